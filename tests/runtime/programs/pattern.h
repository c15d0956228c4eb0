/* The heap placement programs' check that their bytes survive (heap_place.c,
 * heap_aligned.c, heap_aligned_cxx.cpp): a block's bytes written with a pattern of its
 * seed (fill), and read back (check: `bad` set at the first byte that differs). */
#ifndef PW_TEST_PATTERN_H
#define PW_TEST_PATTERN_H

#include <stddef.h>

static int bad;

static void fill(unsigned char *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + (size_t)seed);
}

static void check(const unsigned char *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + (size_t)seed)) {
            bad = 1;
            return;
        }
}

#endif

/* Sampling activities, ground truth for memory allocation: alloc_churn() mallocs and
 * frees blocks of varied sizes (16 B to 64 KiB from the heap; one in eight 256 KiB to
 * 1 MiB, which malloc maps and unmaps: M_MMAP_THRESHOLD is fixed at 128 KiB) for SECONDS
 * (default 2) without touching them, then spin() computes for SECONDS/2: two thirds of
 * the time in the allocator, minus the loop's own few instructions. Then it runs the
 * loop as many times without the allocator (its own instructions alone). Prints on
 * stderr the wall time of each phase as the program measured it: `churn WALL_S spin
 * WALL_S loop WALL_S`. Usage: alloc_churn [SECONDS] */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

#define SLOTS 512

static void *slot[SLOTS];
static volatile size_t sink_size;

/* The churn for seconds (rounds of 64 when churn, else the same number of rounds of the
 * loop's own instructions without the allocator): the rounds made. */
__attribute__((noinline)) static long alloc_churn(double seconds, long rounds, int churn)
{
    uint64_t x = 88172645463325252ull;
    double t0 = now();
    long n = 0;
    while (churn ? now() - t0 < seconds : (now(), n < rounds)) {
        for (int k = 0; k < 64; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned i = (unsigned)(x % SLOTS);
            size_t size = (x >> 20) % 8 == 0 ? (256u << 10) + (x >> 32) % (768u << 10)
                                             : 16 + (x >> 32) % (64u << 10);
            if (churn) {
                free(slot[i]);
                slot[i] = malloc(size);
            } else {
                sink_size += size + i;
            }
        }
        n++;
    }
    for (int i = 0; churn && i < SLOTS; i++)
        free(slot[i]);
    return n;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    double t0 = now();
    long rounds = alloc_churn(seconds, 0, 1);
    double t1 = now();
    spin(seconds / 2);
    double t2 = now();
    alloc_churn(0, rounds, 0);
    double t3 = now();
    fprintf(stderr, "churn %.6f spin %.6f loop %.6f\n", t1 - t0, t2 - t1, t3 - t2);
    return 0;
}

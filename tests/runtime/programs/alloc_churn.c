/* Sampling activities, ground truth for memory allocation: alloc_churn() mallocs and
 * frees blocks of varied sizes (16 B to 64 KiB from the heap; one in eight 256 KiB to
 * 1 MiB, which malloc maps and unmaps: M_MMAP_THRESHOLD is fixed at 128 KiB) for SECONDS
 * (default 2) without touching them, then spin() computes for SECONDS/2: two thirds of
 * the time in the allocator, minus the loop's own few instructions.
 * Usage: alloc_churn [SECONDS] */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "spin.h"

#define SLOTS 512

__attribute__((noinline)) static void alloc_churn(double seconds)
{
    static void *slot[SLOTS];
    uint64_t x = 88172645463325252ull;
    double t0 = now();
    while (now() - t0 < seconds) {
        for (int k = 0; k < 64; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned i = (unsigned)(x % SLOTS);
            size_t size = (x >> 20) % 8 == 0 ? (256u << 10) + (x >> 32) % (768u << 10)
                                             : 16 + (x >> 32) % (64u << 10);
            free(slot[i]);
            slot[i] = malloc(size);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        free(slot[i]);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    alloc_churn(seconds);
    spin(seconds / 2);
    return 0;
}

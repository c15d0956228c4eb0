/* Two kernels over two size ranges (tests/runtime/test_placement_sweep.py): a streaming
 * sum over STREAM_N arrays of 3 MiB (the 2 MiB-4 MiB group; sequential, so huge pages
 * barely change it) and a dependent random walk over WALK_N arrays of 16 MiB (the
 * 16 MiB-32 MiB group; one page a step, bound by the TLB: huge pages make it faster).
 * Each range's arrays are allocated at their own size, at their own site. Appends to the
 * file argv[1] (every run of a sweep, one after the other), by its own counts, "stream
 * COUNT BYTES", "walk COUNT BYTES" and each kernel's seconds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STREAM_N 8
#define STREAM_BYTES (3 << 20)
#define WALK_N 4
#define WALK_SHIFT 22 /* elements of a walk array: 2^22 of 4 bytes, 16 MiB */
#define WALK_BYTES ((size_t)4 << WALK_SHIFT)
#define WALK_STEPS 3000000

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void *alloc_stream(size_t n) { return malloc(n); } /* @site stream */
__attribute__((noinline)) static void *alloc_walk(size_t n) { return malloc(n); } /* @site walk */

int main(int argc, char **argv)
{
    double *s[STREAM_N];
    uint32_t *w[WALK_N];
    const size_t sn = STREAM_BYTES / sizeof(double), wn = WALK_BYTES / sizeof(uint32_t);
    const size_t total = wn * WALK_N;
    long count[2] = {0, 0}, bytes[2] = {0, 0};
    for (int k = 0; k < STREAM_N; k++) {
        s[k] = alloc_stream(STREAM_BYTES);
        count[0]++, bytes[0] += STREAM_BYTES;
        for (size_t i = 0; i < sn; i++)
            s[k][i] = (double)i;
    }
    for (int k = 0; k < WALK_N; k++) {
        w[k] = alloc_walk(WALK_BYTES);
        count[1]++, bytes[1] += WALK_BYTES;
        for (size_t i = 0; i < wn; i++)
            w[k][i] = (uint32_t)(k * wn + i);
    }
    double t0 = now(), sum = 0;
    for (int rep = 0; rep < 4; rep++)
        for (int k = 0; k < STREAM_N; k++)
            for (size_t i = 0; i < sn; i++)
                sum += s[k][i];
    double t1 = now();
    uint32_t at = 0;
    /* each step's index from the value loaded (an LCG of full period over total, a
     * power of two): a dependent chain of loads at pseudo-random places */
    for (long step = 0; step < WALK_STEPS; step++)
        at = (w[at >> WALK_SHIFT][at & (wn - 1)] * 2654435761u + 12345u) & (uint32_t)(total - 1);
    double t2 = now();
    FILE *out = argc > 1 ? fopen(argv[1], "a") : stdout;
    if (!out)
        return 1;
    fprintf(out, "stream %ld %ld\nwalk %ld %ld\n", count[0], bytes[0], count[1], bytes[1]);
    fprintf(out, "seconds stream %.3f walk %.3f (%g %u)\n", t1 - t0, t2 - t1, sum, at);
    fclose(out);
    for (int k = 0; k < STREAM_N; k++)
        free(s[k]);
    for (int k = 0; k < WALK_N; k++)
        free(w[k]);
    return 0;
}

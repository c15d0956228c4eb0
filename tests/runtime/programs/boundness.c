/* Two routines of known character, each timed by the program's own clocks:
 * triad(): STREAM's triad a = b + 3 c over three arrays of MIB MiB each, repeated PASSES
 *   times: arrays larger than a core's own caches, streamed from the shared last-level
 *   cache and memory, bandwidth-bound;
 * fma_chain(): one dependent chain of STEPS fused multiply-adds in registers, no memory
 *   traffic, compute-bound.
 * Usage: boundness PASSES MIB STEPS [FILE] (link with -lm). Each phase is timed once, around all its
 * calls (a clock read per call would put the thread's preemptions, and so its samples,
 * at those system calls). Appends to FILE (else prints) one line:
 *   triad_cpu S triad_wall S fma_cpu S fma_wall S
 * with each phase's CPU time (its thread's CPU clock) and wall time in seconds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) void triad(double *restrict a, const double *restrict b,
                                     const double *restrict c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * c[i];
}

__attribute__((noinline)) double fma_chain(long steps, double x)
{
    double y = x;
    for (long i = 0; i < steps; i++) {
        y = fma(y, 0.999999, 1e-7);
        __asm__ volatile("" : "+x"(y)); /* one dependent step at a time, kept */
    }
    return y;
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 100;
    size_t n = (size_t)(argc > 2 ? atol(argv[2]) : 4) * 1024 * 1024 / sizeof(double);
    long steps = argc > 3 ? atol(argv[3]) : 100000000L;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = 1;
        c[i] = 2;
    }
    double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
    for (int r = 0; r < passes; r++)
        triad(a, b, c, n);
    double c1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
    double sink = fma_chain(steps, a[n / 2]);
    double c2 = now(CLOCK_THREAD_CPUTIME_ID), w2 = now(CLOCK_MONOTONIC);
    FILE *out = argc > 4 ? fopen(argv[4], "a") : stdout;
    if (!out)
        return 1;
    fprintf(out, "triad_cpu %.6f triad_wall %.6f fma_cpu %.6f fma_wall %.6f sink %g\n", c1 - c0,
            w1 - w0, c2 - c1, w2 - w1, sink);
    return 0;
}

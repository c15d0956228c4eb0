/* Compute-only, for the sampler's cost per sample: main -> outer -> inner -> hot, hot
 * counting blocks of 1000 additions for SECONDS of wall time; prints "blocks N". Fewer
 * blocks under sampling = the time the samples took (built -O2 -fomit-frame-pointer,
 * so libunwind walks DWARF, not frame pointers).
 * Usage: compute_chain [SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static long hot(double seconds)
{
    long n = 0;
    volatile double x = 0;
    for (double t0 = now(); now() - t0 < seconds; n++)
        for (int i = 0; i < 1000; i++)
            x += i;
    return n;
}

__attribute__((noinline)) static long inner(double s) { return hot(s) + 0 * s; }
__attribute__((noinline)) static long outer(double s) { return inner(s) - 1 + 1; }

int main(int argc, char **argv)
{
    printf("blocks %ld\n", outer(argc > 1 ? atof(argv[1]) : 2));
    return 0;
}

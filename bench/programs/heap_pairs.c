/* bench/heap_overhead.py's program: timed by the thread's CPU time, prints one line per
 * figure.
 *   pair_ns      one malloc(64)/free pair from one call site, the mean of N pairs
 *   unwind_ns    the first allocation from each of D new call paths (a recursion 1..D deep
 *                allocating at its bottom, each depth a new call-path key), per path
 *   maxrss_kib   after holding LIVE MiB in 64 KiB blocks (getrusage's peak)
 * Usage: heap_pairs N D LIVE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *volatile sink;

__attribute__((noinline)) static void pairs(long n)
{
    for (long i = 0; i < n; i++) {
        sink = malloc(64);
        free(sink);
    }
}

__attribute__((noinline)) static void deep(int d)
{
    if (d > 0) {
        deep(d - 1);
        __asm__ volatile("" ::: "memory"); /* not a tail call: each depth its own frame */
        return;
    }
    sink = malloc(64);
    free(sink);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    int depths = argc > 2 ? atoi(argv[2]) : 2000;
    long live = argc > 3 ? atol(argv[3]) : 256;
    pairs(1000); /* the site's key cached, the allocator warm */
    double t0 = cpu_ns();
    pairs(n);
    double t1 = cpu_ns();
    printf("pair_ns %.3f\n", (t1 - t0) / n);
    t0 = cpu_ns();
    for (int d = 1; d <= depths; d++)
        deep(d);
    t1 = cpu_ns();
    printf("unwind_ns %.3f\n", (t1 - t0) / depths);
    long nblocks = live * 16;
    char **b = malloc(sizeof *b * nblocks);
    for (long i = 0; i < nblocks; i++) {
        b[i] = malloc(65536);
        memset(b[i], 1, 65536);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("maxrss_kib %ld\n", ru.ru_maxrss);
    for (long i = 0; i < nblocks; i++)
        free(b[i]);
    free(b);
    return 0;
}

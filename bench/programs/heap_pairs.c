/* bench/heap_overhead.py's program: timed by the thread's CPU time, prints one line per
 * figure.
 *   pair_ns      one malloc(64)/free pair from one call site, the mean of N pairs
 *   unwind_ns    the first allocation from each of D new call-path keys (one call path
 *                from D stack addresses: alloca shifts the allocating frame, so each is a
 *                new key, unwound once), per key
 *   thread_pair_ns  then a pair in each of THREADS threads allocating at once (N / THREADS
 *                pairs each, each thread's CPU time), the mean over the threads
 *   maxrss_kib   after holding LIVE MiB in 64 KiB blocks (getrusage's peak)
 * Usage: heap_pairs N D LIVE [THREADS] */
#include <alloca.h>
#include <pthread.h>
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
    void *volatile p; /* the thread's own: threads call this at once */
    for (long i = 0; i < n; i++) {
        p = malloc(64);
        free(p);
    }
    sink = p;
}

__attribute__((noinline)) static void leaf(void)
{
    sink = malloc(64);
    free(sink);
}

__attribute__((noinline)) static void shifted(int d)
{
    volatile char *pad = alloca(16 * (size_t)d + 16);
    pad[0] = 0;
    leaf();
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

typedef struct job {
    long n;
    double ns;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    double t0 = cpu_ns();
    pairs(j->n);
    j->ns = (cpu_ns() - t0) / j->n;
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    int depths = argc > 2 ? atoi(argv[2]) : 2000;
    long live = argc > 3 ? atol(argv[3]) : 256;
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    pairs(1000); /* the site's key cached, the allocator warm */
    double t0 = cpu_ns();
    pairs(n);
    double t1 = cpu_ns();
    printf("pair_ns %.3f\n", (t1 - t0) / n);
    t0 = cpu_ns();
    for (int d = 1; d <= depths; d++)
        shifted(d);
    t1 = cpu_ns();
    printf("unwind_ns %.3f\n", (t1 - t0) / depths);
    job jobs[64];
    pthread_t tid[64];
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    for (int i = 0; i < threads; i++) {
        jobs[i].n = n / threads;
        if (pthread_create(&tid[i], NULL, worker, &jobs[i]) != 0)
            return 1;
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        sum += jobs[i].ns;
    }
    printf("thread_pair_ns %.3f\n", sum / threads);
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

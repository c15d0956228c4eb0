/* Two phases, each timed by the program's own CLOCK_MONOTONIC (tests/runtime/test_heap_live.py):
 * phase 1 allocates X (64 MiB), sweeps it in sweep_x for about 0.3 s and frees it; phase 2
 * the same with Y and sweep_y; site Z (1 MiB) is live from before phase 1 to after phase 2.
 * Between the phases the program touches nothing (40 ms of sleep). Prints one line per
 * site "site PID NAME alloc_before alloc_after free_before free_after" and per routine
 * "routine PID NAME begin end" (ns), each rank. argv[1] "threads": two
 * threads open and close site T's intervals at once, 200 times each (a block of 256 KiB
 * each, held 1 ms: of at least 64 KiB, so that threads recording at once publish each
 * change of its live bytes at once, docs/heap.md "Threads"), and print site T's line: the first allocation of the thread that
 * allocated first, the last free of the thread that freed last. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1 << 20)

static int64_t now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void nap(int64_t ns)
{
    struct timespec t = {ns / 1000000000, ns % 1000000000};
    nanosleep(&t, NULL);
}

__attribute__((noinline)) static void *alloc_x(size_t n) { return malloc(n); } /* @site X */
__attribute__((noinline)) static void *alloc_y(size_t n) { return malloc(n); } /* @site Y */
__attribute__((noinline)) static void *alloc_z(size_t n) { return malloc(n); } /* @site Z */
__attribute__((noinline)) static void *alloc_t(size_t n) { return malloc(n); } /* @site T */

static volatile double sink;

/* a[i] = a[i] * s + 1 over n doubles, again and again for `seconds` of the program's clock */
__attribute__((noinline)) static void sweep(double *a, size_t n, double seconds)
{
    int64_t end = now() + (int64_t)(seconds * 1e9);
    while (now() < end)
        for (size_t i = 0; i < n; i++)
            a[i] = a[i] * 0.999 + 1.0;
    sink = a[n / 2];
}
__attribute__((noinline)) static void sweep_x(double *a, size_t n) { sweep(a, n, 0.3); }
__attribute__((noinline)) static void sweep_y(double *a, size_t n) { sweep(a, n, 0.3); }

static void *alloc_timed(void *(*f)(size_t), size_t n, int64_t *t)
{
    t[0] = now();
    void *p = f(n);
    t[1] = now();
    memset(p, 1, n);
    return p;
}

static void free_timed(void *p, int64_t *t)
{
    t[2] = now();
    free(p);
    t[3] = now();
}

static void site_line(const char *name, const int64_t *t)
{
    printf("site %d %s %lld %lld %lld %lld\n", (int)getpid(), name, (long long)t[0],
           (long long)t[1], (long long)t[2], (long long)t[3]);
}

/* One phase: the array allocated, swept by `by` (timed into r[0], r[1]), freed; then
 * 40 ms of sleep. */
static void phase(void *(*alloc)(size_t), void (*by)(double *, size_t), int64_t *t, int64_t *r)
{
    double *a = alloc_timed(alloc, 64 * MIB, t);
    r[0] = now();
    by(a, 64 * MIB / sizeof(double));
    r[1] = now();
    free_timed(a, t);
    nap(40000000);
}

/* t: before and after its first allocation, before and after its last free */
static void *opener(void *arg)
{
    int64_t *t = arg;
    for (int i = 0; i < 200; i++) {
        int64_t a = now();
        void *p = alloc_t(256 << 10);
        if (i == 0)
            t[0] = a, t[1] = now();
        memset(p, 1, 256 << 10);
        nap(1000000);
        t[2] = now();
        free(p);
        t[3] = now();
        nap(200000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc > 1 && !strcmp(argv[1], "threads")) {
        pthread_t th[2];
        int64_t t[2][4];
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, opener, t[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        int f = t[1][0] < t[0][0], l = t[1][3] > t[0][3]; /* the first to allocate, last to free */
        printf("site %d T %lld %lld %lld %lld\n", (int)getpid(), (long long)t[f][0],
               (long long)t[f][1], (long long)t[l][2], (long long)t[l][3]);
        MPI_Finalize();
        return 0;
    }
    int64_t tz[4], tx[4], ty[4], r[4];
    void *z = alloc_timed(alloc_z, MIB, tz);
    nap(40000000);
    phase(alloc_x, sweep_x, tx, r);
    phase(alloc_y, sweep_y, ty, r + 2);
    free_timed(z, tz);
    site_line("X", tx);
    site_line("Y", ty);
    site_line("Z", tz);
    printf("routine %d sweep_x %lld %lld\n", (int)getpid(), (long long)r[0], (long long)r[1]);
    printf("routine %d sweep_y %lld %lld\n", (int)getpid(), (long long)r[2], (long long)r[3]);
    MPI_Finalize();
    return 0;
}

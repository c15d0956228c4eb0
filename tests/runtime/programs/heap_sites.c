/* Three allocation sites of known sizes and lifetimes (tests/runtime/test_heap.py): site A
 * 100 x 2 MiB, each held about 0.2 s in all; site B 10 000 x 64 KiB, 100 live at a time;
 * site C 7 x 8 MiB held about 0.1 s. With MPI when argv[1] is "mpi". Prints each site's
 * count, bytes and byte-seconds by its own clock (CLOCK_MONOTONIC around each malloc and
 * free), one line "site count bytes byte_s live_s" (live_s: from its first allocation's
 * return to its last free's call). argv[2] "kill": SIGKILL itself at the end;
 * "fork": first a child that allocates 3 x 8 MiB at site C, frees them and exits. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void hold(double s)
{
    double t0 = now();
    while (now() - t0 < s)
        ;
}

__attribute__((noinline)) static void *alloc_a(size_t n) { return malloc(n); } /* @site A */
__attribute__((noinline)) static void *alloc_b(size_t n) { return malloc(n); } /* @site B */
__attribute__((noinline)) static void *alloc_c(size_t n) { return malloc(n); } /* @site C */

int main(int argc, char **argv)
{
    int mpi = argc > 1 && !strcmp(argv[1], "mpi"), rank = 0;
    if (mpi) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    if (argc > 2 && !strcmp(argv[2], "fork")) {
        pid_t child = fork();
        if (child == 0) {
            for (int i = 0; i < 3; i++)
                free(alloc_c(8 << 20));
            exit(0);
        }
        waitpid(child, NULL, 0);
        printf("child %d\n", (int)child);
    }
    double bs_a = 0, bs_b = 0, bs_c = 0, t[100], live_a, live_b, live_c;
    void *a[100], *b[100], *c[7];
    for (int i = 0; i < 100; i++) {
        a[i] = alloc_a(2 << 20);
        memset(a[i], 1, 4096);
        t[i] = now();
    }
    hold(0.2);
    for (int i = 0; i < 100; i++) {
        live_a = now() - t[0];
        bs_a += (double)(2 << 20) * (now() - t[i]);
        free(a[i]);
    }
    double tb[100], b_first = 0;
    for (int i = 0; i < 10000; i++) {
        int k = i % 100;
        if (i >= 100) {
            bs_b += 65536.0 * (now() - tb[k]);
            free(b[k]);
        }
        b[k] = alloc_b(65536);
        tb[k] = now();
        if (i == 0)
            b_first = tb[k];
        hold(0.00002);
    }
    for (int k = 0; k < 100; k++) {
        bs_b += 65536.0 * (now() - tb[k]);
        live_b = now() - b_first;
        free(b[k]);
    }
    double tc[7];
    for (int i = 0; i < 7; i++) {
        c[i] = alloc_c(8 << 20);
        tc[i] = now();
    }
    hold(0.1);
    for (int i = 0; i < 7; i++) {
        live_c = now() - tc[0];
        bs_c += (double)(8 << 20) * (now() - tc[i]);
        free(c[i]);
    }
    printf("A 100 %lld %.9g %.9g\nB 10000 %lld %.9g %.9g\nC 7 %lld %.9g %.9g\npid %d %d\n",
           100LL * (2 << 20), bs_a, live_a, 10000LL * 65536, bs_b, live_b, 7LL * (8 << 20), bs_c,
           live_c, (int)getpid(), rank);
    fflush(stdout);
    if (argc > 2 && !strcmp(argv[2], "kill"))
        raise(SIGKILL);
    if (mpi)
        MPI_Finalize();
    return 0;
}

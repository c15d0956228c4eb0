/* perfweave overhead's calibration loop (launch/overhead.py builds it once per module):
 * N calls of one cheap function that a module wraps, in BLOCKS blocks timed by the
 * thread's CPU clock; prints "ns_per_call X", the median block's CPU time per call. CPU
 * time, not wall time: on a shared machine a block loses the CPU to others' work for
 * milliseconds, which wall time would count as the call's; the median of blocks, not the
 * whole loop's mean, leaves out a block that a migration or a cache flush slowed.
 *   -DCALIBRATE_IO    write(2) of 1 byte to /dev/null (the io module's POSIX layer)
 *   -DCALIBRATE_MPI   MPI_Comm_rank (the MPI module's cheapest wrapped call; a singleton)
 *   -DCALIBRATE_MATH  ddot_ with n = 4 through the PLT (the mathlib module's BLAS) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef CALIBRATE_MPI
#include <mpi.h>
#endif

#define BLOCKS 21

#ifdef CALIBRATE_MATH
double ddot_(const int *n, const double *x, const int *incx, const double *y, const int *incy);
#endif

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 210000, per = n / BLOCKS > 0 ? n / BLOCKS : 1;
    double block[BLOCKS], sink = 0;
#ifdef CALIBRATE_MPI
    int r;
    MPI_Init(&argc, &argv);
#elif defined(CALIBRATE_IO)
    int fd = open("/dev/null", O_WRONLY);
    char c = 'x';
    if (fd < 0)
        return 1;
#else
    double x[4] = {1, 2, 3, 4}, y[4] = {4, 3, 2, 1};
    int four = 4, one = 1;
#endif
    for (int b = 0; b < BLOCKS; b++) {
        double t0 = now_ns();
        for (long i = 0; i < per; i++) {
#ifdef CALIBRATE_MPI
            MPI_Comm_rank(MPI_COMM_WORLD, &r);
            sink += r;
#elif defined(CALIBRATE_IO)
            sink += (double)write(fd, &c, 1);
#else
            sink += ddot_(&four, x, &one, y, &one);
#endif
        }
        block[b] = (now_ns() - t0) / (double)per;
    }
    qsort(block, BLOCKS, sizeof block[0], cmp);
    printf("ns_per_call %.3f\ncalls %ld\nsink %.0f\n", block[BLOCKS / 2], per * BLOCKS, sink);
#ifdef CALIBRATE_MPI
    MPI_Finalize();
#endif
    return 0;
}

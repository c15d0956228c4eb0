/* The mathlib benchmark's program: N calls of ddot_(n=4) through the PLT, timed by the
 * program itself; prints "ns_per_call X" (the loop's time / N) and the sum. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double ddot_(const int *n, const double *x, const int *incx, const double *y, const int *incy);

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 10000000L;
    double x[4] = {1, 2, 3, 4}, y[4] = {4, 3, 2, 1}, sum = 0;
    int n = 4, one = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < calls; i++)
        sum += ddot_(&n, x, &one, y, &one);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("ns_per_call %.3f sum %.0f\n", ns / calls, sum);
    return 0;
}

/* The mathlib benchmark's program: N calls of ddot_ through the PLT, timed by the
 * program itself; prints "ns_per_call X" (the loop's time / N) and the sum. With a
 * second argument "alternate", n alternates between 4 and 8 (two size classes of one
 * call site): every call misses the previous call's slot and looks its own up in the
 * table; otherwise n = 4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ddot_(const int *n, const double *x, const int *incx, const double *y, const int *incy);

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 10000000L;
    int alternate = argc > 2 && strcmp(argv[2], "alternate") == 0;
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {8, 7, 6, 5, 4, 3, 2, 1}, sum = 0;
    int ns[2] = {4, alternate ? 8 : 4}, one = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < calls; i++)
        sum += ddot_(&ns[i & 1], x, &one, y, &one);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns_all = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("ns_per_call %.3f sum %.0f\n", ns_all / calls, sum);
    return 0;
}

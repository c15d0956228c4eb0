/* The mathlib module's bound on sites (--mathlib-max-sites): each of two threads, one
 * after the other, calls ddot_ from one line with n = 1, 2, 4, ..., 32 (six size classes,
 * thus six sites), class k (n = 2^k) k + 1 times, in that order. Under a bound of 2 a
 * thread keeps the classes n = 1 and 2 (1 and 2 calls) and folds the other 3 + 4 + 5 + 6
 * = 18 calls into ddot_'s overflow site. Prints the sum of the results. */
#include <pthread.h>
#include <stdio.h>

double ddot_(const int *n, const double *x, const int *incx, const double *y, const int *incy);

static double sums[2];

static void *calls(void *arg)
{
    double x[32], y[32], sum = 0;
    int one = 1;
    for (int i = 0; i < 32; i++)
        x[i] = y[i] = 1;
    for (int k = 0; k < 6; k++)
        for (int n = 1 << k, c = 0; c <= k; c++)
            sum += ddot_(&n, x, &one, y, &one); // @site dot
    sums[(long)arg] = sum;
    return NULL;
}

int main(void)
{
    pthread_t t;
    calls((void *)0);
    pthread_create(&t, NULL, calls, (void *)1);
    pthread_join(t, NULL);
    printf("sums %.0f %.0f\n", sums[0], sums[1]);
    return 0;
}

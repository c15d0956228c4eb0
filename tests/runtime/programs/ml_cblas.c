/* The mathlib module's CBLAS and threads ground truth, on every rank: 5 x cblas_dgemm
 * (one user call each, whether the library's CBLAS calls dgemm_ or not), then two threads
 * that each call daxpy_ 100 times (200 user calls, in two threads). */
#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define N 64
static double a[N * N], b[N * N], c[N * N];

void daxpy_(const int *n, const double *alpha, const double *x, const int *incx, double *y,
            const int *incy);

static void *axpys(void *arg)
{
    double x[100], y[100];
    int n = 100, one = 1;
    double alpha = 0.5;
    for (int i = 0; i < 100; i++)
        x[i] = y[i] = i;
    for (int i = 0; i < 100; i++)
        daxpy_(&n, &alpha, x, &one, y, &one); // @site axpy
    *(double *)arg = y[99];
    return NULL;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < N * N; i++)
        a[i] = b[i] = 1;
    for (int i = 0; i < 5; i++)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0, a, N, b, N, 0.0, c, // @site cblas
                    N);
    pthread_t t[2];
    double out[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, axpys, &out[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("rank %d c00 %.1f y99 %.1f %.1f\n", rank, c[0], out[0], out[1]);
    MPI_Finalize();
    return 0;
}

/* The math libraries in the samples' time split, by the program's own clock: for about
 * argv[1] seconds, rounds of dgemm_ (n = 160) from solve() for 20 ms, then 10 ms of the
 * program's own arithmetic in own_work(); prints on stderr `gemm_s A own_s B` (the time
 * each phase took) and the dgemm_ calls made. Linked with -lblas (a shared BLAS: the
 * wrappers see every call) or with a static BLAS (libblas.a, libopenblas64.a with
 * -DBLAS_INT=long: no call is seen). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spin.h"

#ifndef N
#define N 160 /* -DN=...: a size OpenBLAS splits over its threads */
#endif
#ifndef BLAS_INT
#define BLAS_INT int /* -DBLAS_INT=long: a BLAS with 64-bit integers (ILP64) */
#endif
static double a[N * N], b[N * N], c[N * N];

void dgemm_(const char *ta, const char *tb, const BLAS_INT *m, const BLAS_INT *n,
            const BLAS_INT *k, const double *alpha, const double *a, const BLAS_INT *lda,
            const double *b, const BLAS_INT *ldb, const double *beta, double *c,
            const BLAS_INT *ldc);

static long solve(double until)
{
    BLAS_INT n = N;
    double one = 1, zero = 0;
    long calls = 0;
    while (now() < until) {
        dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n); // @site gemm
        calls++;
    }
    return calls;
}

static void own_work(double until)
{
    double x = 1.0;
    while (now() < until)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    for (int i = 0; i < N * N; i++)
        a[i] = b[i] = 1.0 / (i + 1);
    double gemm_s = 0, own_s = 0, end = now() + seconds;
    long calls = 0;
    while (now() < end) {
        double t0 = now();
        calls += solve(t0 + 0.020);
        double t1 = now();
        own_work(t1 + 0.010);
        double t2 = now();
        gemm_s += t1 - t0;
        own_s += t2 - t1;
    }
    fprintf(stderr, "gemm_s %.4f own_s %.4f calls %ld\n", gemm_s, own_s, calls);
    printf("c00 %.6g\n", c[0]);
    return 0;
}

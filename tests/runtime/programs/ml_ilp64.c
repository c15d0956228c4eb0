/* The mathlib module's ILP64 ground truth: Debian's libopenblas64 (64-bit integers, the
 * usual names: dgemm_, cblas_dgemm), 3 x dgemm_ (m, n, k = 96, 80, 40) and 3 x
 * cblas_dgemm (m, n, k = 50, 60, 70), all integers int64_t. Prints c[0] of each. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void dgemm_(const char *ta, const char *tb, const int64_t *m, const int64_t *n, const int64_t *k,
            const double *alpha, const double *a, const int64_t *lda, const double *b,
            const int64_t *ldb, const double *beta, double *c, const int64_t *ldc, size_t lta,
            size_t ltb);
void cblas_dgemm(int layout, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const double *a, int64_t lda, const double *b, int64_t ldb, double beta, double *c,
                 int64_t ldc);

static double *filled(int64_t n, double v)
{
    double *x = malloc(sizeof *x * n);
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

int main(void)
{
    const int64_t m = 96, n = 80, k = 40;
    const double one = 1, zero = 0;
    double *a = filled(m * k, 1), *b = filled(k * n, 2), *c = filled(m * n, 0);
    for (int i = 0; i < 3; i++)
        dgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, &zero, c, &m, 1, 1); // @site f
    printf("dgemm_ c0 %.1f", c[0]);
    const int64_t m2 = 50, n2 = 60, k2 = 70;
    double *a2 = filled(m2 * k2, 1), *b2 = filled(k2 * n2, 3), *c2 = filled(m2 * n2, 0);
    for (int i = 0; i < 3; i++)
        cblas_dgemm(102, 111, 111, m2, n2, k2, 1.0, a2, m2, b2, k2, 0.0, c2, m2); // @site c
    printf(" cblas_dgemm c0 %.1f\n", c2[0]);
    free(a), free(b), free(c), free(a2), free(b2), free(c2);
    return 0;
}

/* The mathlib module's ScaLAPACK ground truth, on 4 ranks as a 2 x 2 BLACS grid: 2 x
 * pdgemm (M = 200, N = 150, K = 100), then 1 x pdgesv (N = 200, one right-hand side) of
 * a diagonally dominant matrix. Prints each rank's grid place and pdgesv's info. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

void Cblacs_get(int context, int what, int *value);
void Cblacs_gridinit(int *context, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int context);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ctxt, const int *lld, int *info);
void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);
void pdgesv_(const int *n, const int *nrhs, double *a, const int *ia, const int *ja,
             const int *desca, int *ipiv, double *b, const int *ib, const int *jb, const int *descb,
             int *info);

static const int NB = 32, ZERO = 0, ONE = 1;
static int ctxt, nprow, npcol, myrow, mycol;

/* A distributed m x n matrix: its descriptor and local block, a(i,j) = f(i, j) globally. */
static double *matrix(int m, int n, int *desc, double (*f)(int, int))
{
    int lr = numroc_(&m, &NB, &myrow, &ZERO, &nprow), lc = numroc_(&n, &NB, &mycol, &ZERO, &npcol);
    int lld = lr > 1 ? lr : 1, info;
    descinit_(desc, &m, &n, &NB, &NB, &ZERO, &ZERO, &ctxt, &lld, &info);
    double *a = calloc((size_t)lld * (lc > 1 ? lc : 1), sizeof *a);
    for (int jl = 0; jl < lc; jl++)
        for (int il = 0; il < lr; il++) {
            int i = (il / NB * nprow + myrow) * NB + il % NB;
            int j = (jl / NB * npcol + mycol) * NB + jl % NB;
            a[il + (size_t)jl * lld] = f(i, j);
        }
    return a;
}
static double smooth(int i, int j) { return 1.0 / (1 + i + j); }
static double dominant(int i, int j) { return i == j ? 400.0 : 1.0 / (1 + i + j); }

int main(int argc, char **argv)
{
    int rank, info = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", 2, 2);
    Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
    int da[9], db[9], dc[9], dg[9], dx[9];
    const int M = 200, N = 150, K = 100, NS = 200;
    const double alpha = 1, beta = 0;
    double *a = matrix(M, K, da, smooth), *b = matrix(K, N, db, smooth);
    double *c = matrix(M, N, dc, smooth);
    for (int r = 0; r < 2; r++)
        pdgemm_("N", "N", &M, &N, &K, &alpha, a, &ONE, &ONE, da, // @site gemm
                b, &ONE, &ONE, db, &beta, c, &ONE, &ONE, dc);
    double *g = matrix(NS, NS, dg, dominant), *x = matrix(NS, 1, dx, smooth);
    int *ipiv = calloc((size_t)numroc_(&NS, &NB, &myrow, &ZERO, &nprow) + NB, sizeof *ipiv);
    pdgesv_(&NS, &ONE, g, &ONE, &ONE, dg, ipiv, x, &ONE, &ONE, dx, &info); // @site gesv
    printf("rank %d grid %d %d info %d\n", rank, myrow, mycol, info);
    free(a), free(b), free(c), free(g), free(x), free(ipiv);
    Cblacs_gridexit(ctxt);
    MPI_Finalize();
    return 0;
}

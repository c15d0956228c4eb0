/* cuBLAS and cuFFT calls of known sizes, through their C ABI (declared here as
 * cublas_v2.h and cufft.h declare them), on every rank, for test_gpu_mathlib.py (linked
 * against the fake libraries fake_cublas.c and fake_cufft.c):
 *   cublasDgemm_v2  N T  64 x 32 x 16    10 calls    2 m n k each
 *   cublasSgemm_v2  N N  100 x 200 x 300  2 calls
 *   cublasZgemm_v2  C N  8 x 8 x 8        1 call     8 m n k
 *   cublasDgemmStridedBatched N N 32^3, batch 100    2 m n k x 100
 *   cufftPlan3d 64^3 Z2Z, executed 5 times; cufftPlanMany rank 1, n 1024, batch 8 R2C,
 *   executed 3 times; a cufftPlan1d of size 0 (refused: no plan); both plans destroyed.
 * Prints "rank R plans H1 H2 refused S". */
#include <stdio.h>
#include <mpi.h>

int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                   const double *a, int lda, const double *b, int ldb, const double *beta,
                   double *c, int ldc);
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                   const float *a, int lda, const float *b, int ldb, const float *beta,
                   float *c, int ldc);
int cublasZgemm_v2(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                   const void *a, int lda, const void *b, int ldb, const void *beta, void *c,
                   int ldc);
int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                              const double *a, int lda, long long sa, const double *b, int ldb,
                              long long sb, const double *beta, double *c, int ldc,
                              long long sc, int batch);
int cufftPlan3d(int *plan, int nx, int ny, int nz, int type);
int cufftPlan1d(int *plan, int nx, int type, int batch);
int cufftPlanMany(int *plan, int rank, int *n, int *inembed, int istride, int idist,
                  int *onembed, int ostride, int odist, int type, int batch);
int cufftExecZ2Z(int plan, void *in, void *out, int direction);
int cufftExecR2C(int plan, void *in, void *out);
int cufftDestroy(int plan);

enum { OP_N = 0, OP_T = 1, OP_C = 2, Z2Z = 0x69, R2C = 0x2a, FORWARD = -1 };

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *h;
    cublasCreate_v2(&h);
    double one = 1, zero = 0;
    float fone = 1, fzero = 0;
    double zone[2] = {1, 0};
    for (int i = 0; i < 10; i++)
        cublasDgemm_v2(h, OP_N, OP_T, 64, 32, 16, &one, NULL, 64, NULL, 32, &zero, NULL, 64);
    for (int i = 0; i < 2; i++)
        cublasSgemm_v2(h, OP_N, OP_N, 100, 200, 300, &fone, NULL, 100, NULL, 300, &fzero, NULL,
                       100);
    cublasZgemm_v2(h, OP_C, OP_N, 8, 8, 8, zone, NULL, 8, NULL, 8, zone, NULL, 8);
    cublasDgemmStridedBatched(h, OP_N, OP_N, 32, 32, 32, &one, NULL, 32, 1024, NULL, 32, 1024,
                              &zero, NULL, 32, 1024, 100);
    cublasDestroy_v2(h);

    int cube, many, none = -1, n[1] = {1024};
    cufftPlan3d(&cube, 64, 64, 64, Z2Z);
    for (int i = 0; i < 5; i++)
        cufftExecZ2Z(cube, NULL, NULL, FORWARD);
    cufftPlanMany(&many, 1, n, NULL, 1, 1024, NULL, 1, 513, R2C, 8);
    for (int i = 0; i < 3; i++)
        cufftExecR2C(many, NULL, NULL);
    int refused = cufftPlan1d(&none, 0, Z2Z, 1);
    cufftDestroy(cube);
    cufftDestroy(many);
    printf("rank %d plans %d %d refused %d\n", rank, cube, many, refused);
    MPI_Finalize();
    return 0;
}

/* A fake libcublas for tests/runtime/test_gpu_mathlib.py: the cuBLAS v2 gemm entry points
 * with cuBLAS's C ABI (status 0, CUBLAS_STATUS_SUCCESS), doing nothing: the test counts
 * the calls the program makes, their sizes and flops, not their results. */
int cublasCreate_v2(void **handle)
{
    static int context;
    *handle = &context;
    return 0;
}
int cublasDestroy_v2(void *handle)
{
    (void)handle;
    return 0;
}
#define GEMM(NAME)                                                                          \
    int NAME(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, \
             int lda, const void *b, int ldb, const void *beta, void *c, int ldc)             \
    {                                                                                       \
        (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a;       \
        (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;                      \
        return 0;                                                                           \
    }
GEMM(cublasSgemm_v2)
GEMM(cublasDgemm_v2)
GEMM(cublasCgemm_v2)
GEMM(cublasZgemm_v2)
int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                              const void *a, int lda, long long sa, const void *b, int ldb,
                              long long sb, const void *beta, void *c, int ldc, long long sc,
                              int batch)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)sa, (void)b, (void)ldb, (void)sb, (void)beta, (void)c, (void)ldc, (void)sc;
    (void)batch;
    return 0;
}

/* A fake libcufft for tests/runtime/test_gpu_mathlib.py: planners that hand out handles
 * 1, 2, ... (cuFFT's C ABI: cufftHandle an int, status 0 CUFFT_SUCCESS) and refuse a
 * size below 1 (CUFFT_INVALID_SIZE, 4), executes that do nothing. */
static int next_handle = 1;

static int plan(int *p, int n)
{
    if (n < 1)
        return 4;
    *p = next_handle++;
    return 0;
}
int cufftPlan1d(int *p, int nx, int type, int batch)
{
    (void)type;
    return plan(p, nx < batch ? nx : batch);
}
int cufftPlan2d(int *p, int nx, int ny, int type)
{
    (void)type;
    return plan(p, nx < ny ? nx : ny);
}
int cufftPlan3d(int *p, int nx, int ny, int nz, int type)
{
    (void)type;
    return plan(p, nx < ny ? (nx < nz ? nx : nz) : (ny < nz ? ny : nz));
}
int cufftPlanMany(int *p, int rank, int *n, int *inembed, int istride, int idist, int *onembed,
                  int ostride, int odist, int type, int batch)
{
    (void)inembed, (void)istride, (void)idist, (void)onembed, (void)ostride, (void)odist;
    (void)type;
    return plan(p, rank < 1 ? 0 : n[0] < batch ? n[0] : batch);
}
int cufftExecZ2Z(int p, void *in, void *out, int direction)
{
    (void)p, (void)in, (void)out, (void)direction;
    return 0;
}
int cufftExecC2C(int p, void *in, void *out, int direction)
{
    (void)p, (void)in, (void)out, (void)direction;
    return 0;
}
int cufftExecR2C(int p, void *in, void *out)
{
    (void)p, (void)in, (void)out;
    return 0;
}
int cufftDestroy(int p)
{
    (void)p;
    return 0;
}

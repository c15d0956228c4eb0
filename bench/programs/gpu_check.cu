// The device check's CUDA program (bench/gpu_check.sh, docs/gpu.md "The device check"):
// work whose counts, bytes and durations it knows, printed as "key value..." lines that
// bench/gpu_check.py compares with what perfweave recorded.
//   gpu_check KERNELS SPIN_US COPIES COPY_BYTES FFT_N FFT_EXECS LAUNCHES
// - KERNELS launches of spin_kernel (one thread, clock64 spin of SPIN_US at the SM's
//   clock), each between two CUDA events on the same stream: the events' times printed;
// - COPIES copies of COPY_BYTES each way from pageable (malloc) and pinned
//   (cudaMallocHost) host memory, cudaMemcpy on the default stream;
// - a cuFFT 3D Z2Z transform of FFT_N^3 (cufftPlan3d, FFT_EXECS cufftExecZ2Z, destroy),
//   its data made on the device (no copy of the program's);
// - the overhead figures (point 7 of issue 38): LAUNCHES launches of an empty kernel and
//   LAUNCHES 4-byte pinned copies, host time per launch and per copy ("launch_ns",
//   "copy_ns"), which the script compares bare and under perfweave.
// Built with -DUSE_MPI it runs on every rank of MPI_COMM_WORLD (device rank % devices).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <cufft.h>
#ifdef USE_MPI
#include <mpi.h>
#endif

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                   \
                    cudaGetErrorString(e_));                                               \
            exit(3);                                                                       \
        }                                                                                  \
    } while (0)

__global__ void spin_kernel(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
}

__global__ void empty_kernel() {}

__global__ void fill_kernel(cufftDoubleComplex *z, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        z[i].x = (double)(i % 17);
        z[i].y = 0;
    }
}

static double now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank = 0, ranks = 1;
#ifdef USE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
#endif
    if (argc != 8) {
        fprintf(stderr, "usage: %s KERNELS SPIN_US COPIES COPY_BYTES FFT_N FFT_EXECS LAUNCHES\n",
                argv[0]);
        return 2;
    }
    int kernels = atoi(argv[1]), copies = atoi(argv[3]), fft_n = atoi(argv[5]);
    int fft_execs = atoi(argv[6]), launches = atoi(argv[7]);
    double spin_us = atof(argv[2]);
    size_t bytes = (size_t)atoll(argv[4]);
    int devices = 0;
    CHECK(cudaGetDeviceCount(&devices));
    int dev = rank % devices;
    CHECK(cudaSetDevice(dev));
    int khz = 0;
    CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    long long cycles = (long long)(spin_us * khz / 1000.0);

    // kernels of known duration, each bracketed by events on the same stream
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t *ev = (cudaEvent_t *)malloc(2 * kernels * sizeof *ev);
    for (int i = 0; i < 2 * kernels; i++)
        CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < kernels; i++) {
        CHECK(cudaEventRecord(ev[2 * i], s));
        spin_kernel<<<1, 1, 0, s>>>(cycles);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(ev[2 * i + 1], s));
    }
    CHECK(cudaStreamSynchronize(s));
    double total = 0, lo = 1e30, hi = 0;
    for (int i = 0; i < kernels; i++) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        total += ms * 1e6;
        lo = ms * 1e6 < lo ? ms * 1e6 : lo;
        hi = ms * 1e6 > hi ? ms * 1e6 : hi;
    }
    printf("rank %d device %d kernels %d event_ns_total %.0f event_ns_min %.0f event_ns_max %.0f\n",
           rank, dev, kernels, total, lo, hi);

    // copies of known bytes: pageable and pinned host memory, both ways
    void *d, *pageable, *pinned;
    CHECK(cudaMalloc(&d, bytes));
    pageable = malloc(bytes);
    memset(pageable, 1, bytes);
    CHECK(cudaMallocHost(&pinned, bytes));
    memset(pinned, 2, bytes);
    for (int i = 0; i < copies; i++) {
        CHECK(cudaMemcpy(d, pageable, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(pageable, d, bytes, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(d, pinned, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(pinned, d, bytes, cudaMemcpyDeviceToHost));
    }
    printf("rank %d copies %d bytes %zu\n", rank, copies, bytes);

    // a cuFFT 3D transform, data made on the device
    long n3 = (long)fft_n * fft_n * fft_n;
    cufftDoubleComplex *z;
    CHECK(cudaMalloc((void **)&z, n3 * sizeof *z));
    fill_kernel<<<(unsigned)((n3 + 255) / 256), 256>>>(z, n3);
    CHECK(cudaGetLastError());
    cufftHandle plan;
    if (cufftPlan3d(&plan, fft_n, fft_n, fft_n, CUFFT_Z2Z) != CUFFT_SUCCESS) {
        fprintf(stderr, "cufftPlan3d failed\n");
        return 3;
    }
    for (int i = 0; i < fft_execs; i++)
        if (cufftExecZ2Z(plan, z, z, CUFFT_FORWARD) != CUFFT_SUCCESS) {
            fprintf(stderr, "cufftExecZ2Z failed\n");
            return 3;
        }
    CHECK(cudaDeviceSynchronize());
    cufftDestroy(plan);
    printf("rank %d fft %d execs %d\n", rank, fft_n, fft_execs);

    // overhead: host time per launch (empty kernels, then one synchronisation) and per
    // small pinned copy (each synchronous)
    double t0 = now_ns();
    for (int i = 0; i < launches; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    double t1 = now_ns();
    for (int i = 0; i < launches; i++)
        CHECK(cudaMemcpy(d, pinned, 4, cudaMemcpyHostToDevice));
    double t2 = now_ns();
    printf("rank %d launches %d launch_ns %.1f copy_ns %.1f\n", rank, launches,
           (t1 - t0) / launches, (t2 - t1) / launches);

    CHECK(cudaFree(z));
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(pinned));
    free(pageable);
    for (int i = 0; i < 2 * kernels; i++)
        CHECK(cudaEventDestroy(ev[i]));
    CHECK(cudaStreamDestroy(s));
    free(ev);
#ifdef USE_MPI
    MPI_Finalize();
#endif
    (void)ranks;
    return 0;
}

/* An MPI program whose "GPU" is the fake CUDA runtime (fake_cudart.c): each rank launches
 * known kernels on two streams, copies and sets memory, waits for the device, and writes
 * what it did, record by record, to DIR/truth-R.txt: the ground truth of
 * tests/runtime/test_gpu.py. argv: LIB (the fake runtime to dlopen, or "linked" when the
 * program is linked with it), DIR, EXTRA (kernels more, 10 us each, on stream 3). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void kernel_fn(const char *, const int *, const int *, int, uint64_t, uint64_t *,
                       uint64_t *);
typedef void memcpy_fn(uint64_t, int, int, int, int, uint64_t, uint64_t *, uint64_t *);
typedef void memset_fn(uint64_t, int, uint64_t, uint64_t *, uint64_t *);
typedef void sync_fn(int, uint64_t *, uint64_t *);
typedef void counts_fn(long *, long *);

static int64_t host_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4)
        return 2;
    int linked = strcmp(argv[1], "linked") == 0;
    void *h = linked ? RTLD_DEFAULT : dlopen(argv[1], RTLD_NOW); /* RTLD_DEFAULT is NULL */
    if (!linked && !h) {
        fprintf(stderr, "gpu_app: %s\n", dlerror());
        return 2;
    }
    kernel_fn *kernel = (kernel_fn *)dlsym(h, "fakecuda_kernel");
    memcpy_fn *copy = (memcpy_fn *)dlsym(h, "fakecuda_memcpy");
    memset_fn *set = (memset_fn *)dlsym(h, "fakecuda_memset");
    sync_fn *sync = (sync_fn *)dlsym(h, "fakecuda_synchronize");
    counts_fn *counts = (counts_fn *)dlsym(h, "fakecuda_counts");
    if (!kernel || !copy || !set || !sync || !counts) {
        fprintf(stderr, "gpu_app: no fake CUDA runtime: %s\n", dlerror());
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/truth-%d.txt", argv[2], rank);
    FILE *out = fopen(path, "w");
    if (!out)
        return 2;
    int extra = atoi(argv[3]);
    uint64_t s, e;
    static const char *const a_name = "_Z7stencilPKdPdi";
    static const char *const b_name = "_ZN4mini6reduceIdEEvPKT_PS1_i";
    const int a_grid[3] = {64, 1, 1}, a_block[3] = {256, 1, 1};
    const int b_grid[3] = {32, 2, 1}, b_block[3] = {128, 1, 1};
    const int c_grid[3] = {1, 1, 1}, c_block[3] = {32, 1, 1};

    int64_t before = host_now();
    kernel(a_name, a_grid, a_block, 1, 2000000 + 100000 * (uint64_t)rank, &s, &e);
    int64_t after = host_now();
    fprintf(out, "T %lld %lld\n", (long long)before, (long long)after);
    fprintf(out, "K %s 0 1 64 1 1 256 1 1 %llu %llu\n", a_name, (unsigned long long)s,
            (unsigned long long)e);
    for (int i = 0; i < 4; i++) {
        kernel(a_name, a_grid, a_block, 1, 2000000 + 100000 * (uint64_t)rank, &s, &e);
        fprintf(out, "K %s 0 1 64 1 1 256 1 1 %llu %llu\n", a_name, (unsigned long long)s,
                (unsigned long long)e);
    }
    for (int i = 1; i <= 3; i++) {
        kernel(b_name, b_grid, b_block, 2, 1000000 * (uint64_t)i, &s, &e);
        fprintf(out, "K %s 0 2 32 2 1 128 1 1 %llu %llu\n", b_name, (unsigned long long)s,
                (unsigned long long)e);
    }
    for (int i = 0; i < 3; i++) { /* HtoD, pageable to device: 1 MiB each */
        copy(1 << 20, 1, 1, 3, 1, 400000, &s, &e);
        fprintf(out, "C HtoD pageable device 0 1 %d %llu %llu\n", 1 << 20,
                (unsigned long long)s, (unsigned long long)e);
    }
    for (int i = 0; i < 2; i++) { /* DtoH, device to pinned */
        copy(4096 * (uint64_t)(rank + 1), 2, 3, 2, 2, 100000, &s, &e);
        fprintf(out, "C DtoH device pinned 0 2 %d %llu %llu\n", 4096 * (rank + 1),
                (unsigned long long)s, (unsigned long long)e);
    }
    set(1000, 1, 50000, &s, &e);
    fprintf(out, "C memset  device 0 1 1000 %llu %llu\n", (unsigned long long)s,
            (unsigned long long)e);
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t h0 = host_now();
    sync(1, &s, &e);
    int64_t h1 = host_now();
    fprintf(out, "S stream_synchronize 1 %llu %llu %lld\n", (unsigned long long)s,
            (unsigned long long)e, (long long)(h1 - h0));
    for (int i = 0; i < extra; i++) {
        kernel("_Z4tinyv", c_grid, c_block, 3, 10000, &s, &e);
        fprintf(out, "K _Z4tinyv 0 3 1 1 1 32 1 1 %llu %llu\n", (unsigned long long)s,
                (unsigned long long)e);
    }
    h0 = host_now();
    sync(-1, &s, &e);
    h1 = host_now();
    fprintf(out, "S context_synchronize -1 %llu %llu %lld\n", (unsigned long long)s,
            (unsigned long long)e, (long long)(h1 - h0));
    double x = rank, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    long made, lost;
    counts(&made, &lost);
    fprintf(out, "E %ld %ld\nP %d\n", made, lost, (int)getpid());
    fclose(out);
    printf("rank %d done\n", rank);
    return 0;
}

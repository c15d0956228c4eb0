/* A fake CUDA runtime (libcudart.so.12) for tests/runtime/test_gpu.py: the "device" runs
 * each stream's work back to back on the clock of the fake CUPTI (fake_cupti.c, found
 * loaded by its soname, as a profiler's CUPTI is), which gets one activity record per
 * kernel, copy, memset and synchronisation and one runtime-API record per call, as
 * CUDA's would be. Each call returns the record's start and end, so the program knows
 * what the profile must hold. At its first call it does what CUDA's driver does at cuInit
 * with CUDA_INJECTION64_PATH: loads that library and calls its InitializeInjection. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int emit_fn(const void *record);
typedef uint64_t now_fn(void);

static emit_fn *emit;
static now_fn *fake_now;
static long emitted, dropped;
static uint64_t tail[16]; /* each stream's end of work */
static int device;
static uint32_t correlation;

static void init(void)
{
    static int done;
    if (!done) {
        done = 1;
        const char *inject = getenv("CUDA_INJECTION64_PATH");
        void *h = inject && *inject ? dlopen(inject, RTLD_NOW | RTLD_LOCAL) : NULL;
        int (*entry)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (entry)
            entry();
    }
    if (!emit) { /* the profiler's CUPTI, once loaded (by its soname) */
        void *c = dlopen("libcupti.so.12", RTLD_NOW | RTLD_NOLOAD);
        if (c) {
            emit = (emit_fn *)dlsym(c, "fakecupti_emit");
            fake_now = (now_fn *)dlsym(c, "fakecupti_now");
        }
    }
}

static uint64_t now(void)
{
    if (fake_now)
        return fake_now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)(ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

static void put(const void *record)
{
    int r = emit ? emit(record) : -1;
    emitted += r >= 0;
    dropped += r == 0;
}

static void api(uint32_t cbid, uint64_t start)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = start;
    a.end = now();
    a.correlationId = ++correlation;
    put(&a);
}

/* The stream's next piece of work of `ns`: [start, end) after what it already holds. */
static void place(int stream, uint64_t ns, uint64_t *start, uint64_t *end)
{
    uint64_t t = now();
    *start = t > tail[stream] ? t : tail[stream];
    *end = *start + ns;
    tail[stream] = *end;
}

/* A record's place: the stream's next [start, end) on the current device. */
#define ON_STREAM(r, stream, ns, start, end)                                                  \
    do {                                                                                   \
        place(stream, ns, start, end);                                                     \
        (r).start = *(start);                                                              \
        (r).end = *(end);                                                                  \
        (r).deviceId = (uint32_t)device;                                                   \
        (r).contextId = (uint32_t)device + 1;                                              \
        (r).streamId = (uint32_t)(stream);                                                 \
    } while (0)

void fakecuda_set_device(int d) { device = d; }

void fakecuda_kernel(const char *name, const int grid[3], const int block[3], int stream,
                     uint64_t ns, uint64_t *start, uint64_t *end)
{
    init();
    uint64_t t0 = now();
    CUpti_ActivityKernel9 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    ON_STREAM(k, stream, ns, start, end);
    k.gridX = grid[0], k.gridY = grid[1], k.gridZ = grid[2];
    k.blockX = block[0], k.blockY = block[1], k.blockZ = block[2];
    k.name = name;
    k.correlationId = correlation + 1;
    put(&k);
    api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, t0);
}

/* kind, src and dst: CUPTI's CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind */
void fakecuda_memcpy(uint64_t bytes, int kind, int src, int dst, int stream, uint64_t ns,
                     uint64_t *start, uint64_t *end)
{
    init();
    uint64_t t0 = now();
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = (uint8_t)kind;
    m.srcKind = (uint8_t)src;
    m.dstKind = (uint8_t)dst;
    m.bytes = bytes;
    ON_STREAM(m, stream, ns, start, end);
    put(&m);
    api(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, t0);
}

void fakecuda_memset(uint64_t bytes, int stream, uint64_t ns, uint64_t *start, uint64_t *end)
{
    init();
    uint64_t t0 = now();
    CUpti_ActivityMemset4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.bytes = bytes;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    ON_STREAM(m, stream, ns, start, end);
    put(&m);
    api(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, t0);
}

/* The host waits for the stream's work (stream -1: every stream), sleeping. */
void fakecuda_synchronize(int stream, uint64_t *start, uint64_t *end)
{
    init();
    uint64_t until = 0;
    for (int s = 0; s < 16; s++)
        if (stream < 0 ? tail[s] > until : s == stream)
            until = tail[s];
    *start = now();
    for (uint64_t t = *start; t < until; t = now()) {
        struct timespec ts = {0, (long)(until - t)};
        nanosleep(&ts, NULL);
    }
    *end = now();
    CUpti_ActivitySynchronization2 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = stream < 0 ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                        : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    s.start = *start;
    s.end = *end;
    s.contextId = (uint32_t)device + 1;
    s.streamId = stream < 0 ? CUPTI_SYNCHRONIZATION_INVALID_VALUE : (uint32_t)stream;
    s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    put(&s);
    api(stream < 0 ? CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020
                   : CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
        *start);
}

/* The records made, and those CUPTI dropped (no buffer). */
void fakecuda_counts(long *made, long *lost)
{
    *made = emitted;
    *lost = dropped;
}

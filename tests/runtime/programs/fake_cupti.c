/* A fake CUPTI (libcupti.so.12) for tests/runtime/test_gpu.py, compiled against CUPTI's
 * own headers: the activity API the gpu module uses, with records made by the fake CUDA
 * runtime (fake_cudart.c) through fakecupti_emit. Like CUPTI it fills the buffers the
 * client hands it, keeps full ones until a flush (CUPTI's worker delivers them later),
 * drops a record when the client gives no buffer and counts it for
 * cuptiActivityGetNumDroppedRecords, and takes the client's timestamps when a timestamp
 * callback is registered (FAKE_CUPTI_NO_TIMESTAMP_CALLBACK=1: "not supported"; its own
 * clock is then CLOCK_MONOTONIC + FAKE_SKEW_NS, as a GPU's clock is not the host's). */
#include <cupti.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_SKEW_NS 5000000000000LL
#define MAX_FULL 256

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc timestamp;
static int enabled_kinds[64];
static uint8_t *cur;
static size_t cur_size, cur_used;
static struct {
    uint8_t *b;
    size_t valid;
} full[MAX_FULL];
static int nfull;
static size_t dropped;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t fakecupti_now(void)
{
    if (timestamp)
        return timestamp();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)(ts.tv_sec * 1000000000LL + ts.tv_nsec + FAKE_SKEW_NS);
}

static size_t record_size(CUpti_ActivityKind kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return sizeof(CUpti_ActivityKernel9);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
        return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        return sizeof(CUpti_ActivitySynchronization2);
    default:
        return 0;
    }
}

static size_t aligned(size_t n) { return (n + 7) & ~(size_t)7; }

/* One record (its first field its kind) into the current buffer. Returns 1 kept, 0
 * dropped (no buffer), -1 its kind is not enabled (CUPTI makes no record then). */
int fakecupti_emit(const void *record)
{
    CUpti_ActivityKind kind = *(const CUpti_ActivityKind *)record;
    size_t n = record_size(kind);
    if (!n || !enabled_kinds[kind] || !requested)
        return -1;
    pthread_mutex_lock(&lock);
    if (cur && cur_used + aligned(n) > cur_size) {
        if (nfull < MAX_FULL) {
            full[nfull].b = cur;
            full[nfull++].valid = cur_used;
        }
        cur = NULL;
    }
    if (!cur) {
        size_t max_records = 0;
        requested(&cur, &cur_size, &max_records);
        cur_used = 0;
        if (cur && cur_size < aligned(n))
            cur = NULL;
    }
    int kept = cur != NULL;
    if (kept) {
        memcpy(cur + cur_used, record, n);
        cur_used += aligned(n);
    } else {
        dropped++;
    }
    pthread_mutex_unlock(&lock);
    return kept;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done)
{
    requested = req;
    completed = done;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    const char *no = getenv("FAKE_CUPTI_NO_TIMESTAMP_CALLBACK");
    if (no && *no == '1')
        return CUPTI_ERROR_NOT_SUPPORTED;
    timestamp = f;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (!record_size(kind))
        return CUPTI_ERROR_INVALID_KIND;
    enabled_kinds[kind] = 1;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&lock);
    int n = nfull;
    nfull = 0;
    uint8_t *last = cur;
    size_t last_valid = cur_used;
    cur = NULL;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        completed(NULL, 0, full[i].b, full[i].valid, full[i].valid);
    if (last)
        completed(NULL, 0, last, last_valid, last_valid);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                CUpti_Activity **record)
{
    size_t at = 0;
    if (*record) {
        at = (size_t)((uint8_t *)*record - buffer);
        at += aligned(record_size((*record)->kind));
    }
    if (at >= valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(buffer + at);
    return CUPTI_SUCCESS;
}

/* The records dropped since the last call (CUPTI's are per context and stream; the fake
 * has one count). */
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                       size_t *n)
{
    (void)ctx;
    (void)stream;
    pthread_mutex_lock(&lock);
    *n = dropped;
    dropped = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *t = (uint64_t)(ts.tv_sec * 1000000000LL + ts.tv_nsec + FAKE_SKEW_NS);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                          const char **name)
{
    static const struct {
        CUpti_CallbackDomain domain;
        uint32_t cbid;
        const char *name;
    } names[] = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
         "cudaLaunchKernel"},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset"},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
         "cudaStreamSynchronize"},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
         "cudaDeviceSynchronize"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].domain == domain && names[i].cbid == cbid) {
            *name = names[i].name;
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_PARAMETER;
}

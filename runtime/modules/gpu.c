/*
 * The gpu module (--gpu, on by default; docs/gpu.md; its file: docs/format.md "GPU
 * activity"): in a process that loaded the CUDA runtime or driver, CUPTI's activity
 * records (concurrent kernels, memcpy, memset, runtime and driver API calls,
 * synchronisation) aggregated per device, context and stream into gpu/rank-R.json.
 *
 * It links nothing of CUDA. It activates at its start when libcudart or libcuda is
 * already loaded (dl_iterate_phdr), or when the CUDA driver calls InitializeInjection
 * (CUDA_INJECTION64_PATH, which `perfweave run` sets to the runtime's library unless the
 * user set it: the driver loads it at cuInit, so a program whose CUDA runtime is static
 * and opens the driver with dlopen is seen too). Then it opens libcupti with dlopen:
 * --gpu-cupti, else beside the CUDA object that was found (the toolkit's and the Python
 * wheels' layouts), else by the loader's search path. Missing CUPTI or a CUPTI error is
 * one line in the file (status, note) and in the report, never a failure; a process
 * without CUDA is not touched and writes nothing.
 *
 * CUPTI's times are put on perfweave's clock (CLOCK_MONOTONIC, pw_now) by its timestamp
 * callback, else by an offset measured once against cuptiGetTimestamp (the narrowest of
 * several brackets). Buffers are bounded (--gpu-buffers of --gpu-buffer-kb each, mmap'd,
 * reused): when all are out CUPTI drops records, which cuptiActivityGetNumDroppedRecords
 * counts and the file says. Records are aggregated when CUPTI completes a buffer (its
 * thread, or a flush: at MPI_Finalize, at exit), under a lock; a dump from a signal
 * handler writes what was aggregated, without flushing (CUPTI is not signal-safe).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu.h"
#include "perfweave/format/gpu.h"
#include "wrap.h"

#ifdef PW_HAVE_CUPTI
#include <cupti.h>
#endif

static int enabled;
static int state_claimed; /* activation done once, whichever way it came */
static const char *status = "";
static char note[512], cuda_path[1024], cupti_path[1200];

static void set_note(const char *why, const char *a, const char *b)
{
    size_t n = 0;
    for (const char *p[] = {why, a, b}, **q = p; q < p + 3; q++)
        for (const char *s = *q; s && *s && n + 1 < sizeof note; s++)
            note[n++] = *s;
    note[n] = 0;
}

/* A loaded object of the CUDA runtime or driver (libcudart.so*, libcuda.so*): its path. */
static int is_cuda_object(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libcudart.so", 12) == 0 || strncmp(base, "libcuda.so", 10) == 0;
}

static int find_cuda(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (!info->dlpi_name || !is_cuda_object(info->dlpi_name))
        return 0;
    size_t n = strlen(info->dlpi_name);
    if (n >= sizeof cuda_path)
        n = sizeof cuda_path - 1;
    memcpy(cuda_path, info->dlpi_name, n);
    cuda_path[n] = 0;
    return 1;
}

#ifdef PW_HAVE_CUPTI

/* ---- CUPTI, through dlopen ---- */

#define CUPTI_FUNCTIONS(X)                                                                         \
    X(cuptiActivityEnable)                                                                         \
    X(cuptiActivityRegisterCallbacks)                                                              \
    X(cuptiActivityGetNextRecord)                                                                  \
    X(cuptiActivityGetNumDroppedRecords)                                                           \
    X(cuptiActivityFlushAll)                                                                       \
    X(cuptiGetTimestamp)                                                                           \
    X(cuptiGetCallbackName)
#define CUPTI_POINTER(fn) static __typeof__(fn) *p_##fn;
CUPTI_FUNCTIONS(CUPTI_POINTER)
/* Older CUPTIs lack it: the measured offset then. */
static __typeof__(cuptiActivityRegisterTimestampCallback) *p_register_timestamp;

static int active; /* CUPTI records */

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

/* ---- the aggregates (static: untouched pages cost nothing) ---- */

#define KERNEL_SLOTS 4096
#define COPY_SLOTS 512
#define SYNC_SLOTS 256
#define API_SLOTS 1024
#define BUSY_MAX 65536
#define NAMES_BYTES (256 * 1024)

typedef struct krow {
    uint64_t hash;
    const char *name; /* in names[] */
    int32_t dev, ctx, stream, grid[3], block[3];
    int64_t count, total, min, max;
} krow;
typedef struct crow {
    uint64_t hash;
    int32_t used, dir, src, dst, dev, ctx, stream; /* dir -1: a memset */
    int64_t count, bytes, total;
} crow;
typedef struct srow {
    uint64_t hash;
    int32_t used, type, ctx, stream;
    int64_t count, total, max;
} srow;
typedef struct arow {
    uint64_t hash;
    const char *name; /* CUPTI's */
    int32_t used, layer, cbid;
    int64_t count, total;
} arow;
typedef struct interval {
    int64_t start, end;
    int32_t dev;
} interval;

static krow kernels[KERNEL_SLOTS];
static crow copies[COPY_SLOTS];
static srow syncs[SYNC_SLOTS];
static arow apis[API_SLOTS];
static interval busy[BUSY_MAX];
static size_t nbusy;
static char names[NAMES_BYTES];
static size_t names_used;
static int64_t nrecords, ndropped, nlost, nbuffers, clock_offset;
static const char *clock_kind = "";
static int busy_lock; /* the aggregates' lock: CUPTI's thread, flushes, the dump */

static int lock_try(int spins)
{
    for (int i = 0; spins < 0 || i < spins; i++) {
        if (!__atomic_exchange_n(&busy_lock, 1, __ATOMIC_ACQUIRE))
            return 1;
        sched_yield();
    }
    return 0;
}
static void unlock(void) { __atomic_store_n(&busy_lock, 0, __ATOMIC_RELEASE); }

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h | 1; /* 0: an empty slot */
}

static const char *keep_name(const char *s)
{
    size_t n = s ? strlen(s) + 1 : 1;
    if (names_used + n > sizeof names)
        return NULL;
    char *d = names + names_used;
    memcpy(d, s ? s : "", n);
    names_used += n;
    return d;
}

/* Open addressing on a row's hash; the slot of the key, NULL when the table is full. */
#define FIND(table, slots, h, same)                                                                \
    for (size_t i = (h) & ((slots) - 1), k = 0; k < (slots); k++, i = (i + 1) & ((slots) - 1)) {   \
        row = &table[i];                                                                           \
        if (!row->hash || (row->hash == (h) && (same)))                                            \
            break;                                                                                 \
        row = NULL;                                                                                \
    }

static void add_busy(int32_t dev, int64_t s, int64_t e);

static void add_kernel(const CUpti_ActivityKernel9 *r, int64_t s, int64_t e)
{
    int32_t g[3] = {r->gridX, r->gridY, r->gridZ}, b[3] = {r->blockX, r->blockY, r->blockZ};
    uint64_t h = hash_str(r->name);
    h = mix(mix(mix(h, r->deviceId), r->contextId), r->streamId);
    for (int k = 0; k < 3; k++)
        h = mix(mix(h, (uint32_t)g[k]), (uint32_t)b[k]);
    h |= 1;
    krow *row = NULL;
    FIND(kernels, KERNEL_SLOTS, h,
         row->dev == (int32_t)r->deviceId && row->ctx == (int32_t)r->contextId &&
             row->stream == (int32_t)r->streamId && !memcmp(row->grid, g, sizeof g) &&
             !memcmp(row->block, b, sizeof b) && !strcmp(row->name, r->name ? r->name : ""));
    if (row && !row->hash) {
        if (!(row->name = keep_name(r->name))) {
            nlost++;
            return;
        }
        row->hash = h;
        row->dev = (int32_t)r->deviceId;
        row->ctx = (int32_t)r->contextId;
        row->stream = (int32_t)r->streamId;
        memcpy(row->grid, g, sizeof g);
        memcpy(row->block, b, sizeof b);
        row->min = INT64_MAX;
    }
    if (!row) {
        nlost++;
        return;
    }
    int64_t d = e - s;
    row->count++;
    row->total += d;
    row->min = d < row->min ? d : row->min;
    row->max = d > row->max ? d : row->max;
    add_busy((int32_t)r->deviceId, s, e);
}

static void add_copy(int32_t dir, int32_t src, int32_t dst, uint32_t dev, uint32_t ctx,
                     uint32_t stream, uint64_t bytes, int64_t s, int64_t e)
{
    uint64_t h = mix(mix(mix(mix(mix(mix((uint64_t)dir + 7, src), dst), dev), ctx), stream), 3) | 1;
    crow *row = NULL;
    FIND(copies, COPY_SLOTS, h,
         row->dir == dir && row->src == src && row->dst == dst && row->dev == (int32_t)dev &&
             row->ctx == (int32_t)ctx && row->stream == (int32_t)stream);
    if (!row) {
        nlost++;
        return;
    }
    if (!row->hash) {
        *row = (crow){.hash = h,
                      .dir = dir,
                      .src = src,
                      .dst = dst,
                      .dev = (int32_t)dev,
                      .ctx = (int32_t)ctx,
                      .stream = (int32_t)stream};
    }
    row->count++;
    row->bytes += (int64_t)bytes;
    row->total += e - s;
    add_busy((int32_t)dev, s, e);
}

static void add_sync(const CUpti_ActivitySynchronization2 *r, int64_t s, int64_t e)
{
    int32_t stream =
        r->streamId == (uint32_t)CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : (int32_t)r->streamId;
    uint64_t h = mix(mix(mix((uint64_t)r->type + 11, r->contextId), (uint32_t)stream), 5) | 1;
    srow *row = NULL;
    FIND(syncs, SYNC_SLOTS, h,
         row->type == (int32_t)r->type && row->ctx == (int32_t)r->contextId &&
             row->stream == stream);
    if (!row) {
        nlost++;
        return;
    }
    if (!row->hash)
        *row = (srow){
            .hash = h, .type = (int32_t)r->type, .ctx = (int32_t)r->contextId, .stream = stream};
    row->count++;
    row->total += e - s;
    row->max = e - s > row->max ? e - s : row->max;
}

static void add_api(int layer, uint32_t cbid, int64_t s, int64_t e)
{
    uint64_t h = mix(mix((uint64_t)layer + 13, cbid), 9) | 1;
    arow *row = NULL;
    FIND(apis, API_SLOTS, h, row->layer == layer && row->cbid == (int32_t)cbid);
    if (!row) {
        nlost++;
        return;
    }
    if (!row->hash) {
        const char *name = NULL;
        p_cuptiGetCallbackName(layer ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                               cbid, &name);
        *row = (arow){.hash = h, .layer = layer, .cbid = (int32_t)cbid, .name = name};
    }
    row->count++;
    row->total += e - s;
}

/* ---- busy intervals: kept, merged when the list fills and at the dump ---- */

static int before(const interval *a, const interval *b)
{
    return a->dev != b->dev ? a->dev < b->dev : a->start < b->start;
}

/* Heap sort (no allocation, no recursion: the dump may run in a signal handler). */
static void sift(interval *v, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && before(&v[c], &v[c + 1]))
            c++;
        if (!before(&v[i], &v[c]))
            return;
        interval t = v[i];
        v[i] = v[c];
        v[c] = t;
        i = c;
    }
}

/* Sorted by device and start, overlapping or touching intervals of a device merged. */
static void merge_busy(void)
{
    for (size_t i = nbusy / 2; i-- > 0;)
        sift(busy, nbusy, i);
    for (size_t n = nbusy; n > 1; n--) {
        interval t = busy[0];
        busy[0] = busy[n - 1];
        busy[n - 1] = t;
        sift(busy, n - 1, 0);
    }
    size_t out = 0;
    for (size_t i = 0; i < nbusy; i++) {
        if (out && busy[out - 1].dev == busy[i].dev && busy[i].start <= busy[out - 1].end) {
            if (busy[i].end > busy[out - 1].end)
                busy[out - 1].end = busy[i].end;
        } else {
            busy[out++] = busy[i];
        }
    }
    nbusy = out;
}

static void add_busy(int32_t dev, int64_t s, int64_t e)
{
    if (nbusy == BUSY_MAX)
        merge_busy();
    if (nbusy == BUSY_MAX) {
        nlost++;
        return;
    }
    busy[nbusy++] = (interval){s, e, dev};
}

/* ---- CUPTI's buffers ---- */

static void *pool[64];
static int npool, nmade, nmax;
static size_t buffer_bytes;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    lock_try(-1);
    void *b = npool ? pool[--npool] : NULL;
    int make = !b && nmade < nmax;
    nmade += make;
    unlock();
    if (make) {
        b = mmap(NULL, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) {
            b = NULL;
            __atomic_fetch_sub(&nmade, 1, __ATOMIC_RELAXED);
        }
    }
    if (b) {
        *buffer = b;
        *size = buffer_bytes;
        __atomic_fetch_add(&nbuffers, 1, __ATOMIC_RELAXED);
    }
}

static int64_t on_clock(uint64_t t) { return (int64_t)t + clock_offset; }

static void add_record(const CUpti_Activity *rec)
{
    nrecords++;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel9 *r = (const void *)rec;
        add_kernel(r, on_clock(r->start), on_clock(r->end));
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *r = (const void *)rec;
        add_copy(r->copyKind, r->srcKind, r->dstKind, r->deviceId, r->contextId, r->streamId,
                 r->bytes, on_clock(r->start), on_clock(r->end));
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *r = (const void *)rec;
        add_copy(-1, -1, r->memoryKind, r->deviceId, r->contextId, r->streamId, r->bytes,
                 on_clock(r->start), on_clock(r->end));
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *r = (const void *)rec;
        add_api(rec->kind == CUPTI_ACTIVITY_KIND_DRIVER, r->cbid, on_clock(r->start),
                on_clock(r->end));
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *r = (const void *)rec;
        add_sync(r, on_clock(r->start), on_clock(r->end));
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    size_t dropped = 0;
    p_cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    lock_try(-1);
    ndropped += (int64_t)dropped;
    CUpti_Activity *rec = NULL;
    while (buffer && p_cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        add_record(rec);
    if (buffer && npool < (int)(sizeof pool / sizeof *pool))
        pool[npool++] = buffer;
    else if (buffer)
        munmap(buffer, buffer_bytes);
    unlock();
}

static uint64_t CUPTIAPI perfweave_clock(void) { return (uint64_t)pw_now(); }

/* CUPTI's clock against pw_now: the midpoint of the narrowest of 16 brackets. */
static int64_t measure_offset(void)
{
    int64_t best = INT64_MAX, off = 0;
    for (int i = 0; i < 16; i++) {
        uint64_t g = 0;
        int64_t a = pw_now();
        if (p_cuptiGetTimestamp(&g) != CUPTI_SUCCESS)
            return 0;
        int64_t b = pw_now();
        if (b - a < best) {
            best = b - a;
            off = a + (b - a) / 2 - (int64_t)g;
        }
    }
    return off;
}

static void *open_cupti(void)
{
    char dir[1024], path[1200];
    const char *slash = strrchr(cuda_path, '/');
    size_t n = slash ? (size_t)(slash - cuda_path) : 0;
    memcpy(dir, cuda_path, n);
    dir[n] = 0;
    const char *near[] = {"libcupti.so",
                          "libcupti.so.13",
                          "libcupti.so.12",
                          "../extras/CUPTI/lib64/libcupti.so",
                          "../../cuda_cupti/lib/libcupti.so.12",
                          "../../cuda_cupti/lib/libcupti.so.13"};
    const char *plain[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
    void *h = NULL;
    if (pw_opt.gpu_cupti && *pw_opt.gpu_cupti) {
        snprintf(cupti_path, sizeof cupti_path, "%s", pw_opt.gpu_cupti);
        return dlopen(cupti_path, RTLD_NOW | RTLD_LOCAL);
    }
    for (size_t i = 0; n && !h && i < sizeof near / sizeof *near; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, near[i]);
        if (access(path, R_OK) == 0 && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
            snprintf(cupti_path, sizeof cupti_path, "%s", path);
    }
    for (size_t i = 0; !h && i < sizeof plain / sizeof *plain; i++)
        if ((h = dlopen(plain[i], RTLD_NOW | RTLD_LOCAL)))
            snprintf(cupti_path, sizeof cupti_path, "%s", plain[i]);
    return h;
}

static void activate_cupti(void)
{
    void *h = open_cupti();
    if (!h) {
        status = "no-cupti";
        set_note("CUDA was loaded but no CUPTI library was found beside ", cuda_path,
                 " nor on the library path: no GPU activity (--gpu-cupti PATH names one)");
        cupti_path[0] = 0;
        return;
    }
#define CUPTI_LOOKUP(fn)                                                                           \
    if (!(*(void **)&p_##fn = dlsym(h, #fn))) {                                                    \
        status = "cupti-error";                                                                    \
        set_note("the CUPTI library ", cupti_path, " lacks " #fn ": no GPU activity");             \
        return;                                                                                    \
    }
    CUPTI_FUNCTIONS(CUPTI_LOOKUP)
    *(void **)&p_register_timestamp = dlsym(h, "cuptiActivityRegisterTimestampCallback");
    nmax = pw_opt.gpu_buffers > 0 ? (int)pw_opt.gpu_buffers : 1;
    nmax = nmax > 64 ? 64 : nmax;
    buffer_bytes = (size_t)(pw_opt.gpu_buffer_kb > 4 ? pw_opt.gpu_buffer_kb : 4) * 1024;
    if (p_register_timestamp && p_register_timestamp(perfweave_clock) == CUPTI_SUCCESS) {
        clock_kind = "callback";
    } else {
        clock_kind = "offset";
        clock_offset = measure_offset();
    }
    if (p_cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        status = "cupti-error";
        set_note("CUPTI refused its activity buffers (", cupti_path, "): no GPU activity");
        return;
    }
    int on = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        on += p_cuptiActivityEnable(kinds[i]) == CUPTI_SUCCESS;
    if (!on) {
        status = "cupti-error";
        set_note("CUPTI enabled no activity kind (", cupti_path,
                 "; no driver, or another profiler holds it): no GPU activity");
        return;
    }
    status = "active";
    active = 1;
}

static void flush(void)
{
    if (active)
        p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

#else /* built without CUPTI's headers */

static void activate_cupti(void)
{
    status = "no-cupti";
    set_note("CUDA was loaded (", cuda_path,
             ") but this perfweave was built without CUPTI's headers: no GPU activity");
}
static void flush(void) {}

#endif

/* Once, at the first of the start (CUDA already loaded) and the driver's injection. */
static void activate(void)
{
    if (!enabled || __atomic_exchange_n(&state_claimed, 1, __ATOMIC_ACQ_REL))
        return;
    int entered = pw_wrap_enter(), saved = errno; /* CUPTI's calls are not the program's */
    activate_cupti();
    pw_debug("gpu: %s %s", status, note);
    errno = saved;
    if (entered)
        pw_wrap_leave();
}

/* The CUDA driver's entry for a library named by CUDA_INJECTION64_PATH, called at cuInit. */
PW_EXPORT int InitializeInjection(void)
{
    if (enabled && !state_claimed) {
        if (!dl_iterate_phdr(find_cuda, NULL))
            snprintf(cuda_path, sizeof cuda_path, "%s", "libcuda.so.1");
        activate();
    }
    return 1;
}

/* ---- the dump ---- */

#ifdef PW_HAVE_CUPTI
static const char *const copy_kinds[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                         "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
static const char *const memory_kinds[] = {"unknown",       "pageable",      "pinned",
                                           "device",        "array",         "managed",
                                           "device_static", "managed_static"};
static const char *const sync_types[] = {"unknown", "event_synchronize", "stream_wait_event",
                                         "stream_synchronize", "context_synchronize"};
#define NAME_OF(table, i)                                                                          \
    ((i) >= 0 && (size_t)(i) < sizeof table / sizeof *table ? table[i] : "unknown")

/* The rest of a table's row, then the row's end. */
static void put_ints(pw_json *j, const int64_t *v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        pw_json_int(j, NULL, v[k]);
    pw_json_close(j);
}

static void put_tables(pw_json *j)
{
    pw_json_open(j, "kernels", '[');
    for (size_t i = 0; i < KERNEL_SLOTS; i++) {
        const krow *r = &kernels[i];
        if (!r->hash)
            continue;
        pw_json_open(j, NULL, '[');
        pw_json_str(j, NULL, r->name);
        int64_t v[] = {r->dev,     r->ctx,      r->stream,   r->grid[0],  r->grid[1],
                       r->grid[2], r->block[0], r->block[1], r->block[2], r->count,
                       r->total,   r->min,      r->max};
        put_ints(j, v, sizeof v / sizeof *v);
    }
    pw_json_close(j);
    pw_json_open(j, "copies", '[');
    for (size_t i = 0; i < COPY_SLOTS; i++) {
        const crow *r = &copies[i];
        if (!r->hash)
            continue;
        pw_json_open(j, NULL, '[');
        pw_json_str(j, NULL, r->dir < 0 ? "memset" : NAME_OF(copy_kinds, r->dir));
        pw_json_str(j, NULL, r->src < 0 ? "" : NAME_OF(memory_kinds, r->src));
        pw_json_str(j, NULL, NAME_OF(memory_kinds, r->dst));
        int64_t v[] = {r->dev, r->ctx, r->stream, r->count, r->bytes, r->total};
        put_ints(j, v, sizeof v / sizeof *v);
    }
    pw_json_close(j);
    pw_json_open(j, "syncs", '[');
    for (size_t i = 0; i < SYNC_SLOTS; i++) {
        const srow *r = &syncs[i];
        if (!r->hash)
            continue;
        pw_json_open(j, NULL, '[');
        pw_json_str(j, NULL, NAME_OF(sync_types, r->type));
        int64_t v[] = {r->ctx, r->stream, r->count, r->total, r->max};
        put_ints(j, v, sizeof v / sizeof *v);
    }
    pw_json_close(j);
    pw_json_open(j, "apis", '[');
    for (size_t i = 0; i < API_SLOTS; i++) {
        const arow *r = &apis[i];
        if (!r->hash)
            continue;
        pw_json_open(j, NULL, '[');
        pw_json_str(j, NULL, r->layer ? "driver" : "runtime");
        pw_json_str(j, NULL, r->name ? r->name : "");
        int64_t v[] = {r->count, r->total};
        put_ints(j, v, 2);
    }
    pw_json_close(j);
    merge_busy();
    pw_json_open(j, "busy", '[');
    for (size_t i = 0; i < nbusy;) {
        int32_t dev = busy[i].dev;
        int64_t sum = 0, first = busy[i].start, last = busy[i].end;
        for (; i < nbusy && busy[i].dev == dev; i++) {
            sum += busy[i].end - busy[i].start;
            last = busy[i].end > last ? busy[i].end : last;
        }
        pw_json_open(j, NULL, '[');
        int64_t v[] = {dev, sum, first, last};
        put_ints(j, v, 4);
    }
    pw_json_close(j);
}
#else
static int64_t nrecords, ndropped, nlost, nbuffers, clock_offset;
static const char *clock_kind = "";
static int lock_try(int spins)
{
    (void)spins;
    return 1;
}
static void unlock(void) {}
static void put_tables(pw_json *j)
{
    static const char *const lists[] = {"kernels", "copies", "syncs", "apis", "busy"};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        pw_json_open(j, lists[i], '[');
        pw_json_close(j);
    }
}
#endif

static int dump(int state, int in_signal)
{
    char path[4300];
    if (!enabled || !state_claimed || pw_process_path(path, sizeof path, "gpu", ".json") != 0)
        return 0;
    if (!in_signal)
        flush();
    /* from a signal that interrupted an aggregation: the tables as they are */
    int locked = lock_try(in_signal ? 1000 : -1);
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_GPU_MAGIC, PW_GPU_VERSION);
    pw_json_str(&j, "state", pw_state_name(state));
    pw_json_str(&j, "status", status);
    pw_json_str(&j, "note", note);
    pw_json_str(&j, "cuda", cuda_path);
    pw_json_str(&j, "cupti", cupti_path);
    pw_json_str(&j, "clock", clock_kind);
    pw_json_int(&j, "clock_offset_ns", clock_offset);
    pw_json_int(&j, "t_start_ns", pw_t_start);
    pw_json_int(&j, "t_end_ns", pw_now());
    pw_json_int(&j, "records", nrecords);
    pw_json_int(&j, "dropped", ndropped);
    pw_json_int(&j, "lost", nlost);
    pw_json_int(&j, "buffers", nbuffers);
    put_tables(&j);
    if (locked)
        unlock();
    pw_json_end(&j);
    pw_buf_to_file(&b, path);
    return 0;
}

/* MPI_Finalize, every rank: CUPTI's buffers flushed while the program's threads and
 * CUDA still run (the file is written at exit). */
static int reduce(const pw_job *job)
{
    (void)job;
    if (enabled && state_claimed)
        flush();
    return 0;
}

static void fork_child(void)
{
    /* a child's CUDA is its own (CUDA forbids using the parent's context): no file */
    enabled = 0;
}

static void start(void)
{
    enabled = pw_opt.gpu != 0;
    if (enabled && dl_iterate_phdr(find_cuda, NULL))
        activate();
}

const pw_module pw_module_gpu = {
    .name = "gpu",
    .version = PW_GPU_VERSION,
    .start = start,
    .dump = dump,
    .reduce = reduce,
    .fork_child = fork_child,
};

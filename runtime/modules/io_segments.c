/*
 * The io module's segment trace (--io --trace; io_segments.h): each call the record store
 * counts is also a segment in io/HOST.PID.segments, a bounded array of fixed-size records
 * mapped MAP_SHARED as the store is (a process killed by SIGKILL leaves what it traced):
 * a call takes its slot with one atomic add, fills it and commits it by writing its end
 * time last; past the bound it is counted as dropped. Without --trace the store's hot
 * path pays one predictable branch (pw_io_segments).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io_segments.h"
#include "pw_io_fn.h"

#define SEG_CHUNK 16384 /* slots given disk space at a time (640 KiB) */

pw_io_segments_header_rec *pw_io_segments;
static pw_io_segment_rec *segs;
static size_t seg_len;
static char seg_path[4300];  /* reopened to give slots disk space as they are reached */
static int64_t seg_reserved; /* slots with disk space */
static int seg_lock, seg_full;
static pw_io_segments_header_rec *parent_seg; /* a forked child's, while it makes its own */
static size_t parent_seg_len;
/* --filter: the wrapped functions whose calls are not traced (still in the profile) */
static char untraced_fn[PW_IO_NFN];
static int filtered, path_functions;

/* Disk space for slot i and those before it, a chunk at a time; 0 when there is none
 * (past the bound, or the disk is full: later calls are dropped at once). */
static __attribute__((noinline)) int seg_reserve(int64_t i)
{
    int64_t cap = pw_io_segments->capacity;
    if (i >= cap || __atomic_load_n(&seg_full, __ATOMIC_RELAXED))
        return 0;
    while (__atomic_exchange_n(&seg_lock, 1, __ATOMIC_ACQUIRE))
        pw_cpu_relax();
    int64_t have = __atomic_load_n(&seg_reserved, __ATOMIC_RELAXED);
    while (have <= i) {
        int64_t upto = have + SEG_CHUNK < cap ? have + SEG_CHUNK : cap;
        off_t at = PW_IO_PAGE + (off_t)have * (off_t)sizeof(pw_io_segment_rec);
        if (pw_io_reserve_in(seg_path, at, (size_t)(upto - have) * sizeof(pw_io_segment_rec)) !=
            0) {
            __atomic_store_n(&seg_full, 1, __ATOMIC_RELAXED);
            break;
        }
        have = upto;
    }
    __atomic_store_n(&seg_reserved, have, __ATOMIC_RELEASE);
    __atomic_store_n(&seg_lock, 0, __ATOMIC_RELEASE);
    return i < have;
}

void pw_io_segment(const pw_io_call *c, int file, int64_t bytes, int64_t offset, int thread)
{
    if (PW_UNLIKELY(filtered) && ((c->fn >= 0 && c->fn < PW_IO_NFN && untraced_fn[c->fn]) ||
                                  (path_functions && pw_filter_path_excluded_here())))
        return; /* --filter: left out of the segment trace */
    int64_t i = __atomic_fetch_add(&pw_io_segments->next, 1, __ATOMIC_RELAXED);
    if (PW_UNLIKELY(i >= __atomic_load_n(&seg_reserved, __ATOMIC_ACQUIRE)) && !seg_reserve(i)) {
        __atomic_fetch_add(&pw_io_segments->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    pw_io_segment_rec *g = &segs[i];
    g->t0 = c->t0;
    g->bytes = bytes;
    g->offset = offset;
    g->file = file;
    g->thread = (int16_t)thread;
    g->layer = (uint8_t)c->layer;
    g->op = (uint8_t)c->op;
    __atomic_store_n(&g->t1, c->t1 > 0 ? c->t1 : 1, __ATOMIC_RELEASE); /* the commit */
}

void pw_io_segments_make(const char *store_path, int64_t pid)
{
    int64_t cap = pw_opt.io_trace_max;
    if (!pw_opt.trace || cap <= 0)
        return;
    for (int i = 0; i < PW_IO_NFN; i++)
        filtered |= untraced_fn[i] =
            (char)pw_filter_excluded(PW_FILTER_FUNCTION, pw_io_fn_names[i]);
    filtered |= path_functions = pw_filter_paths_resolve() > 0;
    char *path = seg_path;
    size_t n = strlen(store_path) - strlen(".pwio");
    if (n + sizeof ".segments" > sizeof seg_path)
        return;
    memcpy(path, store_path, n);
    memcpy(path + n, ".segments", sizeof ".segments");
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    size_t len = PW_IO_PAGE + (size_t)cap * sizeof(pw_io_segment_rec);
    char *m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0 && pw_reserve_disk(fd, 0, PW_IO_PAGE) == 0)
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        pw_log("io: cannot make the I/O segment trace %s: no segments", path);
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return;
    }
    close(fd);
    seg_len = len;
    seg_reserved = 0;
    seg_full = seg_lock = 0;
    segs = (pw_io_segment_rec *)(m + PW_IO_PAGE);
    pw_io_segments_header_rec *h = (pw_io_segments_header_rec *)m;
    h->version = PW_IO_SEGMENTS_VERSION;
    h->record_size = (int32_t)sizeof(pw_io_segment_rec);
    h->pid = pid;
    h->capacity = cap;
    h->tick_start = pw_tick_start;
    h->ns_start = pw_t_start;
    h->ns_per_tick = pw_ns_per_tick();
    __atomic_store_n(&h->magic, PW_IO_SEGMENTS_MAGIC_NUMBER, __ATOMIC_RELEASE);
    __atomic_store_n(&pw_io_segments, h, __ATOMIC_RELEASE);
}

void pw_io_segments_fork_begin(void)
{
    parent_seg = pw_io_segments;
    parent_seg_len = seg_len;
    pw_io_segments = NULL;
}

void pw_io_segments_fork_end(int made)
{
    if (!parent_seg)
        return;
    if (made && !pw_io_segments) /* its store, but no segments: the parent's file says so */
        __atomic_fetch_add(&parent_seg->forks_dropped, 1, __ATOMIC_RELAXED);
    munmap(parent_seg, parent_seg_len);
    parent_seg = NULL;
}

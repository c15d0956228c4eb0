/*
 * Event trace buffers (docs/format.md, "Traces"): one buffer per thread of
 * --trace-buffer bytes; a full buffer is appended to the rank's events file
 * under a lock, and the flush itself is recorded (a FLUSH event, after the records
 * whose reservation caused it) so analyses can discount its time. Memory is bounded by
 * one buffer per thread.
 *
 * Writers reserve records, fill them and commit. A buffer's owner marks it busy
 * while it writes, so that pw_trace_close can stop recording and then wait for
 * every writer to leave before flushing buffers that belong to other threads.
 *
 * User functions of programs built with -finstrument-functions enter the trace
 * through __cyg_profile_func_enter/exit (ENTER/LEAVE records). Each thread keeps
 * a shadow stack of the functions it is in, from process start, so that when a
 * thread's first traced event comes (after MPI_Init) the functions it is already
 * inside (main, ...) are written first, with their original entry times.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"

typedef struct pw_tbuf {
    struct pw_tbuf *next;
    pw_event_rec *rec;
    size_t n, cap;
    int thread;
    int busy;   /* the owner is between reserve and commit */
    int synced; /* the shadow stack was written */
    int pending;                   /* a flush to record at the next commit: */
    int64_t flush_t0, flush_t1, flush_bytes;
} pw_tbuf;

#define PW_MAX_FLUSHES 65536
static struct {
    int fd;
    int lock;
    int64_t written;  /* records in the file */
    int64_t lost;     /* records that could not be written */
    int nthreads;
    pw_tbuf *all;
    pw_trace_flush flushes[PW_MAX_FLUSHES];
    int nflushes;
    int failed;       /* a write failed: marked in the experiment (pw_file_failed) */
    char path[4200];
} tr = {.fd = -1};

int pw_trace_recording;
int pw_trace_hooks;

static PW_TLS pw_tbuf *self;

/* Shadow stack of instrumented functions (ENTER without LEAVE yet). Deeper
 * levels than PW_STACK_MAX are counted but not kept. */
#define PW_STACK_MAX 256
typedef struct pw_stack {
    int depth;
    uintptr_t fn[PW_STACK_MAX];
    int64_t t[PW_STACK_MAX];
} pw_stack;
static PW_TLS pw_stack *stack;

static void lock(void)
{
    while (__atomic_exchange_n(&tr.lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void) { __atomic_store_n(&tr.lock, 0, __ATOMIC_RELEASE); }

int pw_trace_open(const char *path)
{
    size_t n = strlen(path) < sizeof tr.path ? strlen(path) : sizeof tr.path - 1;
    memcpy(tr.path, path, n);
    tr.path[n] = 0;
    tr.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tr.fd < 0) {
        pw_file_failed(path, errno);
        return -1;
    }
    __atomic_store_n(&pw_trace_recording, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static pw_tbuf *buffer(void)
{
    if (PW_LIKELY(self != NULL))
        return self;
    size_t cap = (size_t)pw_opt.trace_buffer / sizeof(pw_event_rec);
    if (cap < 64)
        cap = 64;
    pw_tbuf *b = pw_alloc(sizeof *b + cap * sizeof(pw_event_rec));
    if (!b)
        return NULL;
    b->rec = (pw_event_rec *)(b + 1);
    b->cap = cap;
    lock();
    b->thread = tr.nthreads++;
    b->next = tr.all;
    tr.all = b;
    unlock();
    self = b;
    return b;
}

/* Append a buffer to the file (caller holds no lock). */
static void flush(pw_tbuf *b)
{
    if (!b->n)
        return;
    lock();
    int64_t first = tr.written;
    int err = tr.fd >= 0 ? pw_write_all(tr.fd, b->rec, b->n * sizeof(pw_event_rec)) : EBADF;
    int ok = !err;
    if (err && tr.fd >= 0) {
        /* back to the last whole flush, so that later ones stay aligned and listed */
        off_t good = (off_t)tr.written * (off_t)sizeof(pw_event_rec);
        if (ftruncate(tr.fd, good) != 0 || lseek(tr.fd, good, SEEK_SET) != good) {
            close(tr.fd);
            tr.fd = -1;
        }
        if (!tr.failed++)
            pw_file_failed(tr.path, err);
    }
    if (ok) {
        tr.written += (int64_t)b->n;
        if (tr.nflushes < PW_MAX_FLUSHES)
            tr.flushes[tr.nflushes++] = (pw_trace_flush){b->thread, first, (int64_t)b->n};
    } else {
        tr.lost += (int64_t)b->n;
    }
    unlock();
    b->n = 0;
}

static pw_event_rec *region_rec(pw_event_rec *r, int type, uintptr_t fn, int64_t t, int depth)
{
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->t0 = t;
    r->bytes = (int64_t)fn;
    r->tag = depth;
    r->peer = r->comm = -1;
    return r;
}

/* Room for n records in b (and one more), flushing it when full. The flush is recorded
 * at the next commit, after the records reserved now: they describe a call that ended
 * before the flush began, and records of a thread stay in time order. */
static pw_event_rec *room(pw_tbuf *b, size_t n)
{
    if (PW_UNLIKELY(b->n + n + 1 > b->cap)) {
        int64_t t0 = pw_ticks();
        int saved_errno = errno;
        size_t count = b->n;
        flush(b);
        errno = saved_errno;
        if (!b->pending) {
            b->pending = 1;
            b->flush_t0 = t0;
            b->flush_bytes = 0;
        }
        b->flush_t1 = pw_ticks();
        b->flush_bytes += (int64_t)(count * sizeof(pw_event_rec));
        if (b->n + n + 1 > b->cap)
            return NULL; /* a single call larger than the buffer */
    }
    pw_event_rec *r = &b->rec[b->n];
    b->n += n;
    return r;
}

/* The flush that made room, as a record (room() kept space for it). */
static void record_flush(pw_tbuf *b)
{
    if (!b->pending || b->n >= b->cap)
        return;
    pw_event_rec *f = &b->rec[b->n++];
    memset(f, 0, sizeof *f);
    f->type = PW_EV_FLUSH;
    f->t0 = b->flush_t0;
    f->t1 = b->flush_t1;
    f->bytes = b->flush_bytes;
    f->peer = f->comm = -1;
    b->pending = 0;
}

pw_event_rec *pw_trace_reserve(int n)
{
    pw_tbuf *b = buffer();
    if (PW_UNLIKELY(!b || b->busy))
        return NULL; /* b->busy: a signal handler interrupted a writer of this thread */
    __atomic_store_n(&b->busy, 1, __ATOMIC_SEQ_CST);
    if (PW_UNLIKELY(!__atomic_load_n(&pw_trace_recording, __ATOMIC_SEQ_CST))) {
        __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
        return NULL;
    }
    if (PW_UNLIKELY(!b->synced)) {
        /* the functions this thread is already in, outermost first */
        b->synced = 1;
        int d = stack ? (stack->depth < PW_STACK_MAX ? stack->depth : PW_STACK_MAX) : 0;
        if ((size_t)d > b->cap / 2)
            d = (int)(b->cap / 2); /* the outermost ones */
        pw_event_rec *r = room(b, (size_t)d);
        for (int i = 0; r && i < d; i++)
            region_rec(r + i, PW_EV_ENTER, stack->fn[i], stack->t[i], i);
    }
    pw_event_rec *r = room(b, (size_t)n);
    if (!r)
        __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
    return r;
}

void pw_trace_commit(int unused)
{
    pw_tbuf *b = self;
    if (!b)
        return;
    if (unused > 0 && (size_t)unused <= b->n)
        b->n -= (size_t)unused;
    record_flush(b);
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

void pw_trace_close(void)
{
    __atomic_store_n(&pw_trace_recording, 0, __ATOMIC_SEQ_CST);
    for (pw_tbuf *b = tr.all; b; b = b->next) {
        /* a writer that saw recording on finishes its record; bounded wait, in
         * case the owner was interrupted by a signal that ended up here */
        for (long spins = 0; __atomic_load_n(&b->busy, __ATOMIC_ACQUIRE) && spins < 100000000L;
             spins++)
            pw_cpu_relax();
        record_flush(b);
        flush(b);
    }
    if (tr.fd >= 0)
        close(tr.fd);
    tr.fd = -1;
}

int pw_trace_flushes(const pw_trace_flush **out)
{
    *out = tr.flushes;
    return tr.nflushes;
}

int64_t pw_trace_written(void) { return tr.written; }
int64_t pw_trace_lost(void) { return tr.lost; }

/* ---- -finstrument-functions ---- */

#define PW_NOINST __attribute__((no_instrument_function))

static PW_NOINST pw_stack *self_stack(void)
{
    if (PW_LIKELY(stack != NULL))
        return stack;
    stack = pw_alloc(sizeof *stack);
    return stack;
}

static PW_NOINST void region_event(int type, uintptr_t fn, int64_t t, int depth)
{
    pw_event_rec *r = pw_trace_reserve(1);
    if (r) {
        region_rec(r, type, fn, t, depth);
        pw_trace_commit(0);
    }
}

PW_EXPORT PW_NOINST void __cyg_profile_func_enter(void *fn, void *site)
{
    (void)site;
    if (PW_LIKELY(!pw_trace_hooks))
        return;
    pw_stack *s = self_stack();
    if (PW_UNLIKELY(!s))
        return;
    int64_t t = pw_ticks();
    int saved_errno = errno;
    if (pw_trace_recording)
        region_event(PW_EV_ENTER, (uintptr_t)fn, t, s->depth);
    if (s->depth < PW_STACK_MAX) {
        s->fn[s->depth] = (uintptr_t)fn;
        s->t[s->depth] = t;
    }
    s->depth++;
    errno = saved_errno;
}

PW_EXPORT PW_NOINST void __cyg_profile_func_exit(void *fn, void *site)
{
    (void)site;
    if (PW_LIKELY(!pw_trace_hooks))
        return;
    pw_stack *s = stack;
    if (PW_UNLIKELY(!s || s->depth <= 0))
        return;
    int saved_errno = errno;
    if (pw_trace_recording)
        region_event(PW_EV_LEAVE, (uintptr_t)fn, pw_ticks(), s->depth - 1);
    s->depth--;
    errno = saved_errno;
}

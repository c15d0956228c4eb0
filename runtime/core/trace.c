/*
 * Event trace buffers (docs/format.md, "Traces"). Each thread writes its records
 * straight into the rank's events file: its buffer is a block of the file (a BLOCK
 * header record and --trace-buffer bytes of record slots, rounded to whole pages)
 * mapped MAP_SHARED. A commit stores the block's count of committed records in its
 * header, so whatever ends the process (MPI_Finalize, a signal we catch, SIGKILL), the
 * file holds every record committed before it: the kernel's page cache owns the pages.
 * A full block is unmapped and the thread maps a new one at the end of the file; the
 * switch is recorded (a FLUSH event, after the records whose reservation caused it) so
 * analyses can discount its time. Blocks are allocated on disk (fallocate) before they
 * are mapped: a full file system costs records (counted as lost), never a SIGBUS in the
 * program. Memory is bounded by one mapped block per thread.
 *
 * Writers reserve records, fill them and commit. A buffer's owner marks it busy
 * while it writes, so that pw_trace_close can stop recording and then wait for
 * every writer to leave before it completes blocks that belong to other threads.
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
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pw.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

typedef struct pw_tbuf {
    struct pw_tbuf *next;
    pw_event_rec *head; /* the mapped block's BLOCK record; NULL: no block */
    pw_event_rec *rec;  /* its record slots */
    size_t n, cap;
    int64_t done;   /* records of the thread's earlier blocks */
    int64_t blocks; /* blocks the thread has mapped */
    int thread;
    int tid;     /* the thread's OS id, in its BLOCK records (the I/O segments name it) */
    int busy;    /* the owner is between reserve and commit */
    int synced;  /* the shadow stack was written */
    int pending; /* a block switch to record at the next commit: */
    int64_t flush_t0, flush_t1, flush_bytes;
} pw_tbuf;

static struct {
    int fd;
    int lock;
    off_t size;   /* bytes of the events file allocated to blocks */
    size_t slots; /* record slots per block */
    int64_t lost; /* records that found no block */
    int nthreads;
    pw_tbuf *all;
    int failed; /* a block found no disk space: marked once (pw_file_failed) */
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

/* A block is a whole number of pages (mmap offsets are page aligned) and of records:
 * a multiple of lcm(40, 4096) = 20480 bytes, 512 records. */
#define PW_BLOCK_RECORDS 512

/* Map a new block at the end of the events file for b (its owner, or nobody writing). */
static int new_block(pw_tbuf *b)
{
    size_t len = (tr.slots + 1) * sizeof(pw_event_rec);
    void *m = MAP_FAILED;
    int saved_errno = errno;
    lock();
    off_t off = tr.size;
    int err = 0;
    if (tr.fd >= 0 && pw_reserve_disk(tr.fd, off, len) == 0) {
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, tr.fd, off);
        if (m != MAP_FAILED)
            tr.size = off + (off_t)len;
        else
            err = errno;
    } else if (tr.fd >= 0) {
        err = errno ? errno : ENOSPC;
    }
    int mark = err && !tr.failed++;
    unlock();
    if (mark) /* the records that find no block are counted (LOST); the file is marked */
        pw_file_failed(tr.path, err);
    b->head = NULL;
    if (m == MAP_FAILED) {
        errno = saved_errno;
        return -1;
    }
    /* Fault every page in now, inside the recorded switch, rather than one page per
     * hundred records later, where the time would count as the program's; the kernel
     * does it without a trap per page (Linux 5.14), 2-3 times faster here. */
    if (madvise(m, len, MADV_POPULATE_WRITE) != 0)
        for (size_t at = 0; at < len; at += 4096)
            ((volatile char *)m)[at] = 0;
    errno = saved_errno;
    pw_event_rec *h = m;
    h->t0 = 0;
    h->t1 = (int64_t)tr.slots;
    h->peer = b->tid;
    h->comm = -1;
    h->tag = b->thread;
    h->bytes = b->blocks++;
    __atomic_store_n(&h->type, (uint8_t)PW_EV_BLOCK, __ATOMIC_RELEASE);
    b->head = h;
    b->rec = h + 1;
    b->cap = tr.slots;
    b->n = 0;
    return 0;
}

static void end_block(pw_tbuf *b)
{
    if (!b->head)
        return;
    b->done += (int64_t)b->n;
    munmap(b->head, (b->cap + 1) * sizeof(pw_event_rec));
    b->head = NULL;
    b->n = b->cap = 0;
}

static pw_tbuf *buffer(void)
{
    if (PW_LIKELY(self != NULL))
        return self;
    pw_tbuf *b = pw_alloc(sizeof *b);
    if (!b)
        return NULL;
    lock();
    b->thread = tr.nthreads++;
    unlock();
    b->tid = (int)gettid();
    /* the first block is a switch like the others: its time is recorded */
    b->pending = 1;
    b->flush_t0 = pw_ticks();
    new_block(b);
    b->flush_t1 = pw_ticks();
    lock();
    b->next = tr.all;
    tr.all = b;
    unlock();
    self = b;
    return b;
}

/* A child forked while tracing (system(), a spawned helper) inherits the blocks as
 * shared mappings of the parent's file: it must not write into them. */
static void stop_in_child(void)
{
    __atomic_store_n(&pw_trace_recording, 0, __ATOMIC_SEQ_CST);
    tr.fd = -1;
}

int pw_trace_open(const char *path)
{
    size_t n = strlen(path) < sizeof tr.path ? strlen(path) : sizeof tr.path - 1;
    memcpy(tr.path, path, n);
    tr.path[n] = 0;
    tr.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tr.fd < 0) {
        pw_file_failed(path, errno);
        return -1;
    }
    pthread_atfork(NULL, NULL, stop_in_child);
    size_t want = (size_t)pw_opt.trace_buffer / sizeof(pw_event_rec) + 1;
    tr.slots = (want + PW_BLOCK_RECORDS - 1) / PW_BLOCK_RECORDS * PW_BLOCK_RECORDS - 1;
    /* The opening thread (MPI_Init's) maps its first block now, in MPI_Init's time,
     * not at its first event, in the program's. */
    pw_tbuf *b = buffer();
    if (b)
        b->pending = 0;
    __atomic_store_n(&pw_trace_recording, 1, __ATOMIC_SEQ_CST);
    return 0;
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

/* Room for n records in b (and one more), in a new block when the current one is full.
 * The switch is recorded at the next commit, after the records reserved now: they
 * describe a call that ended before the switch began, and records of a thread stay in
 * time order. */
static pw_event_rec *room(pw_tbuf *b, size_t n)
{
    if (PW_UNLIKELY(!b->head || b->n + n + 1 > b->cap)) {
        int64_t t0 = pw_ticks();
        int64_t bytes = (int64_t)(b->n * sizeof(pw_event_rec));
        end_block(b);
        new_block(b);
        if (!b->pending) {
            b->pending = 1;
            b->flush_t0 = t0;
            b->flush_bytes = 0;
        }
        b->flush_t1 = pw_ticks();
        b->flush_bytes += bytes;
        if (!b->head || b->n + n + 1 > b->cap) {
            __atomic_add_fetch(&tr.lost, (int64_t)n, __ATOMIC_RELAXED);
            return NULL; /* no disk space, or a single call larger than a block */
        }
    }
    pw_event_rec *r = &b->rec[b->n];
    b->n += n;
    return r;
}

/* The block switch that made room, as a record (room() kept space for it). */
static void record_flush(pw_tbuf *b)
{
    if (!b->pending || !b->head || b->n >= b->cap)
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

/* Publish b's records up to b->n: the count in the block's header is what a reader
 * takes, whatever ends the process after this store. */
static inline void publish(pw_tbuf *b)
{
    if (PW_LIKELY(b->head != NULL))
        __atomic_store_n(&b->head->t0, (int64_t)b->n, __ATOMIC_RELEASE);
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
        if ((size_t)d > tr.slots / 2)
            d = (int)(tr.slots / 2); /* the outermost ones */
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
    publish(b);
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

void pw_trace_close(void)
{
    __atomic_store_n(&pw_trace_recording, 0, __ATOMIC_SEQ_CST);
    for (pw_tbuf *b = tr.all; b; b = b->next) {
        /* A writer that saw recording on finishes its records; bounded wait, since
         * the owner may be this very thread, interrupted by the signal that ended up
         * here (its reservation then stays uncommitted: the header does not count it). */
        int own = b == self && b->busy;
        int idle = !own && !__atomic_load_n(&b->busy, __ATOMIC_SEQ_CST);
        for (long spins = 0; !own && !idle && spins < 1000000L; spins++) {
            pw_cpu_relax();
            idle = !__atomic_load_n(&b->busy, __ATOMIC_SEQ_CST);
        }
        if (!idle)
            continue; /* its committed records are in the file already */
        record_flush(b);
        publish(b);
        end_block(b); /* no writer can touch it again: recording is off */
    }
    if (tr.fd >= 0)
        close(tr.fd);
    tr.fd = -1;
}

int64_t pw_trace_written(void)
{
    int64_t n = 0;
    for (pw_tbuf *b = tr.all; b; b = b->next)
        n += b->done + (b->head ? __atomic_load_n(&b->head->t0, __ATOMIC_ACQUIRE) : 0);
    return n;
}

int64_t pw_trace_lost(void) { return __atomic_load_n(&tr.lost, __ATOMIC_RELAXED); }

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

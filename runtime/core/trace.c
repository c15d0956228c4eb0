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
 * Records are stored compact (version 5, docs/format.md "Compact records"): writers fill
 * event records (pw_event_rec) in a per-thread staging area and the commit encodes them
 * into the block, 16 bytes each in the common case, as layed out by their type's entry of
 * PW_EVENT_LAYOUTS: nothing that writes events knows the encoding.
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

/* Each thread's ids of addresses (call sites, instrumented functions): an open hash
 * table, filled to 3/4 at most; addresses beyond go whole into extension records. */
#define PW_SITES 4096

typedef struct pw_tbuf {
    struct pw_tbuf *next;
    pw_cevent_rec *head; /* the mapped block's BLOCK record; NULL: no block */
    pw_cevent_rec *rec;  /* its record slots */
    size_t n, cap;
    int64_t events; /* events committed by the thread (its blocks' heads) */
    int64_t blocks; /* blocks the thread has mapped */
    off_t off;      /* the mapped block's place in the file */
    int64_t base;   /* the block's time base (ticks), when has_base */
    int64_t post;   /* the number of the thread's latest post (PW_CFLAG_NEXT_POST) */
    int has_base;
    int thread;
    int tid;     /* the thread's OS id, in its THREAD records (the I/O segments name it) */
    int busy;    /* the owner is between reserve and commit */
    int synced;  /* the shadow stack was written */
    int pending; /* a block switch to record at the next commit: */
    int64_t flush_t0, flush_t1, flush_bytes;
    pw_event_rec *stage; /* the reservation's event records, encoded at commit */
    size_t stage_cap, staged, stage_first;
    uintptr_t *site_addr; /* PW_SITES addresses and their id + 1 (0: free) */
    uint32_t *site_id;
    uint32_t nsites;
} pw_tbuf;

static struct {
    int fd;
    int lock;
    off_t size;   /* bytes of the events file allocated to blocks */
    size_t slots; /* record slots per block */
    int64_t lost; /* events that found no block */
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

/* A block is a whole number of pages (mmap offsets are page aligned): a multiple of
 * 4096 bytes, 256 records. */
#define PW_BLOCK_RECORDS (4096 / sizeof(pw_cevent_rec))
/* Compact records one event may take: a BASE, a SITE, its head and one extension record
 * per field of PW_EVENT_EXT_FIELDS */
#define PW_CREC_MAX 10

/* Map a new block at the end of the events file for b (its owner, or nobody writing). */
static int new_block(pw_tbuf *b)
{
    size_t len = (tr.slots + 1) * sizeof(pw_cevent_rec);
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
    pw_cevent_rec *h = m;
    pw_cwide_rec *t = (pw_cwide_rec *)(h + 1);
    t->kind = PW_CK_THREAD;
    t->a = (uint32_t)b->tid;
    t->w = b->blocks++;
    h->a = 1; /* the THREAD record is committed with the block */
    h->b = (uint32_t)tr.slots;
    h->c = (uint32_t)b->thread;
    __atomic_store_n(&h->kind, (uint8_t)PW_EV_BLOCK, __ATOMIC_RELEASE);
    b->head = h;
    b->off = off;
    b->rec = h + 1;
    b->cap = tr.slots;
    b->n = 1;
    b->has_base = 0; /* each block has its own time base: read alone, it is whole */
    return 0;
}

static void end_block(pw_tbuf *b)
{
    if (!b->head)
        return;
    munmap(b->head, (b->cap + 1) * sizeof(pw_cevent_rec));
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
    size_t want = (size_t)pw_opt.trace_buffer / sizeof(pw_cevent_rec) + 1;
    if (want > (size_t)INT32_MAX) /* the header counts slots in 32 bits */
        want = (size_t)INT32_MAX;
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

/* Room for n compact records in b, in a new block when the current one is full. The
 * switch is recorded at the next commit, after the records reserved now: they describe
 * a call that ended before the switch began, and records of a thread stay in time
 * order. */
static int room(pw_tbuf *b, size_t n)
{
    if (PW_UNLIKELY(!b->head || b->n + n > b->cap)) {
        int64_t t0 = pw_ticks();
        int64_t bytes = (int64_t)(b->n * sizeof(pw_cevent_rec));
        end_block(b);
        new_block(b);
        if (!b->pending) {
            b->pending = 1;
            b->flush_t0 = t0;
            b->flush_bytes = 0;
        }
        b->flush_t1 = pw_ticks();
        b->flush_bytes += bytes;
        if (!b->head || b->n + n > b->cap)
            return -1; /* no disk space, or a single call larger than a block */
    }
    return 0;
}

/* ---- the compact encoding (format.h PW_CEVENT_FIELDS, PW_EVENT_LAYOUTS) ---- */

enum { PW_EV_DEFAULT = 0 }; /* PW_EVENT_LAYOUTS's DEFAULT, at index 0 */
#define PW_LAYOUT_AT(name, value) [PW_EV_##name] = (value),
static const uint32_t layouts[128] = {PW_EVENT_LAYOUTS(PW_LAYOUT_AT)};
#undef PW_LAYOUT_AT

/* The event field an extension record of kind PW_CK_EXT + k holds */
#define PW_EXT_ENUM(name, k) PW_FIELD_##name = k,
enum { PW_EVENT_EXT_FIELDS(PW_EXT_ENUM) PW_NFIELDS };
#undef PW_EXT_ENUM

static int64_t field_of(const pw_event_rec *e, int k)
{
    switch (k) {
    case PW_FIELD_T0:
        return e->t0;
    case PW_FIELD_T1:
        return e->t1;
    case PW_FIELD_FN:
        return e->fn;
    case PW_FIELD_PEER:
        return e->peer;
    case PW_FIELD_TAG:
        return e->tag;
    case PW_FIELD_COMM:
        return e->comm;
    default:
        return e->bytes;
    }
}

/* The field a slot code holds */
static int slot_field(int slot)
{
    static const signed char f[] = {
        [PW_SLOT_NONE] = -1,
        [PW_SLOT_FN_U16] = PW_FIELD_FN,
        [PW_SLOT_COMM_I16] = PW_FIELD_COMM,
        [PW_SLOT_PEER_I32] = PW_FIELD_PEER,
        [PW_SLOT_TAG_I32] = PW_FIELD_TAG,
        [PW_SLOT_T0_TIME] = PW_FIELD_T0,
        [PW_SLOT_T1_DUR] = PW_FIELD_T1,
        [PW_SLOT_BYTES_U32] = PW_FIELD_BYTES,
        [PW_SLOT_BYTES_ADDR] = PW_FIELD_BYTES,
        [PW_SLOT_T1_U32] = PW_FIELD_T1,
        [PW_SLOT_T1_I32] = PW_FIELD_T1,
        [PW_SLOT_KEY_T1] = -1,
        [PW_SLOT_KEY_TAG] = -1,
    };
    return slot >= 0 && slot < (int)sizeof f ? f[slot] : -1;
}

static pw_cwide_rec *wide(pw_tbuf *b, int kind, uint32_t a, int64_t w)
{
    pw_cwide_rec *x = (pw_cwide_rec *)&b->rec[b->n++];
    x->kind = (uint8_t)kind;
    x->flags = 0;
    x->s = 0;
    x->a = a;
    x->w = w;
    return x;
}

/* The id of address v in b's table (a SITE record defines it first), or -1: table full */
static int64_t site(pw_tbuf *b, uintptr_t v)
{
    if (PW_UNLIKELY(!b->site_addr)) {
        b->site_addr = pw_alloc(PW_SITES * (sizeof *b->site_addr + sizeof *b->site_id));
        if (!b->site_addr)
            return -1;
        b->site_id = (uint32_t *)(b->site_addr + PW_SITES);
    }
    size_t i = (size_t)((v >> 2) * 0x9E3779B97F4A7C15ull >> 52) & (PW_SITES - 1);
    for (; b->site_id[i]; i = (i + 1) & (PW_SITES - 1))
        if (b->site_addr[i] == v)
            return b->site_id[i] - 1;
    if (b->nsites >= PW_SITES / 4 * 3)
        return -1;
    b->site_addr[i] = v;
    b->site_id[i] = ++b->nsites;
    wide(b, PW_CK_SITE, b->nsites - 1, (int64_t)v);
    return b->nsites - 1;
}

/* Slot `slot` of event e as stored: 1 if the value fits, else 0 (the value then goes
 * whole into an extension record). A TIME slot may write a BASE record first, an ADDR
 * slot a SITE record. */
static int slot_value(pw_tbuf *b, const pw_event_rec *e, int slot, uint32_t *out)
{
    int64_t v;
    *out = 0;
    switch (slot) {
    case PW_SLOT_FN_U16:
        *out = e->fn;
        return 1;
    case PW_SLOT_COMM_I16:
        *out = (uint16_t)e->comm;
        return e->comm >= INT16_MIN && e->comm <= INT16_MAX;
    case PW_SLOT_PEER_I32:
        *out = (uint32_t)e->peer;
        return 1;
    case PW_SLOT_TAG_I32:
        *out = (uint32_t)e->tag;
        return 1;
    case PW_SLOT_T0_TIME:
        v = e->t0 - b->base;
        if (!b->has_base || e->t0 < b->base || v > (int64_t)UINT32_MAX) {
            wide(b, PW_CK_BASE, 0, e->t0);
            b->base = e->t0;
            b->has_base = 1;
            v = 0;
        }
        *out = (uint32_t)v;
        return 1;
    case PW_SLOT_T1_DUR:
        v = e->t1 - e->t0;
        *out = v >= 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : 0;
        return v >= 0 && v <= (int64_t)UINT32_MAX;
    case PW_SLOT_BYTES_U32:
        *out = (uint32_t)e->bytes;
        return e->bytes >= 0 && e->bytes <= (int64_t)UINT32_MAX;
    case PW_SLOT_BYTES_ADDR:
        v = site(b, (uintptr_t)e->bytes);
        *out = v >= 0 ? (uint32_t)v : 0;
        return v >= 0;
    case PW_SLOT_T1_U32:
        *out = (uint32_t)e->t1;
        return e->t1 >= 0 && e->t1 <= (int64_t)UINT32_MAX;
    case PW_SLOT_T1_I32:
        *out = (uint32_t)e->t1;
        return e->t1 >= INT32_MIN && e->t1 <= INT32_MAX;
    default:
        return 0;
    }
}

/* Event e as compact records at the end of b's block (room for PW_CREC_MAX made). */
static void encode(pw_tbuf *b, const pw_event_rec *e)
{
    uint32_t lay = e->type < 128 && layouts[e->type] ? layouts[e->type] : layouts[PW_EV_DEFAULT];
    uint32_t v[4];
    int ok[4], covered = 0;
    /* the slots first: they may need a BASE or SITE record before the head */
    for (int i = 0; i < 4; i++) {
        int slot = (int)(lay >> (4 * i) & 15), f = slot_field(slot);
        ok[i] = slot_value(b, e, slot, &v[i]);
        if (f >= 0 && ok[i])
            covered |= 1 << f;
    }
    int key = (int)(lay >> 16 & 15), flags = e->flags;
    if ((key == PW_SLOT_KEY_T1 && e->t1) || (key == PW_SLOT_KEY_TAG && e->tag))
        covered |= 1 << PW_FIELD_T0; /* the post's number names it: no key */
    if (key == PW_SLOT_KEY_T1 && (e->flags & PW_EVF_NONBLOCKING) && e->t1) {
        /* a post: numbered in the order of posting, so mostly the thread's next one */
        if (e->t1 == b->post + 1 && !(covered >> PW_FIELD_T1 & 1)) {
            covered |= 1 << PW_FIELD_T1;
            flags |= PW_CFLAG_NEXT_POST;
        }
        b->post = e->t1;
    }
    pw_cevent_rec *h = &b->rec[b->n++];
    h->kind = e->type;
    h->flags = (uint8_t)flags;
    h->s = (uint16_t)v[0];
    h->a = v[1];
    h->b = v[2];
    h->c = v[3];
    for (int k = 0; k < PW_NFIELDS; k++) {
        int64_t x = field_of(e, k);
        if (!(covered >> k & 1) && x != (k == PW_FIELD_PEER || k == PW_FIELD_COMM ? -1 : 0))
            wide(b, PW_CK_EXT + k, 0, x);
    }
    b->events++;
}

/* The block switch that made room, as a record (room() kept space for it). */
static void record_flush(pw_tbuf *b)
{
    if (!b->pending || !b->head || b->n + PW_CREC_MAX > b->cap)
        return;
    pw_event_rec f;
    memset(&f, 0, sizeof f);
    f.type = PW_EV_FLUSH;
    f.t0 = b->flush_t0;
    f.t1 = b->flush_t1;
    f.bytes = b->flush_bytes;
    f.peer = f.comm = -1;
    encode(b, &f);
    b->pending = 0;
}

/* Publish b's records up to b->n: the count in the block's header is what a reader
 * takes, whatever ends the process after this store. */
static inline void publish(pw_tbuf *b)
{
    if (PW_LIKELY(b->head != NULL))
        __atomic_store_n(&b->head->a, (uint32_t)b->n, __ATOMIC_RELEASE);
}

/* Staging room for n event records (grown by doubling; pw_alloc: signal-safe) */
static pw_event_rec *stage(pw_tbuf *b, size_t n)
{
    if (PW_UNLIKELY(n > b->stage_cap)) {
        size_t cap = b->stage_cap ? b->stage_cap : 64;
        while (cap < n)
            cap *= 2;
        pw_event_rec *s = pw_alloc(cap * sizeof *s);
        if (!s)
            return NULL;
        if (b->stage)
            pw_release(b->stage, b->stage_cap * sizeof *s);
        b->stage = s;
        b->stage_cap = cap;
    }
    return b->stage;
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
    size_t d = 0;
    if (PW_UNLIKELY(!b->synced)) {
        /* the functions this thread is already in, outermost first */
        b->synced = 1;
        d = stack ? (size_t)(stack->depth < PW_STACK_MAX ? stack->depth : PW_STACK_MAX) : 0;
        if (d * PW_CREC_MAX > tr.slots / 2)
            d = tr.slots / 2 / PW_CREC_MAX; /* the outermost ones */
    }
    pw_event_rec *r = stage(b, d + (size_t)n);
    if (r && room(b, (d + (size_t)n + 1) * PW_CREC_MAX) != 0) {
        __atomic_add_fetch(&tr.lost, (int64_t)n, __ATOMIC_RELAXED);
        r = NULL;
    }
    if (!r) {
        __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
        return NULL;
    }
    for (size_t i = 0; i < d; i++)
        region_rec(r + i, PW_EV_ENTER, stack->fn[i], stack->t[i], (int)i);
    b->staged = d + (size_t)n;
    b->stage_first = d;
    return r + d;
}

void pw_trace_commit(int unused)
{
    pw_tbuf *b = self;
    if (!b)
        return;
    size_t n = b->staged;
    if (unused > 0 && (size_t)unused <= n - b->stage_first)
        n -= (size_t)unused;
    if (b->head)
        for (size_t i = 0; i < n; i++)
            encode(b, &b->stage[i]);
    b->staged = b->stage_first = 0;
    record_flush(b);
    publish(b);
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

/* The unused end of b's last block, given back to the file system: cut off where the
 * block ends the file (readers read a block cut short up to the file's end), else its
 * whole pages freed (they read as zeros: slots no record was committed to). The trace's
 * size on disk is then its records'. */
static void give_back_tail(pw_tbuf *b)
{
    size_t len = (b->cap + 1) * sizeof(pw_cevent_rec);
    off_t used = b->off + (off_t)((b->n + 1) * sizeof(pw_cevent_rec));
    lock();
    if (b->off + (off_t)len == tr.size && ftruncate(tr.fd, used) == 0) {
        tr.size = used;
    } else {
        off_t page = (used + 4095) / 4096 * 4096, end = b->off + (off_t)len;
        if (end > page)
            fallocate(tr.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, page, end - page);
    }
    unlock();
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
        if (b->head && tr.fd >= 0)
            give_back_tail(b);
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
        n += __atomic_load_n(&b->events, __ATOMIC_ACQUIRE);
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

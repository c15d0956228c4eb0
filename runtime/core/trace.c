/*
 * Event trace buffers (docs/format.md, "Traces"): one buffer per thread of
 * --trace-buffer bytes; a full buffer is appended to the rank's events file
 * under a lock, and the flush itself is recorded (a FLUSH event) so analyses
 * can discount its time. Memory is bounded by one buffer per thread.
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
} tr = {.fd = -1};

static PW_TLS pw_tbuf *self;

static void lock(void)
{
    while (__atomic_exchange_n(&tr.lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void) { __atomic_store_n(&tr.lock, 0, __ATOMIC_RELEASE); }

int pw_trace_open(const char *path)
{
    tr.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return tr.fd < 0 ? -1 : 0;
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
    size_t bytes = b->n * sizeof(pw_event_rec);
    const char *p = (const char *)b->rec;
    int ok = tr.fd >= 0;
    while (ok && bytes) {
        ssize_t w = write(tr.fd, p, bytes);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            ok = 0;
            break;
        }
        p += w;
        bytes -= (size_t)w;
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

pw_event_rec *pw_trace_reserve(int n)
{
    pw_tbuf *b = buffer();
    if (PW_UNLIKELY(!b))
        return NULL;
    if (PW_UNLIKELY(b->n + (size_t)n + 1 > b->cap)) {
        int64_t t0 = pw_ticks();
        int saved_errno = errno;
        size_t count = b->n;
        flush(b);
        errno = saved_errno;
        pw_event_rec *f = &b->rec[b->n++];
        memset(f, 0, sizeof *f);
        f->type = PW_EV_FLUSH;
        f->t0 = t0;
        f->t1 = pw_ticks();
        f->bytes = (int64_t)(count * sizeof(pw_event_rec));
        f->peer = f->comm = -1;
        if (b->n + (size_t)n > b->cap)
            return NULL; /* a single call larger than the buffer */
    }
    pw_event_rec *r = &b->rec[b->n];
    b->n += (size_t)n;
    return r;
}

void pw_trace_shrink(int unused)
{
    if (self && unused > 0 && (size_t)unused <= self->n)
        self->n -= (size_t)unused;
}

void pw_trace_flush_all(void)
{
    for (pw_tbuf *b = tr.all; b; b = b->next)
        flush(b);
}

void pw_trace_close(void)
{
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

/* The per-event callbacks of perfweave's OTF2 import (python/perfweave/interop/otf2/bulk.py).
 *
 * The OTF2 library's global event reader calls one callback per event. Through the otf2
 * Python package each of those is a Python call that builds a tuple; here each appends the
 * event's fields to column buffers that Python hands over (numpy arrays of one chunk) and
 * takes back after each OTF2_GlobalEvtReader_ReadEvents of at most a chunk's events. The
 * callbacks are registered by calling the library's OTF2_GlobalEvtReaderCallbacks_Set*
 * functions by the addresses Python takes from the library the package loaded, as
 * otf2_bulk.c calls its writer functions: no OTF2 header or library at build time. The
 * prototypes are those of OTF2's public C API (OTF2_GlobalEvtReaderCallbacks.h and
 * OTF2_AttributeList.h, OTF2 2.x/3.x): references are uint32_t, OTF2_CollectiveOp,
 * OTF2_LockType, OTF2_RmaAtomicType and OTF2_RmaSyncType uint8_t, OTF2_RmaSyncLevel
 * uint32_t, a callback returns OTF2_CallbackCode (0: go on, 1: interrupt). */
#include <stddef.h>
#include <stdint.h>

#define PW_EXPORT __attribute__((visibility("default")))

/* The kinds read, as collector.py's R_* (bulk.py checks pw_otf2r_kinds()). */
enum {
    R_ENTER,
    R_LEAVE,
    R_SEND,
    R_ISEND,
    R_ISEND_DONE,
    R_IRECV_REQ,
    R_RECV,
    R_IRECV,
    R_COLL_BEGIN,
    R_COLL_END,
    R_WIN_CREATE,
    R_WIN_DESTROY,
    R_RMA_COLL_BEGIN,
    R_RMA_COLL_END,
    R_GROUP_SYNC,
    R_ACQUIRE,
    R_RELEASE,
    R_RMA_SYNC,
    R_PUT,
    R_GET,
    R_ATOMIC,
    R_FLUSH,
    R_PROGRAM_BEGIN,
    R_PROGRAM_END,
    R_NBC_REQUEST,
    R_NBC_COMPLETE,
    R_COUNT
};

/* Events of kinds without a record are only counted, per kind and location: their kind
 * column holds R_OTHER + the slot of their kind, so that Python counts a chunk's with
 * numpy. One callback per slot, since the library says nothing else of the kind. */
#define R_OTHER 64
#define N_SLOTS 130

typedef void AL; /* OTF2_AttributeList */
typedef uint64_t L, T;

/* Columns of events (the table's, and the chunk's) */
struct cols {
    int64_t *loc, *time, *kind;
    uint64_t *f[6];
    int64_t *attr;
};

/* What Python and the callbacks share (bulk.py's _Context, field for field). */
struct pw_otf2r {
    /* the table: per location (locs, sorted) a block of size[i] rows from start[i], of
     * which fill[i] are filled */
    struct cols table;
    const int64_t *locs, *start, *size;
    int64_t *fill;
    uint64_t nlocs;
    /* the chunk: events of kinds only counted, of locations not defined, or beyond
     * their location's block, cap rows of which n filled */
    struct cols chunk;
    uint64_t cap, n;
    /* perfweave's attributes: the reference of each, its key (column of vals) and how
     * its value is read (0 a communicator reference, 1 uint8, 2 uint64, 3 int32) */
    const uint32_t *aref;
    const uint8_t *akey, *ahow;
    uint32_t naref, nkeys;
    /* the chunk's attribute rows: which keys each has (bits), their values */
    uint32_t *amask;
    int64_t *avals;
    uint64_t na;
    int64_t abase; /* the number of rows in the chunks before, plus 1 (0: none) */
    /* regions of trace buffer flushes (sorted), whose Enter has attributes */
    const int64_t *flush;
    uint64_t nflush;
    /* OTF2_AttributeList_GetNumberOfElements, OTF2_AttributeList_GetAttributeByIndex */
    void *n_elements, *by_index;
    int err;       /* the library's error code when a callback failed */
    uint64_t last; /* the index of the location of the event before */
};

typedef uint32_t (*f_n_elements)(const AL *);
typedef int (*f_by_index)(const AL *, uint32_t, uint32_t *, uint8_t *, uint64_t *);

/* The row of an event's perfweave attributes (its attr column), 0 where it has none. */
static int64_t attributes(struct pw_otf2r *c, const AL *al)
{
    if (!c->naref || !al)
        return 0;
    uint32_t n = ((f_n_elements)c->n_elements)(al);
    uint32_t mask = 0;
    int64_t *row = c->avals + c->na * c->nkeys;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ref;
        uint8_t type;
        uint64_t value = 0; /* OTF2_AttributeValue: a union of 8 bytes */
        int rc = ((f_by_index)c->by_index)(al, i, &ref, &type, &value);
        if (rc) {
            c->err = rc;
            return 0;
        }
        for (uint32_t k = 0; k < c->naref; k++) {
            if (c->aref[k] != ref)
                continue;
            int64_t v;
            switch (c->ahow[k]) {
            case 0:
                v = (uint32_t)value;
                break;
            case 1:
                v = (uint8_t)value;
                break;
            case 3:
                v = (int32_t)(uint32_t)value;
                break;
            default:
                v = (int64_t)value;
            }
            row[c->akey[k]] = v;
            mask |= 1u << c->akey[k];
            break;
        }
    }
    if (!mask)
        return 0;
    c->amask[c->na] = mask;
    return c->abase + (int64_t)c->na++;
}

/* The index of v in the sorted a[0 .. n), or n where it is not there. */
static uint64_t find(const int64_t *a, uint64_t n, int64_t v)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == v ? lo : n;
}

/* The row of an event of location loc: in its location's block while there is room,
 * else in the chunk (-1: the chunk is full, which ReadEvents asked for at most a
 * chunk's events never lets happen). */
static int64_t row(struct pw_otf2r *c, int64_t loc, struct cols **into)
{
    uint64_t i = c->last;
    if (i >= c->nlocs || c->locs[i] != loc)
        i = find(c->locs, c->nlocs, loc);
    if (i < c->nlocs && c->fill[i] < c->size[i]) {
        c->last = i;
        *into = &c->table;
        return c->start[i] + c->fill[i]++;
    }
    if (c->n >= c->cap)
        return -1;
    *into = &c->chunk;
    return (int64_t)c->n++;
}

/* One event: its row, fields a.. f (the rest 0) and attribute row. Returns the library's
 * answer: go on, or stop where the chunk is full or an attribute list could not be read
 * (neither happens: ReadEvents is asked for at most a chunk's events). */
static int put(struct pw_otf2r *c, int64_t kind, L loc, T t, int64_t attr, uint64_t a, uint64_t b,
               uint64_t cc, uint64_t d, uint64_t e, uint64_t f)
{
    struct cols *o;
    int64_t i = kind < R_OTHER ? row(c, (int64_t)loc, &o) : -1;
    if (kind >= R_OTHER) {
        if (c->n >= c->cap)
            return 1;
        o = &c->chunk;
        i = (int64_t)c->n++;
    }
    if (i < 0 || c->err)
        return 1;
    o->loc[i] = (int64_t)loc;
    o->time[i] = (int64_t)t;
    o->kind[i] = kind;
    o->f[0][i] = a;
    o->f[1][i] = b;
    o->f[2][i] = cc;
    o->f[3][i] = d;
    o->f[4][i] = e;
    o->f[5][i] = f;
    o->attr[i] = attr;
    return 0;
}

#define CTX struct pw_otf2r *c = u
#define ATTR attributes(c, al)

static int cb_enter(L loc, T t, void *u, AL *al, uint32_t region)
{
    CTX;
    return put(c, R_ENTER, loc, t, find(c->flush, c->nflush, region) < c->nflush ? ATTR : 0, region,
               0, 0, 0, 0, 0);
}

static int cb_leave(L loc, T t, void *u, AL *al, uint32_t region)
{
    CTX;
    (void)al;
    return put(c, R_LEAVE, loc, t, 0, region, 0, 0, 0, 0, 0);
}

/* kinds of one field: a request, a window, a buffer flush's end */
#define ONE(name, kind, type)                                                                      \
    static int name(L loc, T t, void *u, AL *al, type a)                                           \
    {                                                                                              \
        CTX;                                                                                       \
        return put(c, kind, loc, t, ATTR, (uint64_t)a, 0, 0, 0, 0, 0);                             \
    }
ONE(cb_isend_done, R_ISEND_DONE, uint64_t)
ONE(cb_irecv_req, R_IRECV_REQ, uint64_t)
ONE(cb_nbc_request, R_NBC_REQUEST, uint64_t)
ONE(cb_win_create, R_WIN_CREATE, uint32_t)
ONE(cb_win_destroy, R_WIN_DESTROY, uint32_t)
ONE(cb_flush, R_FLUSH, uint64_t)

static int cb_coll_begin(L loc, T t, void *u, AL *al)
{
    CTX;
    return put(c, R_COLL_BEGIN, loc, t, ATTR, 0, 0, 0, 0, 0, 0);
}

static int cb_rma_coll_begin(L loc, T t, void *u, AL *al)
{
    CTX;
    return put(c, R_RMA_COLL_BEGIN, loc, t, ATTR, 0, 0, 0, 0, 0, 0);
}

/* MpiSend, MpiRecv: peer, communicator, tag (uint32_t), length; RmaPut, RmaGet: window,
 * remote, bytes (uint64_t), matching id */
#define FOUR(name, kind, type3)                                                                    \
    static int name(L loc, T t, void *u, AL *al, uint32_t a, uint32_t b, type3 c3, uint64_t d)     \
    {                                                                                              \
        CTX;                                                                                       \
        return put(c, kind, loc, t, ATTR, a, b, c3, d, 0, 0);                                      \
    }
FOUR(cb_send, R_SEND, uint32_t)
FOUR(cb_recv, R_RECV, uint32_t)
FOUR(cb_put, R_PUT, uint64_t)
FOUR(cb_get, R_GET, uint64_t)

/* MpiIsend, MpiIrecv: peer, communicator, tag, length, request */
#define P2P_REQ(name, kind)                                                                        \
    static int name(L loc, T t, void *u, AL *al, uint32_t peer, uint32_t comm, uint32_t tag,       \
                    uint64_t len, uint64_t req)                                                    \
    {                                                                                              \
        CTX;                                                                                       \
        return put(c, kind, loc, t, ATTR, peer, comm, tag, len, req, 0);                           \
    }
P2P_REQ(cb_isend, R_ISEND)
P2P_REQ(cb_irecv, R_IRECV)

static int cb_coll_end(L loc, T t, void *u, AL *al, uint8_t op, uint32_t comm, uint32_t root,
                       uint64_t sent, uint64_t received)
{
    CTX;
    return put(c, R_COLL_END, loc, t, ATTR, op, comm, root, sent, received, 0);
}

static int cb_nbc_complete(L loc, T t, void *u, AL *al, uint8_t op, uint32_t comm, uint32_t root,
                           uint64_t sent, uint64_t received, uint64_t req)
{
    CTX;
    return put(c, R_NBC_COMPLETE, loc, t, ATTR, op, comm, root, sent, received, req);
}

static int cb_rma_coll_end(L loc, T t, void *u, AL *al, uint8_t op, uint32_t level, uint32_t win,
                           uint32_t root, uint64_t sent, uint64_t received)
{
    CTX;
    return put(c, R_RMA_COLL_END, loc, t, ATTR, op, level, win, root, sent, received);
}

static int cb_group_sync(L loc, T t, void *u, AL *al, uint32_t level, uint32_t win, uint32_t group)
{
    CTX;
    return put(c, R_GROUP_SYNC, loc, t, ATTR, level, win, group, 0, 0, 0);
}

static int cb_acquire(L loc, T t, void *u, AL *al, uint32_t win, uint32_t remote, uint64_t lock,
                      uint8_t type)
{
    CTX;
    return put(c, R_ACQUIRE, loc, t, ATTR, win, remote, lock, type, 0, 0);
}

static int cb_release(L loc, T t, void *u, AL *al, uint32_t win, uint32_t remote, uint64_t lock)
{
    CTX;
    return put(c, R_RELEASE, loc, t, ATTR, win, remote, lock, 0, 0, 0);
}

static int cb_rma_sync(L loc, T t, void *u, AL *al, uint32_t win, uint32_t remote, uint8_t type)
{
    CTX;
    return put(c, R_RMA_SYNC, loc, t, ATTR, win, remote, type, 0, 0, 0);
}

static int cb_atomic(L loc, T t, void *u, AL *al, uint32_t win, uint32_t remote, uint8_t type,
                     uint64_t sent, uint64_t received, uint64_t id)
{
    CTX;
    return put(c, R_ATOMIC, loc, t, ATTR, win, remote, type, sent, received, id);
}

/* the program's begin and end: their time alone (as collector.py keeps them) */
static int cb_program_begin(L loc, T t, void *u, AL *al, uint32_t name, uint32_t nargs,
                            const uint32_t *args)
{
    CTX;
    (void)al, (void)name, (void)nargs, (void)args;
    return put(c, R_PROGRAM_BEGIN, loc, t, 0, 0, 0, 0, 0, 0, 0);
}

static int cb_program_end(L loc, T t, void *u, AL *al, int64_t status)
{
    CTX;
    (void)al, (void)status;
    return put(c, R_PROGRAM_END, loc, t, 0, 0, 0, 0, 0, 0, 0);
}

/* A counter takes the location and user data, the first arguments of every event
 * callback, and leaves the rest (callers clean up their arguments in the x86-64 and
 * AArch64 calling conventions, so a callback may declare fewer). */
#define COUNTER(s)                                                                                 \
    static int count_##s(L loc, T t, void *u)                                                      \
    {                                                                                              \
        return put(u, R_OTHER + s, loc, t, 0, 0, 0, 0, 0, 0, 0);                                   \
    }
#define SLOT(s) (void *)count_##s,
/* X(0) .. X(N_SLOTS - 1) */
#define TENS(X, t) X(t##0) X(t##1) X(t##2) X(t##3) X(t##4) X(t##5) X(t##6) X(t##7) X(t##8) X(t##9)
#define UNITS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
#define LOW(X) UNITS(X) TENS(X, 1) TENS(X, 2) TENS(X, 3) TENS(X, 4) TENS(X, 5) TENS(X, 6)
#define SLOTS(X) LOW(X) TENS(X, 7) TENS(X, 8) TENS(X, 9) TENS(X, 10) TENS(X, 11) TENS(X, 12)
SLOTS(COUNTER)
static void *const counters[N_SLOTS] = {SLOTS(SLOT)};

static void *const readers[R_COUNT] = {
    [R_ENTER] = (void *)cb_enter,
    [R_LEAVE] = (void *)cb_leave,
    [R_SEND] = (void *)cb_send,
    [R_ISEND] = (void *)cb_isend,
    [R_ISEND_DONE] = (void *)cb_isend_done,
    [R_IRECV_REQ] = (void *)cb_irecv_req,
    [R_RECV] = (void *)cb_recv,
    [R_IRECV] = (void *)cb_irecv,
    [R_COLL_BEGIN] = (void *)cb_coll_begin,
    [R_COLL_END] = (void *)cb_coll_end,
    [R_WIN_CREATE] = (void *)cb_win_create,
    [R_WIN_DESTROY] = (void *)cb_win_destroy,
    [R_RMA_COLL_BEGIN] = (void *)cb_rma_coll_begin,
    [R_RMA_COLL_END] = (void *)cb_rma_coll_end,
    [R_GROUP_SYNC] = (void *)cb_group_sync,
    [R_ACQUIRE] = (void *)cb_acquire,
    [R_RELEASE] = (void *)cb_release,
    [R_RMA_SYNC] = (void *)cb_rma_sync,
    [R_PUT] = (void *)cb_put,
    [R_GET] = (void *)cb_get,
    [R_ATOMIC] = (void *)cb_atomic,
    [R_FLUSH] = (void *)cb_flush,
    [R_PROGRAM_BEGIN] = (void *)cb_program_begin,
    [R_PROGRAM_END] = (void *)cb_program_end,
    [R_NBC_REQUEST] = (void *)cb_nbc_request,
    [R_NBC_COMPLETE] = (void *)cb_nbc_complete,
};

PW_EXPORT int pw_otf2r_kinds(void) { return R_COUNT; }
PW_EXPORT int pw_otf2r_slots(void) { return N_SLOTS; }
PW_EXPORT size_t pw_otf2r_size(void) { return sizeof(struct pw_otf2r); }

typedef int (*f_set)(void *callbacks, void *fn);

/* Registers a callback for each event kind in callbacks (OTF2_GlobalEvtReaderCallbacks):
 * setters[i] is the library's OTF2_GlobalEvtReaderCallbacks_Set*Callback of a kind that
 * which[i] says how to read (a kind below R_COUNT, or R_OTHER + the slot that counts it).
 * Returns 0, or the library's error code. */
PW_EXPORT int pw_otf2r_register(void *callbacks, size_t n, void *const *setters, const int *which)
{
    for (size_t i = 0; i < n; i++) {
        int w = which[i];
        void *fn = w < R_COUNT ? readers[w] : counters[w - R_OTHER];
        int rc = ((f_set)setters[i])(callbacks, fn);
        if (rc)
            return rc;
    }
    return 0;
}

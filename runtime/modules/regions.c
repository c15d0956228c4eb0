/*
 * The regions module: the program's own structure, as it declares it through
 * include/perfweave/perfweave.h (C, C++), runtime/api/perfweave.f90 (Fortran) and
 * MPI_Pcontrol (docs/regions.md):
 *
 *   - regions (perfweave_region_begin/end): nested, per thread; an end that does not
 *     name the innermost open region is counted (unmatched_ends) and ignored;
 *   - phases (perfweave_phase_begin/end, and MPI_Pcontrol(N) for N other than 0 and 1,
 *     a phase "pcontrol N" until the next MPI_Pcontrol): top level, one at a time per
 *     thread, a phase's begin ending the open one;
 *   - measurement off (perfweave_measure_off, MPI_Pcontrol(0)) .. on: process-wide; the
 *     MPI module records no call (its switch, given through pw_regions_attach_mpi), the
 *     samples module takes no sample (pw_regions_off), so no trace event of a call
 *     either. The marks themselves are kept, so that the intervals and the trace's
 *     nesting stay whole.
 *
 * Each interval is one record (format/regions.h) written when it ends into the thread's
 * chunks of records (mmap'ed; a chunk's count is published with a release store, so a
 * dump reads only whole records), with the thread's recorded MPI time and calls inside
 * (pw_regions_mpi_call, called by the MPI module after each recorded call). With
 * --trace, a region's or phase's begin and end are also ENTER/LEAVE records whose comm
 * is the name's index (rank-R.json "regions", pw_regions_json). The dump writes
 * regions/NAME.intervals and regions/NAME.json.
 *
 * The entry point is perfweave_api_v1, found by the program through a weak reference
 * (perfweave.h): a program without perfweave calls nothing. Costs on the program's
 * path: a string hash per begin and end, one record per end; none on the MPI path but
 * an addition to the thread's totals.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfweave/format/regions.h"
#include "perfweave/perfweave.h"
#include "regions.h"

#define MAX_DEPTH 64    /* regions open at once per thread; deeper ones are dropped */
#define MAX_NAMES 4096  /* distinct names per process */
#define NAME_BYTES 256  /* a name's bytes kept, with its NUL */
#define NAME_SLOTS 8192 /* the names' hash table: a power of two, twice MAX_NAMES */
#define CHUNK 4096      /* records per chunk */

static int enabled;

/* ---- names: process-wide, ids in order of first use ---- */

static char *name_arena; /* MAX_NAMES names of NAME_BYTES, mmap'ed in start */
static _Atomic int nnames;
static _Atomic int32_t name_slot[NAME_SLOTS]; /* id + 1; 0 empty */
/* --filter per name: NAME_UNTRACED its marks are not traced, NAME_PATH nothing inside */
enum { NAME_UNTRACED = 1, NAME_PATH = 2 };
static unsigned char name_filter[MAX_NAMES];
static atomic_flag name_lock = ATOMIC_FLAG_INIT;
static _Atomic int64_t dropped;

/* The name's id, made at its first use; -1 when the table is full. A Fortran name (len
 * given) loses its trailing blanks; a name longer than NAME_BYTES - 1 is cut. */
static int name_id(const char *name, size_t len)
{
    if (!name)
        name = "";
    if (len == PERFWEAVE_NUL_TERMINATED)
        len = strnlen(name, NAME_BYTES - 1);
    else {
        while (len > 0 && name[len - 1] == ' ')
            len--;
        if (len > NAME_BYTES - 1)
            len = NAME_BYTES - 1;
    }
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
    size_t at = (size_t)h & (NAME_SLOTS - 1);
    int locked = 0;
    for (size_t probe = 0; probe < NAME_SLOTS; probe++) {
        size_t s = (at + probe) & (NAME_SLOTS - 1);
        int32_t v = atomic_load_explicit(&name_slot[s], memory_order_acquire);
        if (v == 0) {
            if (!locked) { /* insert under the lock: look again from the start */
                while (atomic_flag_test_and_set_explicit(&name_lock, memory_order_acquire))
                    ;
                locked = 1;
                probe = (size_t)-1;
                continue;
            }
            int id = atomic_load_explicit(&nnames, memory_order_relaxed);
            if (id >= MAX_NAMES)
                break;
            char *p = name_arena + (size_t)id * NAME_BYTES;
            memcpy(p, name, len);
            p[len] = 0;
            name_filter[id] =
                (unsigned char)(pw_filter_excluded(PW_FILTER_REGION, p) * NAME_UNTRACED |
                                pw_filter_excluded(PW_FILTER_PATH, p) * NAME_PATH);
            atomic_store_explicit(&nnames, id + 1, memory_order_release);
            atomic_store_explicit(&name_slot[s], id + 1, memory_order_release);
            atomic_flag_clear_explicit(&name_lock, memory_order_release);
            return id;
        }
        const char *p = name_arena + (size_t)(v - 1) * NAME_BYTES;
        if (strncmp(p, name, len) == 0 && p[len] == 0) {
            if (locked)
                atomic_flag_clear_explicit(&name_lock, memory_order_release);
            return v - 1;
        }
    }
    if (locked)
        atomic_flag_clear_explicit(&name_lock, memory_order_release);
    return -1;
}

/* ---- the threads' state and records ---- */

typedef struct chunk {
    struct chunk *next;
    _Atomic int n;
    pw_region_interval_rec rec[CHUNK];
} chunk;

typedef struct open_interval {
    int32_t name;
    int64_t t;                    /* ns */
    int64_t mpi_ticks, mpi_calls; /* the thread's totals at its begin */
} open_interval;

typedef struct rthread {
    struct rthread *next;
    int index, tid;
    int depth;          /* regions open (the stack's first MAX_DEPTH kept) */
    int phase_open;     /* a phase is open: phase */
    int phase_pcontrol; /* it is MPI_Pcontrol's */
    int off_open;       /* this thread turned measurement off: off */
    open_interval stack[MAX_DEPTH], phase, off;
    int64_t mpi_ticks, mpi_calls; /* recorded MPI calls of the thread so far */
    int untraced; /* open regions and phases whose name --filter excludes as a path */
    chunk *first, *last;
} rthread;

static PW_TLS rthread *self;
static _Atomic(rthread *) threads;
static _Atomic int nthreads;
static _Atomic int64_t unmatched;
static _Atomic int64_t intervals;
static _Atomic int measuring_off; /* measurement is off (process-wide) */
static pw_regions_switch_fn *mpi_switch;

static void *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static rthread *thread_self(void)
{
    if (PW_LIKELY(self != NULL))
        return self;
    rthread *t = map(sizeof *t);
    if (!t)
        return NULL;
    t->tid = (int)syscall(SYS_gettid);
    t->index = atomic_fetch_add(&nthreads, 1);
    t->next = atomic_load(&threads);
    while (!atomic_compare_exchange_weak(&threads, &t->next, t))
        ;
    self = t;
    return t;
}

static void put(rthread *t, const open_interval *o, int64_t t_end, int kind, int depth, int flags)
{
    chunk *c = t->last;
    if (!c || atomic_load_explicit(&c->n, memory_order_relaxed) == CHUNK) {
        chunk *fresh = map(sizeof *fresh);
        if (!fresh) {
            atomic_fetch_add(&dropped, 1);
            return;
        }
        if (c)
            c->next = fresh;
        else
            t->first = fresh;
        t->last = c = fresh;
    }
    int n = atomic_load_explicit(&c->n, memory_order_relaxed);
    pw_region_interval_rec *r = &c->rec[n];
    r->t_begin = o->t;
    r->t_end = t_end;
    r->mpi_ns = (int64_t)((double)(t->mpi_ticks - o->mpi_ticks) * pw_ns_per_tick() + 0.5);
    r->mpi_calls = t->mpi_calls - o->mpi_calls;
    r->name = o->name;
    r->thread = t->index;
    r->depth = (int16_t)depth;
    r->kind = (uint8_t)kind;
    r->flags = (uint8_t)flags;
    r->pad = 0;
    atomic_store_explicit(&c->n, n + 1, memory_order_release);
    atomic_fetch_add_explicit(&intervals, 1, memory_order_relaxed);
}

/* ENTER/LEAVE records of a named region in the trace (--trace) */
static void trace_mark_flagged(int type, int32_t name, int depth, int flags)
{
    if (!pw_trace_recording || name < 0 || (name_filter[name] & NAME_UNTRACED))
        return;
    pw_event_rec *r = pw_trace_reserve(1);
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->t0 = pw_ticks();
    r->tag = depth;
    r->peer = -1;
    r->comm = name;
    r->flags = (uint8_t)flags;
    pw_trace_commit(0);
}

static void trace_mark(int type, int32_t name, int depth)
{
    if (!self->untraced)
        trace_mark_flagged(type, name, depth, 0);
}

static void begin(open_interval *o, rthread *t, int32_t name)
{
    o->name = name;
    o->t = pw_now();
    o->mpi_ticks = t->mpi_ticks;
    o->mpi_calls = t->mpi_calls;
}

static void region_begin(rthread *t, const char *name, size_t len)
{
    int32_t id = name_id(name, len);
    if (t->depth < MAX_DEPTH && id >= 0) {
        t->untraced += (name_filter[id] & NAME_PATH) != 0; /* itself and what is inside */
        trace_mark(PW_EV_ENTER, id, t->depth);
        begin(&t->stack[t->depth], t, id);
    } else
        atomic_fetch_add(&dropped, 1);
    t->depth++;
}

static void region_end(rthread *t, const char *name, size_t len)
{
    if (t->depth <= 0) {
        atomic_fetch_add(&unmatched, 1);
        return;
    }
    if (t->depth > MAX_DEPTH) { /* a dropped one: only counted */
        t->depth--;
        return;
    }
    open_interval *o = &t->stack[t->depth - 1];
    if (o->name < 0 || name_id(name, len) != o->name) {
        atomic_fetch_add(&unmatched, 1);
        return;
    }
    int64_t now = pw_now();
    t->depth--;
    trace_mark(PW_EV_LEAVE, o->name, t->depth);
    t->untraced -= (name_filter[o->name] & NAME_PATH) != 0;
    put(t, o, now, PW_REGION_REGION, t->depth, 0);
}

static void phase_end_now(rthread *t)
{
    int64_t now = pw_now();
    trace_mark(PW_EV_LEAVE, t->phase.name, 0);
    t->untraced -= (name_filter[t->phase.name] & NAME_PATH) != 0;
    put(t, &t->phase, now, PW_REGION_PHASE, 0, 0);
    t->phase_open = 0;
    t->phase_pcontrol = 0;
}

static void phase_begin(rthread *t, int32_t id, int pcontrol)
{
    if (t->phase_open)
        phase_end_now(t);
    if (id < 0) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    t->untraced += (name_filter[id] & NAME_PATH) != 0;
    trace_mark(PW_EV_ENTER, id, 0);
    begin(&t->phase, t, id);
    t->phase_open = 1;
    t->phase_pcontrol = pcontrol;
}

static void phase_end(rthread *t, const char *name, size_t len)
{
    if (!t->phase_open || name_id(name, len) != t->phase.name) {
        atomic_fetch_add(&unmatched, 1);
        return;
    }
    phase_end_now(t);
}

/* Measurement on (1) or off (0), process-wide; the off interval is the thread's that
 * turned it off (ended by whichever thread turns it on). */
static rthread *off_owner;

static void measure(rthread *t, int on)
{
    int was_off = atomic_exchange(&measuring_off, !on);
    if (!on && !was_off) {
        begin(&t->off, t, name_id("off", PERFWEAVE_NUL_TERMINATED));
        t->off_open = 1;
        off_owner = t;
    } else if (on && was_off && off_owner) {
        put(off_owner, &off_owner->off, pw_now(), PW_REGION_OFF, 0, 0);
        off_owner->off_open = 0;
        off_owner = NULL;
    }
}

PW_EXPORT void perfweave_api_v1(int op, const char *name, size_t len)
{
    if (!enabled)
        return;
    int saved_errno = errno;
    rthread *t = thread_self();
    if (!t) {
        errno = saved_errno;
        return;
    }
    switch (op) {
    case PERFWEAVE_OP_REGION_BEGIN:
        region_begin(t, name, len);
        break;
    case PERFWEAVE_OP_REGION_END:
        region_end(t, name, len);
        break;
    case PERFWEAVE_OP_PHASE_BEGIN:
        phase_begin(t, name_id(name, len), 0);
        break;
    case PERFWEAVE_OP_PHASE_END:
        phase_end(t, name, len);
        break;
    case PERFWEAVE_OP_MEASURE_OFF:
    case PERFWEAVE_OP_MEASURE_ON:
        measure(t, op == PERFWEAVE_OP_MEASURE_ON);
        if (mpi_switch)
            mpi_switch(op == PERFWEAVE_OP_MEASURE_ON);
        break;
    default:
        break;
    }
    errno = saved_errno;
}

/* ---- the hooks it offers ---- */

static void mpi_call(int64_t ticks)
{
    rthread *t = self;
    if (t) {
        t->mpi_ticks += ticks;
        t->mpi_calls++;
    }
}

static void pcontrol(int level)
{
    rthread *t = thread_self();
    if (!t)
        return;
    if (t->phase_open && t->phase_pcontrol)
        phase_end_now(t);
    measure(t, level != 0);
    if (level != 0 && level != 1) {
        char name[32] = "pcontrol ";
        pw_fmt_int(name + 9, level);
        phase_begin(t, name_id(name, PERFWEAVE_NUL_TERMINATED), 1);
    }
}

static int attach_mpi(pw_regions_switch_fn *set)
{
    mpi_switch = set;
    return !atomic_load(&measuring_off);
}

static int untraced(void)
{
    rthread *t = self;
    return t && t->untraced > 0;
}

/* The phase and regions open in this thread when the trace begins, outermost first; a
 * path --filter leaves out leaves out what is inside it too. */
static void trace_begun(void)
{
    rthread *t = self;
    if (!t)
        return;
    int inside = 0, depth = t->depth < MAX_DEPTH ? t->depth : MAX_DEPTH;
    if (t->phase_open) {
        inside += (name_filter[t->phase.name] & NAME_PATH) != 0;
        if (!inside)
            trace_mark_flagged(PW_EV_ENTER, t->phase.name, 0, PW_EVF_AT_START);
    }
    for (int d = 0; d < depth; d++) {
        int32_t name = t->stack[d].name;
        if (name < 0)
            continue;
        inside += (name_filter[name] & NAME_PATH) != 0;
        if (!inside)
            trace_mark_flagged(PW_EV_ENTER, name, d, PW_EVF_AT_START);
    }
}

static int is_off(void) { return atomic_load_explicit(&measuring_off, memory_order_relaxed); }

static void names_json(pw_json *j, const char *key)
{
    int n = atomic_load_explicit(&nnames, memory_order_acquire);
    pw_json_open(j, key, '[');
    for (int i = 0; i < n; i++) {
        pw_json_open(j, NULL, '{');
        pw_json_str(j, "name", name_arena + (size_t)i * NAME_BYTES);
        pw_json_close(j);
    }
    pw_json_close(j);
}

/* ---- the dump ---- */

static void put_open(rthread *t, int64_t now)
{
    int depth = t->depth < MAX_DEPTH ? t->depth : MAX_DEPTH;
    for (int d = depth - 1; d >= 0; d--)
        if (t->stack[d].name >= 0)
            put(t, &t->stack[d], now, PW_REGION_REGION, d, PW_REGION_F_OPEN);
    if (t->phase_open)
        put(t, &t->phase, now, PW_REGION_PHASE, 0, PW_REGION_F_OPEN);
    if (t->off_open)
        put(t, &t->off, now, PW_REGION_OFF, 0, PW_REGION_F_OPEN);
}

static int dump(int state, int in_signal)
{
    (void)in_signal;
    rthread *all = atomic_load(&threads);
    if (!enabled || !all)
        return 0; /* a process that used no region writes nothing */
    char path[4300];
    int64_t now = pw_now();
    /* the open intervals of the dumping thread only: another thread's state may be
     * changing under it */
    if (self) {
        put_open(self, now);
        self->depth = 0;
        self->phase_open = self->off_open = 0;
    }
    if (pw_process_path(path, sizeof path, "regions", ".intervals") != 0)
        return 0;
    pw_file f;
    int64_t written = 0;
    if (pw_file_open(&f, path) == 0) {
        for (rthread *t = all; t; t = t->next)
            for (chunk *c = t->first; c; c = c->next) {
                int n = atomic_load_explicit(&c->n, memory_order_acquire);
                pw_file_write(&f, c->rec, (size_t)n * sizeof c->rec[0]);
                written += n;
            }
        pw_file_close(&f);
    }
    if (pw_process_path(path, sizeof path, "regions", ".json") != 0)
        return 0;
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_REGIONS_MAGIC, PW_REGIONS_VERSION);
    pw_json_str(&j, "state", pw_state_name(state));
    int n = atomic_load_explicit(&nnames, memory_order_acquire);
    pw_json_open(&j, "names", '[');
    for (int i = 0; i < n; i++)
        pw_json_str(&j, NULL, name_arena + (size_t)i * NAME_BYTES);
    pw_json_close(&j);
    int nt = atomic_load(&nthreads);
    pw_json_open(&j, "threads", '[');
    for (int i = nt - 1; i >= 0; i--) /* by index: the list is newest first */
        for (rthread *t = all; t; t = t->next)
            if (t->index == nt - 1 - i)
                pw_json_int(&j, NULL, t->tid);
    pw_json_close(&j);
    pw_json_int(&j, "intervals", written);
    pw_json_int(&j, "unmatched_ends", atomic_load(&unmatched));
    pw_json_int(&j, "dropped", atomic_load(&dropped));
    pw_json_end(&j);
    pw_buf_to_file(&b, path);
    return 0;
}

static void fork_child(void)
{
    /* the parent's intervals are its own: the child starts empty */
    atomic_store(&threads, NULL);
    atomic_store(&nthreads, 0);
    atomic_store(&intervals, 0);
    atomic_store(&unmatched, 0);
    atomic_store(&dropped, 0);
    self = NULL;
    off_owner = NULL;
    mpi_switch = NULL;
}

/* ---- the module ---- */

static void start(void)
{
    if (!pw_opt.regions)
        return;
    name_arena = map((size_t)MAX_NAMES * NAME_BYTES);
    enabled = name_arena != NULL;
    if (!enabled)
        return;
    pw_filter_active(PW_FILTER_REGION); /* --filter's rules parsed now, in one thread */
    PW_HOOK_OFFER(pw_regions_mpi_call, mpi_call);
    PW_HOOK_OFFER(pw_regions_pcontrol, pcontrol);
    PW_HOOK_OFFER(pw_regions_attach_mpi, attach_mpi);
    PW_HOOK_OFFER(pw_regions_off, is_off);
    PW_HOOK_OFFER(pw_regions_json, names_json);
    PW_HOOK_OFFER(pw_regions_untraced, untraced);
    PW_HOOK_OFFER(pw_regions_trace_begun, trace_begun);
}

const pw_module pw_module_regions = {
    .name = "regions",
    .version = PW_REGIONS_VERSION,
    .start = start,
    .dump = dump,
    .fork_child = fork_child,
};

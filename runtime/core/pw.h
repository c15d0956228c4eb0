/*
 * perfweave runtime: the internal interface between core/ and modules/.
 *
 * core/ owns the process: configuration (pw_opt), clocks, the loaded-object
 * snapshot that turns addresses into (module, offset), per-thread call-site
 * tables, and the writer of profile files. A module (modules/modules.def lists
 * them) wraps calls, records into call-site tables, and has a dump callback that
 * the core runs at exit or on a fatal signal.
 */
#ifndef PW_CORE_H
#define PW_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "perfweave/format.h"
#include "pw_format_parts.h" /* the modules' format headers; PW_PROFILE_ARRAYS */
#include "pw_options.h"

/* Everything declared here is the core's interface to modules, and a module may be
 * a library of its own that the core loads (one per library flavour): these names have
 * default visibility, all else in libperfweave.so is hidden, and of them the names of
 * module_api.def are exported (the version script made from it), the others local. */
#pragma GCC visibility push(default)

#define PW_EXPORT __attribute__((visibility("default")))
#define PW_LIKELY(x) __builtin_expect(!!(x), 1)
#define PW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PW_TLS __thread __attribute__((tls_model("initial-exec")))
#if defined(__x86_64__) || defined(__i386__)
#define pw_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define pw_cpu_relax() __asm__ volatile("yield")
#else
#define pw_cpu_relax() ((void)0)
#endif

/* ---- configuration and process state (core.c) ---- */
extern struct pw_options pw_opt;
extern int pw_active; /* runtime measures in this process */
/* Set when a fatal signal's handler starts saving this process's data (core.c
 * on_signal), which may run on any thread: the MPI library's own, say. A thread of the
 * program that ends a measured call afterwards waits there (pw_hold_if_dying) until the
 * signal ends the process, so the program does nothing the saved data does not show. */
extern int pw_dying;
void pw_hold(void);
static inline void pw_hold_if_dying(void)
{
    /* No fence: a record committed before this load is published in the trace file
     * whatever the save does; one the save stopped (recording seen off, stored after
     * on_signal set pw_dying) makes this acquire load see the flag. */
    if (__builtin_expect(__atomic_load_n(&pw_dying, __ATOMIC_ACQUIRE), 0))
        pw_hold();
}
/* Ending together on a launcher's signal to the job (ending.c): ending/HOST.PID made at
 * the process's start (join), not a fork child's (forget), and removed at its normal end
 * (leave); on_signal says it saves, saves, then waits for the node's other processes
 * still saving and ends them with itself (together). */
int pw_ending_job_wide(int sig); /* SIGINT, SIGTERM, SIGHUP, SIGQUIT */
void pw_ending_join(void);
void pw_ending_forget(void);
void pw_ending_leave(void);
void pw_ending_saving(int sig);
void pw_ending_together(int sig);
extern int64_t pw_t_start; /* constructor time */
extern char pw_hostname[256];

static inline int64_t pw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Durations of wrapped calls are taken in ticks of the cheapest invariant counter
 * (x86 TSC with constant_tsc and nonstop_tsc, the aarch64 virtual counter) and
 * converted to ns when written, with a rate calibrated against CLOCK_MONOTONIC
 * over the process's life. Without such a counter a tick is a nanosecond. */
extern int pw_use_tsc;
extern int64_t pw_tick_start; /* pw_ticks() at pw_t_start */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline int64_t pw_ticks(void)
{
    return PW_LIKELY(pw_use_tsc) ? (int64_t)__rdtsc() : pw_now();
}
#elif defined(__aarch64__)
static inline int64_t pw_ticks(void)
{
    uint64_t v;
    if (PW_UNLIKELY(!pw_use_tsc))
        return pw_now();
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return (int64_t)v;
}
#else
static inline int64_t pw_ticks(void) { return pw_now(); }
#endif
/* A calibration point: the counter and CLOCK_MONOTONIC read together. Each try
 * brackets the counter between two clock reads and the narrowest bracket's midpoint is
 * kept: a process preempted between two plain reads (milliseconds on a loaded node)
 * would tilt the rate of the whole run by that much. */
void pw_clock_pair(int64_t *ns, int64_t *ticks);
/* Nanoseconds per tick, measured from the constructor to now. */
double pw_ns_per_tick(void);

/* "perfweave: ..." on stderr; pw_debug only with --verbose. Async-signal-safe
 * for plain %s/%d/%ld formats (own formatter, one write()). */
void pw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define pw_debug(...)                                                                              \
    do {                                                                                           \
        if (pw_opt.verbose)                                                                        \
            pw_log(__VA_ARGS__);                                                                   \
    } while (0)

/* Experiment directory (PERFWEAVE_EXPERIMENT), NULL when unset. */
const char *pw_experiment_dir(void);

/* ---- modules (modules/modules.def lists them; docs/architecture.md) ---- */

/* A module's dump callback: write this process's data because the process is
 * ending in state `state` (PW_STATE_*). `in_signal` is set when called from a
 * signal handler: only async-signal-safe work is allowed then. Returns 1 if it
 * wrote the process's profile (the core then writes no plain process record). */
typedef int (*pw_dump_fn)(int state, int in_signal);

/* The job a process is a rank of, for the modules' reduce: given by the module that
 * knows it (the MPI module, in MPI_Finalize while MPI still works), alike on every rank. */
typedef struct pw_job {
    int rank, size;
    /* Collective (every rank calls it, as often): each rank's n bytes to rank 0, where
     * *all (malloc'ed, the caller frees) holds them one after the other in rank order and
     * lens[r] (malloc'ed, freed by the caller) their sizes; both NULL on other ranks. A
     * rank whose bytes are NULL contributes none. 0 on success. */
    int (*gather)(const void *mine, size_t n, char **all, int **lens);
} pw_job;

/* What the core knows of a module: every entry but the name may be 0/NULL. The core
 * calls them in the order of modules/modules.def (dumps in the reverse order, as
 * atexit would, after those of pw_register_module), never a module by name. */
typedef struct pw_module {
    const char *name;           /* one word, as in its files and options (options.json
                                 * "module": the options it owns) */
    int version;                /* of the files it writes (its own format, docs/format.md) */
    void (*start)(void);        /* core constructor, the process being measured: read its
                                 options, set the hooks it provides, start threads */
    void (*thread_start)(void); /* a thread begins to be measured (pw_thread_begin) */
    pw_dump_fn dump;            /* the process ends (exit, fatal signal, pw_dump_now) */
    /* In the child of a fork (pthread_atfork), before fork returns there: let go of what
     * is the parent's (its files, its rank), so that the child writes its own data or
     * none. The core has already emptied the call-site tables and unset pw_rank. */
    void (*fork_child)(void);
    /* Combine all ranks' data into one file at the job's end (collective: it must make
     * the same job->gather calls on every rank). NULL: per-process files only. */
    int (*reduce)(const pw_job *job);
    /* Write the data so far into the experiment's folder DIR ("snapshots/N/", the same
     * file names as at the end) from the core's snapshot thread, recording going on
     * (runtime/core/snapshot.c); 1 when it wrote the process's profile. NULL: none. */
    int (*snapshot)(const char *dir);
} pw_module;

/* A module in a library of its own, loaded later (the generated call wrappers per
 * library flavour): its dump runs before those of the list (it writes the profile), its
 * fork_child after theirs. Its start and thread_start are not called. */
void pw_register_module(const pw_module *m);
/* Save now (e.g. in an abort call), once: later exit or signal paths write nothing. */
void pw_dump_now(int state);
/* Run every module's thread_start in the calling thread (once per thread: a module
 * keeps its own per-thread flag). The core calls it at a thread's first recorded call;
 * a module that sees threads start (a pthread_create wrapper) calls it there. */
void pw_thread_begin(void);
/* Run the reduce of every module that has one, in list order, on every rank of the job
 * (the module that knows the job calls it at the job's end). */
void pw_modules_reduce(const pw_job *job);
/* Every module's snapshot into DIR, then the process profile where none wrote it; -1
 * when snapshots are stopped (the process ends). The snapshot thread's (snapshot.c). */
int pw_modules_snapshot(const char *dir);
/* No snapshot from now on: waits (a while at most) for one being written. Called before
 * the end's writing (exit, signal, MPI_Finalize's reduction). */
void pw_snapshots_stop(void);
void pw_snapshot_start(void);
/* The decimal number at the start of the experiment's file NAME (a request the runtime
 * polls: snapshots/request, hangs/asked); 0 when there is none. */
int64_t pw_experiment_number(const char *name);
/* A detached thread of the runtime's own running fn, named NAME (perfweave-*: the samples
 * module leaves such threads out), with every signal blocked: no handler of the program
 * or of the runtime runs on it. 0, or -1 when it cannot be started. */
int pw_runtime_thread(void *(*fn)(void *), const char *name);
void pw_snapshot_forget(void);

/* ---- hooks: how one module's events reach another without naming it ---- */
/* A hook is a function one module offers and others call, under a name. The offering
 * module declares it in its own header: its function type HOOK_fn (`typedef int
 * pw_counters_read_events_fn(int64_t *out, int max);`), the hook's name being HOOK. It
 * offers its implementation in its start (PW_HOOK_OFFER), before any thread records. A
 * module that calls it finds it once (PW_HOOK_FIND: NULL when no module offers it) and
 * keeps the pointer, then calls it when it is not NULL: a load and a branch on the hot
 * path, as a flag would cost. It finds it after the offer: in its own start if it comes
 * after the offering module in modules/modules.def, else where it begins to need it (the
 * MPI wrappers: when MPI_Init returns). Not from a signal handler (a lock). The core
 * knows no hook's name or type (docs/architecture.md "Hooks between modules"). */
typedef void (*pw_hook_fn)(void); /* any hook's pointer, cast back to its own type */
/* Offer hook `name` (a string the registry keeps; a second offer replaces the first). */
void pw_hook_offer(const char *name, pw_hook_fn fn);
/* The implementation of hook `name`, NULL when none was offered. */
pw_hook_fn pw_hook_find(const char *name);
/* The same, typed: HOOK is the hook's name as an identifier, HOOK_fn its function type
 * (the compiler warns, or from GCC 14 stops, when an offered fn is not a HOOK_fn). */
#define PW_HOOK_OFFER(HOOK, fn) pw_hook_offer(#HOOK, (pw_hook_fn)(HOOK##_fn *){fn})
#define PW_HOOK_FIND(HOOK) ((HOOK##_fn *)pw_hook_find(#HOOK))

/* The events counted per call site and per thread (set by the module that counts
 * them in its start, before any call-site table exists; 0: none). */
#define PW_MAX_EVENTS 16
extern int pw_nevents;
extern const char *pw_event_names[PW_MAX_EVENTS + 1];

/* The process's rank in its job once known, else -1 (set through pw_rank_set). */
extern int pw_rank;
/* Tell the core (and the activity page) where the process is in joining a job: its
 * rank once known (>= 0), else PW_ACT_JOINING (its start-up call began) or
 * PW_ACT_STARTING (the job started, the rank's own start-up goes on). */
void pw_rank_set(int rank);

/* ---- what each thread is doing (set by wrappers, read by observers) ---- */
/* pw_thread_activity is an index of PW_ACTIVITIES (format.h): PW_ACTIVITY_COMPUTE,
 * 1 + family (PW_ACTIVITY_P2P, ...) in a measured call of that family (PW_FAMILIES),
 * PW_ACTIVITY_SLEEP and PW_ACTIVITY_WAIT when blocked outside one. */
#define PW_ACTIVITY_ENUM(name, value, str) PW_ACTIVITY_##name = value,
#define PW_ACTIVITY_CLASS(name, value, str) PW_ACTIVITY_##name = 1 + value,
enum pw_activity_index { PW_ACTIVITIES(PW_ACTIVITY_ENUM, PW_ACTIVITY_CLASS) };
#undef PW_ACTIVITY_ENUM
#undef PW_ACTIVITY_CLASS
#define PW_NFAMILIES PW_NFAMILIES
extern PW_TLS int pw_thread_activity;
/* In a measured call, for a frame-pointer walk: the outermost wrapper's frame and an
 * address inside it (libraries without frame pointers break the chain below it). Kept
 * only while pw_want_anchor (set by a module that walks stacks). */
extern PW_TLS uintptr_t pw_call_anchor, pw_call_here;
extern int pw_want_anchor;
void *pw_code_here(void); /* an address in the function that calls it */

/* This process's activity page: time in measured calls by family, cumulative, in a
 * small shared file that a node-level reader maps (NULL: none). Created by the module
 * that reads it; one plain store per call (a thread may lose another's concurrent add:
 * sampling precision only). */
#define PW_ACT_NO_JOB -1   /* rank of a process that has joined no job */
#define PW_ACT_JOINING -2  /* joining one, no rank yet */
#define PW_ACT_STARTING -3 /* its job started (MPI_Init returned), its rank being set up */
typedef struct pw_activity {
    int64_t magic, pid;
    int32_t rank, version;       /* rank: in the job once known, else PW_ACT_* */
    int64_t ticks[PW_NFAMILIES]; /* pw_ticks() spent in measured calls */
    int64_t calls;
} pw_activity;
extern pw_activity *pw_act;
static inline void pw_act_add(int cls, int64_t ticks)
{
    pw_activity *a = pw_act;
    if (PW_LIKELY(a == NULL) || cls < 0)
        return;
    __atomic_store_n(&a->ticks[cls], __atomic_load_n(&a->ticks[cls], __ATOMIC_RELAXED) + ticks,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&a->calls, __atomic_load_n(&a->calls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* ---- loaded objects (objects.c) ---- */
/* Refresh the snapshot of loaded objects (not async-signal-safe). */
void pw_objects_refresh(void);
/* Map an address to (object index, offset from its load base); -1 if unknown.
 * Async-signal-safe (reads the last snapshot). */
int pw_object_of(uintptr_t addr, uint64_t *offset);
int pw_objects_count(void);
const char *pw_object_path(int i);
const char *pw_object_buildid(int i); /* hex, "" when the object has none */
void pw_object_range(int i, uintptr_t *start, uintptr_t *end, uintptr_t *base);
struct pw_json;
/* The snapshot's objects as the member `key` of j: a list of [path, build-id], by index
 * (what pw_object_of's indices name in a module's file). Async-signal-safe. */
void pw_objects_json(struct pw_json *j, const char *key);

/* ---- measured functions: ids by (module, function) (functions.c) ---- */
/* A module that records calls into the call-site tables registers its functions once,
 * before it records any (in its start, or its library's constructor). The core gives
 * them consecutive ids, base + the function's index in the module's list: the sites'
 * and histograms' fn, and the profile's "functions" (docs/format.md, "modules"). */
#define PW_MAX_FUNCTIONS 4096 /* every module's functions together */
#define PW_MAX_FUNCTION_SETS 16
typedef struct pw_functions {
    const char *module;          /* its pw_module's name */
    int version;                 /* its version (pw_module.version) */
    int n;                       /* functions */
    const char *const *names;    /* [n] */
    const signed char *families; /* [n] PW_FAMILY_*: the MPI family each call is; NULL
                                  * for a module that makes no MPI calls ("other") */
    int hist;                    /* its calls go into size histograms (pw_hist_add) */
    /* "key", "value", ..., NULL: strings of the module's entry in the profile header
     * (e.g. the library it wraps), read when a profile is written; NULL: none */
    const char *const *strings;
    int base, index; /* set by pw_functions_register: id of names[0], slot in the list */
} pw_functions;
/* Give f's functions their ids (f->base); f stays the module's and must live as long
 * as the process. -1 (logged, nothing recorded for them) when PW_MAX_* is reached. */
int pw_functions_register(pw_functions *f);
/* The registered sets, in the order registered (ids ascending); *n of them. */
pw_functions *const *pw_functions_list(int *n);

/* ---- call-site tables (sites.c) ---- */
#define PW_MAX_DEPTH 16

/* A slot of a table: its fixed part is format.h's table_site record (the tables file's
 * readers take it so), then the caller frames. */
typedef struct pw_site {
    PW_TABLE_SITE_FIELDS(PW_FIELD_DECL, PW_ARRAY_DECL) /* durations in ticks (pw_ticks) */
    uintptr_t frames[];                                /* pw_opt.callsite_depth - 1 entries */
} pw_site;

/* A thread's table, in private memory; its slots and histograms in blocks of the
 * process's tables file (tables.c) where there is one, else in private memory too. */
typedef struct pw_sitetab {
    struct pw_sitetab *next; /* all tables, for the dump */
    pw_site *last;           /* the site of the previous call: loops hit it */
    size_t nslots, used, entry_size;
    size_t bytes, hist_bytes; /* of the slots, of its histograms */
    /* the block's record in the file (dropped: calls folded into an overflow site;
     * last_tick: the end of its latest MPI call), or own_rec without a file */
    pw_table_block_rec *rec;
    /* per function set (pw_functions.index) with hist, made at its first histogram
     * call: [n][PW_HIST_BUCKETS][3]: count, bytes, ticks */
    int64_t *hist[PW_MAX_FUNCTION_SETS];
    size_t events_offset; /* of a site's event counts (pw_site_events) */
    char *slots;
    /* a bit per page of slots that may be touched: given disk space, or private memory
     * (a page of the file without disk space would be a SIGBUS when touched, even read,
     * on a full disk); NULL: the slots are private memory, every page usable */
    unsigned char *ready;
    void *map; /* the file mapping of the slots' block (NULL: private) and its length */
    size_t map_len;
    /* per set with a histogram: a byte per function, its row usable (pw_hist_add makes it
     * so: disk space for its pages first, as the slots'); a bit per page of the block (NULL
     * when private); the block's file offset, its mapping (NULL: private) and length */
    unsigned char *hist_rows[PW_MAX_FUNCTION_SETS], *hist_pages[PW_MAX_FUNCTION_SETS];
    int64_t hist_offset[PW_MAX_FUNCTION_SETS];
    void *hist_map[PW_MAX_FUNCTION_SETS];
    size_t hist_map_len[PW_MAX_FUNCTION_SETS];
    int64_t slots_offset; /* of the slots in the tables file */
    pw_table_block_rec own_rec;
    /* where a call goes that found no memory for its slot's page: never saved */
    _Alignas(8) char lost[sizeof(pw_site) + PW_MAX_DEPTH * sizeof(uintptr_t) +
                          (2 * PW_MAX_EVENTS + 2) * sizeof(int64_t)];
} pw_sitetab;

/* Every table's shape: bytes of a slot, of its event counts in it, slots per table. */
void pw_sitetab_layout(size_t *entry, size_t *events_offset, size_t *nslots);
pw_site *pw_site_get(pw_sitetab *t, int32_t fn, uintptr_t ra, const uintptr_t *frames, int nframes);
/* The calling thread's table, created on first use (NULL if out of memory). */
extern PW_TLS pw_sitetab *pw_self_table;
pw_sitetab *pw_sitetab_create(void);
/* Every table's mapped slots copied into private memory (the tables file's disk space
 * freed once the profile is saved; recording goes on). */
void pw_sitetabs_privatize(void);
static inline pw_sitetab *pw_sitetab_self(void)
{
    pw_sitetab *t = pw_self_table;
    return PW_LIKELY(t != NULL) ? t : pw_sitetab_create();
}
/* The site of (fn, ra) at depth 1, through the one-entry cache. */
static inline pw_site *pw_site_find(pw_sitetab *t, int32_t fn, uintptr_t ra)
{
    pw_site *s = t->last;
    if (PW_LIKELY(s != NULL) && s->ra == ra && s->fn == fn && s->stack_hash == 0)
        return s;
    s = pw_site_get(t, fn, ra, NULL, 0);
    t->last = s;
    return s;
}

static inline pw_site *pw_site_at(const pw_sitetab *t, size_t i)
{
    return (pw_site *)(t->slots + i * t->entry_size);
}
/* Slot s may be read: the page holding its `used` was given disk space (or is private
 * memory). A slot is used only once all its pages were, so an unused one is all it
 * takes a probe to read. (For another thread's table: an acquire fence after it.) */
static inline int pw_site_ready(const pw_sitetab *t, const pw_site *s)
{
    const unsigned char *r = t->ready;
    if (r == NULL)
        return 1;
    size_t p = (size_t)((const char *)&s->used - t->slots) / PW_TABLES_PAGE;
    return r[p / 8] >> (p % 8) & 1;
}
/* The used slot after *i (start with *i = 0), NULL after the last: for a dump, which never
 * reads a page that was given no disk space. */
pw_site *pw_site_next(const pw_sitetab *t, size_t *i);
/* Head of the list of all threads' tables. */
pw_sitetab *pw_sitetabs(void);
int pw_sitetabs_count(void);
/* In the child of a fork: no table (they hold the parent's calls; the child's threads,
 * its forking one, make new ones at their next call). */
void pw_sitetabs_forget(void);

/* A site's event counts (pw_nevents > 0): inside [pw_nevents], before [pw_nevents], then
 * the ns each covers (inside, before); charged by the counting module's call_leave. */
static inline int64_t *pw_site_events(const pw_sitetab *t, pw_site *s)
{
    return (int64_t *)((char *)s + t->events_offset);
}

static inline int pw_hist_bucket(int64_t bytes)
{
    if (bytes <= 0)
        return 0;
    int b = 64 - __builtin_clzll((unsigned long long)bytes); /* floor(log2)+1 */
    return b < PW_HIST_BUCKETS ? b : PW_HIST_BUCKETS - 1;
}

/* The histogram of set f in table t, made on first use (NULL: --no-histograms, or no
 * memory). */
int64_t *pw_sitetab_hist(pw_sitetab *t, const pw_functions *f);
/* The row of f's function `local` usable (disk space for it, or private memory); 0 when
 * neither could be had. */
int pw_sitetab_hist_row(pw_sitetab *t, const pw_functions *f, int local);
/* A call of f's function `local` (its index in f->names), of `bytes` and `ticks`, into
 * the calling thread's size histogram (pw_hist_rec). */
static inline void pw_hist_add(pw_sitetab *t, const pw_functions *f, int local, int64_t bytes,
                               int64_t ticks)
{
    int64_t *h = t->hist[f->index];
    if (PW_UNLIKELY(h == NULL) && (h = pw_sitetab_hist(t, f)) == NULL)
        return;
    if (PW_UNLIKELY(!t->hist_rows[f->index][local]) && !pw_sitetab_hist_row(t, f, local))
        return;
    int64_t *cell = h + ((size_t)local * PW_HIST_BUCKETS + (size_t)pw_hist_bucket(bytes)) * 3;
    cell[0]++;
    cell[1] += bytes;
    cell[2] += ticks;
}

static inline void pw_site_add(pw_site *s, int64_t ticks, int64_t sent, int64_t recv)
{
    s->count++;
    s->total += ticks;
    if (ticks < s->min)
        s->min = ticks;
    if (ticks > s->max)
        s->max = ticks;
    s->bytes_sent += sent;
    s->bytes_recv += recv;
}

/* ---- event traces (trace.c) ---- */
/* --filter (filter.c): whether the trace leaves out `name` (a function's, a region's,
 * or a region open around an event: PW_FILTER_PATH), by the last rule that matches it;
 * pw_filter_active: whether any rule is about that target. Not from a signal handler. */
enum { PW_FILTER_FUNCTION, PW_FILTER_REGION, PW_FILTER_PATH };
int pw_filter_excluded(int target, const char *name);
int pw_filter_active(int target);
/* Path rules about ordinary functions: pw_filter_paths_resolve finds the functions they
 * exclude (once, at start: reads the objects' symbol tables; returns how many);
 * pw_filter_path_excluded_here, in a wrapper, whether a caller of the call is one. */
int pw_filter_paths_resolve(void);
int pw_filter_path_excluded_here(void);

/* Events are recorded: between pw_trace_open and pw_trace_close. */
extern int pw_trace_recording;
/* -finstrument-functions hooks keep shadow stacks (--trace in an active process). */
extern int pw_trace_hooks;

/* Open the events file and start recording. */
int pw_trace_open(const char *path);
/* Room for n consecutive records in the calling thread's block of the events file
 * (a new block first if it is full; the switch is recorded); NULL if there is none or
 * recording has stopped. A non-NULL reservation must be followed by pw_trace_commit,
 * which makes the records part of the file whatever ends the process afterwards. */
pw_event_rec *pw_trace_reserve(int n);
/* End the latest reservation, giving back its last `unused` records. */
void pw_trace_commit(int unused);
/* Stop recording, wait for writers (not for this thread's own, when a signal
 * interrupted it), complete every thread's block, close. */
void pw_trace_close(void);
/* Records committed (BLOCK headers not counted), and records that found no block. */
int64_t pw_trace_written(void);
int64_t pw_trace_lost(void);

/* ---- growable output buffer and profile writer (writer.c) ---- */
typedef struct pw_buf {
    char *data;
    size_t len, cap;
    int failed; /* out of memory: contents incomplete */
} pw_buf;

void pw_buf_free(pw_buf *b);
void pw_buf_put(pw_buf *b, const void *p, size_t n);
/* Integer to decimal into out (>= 24 bytes); returns length. */
int pw_fmt_int(char *out, int64_t v);

/* ---- JSON files (json.c) ----
 * The one writer of the runtime's JSON: a file says keys and values, the writer places
 * the commas, quotes, escapes and closing brackets (compact: no spaces). Into a
 * pw_buf, numbers by pw_fmt_int: async-signal-safe, no allocator, no locale.
 *
 *   pw_buf b = {0};
 *   pw_json j;
 *   pw_json_begin(&j, &b);                 {
 *   pw_json_int(&j, "calls", n);             "calls":12,
 *   pw_json_open(&j, "threads", '[');        "threads":[
 *   pw_json_open(&j, NULL, '{');               {
 *   pw_json_str(&j, "name", s);                  "name":"main"
 *   pw_json_end(&j);                       }]}\n  (closes what is open)
 *   pw_buf_to_file(&b, path);
 *
 * key: the member's name inside an object; inside a list it is not written (pass
 * NULL). Nesting deeper than PW_JSON_DEPTH marks the buffer failed (b->failed), so the
 * file is not written. */
#define PW_JSON_DEPTH 16
typedef struct pw_json {
    pw_buf *b;
    int depth;                  /* containers open */
    char closer[PW_JSON_DEPTH]; /* '}' or ']' of each */
    char items[PW_JSON_DEPTH];  /* it has a value already: the next one takes a comma */
} pw_json;
void pw_json_begin(pw_json *j, pw_buf *b);                 /* the file's object: '{' */
void pw_json_open(pw_json *j, const char *key, char kind); /* kind '{' or '[' */
void pw_json_close(pw_json *j);                            /* the innermost open one */
void pw_json_end(pw_json *j); /* closes every open one, then a newline */
void pw_json_int(pw_json *j, const char *key, int64_t v);
void pw_json_str(pw_json *j, const char *key, const char *s); /* NULL: "" */
void pw_json_bool(pw_json *j, const char *key, int v);
/* v with `decimals` digits after the point (0 to 18), as printf's %.Nf; null for NaN,
 * infinities and |v| > 9e18 */
void pw_json_double(pw_json *j, const char *key, double v, int decimals);
void pw_json_strs(pw_json *j, const char *key, const char *const *v, size_t n); /* list */
void pw_json_ints(pw_json *j, const char *key, const int *v, size_t n);         /* list */

/* Files of the experiment (docs/format.md, "Writing files"): written to PATH.tmp.PID, every
 * write checked (short writes, ENOSPC, EDQUOT, EIO), renamed to PATH only when complete
 * and closed without error; otherwise the temporary file is removed and the failure
 * marked (pw_file_failed). Async-signal-safe. A failed open is remembered and makes
 * the writes no-ops, so a caller writes, then checks pw_file_close only. */
typedef struct pw_file {
    int fd;
    int err;   /* first errno, 0 while every write succeeded */
    int quiet; /* set after pw_file_open: a failure is not marked (a file that is only a
                  fallback of others) */
    char path[4200], tmp[4240];
} pw_file;
int pw_file_open(pw_file *f, const char *path);
int pw_file_write(pw_file *f, const void *p, size_t n);
int pw_file_close(pw_file *f); /* rename, or mark; 0 on success */
/* A file of the profiles' layout (docs/format.md "Profile files"): pw_file_framed_open
 * ends the JSON header h with spaces and a newline so that what follows starts 64-byte
 * aligned, opens path and writes h (a header that ran out of memory: path marked, -1);
 * the caller writes its arrays; pw_file_framed_close writes the end marker and closes. */
int pw_file_framed_open(pw_file *f, const char *path, pw_buf *h);
int pw_file_framed_close(pw_file *f);
int pw_file_put(const char *path, const void *p, size_t n); /* the three at once */
/* A module's file of the process's own (docs/format.md): B written to PATH as
 * pw_file_put does, or PATH marked (ENOMEM) when B ran out of memory; B freed either
 * way. 0 when written. Async-signal-safe. */
int pw_buf_to_file(pw_buf *b, const char *path);
/* The one way to name a file of the experiment: EXP/PART..., the parts (strings, as many
 * as needed) joined as they are, e.g.
 *   pw_experiment_path(path, sizeof path, "traces/rank-", num, ".json");
 * -1 (out "") when there is no experiment or the path does not fit in cap bytes (never a
 * truncated path). Async-signal-safe. */
int pw_path_in_experiment(char *out, size_t cap, ... /* const char *, NULL */);
#define pw_experiment_path(out, cap, ...)                                                          \
    pw_path_in_experiment((out), (cap), __VA_ARGS__, (const char *)NULL)
/* The path of this process's file in the experiment's folder DIR: EXP/DIR/rank-R SUFFIX
 * once it has a rank in its job (pw_rank), else EXP/DIR/HOST.PID SUFFIX
 * (pw_experiment_path); -1 when it does not fit in cap bytes or there is no experiment.
 * The folder is made when the file is (pw_file_open). Async-signal-safe. */
int pw_process_path(char *out, size_t cap, const char *dir, const char *suffix);
/* The start of a module's JSON file about this process, into b through j (begun here):
 * {"format": FORMAT, "version": VERSION, "rank": pw_rank, "pid": ..., "host": ...; the
 * caller adds its own members and ends j (pw_json_end). */
void pw_buf_json_head(pw_json *j, pw_buf *b, const char *format, int version);
/* The name of a rank end state (PW_STATES), "?" for a value outside them; of a
 * family (PW_FAMILIES), "other" for a value outside them. */
const char *pw_state_name(int state);
const char *pw_family_name(int family);
/* Mark PATH (a file of the experiment) as not written because of errno err: an empty
 * file unwritten.REL.ERRNAME in the experiment, which perfweave run and the readers
 * collect; a line on stderr only when not even the mark can be made (once per
 * process). For files appended during the run (trace events, timeline values) too. */
void pw_file_failed(const char *path, int err);
/* write(2) until done; 0, or the errno of the failure (ENOSPC for a zero-length write). */
int pw_write_all(int fd, const void *p, size_t n);
/* Disk space for len bytes of fd at off, before they are mapped (a mapped page without
 * disk space would be a SIGBUS when the disk is full): fallocate, or zeros written where
 * the file system cannot. 0 on success. */
int pw_reserve_disk(int fd, off_t off, size_t len);

/* A profile in memory: arrays plus string tables (see docs/format.md). Its arrays are
 * PW_PROFILE_ARRAYS(X), generated by the build from modules.def: format.h's
 * PW_PROFILE_ARRAYS_core, then each module's PW_PROFILE_ARRAYS_<module> of its format
 * header, X(array, record, FIELDS, type); each is a member `type *array` with its count
 * `narray`, and PW_ARRAY_<array> its number. */
#define PW_PROFILE_ARRAY_ENUM(arr, rec, FIELDS, type) PW_ARRAY_##arr,
enum pw_profile_array { PW_PROFILE_ARRAYS(PW_PROFILE_ARRAY_ENUM) PW_NARRAYS };
#undef PW_PROFILE_ARRAY_ENUM
#define PW_PROFILE_ARRAY_MEMBER(arr, rec, FIELDS, type)                                            \
    type *arr;                                                                                     \
    size_t n##arr;
typedef struct pw_profile {
    PW_PROFILE_ARRAYS(PW_PROFILE_ARRAY_MEMBER)
    const char **events;
    size_t nevents; /* event names of counts */
    const char **hosts;
    size_t nhosts;
    const char **objects;  /* paths of the loaded objects that sites and frames name */
    const char **buildids; /* parallel to objects */
    size_t nobjects;
    int world_size;
    int partial; /* 1: one rank's own dump */
} pw_profile;
#undef PW_PROFILE_ARRAY_MEMBER

/* A module's array of p (array: PW_ARRAY_<name>, one of its PW_PROFILE_ARRAYS_<module>):
 * n records of its type at rows, which stay the caller's and must live until p is
 * written (pw_profile_write); replaces what p had. Async-signal-safe. */
void pw_profile_array_set(pw_profile *p, int array, const void *rows, size_t n);

/* Write atomically (pw_file), with the header's modules and functions from the
 * registry (pw_functions_list: alike on every rank of a job). Async-signal-safe if the
 * profile's memory is already allocated. Returns 0 on success. */
int pw_profile_write(const pw_profile *p, const char *path);

/* ---- the call-site tables' file (tables.c; format.h "call-site tables") ----
 * The slots and histograms of a process's tables live in tables/NAME.pwtab, mapped
 * shared, so that however the process ends its counts are on disk (and described by
 * tables/NAME.json); the process's saved profile supersedes them, and whoever saves it
 * says so (pw_tables_done), which removes both files. */
/* A block of the file for `bytes` of data after its record's page; its pages on disk now
 * when `whole`, else only its record's (pw_tables_reserve for the others before they are
 * touched). 0 with *rec (in the file; kind committed), *data (its offset in the file:
 * *data_offset), *map and *map_len (the mapping, for munmap) set; -1 when there is no file (none could be made, the process
 * saved its profile, or a fork's child) or no room: the caller keeps private memory. */
int pw_tables_block(int kind, int thread, int first, int count, size_t bytes, int whole,
                    pw_table_block_rec **rec, char **data, int64_t *data_offset, void **map,
                    size_t *map_len);
/* Disk space for len bytes of the file at offset off; 0 when given. Async-signal-safe. */
int pw_tables_reserve(int64_t off, size_t len);
/* A page of slots kept in private memory for want of disk space: counted in the head. */
void pw_tables_page_lost(void);
/* Rewrite tables/NAME.json (what the process is, its functions, loaded objects,
 * counters), if the file exists: when any of these changes. */
void pw_tables_describe(void);
/* The rank record as far as the module that knows the job knows it (MPI_Init), and the
 * job's size: kept in the file, the record of the process if it ends without saving (the
 * size reaches the description at its next writing: pw_rank_set's). */
void pw_tables_rank(const pw_rank_rec *r, int world_size);
/* The process's data ended in state `state`; saved: its profile was written (the reduced
 * one included), which supersedes the tables file: both files are removed. No later
 * table has a block of the file. Async-signal-safe. */
void pw_tables_done(int state, int saved);
/* In a fork's child: let go of the parent's file (unmapped, never written); the child
 * makes its own at its first table. */
void pw_tables_forget(void);
/* The registry (pw_functions_list) as "modules", "functions" and "families" members of j
 * (docs/format.md, profile header). */
void pw_functions_json(pw_json *j);
/* The snapshot's objects as the member `key` of j, with their address ranges: a list of
 * {path, buildid, start, end, base}. Async-signal-safe. */
void pw_objects_ranges_json(struct pw_json *j, const char *key);

/* Memory for the writer and dumps: mmap based, usable in a signal handler. */
void *pw_alloc(size_t n);
void pw_release(void *p, size_t n);

/* Build this process's own rows (one rank) from the thread tables; the result
 * is a self-contained profile using local object indices. Not allocation free,
 * but uses pw_alloc only. rank_rec must be filled by the caller. */
typedef struct pw_local {
    pw_profile prof;
    pw_rank_rec rank;
    size_t bytes; /* memory to release */
    void *mem;
} pw_local;
int pw_local_build(pw_local *l, const pw_rank_rec *rank);
void pw_local_free(pw_local *l);

#pragma GCC visibility pop

#endif

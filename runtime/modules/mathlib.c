/*
 * The mathlib module: the program's calls of BLAS, CBLAS, LAPACK, LAPACKE and FFTW3, by
 * routine, size class (log2 bucket of each dimension and the transpose/uplo/side/diag
 * letters), call site and the library that answered, with flops and bytes touched by the
 * formulas of runtime/mathlib/mathlib.spec; FFTW plans described at creation and their
 * executes attributed to the live plan (docs/mathlib.md; its files: docs/format.md
 * "Math-library calls").
 *
 * The wrappers (generated from the spec) live in the preloaded runtime, so that calls
 * through the PLT reach them: the program's, and those one math library makes into
 * another (liblapack into libblas, the reference CBLAS into the Fortran BLAS). One
 * depth per thread across the whole family tells them apart: the outermost call is the
 * user's and is recorded; a call inside it is counted as the routine's internal call.
 * The same program thus has the same user calls under the reference libraries (where
 * dgetrf calls dgemm_ through the PLT) and under OpenBLAS (where it does not).
 *
 * The hot path (mathlib.h) takes no lock and allocates nothing: a thread-local table of
 * the core's keyed call-site tables (keyed.h), made at the thread's first call, on
 * (key, return address) with the previous call's slot checked first. The FFTW plan
 * table is written under a spin lock by planners and destroyers only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "mathlib.h"
#include "perfweave/format/mathlib.h"

int pw_ml_on;
PW_TLS int pw_ml_depth;
PW_TLS int pw_ml_anchored;
PW_TLS pw_keyed_tab *pw_ml_self;

static int64_t t_start; /* the process's measured life: from the start or its fork */

#define ROUTINE_NAME(ident, name, group, kind) name,
#define ROUTINE_GROUP(ident, name, group, kind) group,
#define GROUP_NAME(g, name) name,
#define NOT_WRAPPED_NAME(name, why) name,
#define NOT_WRAPPED_WHY(name, why) why,
static const char *const routine_names[PW_ML_NFN] = {PW_ML_ROUTINES(ROUTINE_NAME)};
static const signed char routine_groups[PW_ML_NFN] = {PW_ML_ROUTINES(ROUTINE_GROUP)};
static const char *const group_names[] = {PW_ML_GROUPS(GROUP_NAME)};
static const char *const not_wrapped[] = {PW_ML_NOT_WRAPPED(NOT_WRAPPED_NAME)};
static const char *const not_wrapped_why[] = {PW_ML_NOT_WRAPPED(NOT_WRAPPED_WHY)};
static const char *const fft_kinds[] = {"c2c", "r2c", "c2r"};

/* The object that answered each routine (dladdr of the real function), NULL until
 * resolved; the string is the loader's and lives while the library is loaded. */
static const char *libraries[PW_ML_NFN];

/* ---- the thread's table ---- */

static void slot_fresh(pw_keyed_slot *k) { ((pw_ml_slot *)k)->min = INT64_MAX; }

static void slot_add(pw_keyed_slot *into, const pw_keyed_slot *from)
{
    pw_ml_slot *d = (pw_ml_slot *)into;
    const pw_ml_slot *s = (const pw_ml_slot *)from;
    d->ticks += s->ticks;
    d->min = s->min < d->min ? s->min : d->min;
    d->max = s->max > d->max ? s->max : d->max;
    d->flops += s->flops;
    d->bytes += s->bytes;
    for (int k = 0; k < 3; k++)
        d->dim_sum[k] += s->dim_sum[k];
}

/* Past max_sites (set in start), a new site's calls go to its routine's overflow slot
 * (ra 0, no size class: the key's bits from 46 up are the routine's) and are counted. */
static pw_keyed sites = {.slot_size = sizeof(pw_ml_slot),
                         .families = PW_ML_NFN,
                         .family_shift = 46,
                         .extra_size = PW_ML_NFN * sizeof(int64_t),
                         .fresh = slot_fresh,
                         .add = slot_add};

pw_keyed_tab *pw_ml_tab_create(void) { return pw_ml_self = pw_keyed_create(&sites); }

/* ---- the real functions ---- */

void *pw_ml_resolve(int id)
{
    const char *name = routine_names[id];
    void *p = pw_wrap_next(name); /* also in an object loaded RTLD_LOCAL */
    Dl_info info;
    if (p != NULL && libraries[id] == NULL && dladdr(p, &info) && info.dli_fname)
        libraries[id] = info.dli_fname;
    return p;
}

void pw_ml_missing(int id)
{
    static int said[PW_ML_NFN];
    if (!__atomic_exchange_n(&said[id], 1, __ATOMIC_RELAXED))
        pw_log("%s called, but no loaded library defines it: the call does nothing",
               routine_names[id]);
}

/* ---- FFTW plans ---- */

#define MAX_PLANS 4096
#define PLAN_MAP 8192 /* open addressing: address -> index of the live plan, -1 none */
typedef struct plan_ref {
    const void *ptr;
    int32_t idx;
} plan_ref;
static pw_ml_plan *plans;
static plan_ref *plan_map;
static int64_t nplans, plans_dropped, unknown_executes;
static int plan_lock;

static void lock(void)
{
    while (__atomic_test_and_set(&plan_lock, __ATOMIC_ACQUIRE))
        pw_cpu_relax();
}
static void unlock(void) { __atomic_clear(&plan_lock, __ATOMIC_RELEASE); }

static plan_ref *plan_slot(const void *p, int make)
{
    if (plan_map == NULL)
        return NULL;
    size_t h = pw_keyed_hash((uint64_t)(uintptr_t)p, 0);
    for (size_t i = 0; i < PLAN_MAP; i++) {
        plan_ref *r = &plan_map[(h + i) & (PLAN_MAP - 1)];
        const void *q = __atomic_load_n(&r->ptr, __ATOMIC_ACQUIRE);
        if (q == p)
            return r;
        if (q == NULL) {
            if (!make)
                return NULL;
            r->idx = -1;
            __atomic_store_n(&r->ptr, p, __ATOMIC_RELEASE);
            return r;
        }
    }
    return NULL;
}

void pw_ml_plan_desc_dims(pw_ml_plan_desc *d, int rank, const int *n)
{
    d->rank = rank;
    for (int i = 0; i < rank && n != NULL; i++) {
        if (i < 3)
            d->n[i] = n[i];
        d->size *= n[i];
    }
}

void pw_ml_plan_desc_ldims(pw_ml_plan_desc *d, int rank, const int64_t *n)
{
    d->rank = rank;
    for (int i = 0; i < rank && n != NULL; i++) {
        if (i < 3)
            d->n[i] = n[i];
        d->size *= (double)n[i];
    }
}

int64_t pw_ml_comm_procs(void *comm)
{
    static int (*size)(void *, int *);
    if (size == NULL)
        *(void **)&size = pw_wrap_next("PMPI_Comm_size");
    int n = 0;
    if (size == NULL || size(comm, &n) != 0 || n < 1)
        return 1;
    return n;
}

double pw_ml_grid_procs(const int *desc)
{
    static void (*info)(const int *, int *, int *, int *, int *);
    if (info == NULL)
        *(void **)&info = pw_wrap_next("blacs_gridinfo_");
    int nprow = -1, npcol = -1, myrow, mycol;
    if (info == NULL || desc == NULL)
        return 1;
    info(&desc[1], &nprow, &npcol, &myrow, &mycol);
    return nprow > 0 && npcol > 0 ? (double)nprow * npcol : 1;
}

static uint64_t plan_chars(int kind, int sign)
{
    return pw_ml_chars(kind == 0   ? 'C'
                       : kind == 1 ? 'R'
                                   : 'I',
                       sign < 0   ? '-'
                       : sign > 0 ? '+'
                                  : 0,
                       0, 0);
}

void pw_ml_plan_made(int id, uintptr_t ra, int64_t ticks, void *plan, const pw_ml_plan_desc *d)
{
    pw_ml_add(id, ra, ticks, d->n, plan_chars(d->kind, d->sign), 0, 0);
    if (plan != NULL) {
        lock();
        if (plans == NULL) {
            plans = pw_alloc(MAX_PLANS * sizeof *plans);
            plan_map = pw_alloc(PLAN_MAP * sizeof *plan_map);
        }
        plan_ref *r = nplans < MAX_PLANS && plans ? plan_slot(plan, 1) : NULL;
        if (r != NULL) {
            pw_ml_plan *p = &plans[nplans];
            *p = (pw_ml_plan){.ptr = plan,
                              .gen = nplans,
                              .fn = id,
                              .live = 1,
                              .ra = ra,
                              .ticks = ticks,
                              .kind = d->kind,
                              .rank = d->rank,
                              .sign = d->sign,
                              .inplace = d->inplace,
                              .flags = d->flags,
                              .howmany = d->howmany,
                              .procs = d->procs,
                              .size = d->size};
            memcpy(p->n, d->n, sizeof p->n);
            __atomic_store_n(&r->idx, (int32_t)nplans, __ATOMIC_RELEASE);
            nplans++;
        } else {
            plans_dropped++;
        }
        unlock();
    }
    pw_ml_leave();
}

const pw_ml_plan *pw_ml_plan_find(const void *plan)
{
    plan_ref *r = plan_slot(plan, 0);
    int32_t i = r ? __atomic_load_n(&r->idx, __ATOMIC_ACQUIRE) : -1;
    return i >= 0 ? &plans[i] : NULL;
}

void pw_ml_plan_executed(int id, uintptr_t ra, int64_t ticks, const pw_ml_plan *p, double flops)
{
    static const int64_t none[3] = {0, 0, 0};
    if (p != NULL) {
        pw_ml_plan *w = (pw_ml_plan *)p;
        __atomic_fetch_add(&w->executes, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&w->exec_ticks, ticks, __ATOMIC_RELAXED);
        w->flops = flops; /* per execute: the same every time */
        pw_ml_add(id, ra, ticks, p->n, plan_chars(p->kind, p->sign), flops, 0);
    } else {
        __atomic_fetch_add(&unknown_executes, 1, __ATOMIC_RELAXED);
        pw_ml_add(id, ra, ticks, none, 0, 0, 0);
    }
    pw_ml_leave();
}

void pw_ml_plan_destroyed(int id, uintptr_t ra, int64_t ticks, const void *plan)
{
    static const int64_t none[3] = {0, 0, 0};
    const int64_t *n = none;
    lock();
    plan_ref *r = plan_slot(plan, 0);
    if (r != NULL && r->idx >= 0) {
        plans[r->idx].live = 0;
        n = plans[r->idx].n;
        __atomic_store_n(&r->idx, -1, __ATOMIC_RELEASE);
    }
    unlock();
    pw_ml_add(id, ra, ticks, n, 0, 0, 0);
    pw_ml_leave();
}

/* ---- the dump ---- */

static void object_offset(uintptr_t ra, int32_t *object, int64_t *offset)
{
    uint64_t off = 0;
    *object = ra ? pw_object_of(ra, &off) : -1;
    *offset = *object < 0 ? (int64_t)ra : (int64_t)off;
}

static int64_t ns(int64_t ticks, double ns_per_tick)
{
    return (int64_t)(ticks * ns_per_tick + 0.5);
}

static int dump(int state, int in_signal)
{
    if (!pw_ml_on)
        return 0;
    if (pw_keyed_tabs(&sites) == NULL && nplans == 0)
        return 0; /* no math-library call: nothing to merge (no allocation at exit, where
                   * the samples module still samples the process) */
    int threads = 0;
    int64_t dropped = 0;
    static int64_t internal[PW_ML_NFN];
    pw_keyed_tab *m = pw_keyed_merge(&sites, &threads, &dropped);
    for (pw_keyed_tab *t = pw_keyed_tabs(&sites); t; t = t->next)
        for (int k = 0; k < PW_ML_NFN; k++)
            internal[k] += pw_ml_internal(t)[k];
    int64_t any_internal = 0, nwritten = 0;
    for (int k = 0; k < PW_ML_NFN; k++)
        any_internal |= internal[k];
    for (int64_t i = 0; i < nplans; i++)
        nwritten += !plans[i].inherited || plans[i].executes > 0;
    if (m == NULL || (m->used == 0 && nwritten == 0 && !any_internal)) {
        pw_keyed_free(m);
        return 0; /* the program made no math-library call: no file */
    }
    if (!in_signal)
        pw_objects_refresh();
    double npt = pw_ns_per_tick();
    char path[4300];
    pw_file f;
    if (pw_process_path(path, sizeof path, "mathlib", ".calls") != 0)
        return 0;
    pw_file_open(&f, path);
    size_t i = 0;
    for (const pw_ml_slot *s; (s = (const pw_ml_slot *)pw_keyed_next(m, &i)) != NULL;) {
        uint64_t key = s->site.key;
        pw_mlcall_rec r;
        memset(&r, 0, sizeof r);
        r.routine = (int32_t)(key >> 46) - 1;
        object_offset(s->site.ra, &r.object, &r.offset);
        for (int k = 0; k < 3; k++) {
            r.dim_bucket[k] = (int32_t)(key >> (40 - 6 * k) & 63);
            r.dim_sum[k] = s->dim_sum[k];
        }
        for (int k = 0; k < 4; k++)
            r.chars[k] = (uint8_t)(key >> (21 - 7 * k) & 127);
        r.count = s->site.count;
        r.total_ns = ns(s->ticks, npt);
        r.min_ns = ns(s->min, npt);
        r.max_ns = ns(s->max, npt);
        r.flops = s->flops;
        r.bytes = s->bytes;
        pw_file_write(&f, &r, sizeof r);
    }
    pw_keyed_free(m);
    if (pw_file_close(&f) != 0)
        return 0;
    pw_process_path(path, sizeof path, "mathlib", ".plans");
    pw_file_open(&f, path);
    for (int64_t i = 0; i < nplans; i++) {
        const pw_ml_plan *p = &plans[i];
        if (p->inherited && p->executes == 0)
            continue; /* the parent's plan, not used by this forked child */
        pw_mlplan_rec r;
        memset(&r, 0, sizeof r);
        r.gen = p->gen;
        r.routine = p->fn;
        object_offset(p->ra, &r.object, &r.offset);
        r.kind = p->kind;
        r.rank = p->rank;
        memcpy(r.n, p->n, sizeof r.n);
        r.howmany = p->howmany;
        r.procs = p->procs;
        r.size = p->size;
        r.sign = p->sign;
        r.flags = p->flags;
        r.inplace = p->inplace;
        r.live = p->live;
        r.plan_ns = ns(p->ticks, npt);
        r.executes = p->executes;
        r.exec_ns = ns(p->exec_ticks, npt);
        r.flops = p->flops * (double)p->executes;
        pw_file_write(&f, &r, sizeof r);
    }
    if (pw_file_close(&f) != 0)
        return 0;

    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_MATHLIB_MAGIC, PW_MATHLIB_VERSION);
    pw_json_str(&j, "state", pw_state_name(state));
    pw_json_int(&j, "t_start", t_start);
    pw_json_int(&j, "t_end", pw_now());
    pw_json_int(&j, "threads", threads);
    pw_json_int(&j, "max_sites", (int64_t)sites.max_sites);
    pw_json_int(&j, "dropped", dropped); /* calls folded into overflow sites */
    pw_json_int(&j, "plans_dropped", plans_dropped);
    pw_json_int(&j, "unknown_plan_executes", unknown_executes);
    pw_json_strs(&j, "routines", routine_names, PW_ML_NFN);
    pw_json_open(&j, "groups", '['); /* each routine's library interface */
    for (int k = 0; k < PW_ML_NFN; k++)
        pw_json_str(&j, NULL, group_names[(int)routine_groups[k]]);
    pw_json_close(&j);
    pw_json_open(&j, "libraries", '['); /* the object that answered each, "" not called */
    for (int k = 0; k < PW_ML_NFN; k++)
        pw_json_str(&j, NULL, libraries[k]);
    pw_json_close(&j);
    pw_json_open(&j, "internal", '['); /* calls inside another math-library call */
    for (int k = 0; k < PW_ML_NFN; k++)
        pw_json_int(&j, NULL, internal[k]);
    pw_json_close(&j);
    pw_json_strs(&j, "fft_kinds", fft_kinds, 3);
    pw_json_open(&j, "not_wrapped", '[');
    for (size_t k = 0; k < sizeof not_wrapped / sizeof *not_wrapped; k++) {
        pw_json_open(&j, NULL, '[');
        pw_json_str(&j, NULL, not_wrapped[k]);
        pw_json_str(&j, NULL, not_wrapped_why[k]);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_objects_json(&j, "objects"); /* the loaded objects: path, build-id */
    pw_json_end(&j);
    pw_process_path(path, sizeof path, "mathlib", ".json");
    pw_buf_to_file(&b, path);
    return 0;
}

/* A forked child (the only thread, a copy of the one that called fork) starts with
 * empty tables: the parent's counts are the parent's to write, and the child's dump
 * holds its own calls alone (none: no file). The parent's tables are unmapped from the
 * child (their pages, shared copy-on-write, were never written by it); the plans stay
 * known (a child may execute a plan its parent made) with their executes, planning time
 * and counters zeroed, and are written only if the child executes them. The plan lock
 * is the child's alone: a parent's thread that held it does not exist here. The core
 * has unset the rank: a child of an MPI rank writes HOST.PID files of its own, never
 * the rank's (mathlib/rank-R.*). Run by the core in the child (the module's
 * fork_child). */
static void in_child(void)
{
    pw_keyed_forget(&sites);
    pw_ml_self = NULL;
    __atomic_clear(&plan_lock, __ATOMIC_RELEASE);
    for (int64_t i = 0; i < nplans; i++) {
        plans[i].inherited = 1;
        plans[i].executes = plans[i].exec_ticks = plans[i].ticks = 0;
    }
    plans_dropped = unknown_executes = 0;
    t_start = pw_now();
}

/* In the core's constructor, the process being measured: nothing is looked up or
 * allocated until the program makes its first math-library call. */
static void start(void)
{
    sites.max_sites = pw_opt.mathlib_max_sites > 0 ? (size_t)pw_opt.mathlib_max_sites : 1;
    pw_ml_on = pw_opt.mathlib;
    t_start = pw_t_start;
}

const pw_module pw_module_mathlib = {
    .name = "mathlib",
    .version = PW_MATHLIB_VERSION,
    .start = start,
    .dump = dump,
    .fork_child = in_child,
};

/*
 * The example module: a complete runtime module, annotated, to copy when writing one.
 * It is built into libperfweave.so like every module and is off unless --example.
 *
 * What it measures: the program's sched_yield calls (a call no other module wraps),
 * counted and timed per thread; not those an MPI library makes inside an MPI call
 * (that time is the MPI call's). What it writes into the experiment (docs/format.md
 * "Example module"): at the process's end, example/rank-R.json, or
 * example/HOST.PID.json for a process without a rank,
 *
 *   {"format":"perfweave-example","version":1,"rank":-1,"pid":123,"host":"h",
 *    "state":"complete","function":"sched_yield","threads":2,"calls":1000,
 *    "total_ns":81234,"max_ns":912}     (one line)
 *
 * and, in an MPI job, at MPI_Finalize, example/job.json: the ranks' totals so far.
 *
 * Its calls are also in the profile's call sites, under its own function ids (the
 * header's module "example", function "sched_yield"), beside the MPI module's.
 *
 * The pieces every module has, in this file's order:
 *   1. its options: declared in python/perfweave/options.json (here "example", with
 *      "module": "example"), read from pw_opt (the core loads them all from the
 *      environment);
 *   2. its record: here the core's per-thread call-site tables, under function ids
 *      the core's registry gives it (pw_functions_register): no lock and no atomic on
 *      the hot path, and every call site goes into the profile; a module with data of
 *      another shape keeps a per-thread record of its own the same way;
 *   3. its wrappers, in the one shape of runtime/core/wrap.h;
 *   4. its dump: the process's data into the experiment, async-signal-safe;
 *   5. its reduce (optional): the job's data into one file, through the job's gather;
 *   6. its pw_module, named once in runtime/modules/modules.def.
 * It talks to the core only (pw.h, wrap.h), never to another module: what it would need
 * of one goes through a hook that module offers, declared in that module's header and
 * found once in start (PW_HOOK_FIND; docs/architecture.md "Hooks between modules"), as
 * samples.c finds the counters module's pw_counters_read_events. It needs none.
 *
 * A new module copies this file and the example's other six (example.h,
 * include/perfweave/format/example.h, and python/perfweave/{model,readers,analysis,
 * report/sections}/example.py), replacing example, Example, EXAMPLE and the wrapped
 * function (its name is in function_names and the wrapper only), and registers itself in
 * modules.def, options.json, readers/datasets.py and report/sections/__init__.py: the list
 * and every step are docs/architecture.md "Adding a module"; nothing else is edited.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example.h"
#include "perfweave/format/example.h" /* its files: kinds, versions */
#include "wrap.h"

/* ---- 1. options ---- */

/* Set once in start, from pw_opt.example: the wrapper's test when the module is off. */
static int enabled;

/* ---- 2. the record ---- */

/* The module's functions in the core's registry: registered in start, when on; their
 * ids are base + index (here one function, id base). The profile header lists them as
 * the module "example" (docs/format.md "modules"). It makes no MPI calls, so it names no
 * MPI family (.families NULL). */
static const char *const function_names[] = {"sched_yield"};
static pw_functions functions = {.module = "example",
                                 .version = PW_EXAMPLE_VERSION,
                                 .n = 1,
                                 .names = function_names,
                                 .base = -1};

/* One call of `ticks` from return address `ra` into the calling thread's table (made at
 * its first call; NULL if out of memory: the call is then not recorded). */
static void record(void *ra, int64_t ticks)
{
    pw_sitetab *t = pw_sitetab_self();
    if (PW_LIKELY(t != NULL))
        pw_site_add(pw_site_find(t, functions.base, (uintptr_t)ra), ticks, 0, 0);
}

/* ---- 3. the wrapper (wrap.h): real function cached, called exactly once, timed;
 * recorded only when on, measured and not re-entered; return value and errno the real
 * call's ---- */

/* Inside a measured call of another module (an MPI library yielding while it waits):
 * the core's per-thread activity says so. */
static int in_measured_call(void)
{
    return pw_thread_activity > 0 && pw_thread_activity <= PW_NFAMILIES;
}

PW_EXPORT int sched_yield(void)
{
    PW_REAL(sched_yield);
    if (PW_LIKELY(!enabled) || in_measured_call() || !pw_wrap_enter())
        return real_sched_yield();
    int64_t t0 = pw_ticks();
    int rc = real_sched_yield();
    int64_t t1 = pw_ticks();
    PW_KEEP_ERRNO(record(__builtin_return_address(0), t1 - t0));
    pw_wrap_leave();
    return rc;
}

/* ---- 4. the dump ---- */

/* The process's totals: its function's sites in all its threads' tables (a thread: a
 * table with one of them), durations in ns. Its members are the keys its files declare
 * (format/example.h PW_EXAMPLE_TOTALS), so the struct, the writer and the reader's schema
 * are one list. */
#define TOTAL_MEMBER(type, key) int64_t key;
typedef struct totals {
    PW_EXAMPLE_TOTALS(TOTAL_MEMBER)
} totals;

static totals sum_records(void)
{
    totals t = {0};
    int64_t ticks = 0, max_ticks = 0;
    for (pw_sitetab *tab = pw_sitetabs(); tab; tab = tab->next) {
        int64_t calls = 0;
        size_t i = 0;
        for (const pw_site *s; (s = pw_site_next(tab, &i)) != NULL;) {
            if (s->fn != functions.base || s->count <= 0)
                continue;
            calls += s->count;
            ticks += s->total;
            if (s->max > max_ticks)
                max_ticks = s->max;
        }
        t.threads += calls > 0;
        t.calls += calls;
    }
    double ns_per_tick = pw_ns_per_tick();
    t.total_ns = (int64_t)((double)ticks * ns_per_tick + 0.5);
    t.max_ns = (int64_t)((double)max_ticks * ns_per_tick + 0.5);
    return t;
}

/* The totals' members of a JSON object: the core's JSON writer (pw_json) places the
 * commas, quotes and brackets; a module says keys and values. */
static void put_totals(pw_json *j, const totals *t)
{
#define PUT_TOTAL(type, key) pw_json_##type(j, #key, t->key);
    PW_EXAMPLE_TOTALS(PUT_TOTAL)
}

/* The process ends in `state`: this process's file, also from a fatal signal's handler
 * (then marked by its state). Returns 0: it writes no profile. The core's helpers make
 * the path (pw_process_path: example/rank-R.json, or example/HOST.PID.json; other paths
 * into the experiment: pw_experiment_path), the JSON (pw_buf_json_head: its common head;
 * pw_json_*: keys and values, the writer places commas, quotes and brackets) and the file
 * (temporary name, renamed when whole; pw_buf is mmap'ed memory): all of it
 * async-signal-safe. */
static int dump(int state, int in_signal)
{
    (void)in_signal;
    char path[4300];
    if (!enabled || pw_process_path(path, sizeof path, "example", ".json") != 0)
        return 0;
    totals t = sum_records();
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_EXAMPLE_MAGIC, PW_EXAMPLE_VERSION);
    pw_json_str(&j, "state", pw_state_name(state));
    pw_json_str(&j, "function", function_names[0]);
    put_totals(&j, &t);
    pw_json_end(&j);          /* the closing brace, a newline */
    pw_buf_to_file(&b, path); /* whole or not at all; a failure is marked */
    return 0;
}

/* ---- 5. the reduce ---- */

/* At the job's end (MPI_Finalize), on every rank: each rank's totals to rank 0, which
 * writes example/job.json. Collective: every rank takes the same path (the option is
 * the job's). Not async-signal-safe, and need not be. */
static int reduce(const pw_job *job)
{
    if (!enabled || !pw_experiment_dir())
        return 0;
    totals mine = sum_records(), all_ranks = {0};
    char *all = NULL;
    int *lens = NULL, reported = 0;
    if (job->gather(&mine, sizeof mine, &all, &lens) == 0 && job->rank == 0) {
        size_t at = 0;
        for (int r = 0; r < job->size; at += (size_t)lens[r], r++) {
            totals t;
            if (lens[r] != (int)sizeof t)
                continue; /* a rank that could not take part */
            memcpy(&t, all + at, sizeof t);
            reported++;
            all_ranks.threads += t.threads;
            all_ranks.calls += t.calls;
            all_ranks.total_ns += t.total_ns;
            if (t.max_ns > all_ranks.max_ns)
                all_ranks.max_ns = t.max_ns;
        }
        char path[4300];
        pw_buf o = {0};
        pw_json j;
        pw_json_begin(&j, &o);
        pw_json_str(&j, "format", PW_EXAMPLE_JOB_MAGIC);
        pw_json_int(&j, "version", PW_EXAMPLE_VERSION);
        pw_json_int(&j, "ranks", job->size);
        pw_json_int(&j, "reported", reported);
        pw_json_str(&j, "function", function_names[0]);
        put_totals(&j, &all_ranks);
        pw_json_end(&j);
        if (pw_experiment_path(path, sizeof path, "example/job.json") == 0)
            pw_buf_to_file(&o, path);
        else
            pw_buf_free(&o);
    }
    free(all);
    free(lens);
    return 0;
}

/* ---- 6. the module ---- */

/* In the core's constructor, the process being measured. */
static void start(void) { enabled = pw_opt.example && pw_functions_register(&functions) == 0; }

const pw_module pw_module_example = {
    .name = "example",
    .version = PW_EXAMPLE_VERSION,
    .start = start,
    .dump = dump,
    .reduce = reduce,
};

/*
 * Process-level runtime: options, activation, logging, the modules (started, told of
 * new threads and dumped through the one list, modules/modules.def), the registry of
 * the hooks they offer one another, the per-thread state they share, and saving data when the process ends (normal exit,
 * or a fatal signal) through the modules' dump callbacks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"
#include "wrap.h"

struct pw_options pw_opt;
int pw_active;
int64_t pw_t_start;
char pw_hostname[256];
int pw_use_tsc;
int64_t pw_tick_start;

/* ---- the modules: the list is the one place that names them ---- */
#define PW_MODULE(name, ...) extern const pw_module pw_module_##name;
#include "modules/modules.def"
#undef PW_MODULE
#define PW_MODULE(name, ...) &pw_module_##name,
static const pw_module *const modules[] = {
#include "modules/modules.def"
};
#undef PW_MODULE
#define PW_NMODULES (sizeof modules / sizeof *modules)

int pw_rank = -1;
pw_activity *pw_act;
PW_TLS int pw_thread_activity;
PW_TLS uintptr_t pw_call_anchor, pw_call_here;
int pw_want_anchor;

__attribute__((noinline)) void *pw_code_here(void) { return __builtin_return_address(0); }

void pw_rank_set(int rank)
{
    if (rank >= 0)
        pw_rank = rank;
    /* joining: only a process in no job yet (a second start-up call changes nothing) */
    if (pw_act && (rank != PW_ACT_JOINING || pw_act->rank == PW_ACT_NO_JOB))
        pw_act->rank = rank;
    if (rank >= 0)
        pw_tables_describe(); /* the tables file's description: the rank */
}

void pw_thread_begin(void)
{
    for (size_t i = 0; i < PW_NMODULES; i++)
        if (modules[i]->thread_start)
            modules[i]->thread_start();
}

void pw_modules_reduce(const pw_job *job)
{
    for (size_t i = 0; i < PW_NMODULES; i++)
        if (modules[i]->reduce)
            modules[i]->reduce(job);
}

/* ---- hooks between modules: names to functions ---- */

#define PW_MAX_HOOKS 32
static struct {
    const char *name;
    pw_hook_fn fn;
    int looked; /* a module found none here: an offer now comes too late for it */
} hooks[PW_MAX_HOOKS];
static int nhooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;

/* The index of `name`'s entry, made at its first offer or look-up (-1: the table is
 * full); under the lock. */
static int hook_entry(const char *name)
{
    for (int i = 0; i < nhooks; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return i;
    if (nhooks == PW_MAX_HOOKS)
        return -1;
    hooks[nhooks].name = name;
    return nhooks++;
}

void pw_hook_offer(const char *name, pw_hook_fn fn)
{
    pthread_mutex_lock(&hooks_lock);
    int i = hook_entry(name);
    if (i >= 0 && hooks[i].looked && !hooks[i].fn)
        /* a module's mistake (its start's place in modules.def), never a user's */
        pw_log("hook %s offered after a module looked it up: that module goes without it", name);
    if (i >= 0)
        hooks[i].fn = fn;
    else
        pw_log("hook %s not offered: more than %d hooks", name, PW_MAX_HOOKS);
    pthread_mutex_unlock(&hooks_lock);
}

pw_hook_fn pw_hook_find(const char *name)
{
    pthread_mutex_lock(&hooks_lock);
    int i = hook_entry(name);
    pw_hook_fn fn = i >= 0 ? hooks[i].fn : NULL;
    if (i >= 0)
        hooks[i].looked = 1;
    pthread_mutex_unlock(&hooks_lock);
    return fn;
}

/* Is the tick counter invariant (constant rate, runs in all power states)? */
static int invariant_counter(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* the kernel keeps the TSC as its clock only where it is synchronised across
     * CPUs and stable; elsewhere (kvm-clock, hpet) use clock_gettime */
    char buf[8192];
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    int ok = 0;
    if (!f)
        return 0;
    ok = fgets(buf, sizeof buf, f) && strncmp(buf, "tsc", 3) == 0;
    fclose(f);
    if (!ok)
        return 0;
    ok = 0;
    f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    while (fgets(buf, sizeof buf, f))
        if (strncmp(buf, "flags", 5) == 0) {
            ok = strstr(buf, " constant_tsc") && strstr(buf, " nonstop_tsc");
            break;
        }
    fclose(f);
    return ok;
#elif defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

void pw_clock_pair(int64_t *ns, int64_t *ticks)
{
    if (!pw_use_tsc) {
        *ns = *ticks = pw_now();
        return;
    }
    int64_t best = INT64_MAX;
    /* a few tries: one is rarely preempted, and a bracket of tens of ns is as good as it
     * gets from user space */
    for (int i = 0; i < 5; i++) {
        int64_t a = pw_now(), k = pw_ticks(), b = pw_now();
        if (b - a < best) {
            best = b - a;
            *ns = a + (b - a) / 2;
            *ticks = k;
        }
    }
}

double pw_ns_per_tick(void)
{
    if (!pw_use_tsc)
        return 1.0;
    /* the interval since the constructor makes the rate exact to a few ns over the
     * whole run */
    int64_t t, k;
    pw_clock_pair(&t, &k);
    if (k <= pw_tick_start || t <= pw_t_start)
        return 1.0;
    return (double)(t - pw_t_start) / (double)(k - pw_tick_start);
}

static const char *experiment_dir;

const char *pw_experiment_dir(void) { return experiment_dir; }

/* ---- logging: async-signal-safe subset of printf ---- */

int pw_fmt_int(char *out, int64_t v)
{
    char tmp[24];
    int n = 0, len = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[len++] = '-';
    while (n)
        out[len++] = tmp[--n];
    out[len] = 0;
    return len;
}

void pw_log(const char *fmt, ...)
{
    char buf[1024];
    size_t n = 0;
    const char *prefix = "perfweave: ";
    va_list ap;
    va_start(ap, fmt);
    for (const char *p = prefix; *p && n < sizeof buf - 2; p++)
        buf[n++] = *p;
    for (const char *p = fmt; *p && n < sizeof buf - 26; p++) {
        if (*p != '%') {
            buf[n++] = *p;
            continue;
        }
        p++;
        int wide = 0;
        while (*p == 'l' || *p == 'z') {
            wide = 1;
            p++;
        }
        if (*p == 's') {
            const char *s = va_arg(ap, const char *);
            for (s = s ? s : "(null)"; *s && n < sizeof buf - 26; s++)
                buf[n++] = *s;
        } else if (*p == 'd') {
            long long v = wide ? va_arg(ap, long long) : va_arg(ap, int);
            n += (size_t)pw_fmt_int(buf + n, v);
        } else if (*p == '%') {
            buf[n++] = '%';
        } else if (!*p) {
            break;
        }
    }
    va_end(ap);
    buf[n++] = '\n';
    ssize_t w = write(2, buf, n);
    (void)w;
}

/* ---- options ---- */

static void load_options(void)
{
#define PW_LOAD_int(name, env, def)                                                                \
    do {                                                                                           \
        const char *v = getenv(env);                                                               \
        char *end;                                                                                 \
        pw_opt.name = def;                                                                         \
        if (v && *v) {                                                                             \
            long x = strtol(v, &end, 10);                                                          \
            if (*end == 0)                                                                         \
                pw_opt.name = x;                                                                   \
            else                                                                                   \
                pw_log("ignoring %s=%s: not an integer", env, v);                                  \
        }                                                                                          \
    } while (0);
#define PW_LOAD_bool(name, env, def)                                                               \
    do {                                                                                           \
        const char *v = getenv(env);                                                               \
        pw_opt.name = def;                                                                         \
        if (v && *v)                                                                               \
            pw_opt.name = !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 ||                  \
                            strcasecmp(v, "no") == 0 || strcasecmp(v, "off") == 0);                \
    } while (0);
#define PW_LOAD_str(name, env, def)                                                                \
    do {                                                                                           \
        const char *v = getenv(env);                                                               \
        pw_opt.name = v ? v : def;                                                                 \
    } while (0);
#define PW_LOAD(name, type, env, def) PW_LOAD_##type(name, env, def)
    PW_OPTION_LIST(PW_LOAD)
#undef PW_LOAD
    if (pw_opt.callsite_depth < 1)
        pw_opt.callsite_depth = 1;
    if (pw_opt.callsite_depth > PW_MAX_DEPTH)
        pw_opt.callsite_depth = PW_MAX_DEPTH;
    if (pw_opt.max_callsites < 16)
        pw_opt.max_callsites = 16;
}

/* Is this executable one of the launchers/daemons we leave alone? */
static int skipped_executable(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    /* also match by argv[0]'s name: launchers are often symlinks to another name */
    char cmd[4096] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f) {
        size_t m = fread(cmd, 1, sizeof cmd - 1, f);
        cmd[m] = 0;
        fclose(f);
    }
    const char *arg0 = strrchr(cmd, '/');
    arg0 = arg0 ? arg0 + 1 : cmd;
    const char *list = pw_opt.skip_exe;
    while (list && *list) {
        const char *comma = strchr(list, ',');
        size_t len = comma ? (size_t)(comma - list) : strlen(list);
        if (len && ((strlen(base) == len && strncmp(base, list, len) == 0) ||
                    (strlen(arg0) == len && strncmp(arg0, list, len) == 0)))
            return 1;
        list = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* ---- ending the process ---- */

#define PW_MAX_LATE 8
static const pw_module *late[PW_MAX_LATE]; /* modules in libraries loaded later */
static int nlate;
static int dump_state; /* 0: not yet, 1: a thread is writing, 2: written */

void pw_register_module(const pw_module *m)
{
    if (nlate < PW_MAX_LATE)
        late[nlate++] = m;
}

/* The rank record of a process that never initialised MPI: rank -1, up to now. */
static void process_rank(pw_rank_rec *r, int state)
{
    memset(r, 0, sizeof *r);
    r->rank = -1;
    r->pid = (int32_t)getpid();
    r->state = state;
    r->thread_level = -1;
    r->t_start = pw_t_start;
    r->t_end = r->t_fini_enter = pw_now();
    r->app_ns = r->t_end - r->t_start;
}

/* Data of a process that never initialised MPI: one row with rank -1. */
static void write_process_profile(int state, int in_signal)
{
    pw_local l;
    pw_rank_rec r;
    process_rank(&r, state);
    (void)in_signal;
    if (pw_local_build(&l, &r) != 0) {
        pw_tables_done(state, 0);
        return;
    }
    char path[4200], num[24];
    pw_fmt_int(num, r.pid);
    /* procs/HOST.PID.pwprof (its folder made by the writer); a failure is marked */
    int rc = pw_experiment_path(path, sizeof path, "procs/", pw_hostname, ".", num, ".pwprof");
    pw_tables_done(state, rc == 0 && pw_profile_write(&l.prof, path) == 0);
    pw_local_free(&l);
}

/* ---- snapshots (snapshot.c's thread) ---- */

static int snap_stopped, snap_busy;

void pw_snapshots_stop(void)
{
    __atomic_store_n(&snap_stopped, 1, __ATOMIC_SEQ_CST);
    /* the snapshot thread blocks every signal: a handler never waits for itself here */
    for (int i = 0; i < 3000 && __atomic_load_n(&snap_busy, __ATOMIC_SEQ_CST); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

int pw_modules_snapshot(const char *dir)
{
    __atomic_store_n(&snap_busy, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&snap_stopped, __ATOMIC_SEQ_CST) || !pw_active) {
        __atomic_store_n(&snap_busy, 0, __ATOMIC_SEQ_CST);
        return -1;
    }
    int done = 0;
    for (int i = 0; i < nlate; i++)
        if (late[i]->snapshot)
            done |= late[i]->snapshot(dir);
    for (size_t i = PW_NMODULES; i-- > 0;)
        if (modules[i]->snapshot)
            done |= modules[i]->snapshot(dir);
    if (!done) {
        pw_local l;
        pw_rank_rec r;
        process_rank(&r, PW_STATE_RUNNING);
        char path[4200], num[24];
        pw_fmt_int(num, r.pid);
        if (pw_local_build(&l, &r) == 0) {
            if (pw_experiment_path(path, sizeof path, dir, "procs/", pw_hostname, ".", num,
                                   ".pwprof") == 0)
                pw_profile_write(&l.prof, path);
            pw_local_free(&l);
        }
    }
    __atomic_store_n(&snap_busy, 0, __ATOMIC_SEQ_CST);
    return 0;
}

static void dump_all(int state, int in_signal)
{
    int expected = 0;
    if (!pw_active)
        return;
    if (!__atomic_compare_exchange_n(&dump_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        /* Another thread is writing (say a second fatal signal arrived): let it
         * finish, within reason, before this thread goes on to end the process. */
        for (int i = 0; i < 2000 && __atomic_load_n(&dump_state, __ATOMIC_ACQUIRE) == 1; i++) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        return;
    }
    int saved_errno = errno;
    int done = 0;
    pw_snapshots_stop();
    pw_wrap_depth++; /* what the dumps call is not the program's: not recorded */
    /* first the modules loaded later (one of them may write the process's profile:
     * the file that says this rank took part, so it goes first where a second signal
     * may kill the process mid-way), then the list's in reverse (last started, first
     * ended) */
    for (int i = 0; i < nlate; i++)
        if (late[i]->dump)
            done |= late[i]->dump(state, in_signal);
    for (size_t i = PW_NMODULES; i-- > 0;)
        if (modules[i]->dump)
            done |= modules[i]->dump(state, in_signal);
    if (!done)
        write_process_profile(state, in_signal);
    pw_wrap_depth--;
    __atomic_store_n(&dump_state, 2, __ATOMIC_RELEASE);
    errno = saved_errno;
}

void pw_dump_now(int state) { dump_all(state, 0); }

static void at_exit(void)
{
    dump_all(PW_STATE_COMPLETE, 0);
    pw_ending_leave();
}

/* A child of fork (system(), a spawned helper, a program that forks workers) is a
 * process of its own: it starts with no recorded call and no rank, and writes its own
 * data at its end (procs/HOST.PID.pwprof and the modules' files), never the parent's
 * again. Run in the child before fork returns, by the thread that forked. */
static void fork_child(void)
{
    pw_sitetabs_forget(); /* and the parent's tables file */
    pw_rank = -1;
    __atomic_store_n(&dump_state, 0, __ATOMIC_RELEASE);
    pw_ending_forget();
    pw_snapshot_forget();
    for (size_t i = 0; i < PW_NMODULES; i++)
        if (modules[i]->fork_child)
            modules[i]->fork_child();
    for (int i = 0; i < nlate; i++)
        if (late[i]->fork_child)
            late[i]->fork_child();
}

static const int caught[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS};
static struct sigaction previous[sizeof caught / sizeof *caught];

int pw_dying;

void pw_hold(void)
{
    /* the process ends with the signal as soon as the handler is done; should it not
     * (a handler that returned), the thread goes on after a while */
    for (int i = 0; i < 30000 && __atomic_load_n(&pw_dying, __ATOMIC_ACQUIRE); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static void on_signal(int sig)
{
    __atomic_store_n(&pw_dying, 1, __ATOMIC_SEQ_CST);
    pw_ending_saving(sig);
    dump_all(PW_STATE_SIGNAL, 1);
    /* Hand the signal back to what was there before us (the default action):
     * it is blocked while we run, so it is delivered as soon as we return. */
    for (size_t i = 0; i < sizeof caught / sizeof *caught; i++)
        if (caught[i] == sig)
            sigaction(sig, &previous[i], NULL);
    pw_ending_together(sig); /* a launcher's signal to the job: die with the others */
    raise(sig);
}

/* Returns whether one of the signals a launcher sends the whole job is among them */
static int install_signal_handlers(void)
{
    int any = 0;
    for (size_t i = 0; i < sizeof caught / sizeof *caught; i++) {
        struct sigaction old, sa;
        if (sigaction(caught[i], NULL, &old) != 0)
            continue;
        /* Only where nobody has a handler and the signal is not ignored. */
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue;
        previous[i] = old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(caught[i], &sa, NULL) == 0)
            any |= pw_ending_job_wide(caught[i]);
    }
    return any;
}

__attribute__((constructor)) static void pw_init(void)
{
    pw_use_tsc = invariant_counter();
    pw_clock_pair(&pw_t_start, &pw_tick_start);
    load_options();
    experiment_dir = getenv("PERFWEAVE_EXPERIMENT");
    if (!experiment_dir || !*experiment_dir || skipped_executable())
        return;
    if (gethostname(pw_hostname, sizeof pw_hostname - 1) != 0)
        strcpy(pw_hostname, "unknown");
    pw_active = 1;
    pw_trace_hooks = pw_opt.trace; /* shadow stacks of instrumented functions from now */
    /* in list order: a module that sizes the call-site tables (pw_nevents) comes before
     * any that records; libraries they load are in the snapshot of loaded objects */
    for (size_t i = 0; i < PW_NMODULES; i++)
        if (modules[i]->start)
            modules[i]->start();
    pw_objects_refresh();
    pw_snapshot_start();
    atexit(at_exit);
    pthread_atfork(NULL, NULL, fork_child);
    if (pw_opt.catch_signals && install_signal_handlers())
        pw_ending_join(); /* a program with handlers of its own for them: left alone */
    pw_debug("active in pid %d", (int)getpid());
}

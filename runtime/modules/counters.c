/*
 * PAPI counters per thread (--counters EV1,EV2,...): every thread that makes MPI
 * calls counts the events in its own PAPI event set, read at each measured call's
 * entry and exit. The counts are charged to the call site: "inside" (entry to exit)
 * and "before" (the thread's previous exit, or the start of counting, to this entry:
 * the computation that led to the call). Events are any PAPI names of any component
 * compiled into the PAPI found at run time (perf::PAGE-FAULTS, PAPI_TOT_INS,
 * pcp:::..., nvml:::...). PAPI is opened with dlopen: without it, or for an event it
 * does not know, the runtime says so in one line and counts what it can. PAPI knows
 * names it cannot count here (a preset such as PAPI_TOT_INS on a machine without
 * hardware counters), and an event set holding one of them cannot start at all: each
 * event is tried first, alone with those already kept, and one that fails is left out
 * (named in one line, by the first process of the run only) while the others are
 * counted. perfweave run finds these before the run and records them in the experiment;
 * the runtime's check covers nodes unlike the one the run was started from.
 *
 * The kernel's software events (perf::TASK-CLOCK, perf::PAGE-FAULTS, ...: the table of
 * python/perfweave/kernel_events.json) are counted here with perf_event_open, on every
 * machine, one descriptor each, as PAPI would count them (this thread, user-level domain);
 * the rest goes through PAPI. Two reasons. They need no knowledge of the processor, but PAPI
 * reaches them through libpfm4, and on a processor libpfm4 does not know PAPI's perf_event
 * component is disabled (every PAPI release to 7.2: "no default PMU found") and they are no
 * PAPI events at all. And the kernel loses counts of a group's members other than its
 * leader when they are software events (Linux 6.18: perf::TASK-CLOCK behind
 * perf::PAGE-FAULTS read 0.121 s of a thread's 0.243 s, or none, in 1 run of 10; the
 * leader's counts, and every event alone, were exact), and a PAPI event set, like any
 * group read in one system call, is such a group. Nothing of the process's environment is
 * changed for it (forcing libpfm4 to another model's PMU, LIBPFM_FORCE_PMU, would encode
 * that model's events and hides libpfm4's perf:: events as well).
 *
 * A read costs a system call per kernel event (1.5 us on a VM), and one for PAPI's: with
 * --counters-interval-us N a thread reads at a call's entry only when N us passed
 * since its last read, and at the call's exit only if it read at the entry; the
 * counts of calls closer together go into the next read ("before" its site). Phases
 * longer than N us are charged exactly; reads stay below 2 per N us.
 *
 * The few PAPI constants used are the stable ones of papi.h (PAPI_OK, PAPI_NULL,
 * PAPI_VER_CURRENT's layout), so that no PAPI headers are needed to build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "counters.h"
#include "pw_kernel_events.h"

#define PAPI_OK_ 0
#define PAPI_NULL_ (-1)

/* The events kept: the core's pw_event_names point here (the call-site tables make
 * room for pw_nevents per site). */
static char names_buf[PW_MAX_EVENTS][128];
/* How each kept event is counted: -1 by PAPI, else by the kernel (perf_event_open) as the
 * software event of this config; and how many of each kind were kept. */
static int kconfig[PW_MAX_EVENTS];
static int npapi_events, nkernel_events;
/* A thread's kernel events are closed when it ends (PAPI's event sets never are). */
static pthread_key_t kernel_key;

static struct {
    void *lib;
    int (*library_init)(int);
    int (*thread_init)(unsigned long (*)(void));
    int (*multiplex_init)(void);
    int (*create_eventset)(int *);
    int (*assign_component)(int, int);
    int (*set_multiplex)(int);
    int (*add_named_event)(int, const char *);
    int (*name_to_code)(const char *, int *);
    int (*event_component)(int);
    int (*start)(int);
    int (*stop)(int, long long *);
    int (*cleanup_eventset)(int);
    int (*destroy_eventset)(int *);
    int (*read)(int, long long *);
    char *(*strerror)(int);
} papi;

static PW_TLS struct {
    int state;         /* 0: not started, 1: counting, -1: failed */
    volatile int busy; /* in a PAPI call: the sampler's handler must not read then */
    int entered;       /* entry[] holds the current call's entry reading */
    int es;            /* the PAPI event set, when PAPI counts some events */
    int npapi;         /* events in the PAPI set: those that could be added here */
    int nkern;         /* kernel events opened here, kfd[0..nkern) */
    int kfd[PW_MAX_EVENTS];
    int slot[PW_MAX_EVENTS]; /* event -> its place in its source's readings, -1: not counted */
    int64_t last_ns;         /* time of the last read */
    int64_t entry_ns;        /* time of the current call's entry reading */
    long long entry[PW_MAX_EVENTS], last[PW_MAX_EVENTS];
} th;

static void call_enter(void);
static void thread_end(void *unused);
static void call_leave(pw_sitetab *t, pw_site *s);
static void app_begin(void);
static int read_events(int64_t *out, int max);

static const char *papi_err(int rc)
{
    const char *s = papi.strerror ? papi.strerror(rc) : NULL;
    return s ? s : "PAPI error";
}

static unsigned long self_id(void) { return (unsigned long)pthread_self(); }

/* The kernel software event's config of a name of kernel_events.json (perf::NAME or NAME,
 * any case), -1 when it is none. */
static int kernel_event(const char *name)
{
    static const struct {
        const char *name;
        int config;
    } events[] = {
#define KERNEL_EVENT(n, c) {n, c},
        PW_KERNEL_EVENT_LIST(KERNEL_EVENT)
#undef KERNEL_EVENT
    };
    if (strncasecmp(name, "perf::", 6) == 0)
        name += 6;
    for (size_t i = 0; i < sizeof events / sizeof *events; i++)
        if (strcasecmp(name, events[i].name) == 0)
            return events[i].config;
    return -1;
}

/* The software event config counted in the calling thread from now, alone (no group: see
 * the top), as PAPI's perf_event component opens its perf:: events: PAPI's default domain,
 * user level (which unprivileged users may count at perf_event_paranoid 2; a fault is
 * charged to user level when the program's code caused it, and TASK-CLOCK counts the
 * thread's time in the kernel as well). A read gives its count alone. */
static int kernel_open(int config)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = (unsigned)config;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Why the kernel refused a software event (errno of perf_event_open). */
static const char *kernel_err(int err, char *buf, size_t n)
{
    if (err == EACCES || err == EPERM) {
        FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
        int level = 0, have = f && fscanf(f, "%d", &level) == 1;
        if (f)
            fclose(f);
        if (have) {
            snprintf(buf, n, "%s; kernel.perf_event_paranoid is %d", strerror(err), level);
            return buf;
        }
    }
    return strerror(err);
}

/* Whether libpfm4, through which PAPI's perf_event component knows events, knows a core
 * PMU of this processor other than Intel's architectural one: PAPI takes its presets from
 * that PMU, and disables the component without one. -1: cannot tell (libpfm4's
 * pfm_get_pmu_info, found through PAPI's handle: its dependency, or built into it). */
static int libpfm4_knows_processor(void)
{
    static int known = -2;
    if (known != -2)
        return known;
    int (*pmu_info)(int, void *);
    *(void **)&pmu_info = dlsym(papi.lib, "pfm_get_pmu_info");
    known = pmu_info ? 0 : -1;
    /* libpfm4's pfm_pmu_info_t (ABI version 0, checked through its size field) */
    struct {
        const char *name, *desc;
        size_t size;
        int pmu, type, nevents, first_event, max_encoding, num_cntrs, num_fixed_cntrs;
        unsigned flags; /* bit 0: is_present */
    } info;
    enum { PFM_ERR_INVAL_ = -2, PFM_PMU_TYPE_CORE_ = 1 };
    for (int i = 0; pmu_info && i < 4096 && known == 0; i++) {
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        int rc = pmu_info(i, &info);
        if (rc == PFM_ERR_INVAL_) /* past the last PMU libpfm4 has */
            break;
        known = rc == 0 && (info.flags & 1) && info.type == PFM_PMU_TYPE_CORE_ && info.name &&
                strcmp(info.name, "ix86arch") != 0;
    }
    return known;
}

/* What to add to PAPI's reason for an event of PAPI's perf_event component (code; -1: an
 * event PAPI does not know) on a processor libpfm4 does not know. */
static const char *pmu_note(int code)
{
    static const char note[] =
        "; libpfm4 does not know this processor: PAPI counts none of its hardware events or "
        "presets here";
    int (*component_index)(const char *);
    *(void **)&component_index = dlsym(papi.lib, "PAPI_get_component_index");
    int perf_event = component_index ? component_index("perf_event") : -1;
    if (code != -1 && (perf_event < 0 || papi.event_component(code) != perf_event))
        return "";
    return libpfm4_knows_processor() == 0 ? note : "";
}

#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&papi.field = dlsym(papi.lib, name);                                             \
        if (!papi.field) {                                                                         \
            pw_log("--counters: %s lacks %s; no counters", lib, name);                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Whether the event can be counted together with those kept so far: a probe event set
 * with all of them is started, then dropped; PAPI's code of the failure otherwise. */
static int countable(const char *ev)
{
    int es = PAPI_NULL_, rc = papi.create_eventset(&es);
    for (int e = 0; rc == PAPI_OK_ && e < pw_nevents; e++)
        if (kconfig[e] < 0)
            rc = papi.add_named_event(es, pw_event_names[e]);
    if (rc == PAPI_OK_)
        rc = papi.add_named_event(es, ev);
    if (rc == PAPI_OK_ && (rc = papi.start(es)) == PAPI_OK_) {
        long long v[PW_MAX_EVENTS + 1];
        papi.stop(es, v);
    }
    if (es != PAPI_NULL_) {
        papi.cleanup_eventset(es);
        papi.destroy_eventset(&es);
    }
    return rc;
}

/* Whether the kernel counts the software event config in this thread: 0, or its errno. */
static int kernel_countable(int config)
{
    int fd = kernel_open(config);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

/* Whether this process is the run's first (rank 0 by its launcher's environment, or not
 * launched by MPI): it alone speaks for all, which start alike. */
static int first_process(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v)
            return strcmp(v, "0") == 0;
    }
    return 1;
}

static void start(void)
{
    if (!pw_opt.counters || !*pw_opt.counters)
        return;
    static const char *libs[] = {"libpapi.so.7.1", "libpapi.so.7.0", "libpapi.so.7",
                                 "libpapi.so",     "libpapi.so.6.0", "libpapi.so.5"};
    const char *lib = NULL;
    for (size_t i = 0; i < sizeof libs / sizeof *libs && !papi.lib; i++)
        if ((papi.lib = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL)))
            lib = libs[i];
    if (!papi.lib) {
        pw_log("--counters: PAPI (libpapi.so) not found; no counters");
        return;
    }
    SYM(library_init, "PAPI_library_init");
    SYM(thread_init, "PAPI_thread_init");
    SYM(multiplex_init, "PAPI_multiplex_init");
    SYM(create_eventset, "PAPI_create_eventset");
    SYM(assign_component, "PAPI_assign_eventset_component");
    SYM(set_multiplex, "PAPI_set_multiplex");
    SYM(add_named_event, "PAPI_add_named_event");
    SYM(name_to_code, "PAPI_event_name_to_code");
    SYM(event_component, "PAPI_get_event_component");
    SYM(start, "PAPI_start");
    SYM(stop, "PAPI_stop");
    SYM(cleanup_eventset, "PAPI_cleanup_eventset");
    SYM(destroy_eventset, "PAPI_destroy_eventset");
    SYM(read, "PAPI_read");
    SYM(strerror, "PAPI_strerror");
    /* PAPI_VER_CURRENT is (major << 24 | minor << 16); PAPI_library_init answers it
     * back only when it matches the library's own */
    int ok = 0;
    for (int major = 7; major >= 5 && !ok; major--)
        for (int minor = 3; minor >= 0 && !ok; minor--) {
            int v = (major << 24) | (minor << 16);
            ok = papi.library_init(v) == v;
        }
    if (!ok) {
        pw_log("--counters: %s did not initialise (version 5-7 expected); no counters", lib);
        return;
    }
    if (papi.thread_init(self_id) != PAPI_OK_) {
        pw_log("--counters: PAPI_thread_init failed; no counters");
        return;
    }
    if (pw_opt.counters_multiplex && papi.multiplex_init() != PAPI_OK_)
        pw_log("--counters-multiplex: PAPI_multiplex_init failed; counting without");
    char list[4096];
    snprintf(list, sizeof list, "%s", pw_opt.counters);
    char *save = NULL;
    for (char *ev = strtok_r(list, ",", &save); ev; ev = strtok_r(NULL, ",", &save)) {
        int code, rc, kc = -1;
        char why[160];
        if (pw_nevents == PW_MAX_EVENTS) {
            pw_log("--counters: at most %d events; %s and later ones ignored", PW_MAX_EVENTS, ev);
            break;
        }
        /* the kernel's software events ours (see the top), the others PAPI's */
        if ((kc = kernel_event(ev)) < 0 && (rc = papi.name_to_code(ev, &code)) != PAPI_OK_) {
            pw_log("--counters: %s: %s%s (see perfweave components; papi_native_avail)", ev,
                   papi_err(rc), pmu_note(-1));
            continue;
        }
        if (kc >= 0 && (rc = kernel_countable(kc)) != 0) {
            if (first_process())
                pw_log("--counters: %s cannot be counted here (perf_event_open: %s); counting "
                       "the others",
                       ev, kernel_err(rc, why, sizeof why));
            continue;
        }
        if (kc < 0 && (rc = countable(ev)) != PAPI_OK_) {
            if (first_process())
                pw_log("--counters: %s cannot be counted here (PAPI: %s%s); counting the others",
                       ev, papi_err(rc), pmu_note(code));
            continue;
        }
        kconfig[pw_nevents] = kc;
        *(kc >= 0 ? &nkernel_events : &npapi_events) += 1;
        snprintf(names_buf[pw_nevents], sizeof names_buf[0], "%s", ev);
        pw_event_names[pw_nevents] = names_buf[pw_nevents];
        pw_nevents++;
    }
    if (nkernel_events)
        pthread_key_create(&kernel_key, thread_end);
    if (pw_nevents) {
        PW_HOOK_OFFER(pw_counters_call_enter, call_enter);
        PW_HOOK_OFFER(pw_counters_call_leave, call_leave);
        PW_HOOK_OFFER(pw_counters_app_begin, app_begin);
        PW_HOOK_OFFER(pw_counters_read_events, read_events);
    }
}

/* The calling thread's PAPI event set for the events PAPI counts, created and started
 * (th.npapi of them in it; none when it cannot start). */
static void papi_thread_start(void)
{
    th.es = PAPI_NULL_;
    th.npapi = 0;
    int rc = papi.create_eventset(&th.es), first = 0;
    while (kconfig[first] >= 0)
        first++;
    if (rc == PAPI_OK_ && pw_opt.counters_multiplex) {
        /* PAPI's order: bind the empty set to the events' component, then multiplex */
        int code = 0, mrc;
        papi.name_to_code(pw_event_names[first], &code);
        mrc = papi.assign_component(th.es, papi.event_component(code));
        if (mrc == PAPI_OK_)
            mrc = papi.set_multiplex(th.es);
        static int said;
        if (mrc != PAPI_OK_ && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            pw_log("--counters-multiplex: PAPI cannot multiplex these events here (%s); "
                   "counting them without",
                   papi_err(mrc));
    }
    /* an event this thread cannot add is left out (reads as 0), the others counted */
    for (int e = 0; rc == PAPI_OK_ && e < pw_nevents; e++) {
        if (kconfig[e] >= 0)
            continue;
        int arc = papi.add_named_event(th.es, pw_event_names[e]);
        th.slot[e] = arc == PAPI_OK_ ? th.npapi++ : -1;
        static int said;
        if (arc != PAPI_OK_ && first_process() && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            pw_log("--counters: cannot count %s in a thread (%s); counting the others%s",
                   pw_event_names[e], papi_err(arc),
                   pw_nevents > 1 ? " (or try fewer events, or --counters-multiplex)" : "");
    }
    if (rc == PAPI_OK_ && th.npapi && (rc = papi.start(th.es)) != PAPI_OK_)
        pw_log("--counters: PAPI_start failed in this thread (%s)", papi_err(rc));
    if (rc != PAPI_OK_) {
        th.npapi = 0;
        for (int e = 0; e < pw_nevents; e++)
            if (kconfig[e] < 0)
                th.slot[e] = -1;
    }
}

/* The calling thread's kernel events, each read alone (th.nkern of them). */
static void kernel_thread_start(void)
{
    th.nkern = 0;
    for (int e = 0; e < pw_nevents; e++) {
        if (kconfig[e] < 0)
            continue;
        int fd = kernel_open(kconfig[e]);
        th.slot[e] = fd >= 0 ? th.nkern : -1;
        if (fd >= 0)
            th.kfd[th.nkern++] = fd;
        static int said;
        char why[160];
        if (fd < 0 && first_process() && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            pw_log("--counters: cannot count %s in a thread (perf_event_open: %s); counting the "
                   "others",
                   pw_event_names[e], kernel_err(errno, why, sizeof why));
    }
    if (th.nkern)
        pthread_setspecific(kernel_key, &th); /* closed at the thread's end */
}

/* The calling thread's counting, started on its first measured call. */
static int thread_start(void)
{
    if (npapi_events)
        papi_thread_start();
    if (nkernel_events)
        kernel_thread_start();
    th.state = th.npapi || th.nkern ? 1 : -1;
    memset(th.last, 0, sizeof th.last);
    th.last_ns = pw_now();
    return th.state;
}

/* A thread that counted kernel events ends (pthread key destructor): its descriptors go. */
static void thread_end(void *unused)
{
    th.busy = 1; /* a sampler's handler reads nothing from now */
    th.state = -1;
    for (int k = 0; k < th.nkern; k++)
        close(th.kfd[k]);
    th.nkern = 0;
}

/* In the child of a fork: the thread's kernel events count its parent's thread, and the
 * child makes no measured calls (MPI forbids a forked child MPI calls): they go. */
static void in_child(void)
{
    for (int k = 0; k < th.nkern; k++)
        close(th.kfd[k]);
    th.nkern = 0;
    for (int e = 0; e < pw_nevents; e++)
        if (kconfig[e] >= 0)
            th.slot[e] = -1;
    if (th.state > 0 && !th.npapi)
        th.state = -1;
}

/* The thread's counts of every event, in --counters order (0: not counted here). */
static int read_counters(long long *out)
{
    if (th.npapi == pw_nevents) /* every event counted by PAPI: its order is ours */
        return papi.read(th.es, out);
    long long raw[PW_MAX_EVENTS];
    uint64_t kern[PW_MAX_EVENTS];
    int rc = th.npapi ? papi.read(th.es, raw) : PAPI_OK_;
    if (rc != PAPI_OK_)
        return rc;
    for (int k = 0; k < th.nkern; k++)
        if (read(th.kfd[k], &kern[k], sizeof *kern) != (ssize_t)sizeof *kern)
            return PAPI_NULL_;
    for (int e = 0; e < pw_nevents; e++)
        out[e] = th.slot[e] < 0    ? 0
                 : kconfig[e] >= 0 ? (long long)kern[th.slot[e]]
                                   : raw[th.slot[e]];
    return PAPI_OK_;
}

/* A thread begins to be measured (its start, when a module sees threads start; its
 * first recorded call): its event set, so that samples can read it too. */
static void thread_begin(void)
{
    if (pw_nevents && th.state == 0)
        thread_start();
}

/* The program's measured part begins (MPI_Init returned) in this thread. */
static void app_begin(void)
{
    if (pw_nevents && th.state == 0) {
        thread_start();
    } else if (pw_nevents && th.state > 0) {
        /* already counting (since the thread's start): the call sites' "before" counts
         * start from now, as when counting starts here */
        th.busy = 1;
        if (read_counters(th.last) == PAPI_OK_)
            th.last_ns = pw_now();
        th.busy = 0;
    }
}

static void call_enter(void)
{
    if (PW_UNLIKELY(th.state <= 0) && (th.state < 0 || thread_start() < 0))
        return;
    int64_t now = pw_now();
    if (now - th.last_ns < pw_opt.counters_interval_us * 1000)
        return; /* too soon after the last read: this call's counts go to the next */
    th.busy = 1;
    th.entered = read_counters(th.entry) == PAPI_OK_;
    th.busy = 0;
    th.entry_ns = now;
}

static void call_leave(pw_sitetab *t, pw_site *s)
{
    if (!th.entered)
        return;
    th.entered = 0;
    long long now[PW_MAX_EVENTS];
    th.busy = 1;
    int rc = read_counters(now);
    th.busy = 0;
    if (rc != PAPI_OK_)
        return;
    int64_t now_ns = pw_now();
    int64_t *c = pw_site_events(t, s);
    for (int e = 0; e < pw_nevents; e++) {
        c[e] += now[e] - th.entry[e];
        c[pw_nevents + e] += th.entry[e] - th.last[e];
        th.last[e] = now[e];
    }
    /* the wall time these counts cover, for rates: inside, before */
    c[2 * pw_nevents] += now_ns - th.entry_ns;
    c[2 * pw_nevents + 1] += th.entry_ns - th.last_ns;
    th.last_ns = now_ns;
}

/* From a signal handler (a sampler's): the thread's counters now (cumulative since its
 * event set started), or 0 when they cannot be read safely (no event set in this thread,
 * or the thread was itself inside a PAPI call). */
static int read_events(int64_t *out, int max)
{
    if (th.state != 1 || th.busy)
        return 0;
    long long v[PW_MAX_EVENTS];
    if (read_counters(v) != PAPI_OK_)
        return 0;
    for (int e = 0; e < pw_nevents && e < max; e++)
        out[e] = v[e];
    return 1;
}

const pw_module pw_module_counters = {
    .name = "counters",
    .version = 0, /* writes no file of its own: counts go into the profile */
    .start = start,
    .thread_start = thread_begin,
    .fork_child = in_child,
};

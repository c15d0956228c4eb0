/*
 * Wall-clock sampling of call stacks (--sample): a POSIX timer per thread
 * (CLOCK_MONOTONIC, delivered to that thread with SIGEV_THREAD_ID) raises a real-time
 * signal of our own, never SIGPROF or SIGALRM, so programs with their own handlers for
 * those keep them. The handler records the time, what the thread was doing (computation,
 * or the family of the MPI call it is in: the core's pw_thread_activity, kept by the MPI
 * wrappers) and the stack by frame pointers, each frame checked to lie in the thread's
 * own stack.
 *
 * Memory is bounded: each thread has a buffer of --sample-capacity samples; when it is
 * full, every other sample is dropped (the oldest kept) and the thread's interval doubles,
 * so about capacity/2..capacity samples cover the whole run, evenly, whatever its length.
 *
 * The handler is async-signal-safe: no locks, no allocation, only the thread's own buffer
 * and timer_settime. Threads sampled: the main thread from the start, every thread the
 * program creates (pthread_create, so OpenMP's too) from its start, any other thread
 * from its first MPI call, and the threads that exist when the module starts (a library's
 * constructor started them before this runtime's: OpenBLAS's workers) from then on. At exit the samples are written to samples/rank-R.samples or
 * samples/HOST.PID.samples (+ .json), addresses as (module, offset).
 *
 * This file is the sampler and its dump; the stack walks, the program's signal handlers
 * and the blocking-call wrappers are the module's other files (samples_internal.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "samples.h"
#include "counters.h" /* the hooks it calls */
#include "regions.h"
#include "perfweave/format/samples.h" /* its files: kinds, records, versions */
#include "samples_internal.h"
#include "wrap.h"

#define PW_SAMPLE_THREADS 256
static pid_t start_pid;

struct sample {
    int64_t t;
    int16_t activity, depth;
    int32_t have_ctr; /* counters[] read */
    int64_t counters[PW_SAMPLE_COUNTERS];
    uintptr_t frames[PW_SAMPLE_FRAMES]; /* [0]: the interrupted pc + 1 (a "return" address) */
};

static thr threads[PW_SAMPLE_THREADS];
static int nthreads;            /* slots claimed: beyond PW_SAMPLE_THREADS, threads not sampled */
static int no_timer, no_memory; /* threads not sampled: timer_create or the buffer failed */
PW_TLS thr *pw_samples_self;
int pw_samples_sig;
int pw_samples_started;
static int nmaps;                /* mappings snapshotted for threads found running at start */
static thr *adopt(uintptr_t sp); /* such a thread's slot, taken by its handler */
static pw_counters_read_events_fn *read_events; /* NULL without counters */
static pw_regions_off_fn *measure_off;          /* the program turned measurement off */

/* Arm the thread's timer once, for the interval +-50 % at random: a fixed period would
 * alias with a program's own periodic phases (and keep sampling the same one). */
static void set_interval(thr *t)
{
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    int64_t ns = t->interval_ns / 2 + (int64_t)(t->rng % (uint64_t)(t->interval_ns + 1));
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = ns / 1000000000LL;
    its.it_value.tv_nsec = ns % 1000000000LL;
    timer_settime(t->timer, 0, &its, NULL);
}

static void on_sample(int signo, siginfo_t *si, void *ucv)
{
    (void)signo;
    (void)si;
    int saved = errno;
    thr *t = pw_samples_self;
    pw_samples_note_interruption(ucv);
    if (!t && nmaps) {
        uintptr_t pc0, fp0, sp0;
        context_regs(ucv, &pc0, &fp0, &sp0);
        t = adopt(sp0);
    }
    if (!t || !t->ok) {
        errno = saved;
        return;
    }
    if (measure_off && measure_off()) { /* perfweave_measure_off, MPI_Pcontrol(0) */
        set_interval(t);
        errno = saved;
        return;
    }
    if (t->n == t->cap) { /* full: keep every other sample, sample half as often */
        for (int i = 0; i < t->cap / 2; i++)
            t->buf[i] = t->buf[2 * i];
        t->n = t->cap / 2;
        t->thinned++;
        t->interval_ns *= 2;
    }
    sample *s = &t->buf[t->n];
    s->t = pw_now();
    s->activity = (int16_t)pw_thread_activity;
    s->have_ctr = read_events ? read_events(s->counters, PW_SAMPLE_COUNTERS) : 0;
    s->depth = (int16_t)pw_samples_stack(t, ucv, s->frames);
    t->n++;
    t->taken++;
    if (!pw_samples_nudge(t, ucv))
        set_interval(t); /* the next one */
    errno = saved;
}

/* Threads that exist when the module starts were not made through pthread_create's
 * trampoline: a library's constructor ran before the runtime's (libopenblas, loaded as
 * the program's dependency, starts its workers there). Each gets a slot and a timer from
 * the starting thread; its handler adopts the slot at the first sample (pw_samples_self is the
 * thread's own). Their stacks' bounds are the mapping that holds the interrupted stack
 * pointer, from a snapshot of /proc/self/maps taken here. The runtime's own threads are
 * named "perfweave..." (pw_thread_name) and left out. */
#define PW_MAX_MAPS 2048
static uintptr_t maps_lo[PW_MAX_MAPS], maps_hi[PW_MAX_MAPS];

static void snapshot_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    while (nmaps < PW_MAX_MAPS && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r' &&
            perms[1] == 'w') {
            maps_lo[nmaps] = lo;
            maps_hi[nmaps] = hi;
            nmaps++;
        }
    }
    fclose(f);
}

static int runtime_thread(int tid)
{
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1; /* gone */
    int got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    return got && strncmp(name, "perfweave", 9) == 0;
}

static int arm(thr *t);

static void adopt_existing_threads(void)
{
    int me = (int)syscall(SYS_gettid), any = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid <= 0 || tid == me || runtime_thread(tid))
            continue;
        int i = __atomic_fetch_add(&nthreads, 1, __ATOMIC_RELAXED);
        if (i >= PW_SAMPLE_THREADS)
            break;
        thr *t = &threads[i];
        t->tid = tid;
        t->adopted = 1;
        if (arm(t) == 0)
            any = 1;
    }
    closedir(d);
    if (any)
        snapshot_maps();
}

/* In the handler: the slot another thread set up for this one, with its stack's bounds
 * (the mapping holding sp); NULL if none. */
static thr *adopt(uintptr_t sp)
{
    int tid = (int)syscall(SYS_gettid);
    int n = nthreads < PW_SAMPLE_THREADS ? nthreads : PW_SAMPLE_THREADS;
    for (int i = 0; i < n; i++) {
        thr *t = &threads[i];
        if (t->adopted && t->tid == tid && __atomic_load_n(&t->ok, __ATOMIC_ACQUIRE)) {
            /* a mapping of the snapshot may be the stack merged with a neighbour, which
             * may be gone since: the top of the stack is its thread's descriptor, where
             * the C library puts it (above the static TLS, at the top of the block) */
            uintptr_t top = (uintptr_t)pthread_self();
            for (int k = 0; k < nmaps; k++)
                if (sp >= maps_lo[k] && sp < maps_hi[k]) {
                    t->stack_lo = maps_lo[k];
                    t->stack_hi = top > sp && top < maps_hi[k] ? top : maps_hi[k];
                    break;
                }
            pw_samples_self = t;
            return t;
        }
    }
    return NULL;
}

/* Sample the calling thread from now on (the module's thread_start). */
static void sample_thread(void)
{
    if (!pw_samples_started || pw_samples_self)
        return;
    if (nmaps) { /* an existing thread already given a slot: its own, with its bounds */
        int tid = (int)syscall(SYS_gettid);
        for (int k = 0; k < nthreads && k < PW_SAMPLE_THREADS; k++)
            if (threads[k].adopted && threads[k].tid == tid) {
                uintptr_t here = (uintptr_t)__builtin_frame_address(0);
                adopt(here);
                return;
            }
    }
    int i = __atomic_fetch_add(&nthreads, 1, __ATOMIC_RELAXED);
    if (i >= PW_SAMPLE_THREADS)
        return;
    thr *t = &threads[i];
    t->cap = pw_opt.sample_capacity < 16 ? 16 : (int)pw_opt.sample_capacity;
    t->cap &= ~1;
    t->buf = pw_alloc((size_t)t->cap * sizeof(sample));
    if (!t->buf) {
        __atomic_fetch_add(&no_memory, 1, __ATOMIC_RELAXED);
        return;
    }
    pthread_attr_t a;
    void *lo = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &lo, &size);
        pthread_attr_destroy(&a);
    }
    t->stack_lo = (uintptr_t)lo;
    t->stack_hi = (uintptr_t)lo + size;
    t->tid = (int)syscall(SYS_gettid);
    pw_samples_warm_unwind(t);
    pw_samples_self = t;
    arm(t);
}

/* A slot's timer, to its thread (t->tid), and its first interval; 0 on success. */
static int arm(thr *t)
{
    if (!t->buf) {
        t->cap = pw_opt.sample_capacity < 16 ? 16 : (int)pw_opt.sample_capacity;
        t->cap &= ~1;
        t->buf = pw_alloc((size_t)t->cap * sizeof(sample));
        if (!t->buf) {
            __atomic_fetch_add(&no_memory, 1, __ATOMIC_RELAXED);
            return -1;
        }
    }
    t->pid = getpid();
    t->cpu_ns = -1;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = pw_samples_sig;
    ev._sigev_un._tid = t->tid;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t->timer) != 0) {
        pw_log("--sample: cannot create a timer for thread %d", t->tid);
        __atomic_fetch_add(&no_timer, 1, __ATOMIC_RELAXED);
        return -1;
    }
    t->interval_ns = (pw_opt.sample_interval_ms > 0 ? pw_opt.sample_interval_ms : 10) * 1000000LL;
    t->rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)t->tid << 17) ^ (uint64_t)pw_now();
    __atomic_store_n(&t->ok, 1, __ATOMIC_RELEASE);
    set_interval(t);
    return 0;
}

/* The CPU time of thread tid of this process (ns), -1 when it is gone: its clock by
 * the kernel's thread CPU-clock id (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), what
 * pthread_getcpuclockid gives), which any thread of the process may read. */
static int64_t thread_cpu_ns(int tid)
{
    struct timespec ts;
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
    if (tid <= 0 || clock_gettime(clock, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The module's dump: the samples, at the process's end (not from a signal handler: the
 * writing allocates; a process killed by a signal has no samples). */
static int write_samples(int state, int in_signal)
{
    (void)state;
    if (in_signal || !pw_samples_started ||
        getpid() != start_pid) /* a forked child has no timers */
        return 0;
    pw_samples_started = 0;
    int n = nthreads < PW_SAMPLE_THREADS ? nthreads : PW_SAMPLE_THREADS;
    for (int i = 0; i < n; i++)
        if (threads[i].ok) {
            threads[i].ok = 0;
            timer_delete(threads[i].timer);
        }
    char path[4300];
    pw_objects_refresh();
    pw_process_path(path, sizeof path, "samples", ".samples");
    pw_file out;
    pw_file_open(&out, path);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        thr *t = &threads[i];
        for (int k = 0; k < t->n; k++) {
            const sample *s = &t->buf[k];
            pw_sample_rec r;
            memset(&r, 0, sizeof r);
            r.t = s->t;
            r.thread = i;
            r.activity = s->activity;
            r.depth = s->depth;
            for (int c = 0; c < PW_SAMPLE_COUNTERS; c++)
                r.counters[c] = s->have_ctr && c < pw_nevents ? s->counters[c] : -1;
            for (int f = 0; f < s->depth; f++) {
                uint64_t off = 0;
                r.object[f] = pw_object_of(s->frames[f], &off);
                r.offset[f] = r.object[f] < 0 ? (int64_t)s->frames[f] : (int64_t)off;
            }
            if (pw_file_write(&out, &r, sizeof r) != 0)
                break;
            total++;
        }
    }
    if (pw_file_close(&out) != 0)
        return 0; /* marked; a JSON without its records would describe nothing */
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_SAMPLES_MAGIC, PW_SAMPLES_VERSION);
    pw_json_int(&j, "frames", PW_SAMPLE_FRAMES);
    pw_json_strs(&j, "counters", pw_event_names,
                 (size_t)(pw_nevents < PW_SAMPLE_COUNTERS ? pw_nevents : PW_SAMPLE_COUNTERS));
    pw_json_int(&j, "samples", total);
    int64_t fallbacks = 0;
    for (int i = 0; i < n; i++)
        fallbacks += threads[i].fallbacks;
    pw_json_str(&j, "unwinder", pw_samples_unwinder());
    pw_json_int(&j, "unwind_fallbacks", fallbacks); /* samples by frame pointers instead */
    pw_json_open(&j, "dropped", '{');               /* threads never sampled, and why */
    pw_json_int(&j, "threads", nthreads > PW_SAMPLE_THREADS ? nthreads - PW_SAMPLE_THREADS : 0);
    pw_json_int(&j, "timers", no_timer);
    pw_json_int(&j, "memory", no_memory);
    pw_json_close(&j);
    pw_json_int(&j, "t_start", pw_t_start);
    pw_json_int(&j, "t_end", pw_now());
    pw_json_open(&j, "activities", '['); /* the activities, by index */
#define PW_NAME(name, value, str) pw_json_str(&j, NULL, str);
#define PW_MPI_NAME(name, value, str) pw_json_str(&j, NULL, "mpi_" str);
    PW_ACTIVITIES(PW_NAME, PW_MPI_NAME)
#undef PW_NAME
#undef PW_MPI_NAME
    pw_json_close(&j);
    pw_json_open(&j, "threads", '[');
    for (int i = 0; i < n; i++) {
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "tid", threads[i].tid);
        pw_json_int(&j, "taken", threads[i].taken);
        pw_json_int(&j, "kept", threads[i].n);
        pw_json_int(&j, "thinned", threads[i].thinned);
        pw_json_int(&j, "interval_ns", threads[i].interval_ns);
        /* the thread's CPU time, read now while it runs, else when its function returned */
        int64_t cpu = thread_cpu_ns(threads[i].tid);
        pw_json_int(&j, "cpu_ns", cpu >= 0 ? cpu : threads[i].cpu_ns);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_objects_json(&j, "objects"); /* the loaded objects: path, build-id */
    pw_json_end(&j);
    pw_process_path(path, sizeof path, "samples", ".json");
    pw_buf_to_file(&b, path);
    return 0;
}

/* Threads the program creates are sampled from their first instruction: the new thread
 * runs a trampoline that starts its timer, then the program's function. */
typedef struct start_arg {
    void *(*fn)(void *);
    void *arg;
} start_arg;

/* The thread's CPU time kept in its slot as it ends, which the dump cannot read once the
 * thread is gone: by a cleanup handler, so that a thread ended by pthread_exit (or
 * cancelled) keeps it too, not only one whose start routine returned. */
static void keep_cpu_time(void *unused)
{
    (void)unused;
    thr *t = pw_samples_self;
    if (t)
        t->cpu_ns = thread_cpu_ns(t->tid);
}

static void *trampoline(void *p)
{
    start_arg a = *(start_arg *)p;
    free(p);
    pw_thread_begin(); /* every module's start of a thread: ours samples it */
    void *ret;
    pthread_cleanup_push(keep_cpu_time, NULL);
    ret = a.fn(a.arg);
    pthread_cleanup_pop(1);
    return ret;
}

/* Threads of the MPI library and its runtime (progress, PMIx, UCX, libevent) are not
 * the program's work, and interrupting their poll loops would only change them. */
static int library_thread(const void *caller)
{
    static const char *skip[] = {"libmpi",       "libopen-",  "libpmix",  "libucs",   "libucp",
                                 "libuct",       "libfabric", "libevent", "libhwloc", "libpsm",
                                 "libperfweave", "libpapi",   "libpcp",   "libnvidia"};
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strncmp(base, skip[i], strlen(skip[i])) == 0)
            return 1;
    return 0;
}

PW_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    PW_REAL(pthread_create);
    if (!pw_samples_started || library_thread(__builtin_return_address(0)))
        return real_pthread_create(thread, attr, fn, arg);
    start_arg *a = malloc(sizeof *a);
    if (!a)
        return real_pthread_create(thread, attr, fn, arg);
    a->fn = fn;
    a->arg = arg;
    int rc = real_pthread_create(thread, attr, trampoline, a);
    if (rc != 0)
        free(a);
    return rc;
}

/* In the core's constructor (the process is measured). */
static void start(void)
{
    if (!pw_opt.sample)
        return;
    pw_samples_sig = SIGRTMAX - 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask); /* the program's signals wait until it returns: ended_a_call */
    if (sigaction(pw_samples_sig, &sa, NULL) != 0) {
        pw_log("--sample: cannot install the handler of signal %d; no samples", pw_samples_sig);
        return;
    }
    /* the counters module (before this one in modules.def) offered it in its start */
    read_events = PW_HOOK_FIND(pw_counters_read_events);
    measure_off = PW_HOOK_FIND(pw_regions_off); /* regions: also before it */
    pw_samples_unwinder_load();
    pw_samples_handlers_resolve();
    pw_samples_started = 1;
    pw_want_anchor = 1; /* MPI wrappers keep their frame for fp_walk */
    start_pid = getpid();
    pw_thread_begin(); /* the main thread, from now (and the other modules' start in it) */
    adopt_existing_threads();
}

const pw_module pw_module_samples = {
    .name = "samples",
    .version = PW_SAMPLES_VERSION,
    .start = start,
    .thread_start = sample_thread,
    .dump = write_samples,
};

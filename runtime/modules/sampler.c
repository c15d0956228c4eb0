/*
 * Wall-clock sampling of call stacks (--sample): a POSIX timer per thread
 * (CLOCK_MONOTONIC, delivered to that thread with SIGEV_THREAD_ID) raises a real-time
 * signal of our own, never SIGPROF or SIGALRM, so programs with their own handlers for
 * those keep them. The handler records the time, what the thread was doing (computation,
 * or the family of the MPI call it is in: pw_sample_state, kept by the MPI wrappers) and
 * the stack by frame pointers, each frame checked to lie in the thread's own stack.
 *
 * Memory is bounded: each thread has a buffer of --sample-capacity samples; when it is
 * full, every other sample is dropped (the oldest kept) and the thread's interval doubles,
 * so about capacity/2..capacity samples cover the whole run, evenly, whatever its length.
 *
 * The handler is async-signal-safe: no locks, no allocation, only the thread's own buffer
 * and timer_settime. Threads sampled: the main thread from the start, every thread the
 * program creates (pthread_create, so OpenMP's too) from its start, and any other thread
 * from its first MPI call. At exit the samples are written to samples/rank-R.samples or
 * samples/HOST.PID.samples (+ .json), addresses as (module, offset).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "pw.h"

#define PW_SAMPLE_FRAMES 32
#define PW_SAMPLE_COUNTERS 4 /* the first --counters events, read at each sample */
#define PW_SAMPLE_THREADS 256

PW_TLS int pw_sample_state; /* 0: computation; 1 + family: in an MPI call; SLEEP */
#define STATE_SLEEP (1 + PW_ACT_FAMILIES)
static PW_TLS int interrupted; /* our signal arrived (sleep wrappers resume after it) */
int pw_rank = -1;
static pid_t start_pid;

typedef struct sample {
    int64_t t;
    int16_t state, depth;
    int32_t have_ctr; /* counters[] read */
    int64_t counters[PW_SAMPLE_COUNTERS];
    uintptr_t frames[PW_SAMPLE_FRAMES]; /* [0]: the interrupted pc + 1 (a "return" address) */
} sample;

typedef struct thr {
    timer_t timer;
    int ok, tid;
    uintptr_t stack_lo, stack_hi;
    int64_t interval_ns;
    uint64_t rng;     /* xorshift state: jitter of each interval */
    int n, cap, thinned;
    int64_t taken, dropped;
    sample *buf;
} thr;

static thr threads[PW_SAMPLE_THREADS];
static int nthreads;
static PW_TLS thr *self;
static int sig;
static int started;

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
    thr *t = self;
    interrupted = 1;
    if (!t || !t->ok) {
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
    s->state = (int16_t)pw_sample_state;
    s->have_ctr = pw_nctr ? pw_counters_sample(s->counters, PW_SAMPLE_COUNTERS) : 0;
    int d = 0;
#if defined(__x86_64__)
    ucontext_t *uc = ucv;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    ucontext_t *uc = ucv;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.regs[29];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.sp;
#else
    uintptr_t pc = 0, fp = 0, sp = 0;
    (void)ucv;
#endif
    if (pc)
        s->frames[d++] = pc + 1;
    /* frame pointers: [fp] = caller's fp, [fp + 8] = return address; every fp must lie
     * in this thread's stack, above the stack pointer, and grow */
    while (d < PW_SAMPLE_FRAMES && fp >= sp && fp >= t->stack_lo &&
           fp + 2 * sizeof(uintptr_t) <= t->stack_hi && (fp & (sizeof(uintptr_t) - 1)) == 0) {
        uintptr_t next = ((uintptr_t *)fp)[0], ret = ((uintptr_t *)fp)[1];
        if (ret < 4096)
            break;
        s->frames[d++] = ret;
        if (next <= fp)
            break;
        fp = next;
    }
    s->depth = (int16_t)d;
    t->n++;
    t->taken++;
    set_interval(t); /* the next one */
    errno = saved;
}

/* Sample the calling thread from now on. */
void pw_sampler_thread(void)
{
    if (!started || self)
        return;
    int i = __atomic_fetch_add(&nthreads, 1, __ATOMIC_RELAXED);
    if (i >= PW_SAMPLE_THREADS)
        return;
    thr *t = &threads[i];
    t->cap = pw_opt.sample_capacity < 16 ? 16 : (int)pw_opt.sample_capacity;
    t->cap &= ~1;
    t->buf = pw_alloc((size_t)t->cap * sizeof(sample));
    if (!t->buf)
        return;
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
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = sig;
    ev._sigev_un._tid = t->tid;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t->timer) != 0) {
        pw_log("--sample: cannot create a timer for thread %d", t->tid);
        return;
    }
    t->interval_ns = (pw_opt.sample_interval_ms > 0 ? pw_opt.sample_interval_ms : 10) * 1000000LL;
    t->rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)t->tid << 17) ^ (uint64_t)pw_now();
    self = t;
    pw_counters_begin(); /* --counters: this thread's event set, read at each sample */
    __atomic_store_n(&t->ok, 1, __ATOMIC_RELEASE);
    set_interval(t);
}

static void write_samples(void)
{
    if (!started || getpid() != start_pid) /* a forked child has no timers of ours */
        return;
    started = 0;
    int n = nthreads < PW_SAMPLE_THREADS ? nthreads : PW_SAMPLE_THREADS;
    for (int i = 0; i < n; i++)
        if (threads[i].ok) {
            threads[i].ok = 0;
            timer_delete(threads[i].timer);
        }
    const char *exp = pw_experiment_dir();
    char dir[4200], path[4400];
    snprintf(dir, sizeof dir, "%s/samples", exp);
    mkdir(dir, 0777);
    int rank = pw_rank;
    char stem[4400];
    if (rank >= 0)
        snprintf(stem, sizeof stem, "%s/rank-%d", dir, rank);
    else
        snprintf(stem, sizeof stem, "%s/%s.%d", dir, pw_hostname, (int)getpid());
    pw_objects_refresh();
    /* records: t, thread, state, depth, then PW_SAMPLE_FRAMES (module, offset) pairs */
    snprintf(path, sizeof path, "%s.samples", stem);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        thr *t = &threads[i];
        for (int k = 0; k < t->n; k++) {
            const sample *s = &t->buf[k];
            struct {
                int64_t t;
                int32_t thread;
                int16_t state, depth;
                int32_t module[PW_SAMPLE_FRAMES];
                int64_t offset[PW_SAMPLE_FRAMES];
                int64_t counters[PW_SAMPLE_COUNTERS]; /* -1: not read at this sample */
            } r;
            memset(&r, 0, sizeof r);
            r.t = s->t;
            r.thread = i;
            r.state = s->state;
            r.depth = s->depth;
            for (int c = 0; c < PW_SAMPLE_COUNTERS; c++)
                r.counters[c] = s->have_ctr && c < pw_nctr ? s->counters[c] : -1;
            for (int f = 0; f < s->depth; f++) {
                uint64_t off = 0;
                r.module[f] = pw_object_of(s->frames[f], &off);
                r.offset[f] = r.module[f] < 0 ? (int64_t)s->frames[f] : (int64_t)off;
            }
            if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
                break;
            total++;
        }
    }
    close(fd);
    pw_buf b = {0};
    pw_buf_puts(&b, "{\"format\": \"perfweave-samples\", \"version\": 2, \"rank\": ");
    pw_buf_int(&b, rank);
    pw_buf_puts(&b, ", \"pid\": ");
    pw_buf_int(&b, getpid());
    pw_buf_puts(&b, ", \"host\": ");
    pw_buf_jstr(&b, pw_hostname);
    pw_buf_puts(&b, ", \"frames\": ");
    pw_buf_int(&b, PW_SAMPLE_FRAMES);
    pw_buf_puts(&b, ", \"counters\": [");
    for (int c = 0; c < pw_nctr && c < PW_SAMPLE_COUNTERS; c++) {
        pw_buf_puts(&b, c ? ", " : "");
        pw_buf_jstr(&b, pw_ctr_names[c]);
    }
    pw_buf_puts(&b, "]");
    pw_buf_puts(&b, ", \"samples\": ");
    pw_buf_int(&b, total);
    pw_buf_puts(&b, ", \"t_start\": ");
    pw_buf_int(&b, pw_t_start);
    pw_buf_puts(&b, ", \"t_end\": ");
    pw_buf_int(&b, pw_now());
    pw_buf_puts(&b, ", \"states\": [\"compute\", \"mpi_p2p\", \"mpi_coll\", \"mpi_rma\", "
                    "\"mpi_sync\", \"mpi_io\", \"mpi_other\", \"sleep\"], \"threads\": [");
    for (int i = 0; i < n; i++) {
        pw_buf_puts(&b, i ? ", {\"tid\": " : "{\"tid\": ");
        pw_buf_int(&b, threads[i].tid);
        pw_buf_puts(&b, ", \"taken\": ");
        pw_buf_int(&b, threads[i].taken);
        pw_buf_puts(&b, ", \"kept\": ");
        pw_buf_int(&b, threads[i].n);
        pw_buf_puts(&b, ", \"thinned\": ");
        pw_buf_int(&b, threads[i].thinned);
        pw_buf_puts(&b, ", \"interval_ns\": ");
        pw_buf_int(&b, threads[i].interval_ns);
        pw_buf_puts(&b, "}");
    }
    pw_buf_puts(&b, "], \"modules\": [");
    for (int i = 0; i < pw_objects_count(); i++) {
        pw_buf_puts(&b, i ? ", [" : "[");
        pw_buf_jstr(&b, pw_object_path(i));
        pw_buf_puts(&b, ", ");
        pw_buf_jstr(&b, pw_object_buildid(i));
        pw_buf_puts(&b, "]");
    }
    pw_buf_puts(&b, "]}\n");
    snprintf(path, sizeof path, "%s.json", stem);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && !b.failed) {
        if (write(fd, b.data, b.len) != (ssize_t)b.len)
            pw_log("--sample: short write of %s", path);
    }
    if (fd >= 0)
        close(fd);
    pw_buf_free(&b);
}

/* Threads the program creates are sampled from their first instruction: the new thread
 * runs a trampoline that starts its timer, then the program's function. */
typedef struct start_arg {
    void *(*fn)(void *);
    void *arg;
} start_arg;

static void *trampoline(void *p)
{
    start_arg a = *(start_arg *)p;
    free(p);
    pw_sampler_thread();
    return a.fn(a.arg);
}

/* Threads of the MPI library and its runtime (progress, PMIx, UCX, libevent) are not
 * the program's work, and interrupting their poll loops would only change them. */
static int library_thread(const void *caller)
{
    static const char *skip[] = {"libmpi", "libopen-", "libpmix", "libucs", "libucp",
                                 "libuct", "libfabric", "libevent", "libhwloc", "libpsm",
                                 "libperfweave", "libpapi", "libpcp", "libnvidia"};
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

PW_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (PW_UNLIKELY(!real))
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    if (!started || library_thread(__builtin_return_address(0)))
        return real(thread, attr, fn, arg);
    start_arg *a = malloc(sizeof *a);
    if (!a)
        return real(thread, attr, fn, arg);
    a->fn = fn;
    a->arg = arg;
    int rc = real(thread, attr, trampoline, a);
    if (rc != 0)
        free(a);
    return rc;
}

/* Sleeping is sampled (state "sleep"), and a sleep that our signal interrupts goes on
 * for the time left: nanosleep is never restarted by SA_RESTART, and a program's
 * sleep() must not return early because it is being measured. An interruption by the
 * program's own signals still returns EINTR as it would without perfweave. */
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);

PW_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                              struct timespec *rem)
{
    if (PW_UNLIKELY(!real_clock_nanosleep))
        *(void **)&real_clock_nanosleep = dlsym(RTLD_NEXT, "clock_nanosleep");
    if (!started || !req)
        return real_clock_nanosleep(clock, flags, req, rem);
    int state = pw_sample_state, rc;
    struct timespec left = *req, r;
    pw_sample_state = STATE_SLEEP;
    for (;;) {
        interrupted = 0;
        rc = real_clock_nanosleep(clock, flags, &left, &r);
        if (rc != EINTR || !interrupted)
            break;
        if (!(flags & TIMER_ABSTIME))
            left = r; /* relative: what is left; absolute: the same deadline */
    }
    pw_sample_state = state;
    if (rc == EINTR && rem && !(flags & TIMER_ABSTIME))
        *rem = r;
    return rc;
}

PW_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    int rc = clock_nanosleep(CLOCK_REALTIME, 0, req, rem);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

PW_EXPORT int usleep(useconds_t usec)
{
    struct timespec ts = {usec / 1000000, (long)(usec % 1000000) * 1000};
    return nanosleep(&ts, NULL);
}

PW_EXPORT unsigned int sleep(unsigned int seconds)
{
    struct timespec ts = {seconds, 0}, rem = {0, 0};
    if (nanosleep(&ts, &rem) == 0)
        return 0;
    return (unsigned int)rem.tv_sec + (rem.tv_nsec > 0);
}

/* Called at the end of the core's constructor. */
void pw_sampler_start(void)
{
    if (!pw_active || !pw_opt.sample)
        return;
    sig = SIGRTMAX - 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) {
        pw_log("--sample: cannot install the handler of signal %d; no samples", sig);
        return;
    }
    started = 1;
    start_pid = getpid();
    atexit(write_samples);
    pw_sampler_thread();
}

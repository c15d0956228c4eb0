/* pw-stream: perfweave's memory-bandwidth co-runner for `perfweave boundness`
 * (docs/boundness.md). STREAM's triad, a[i] = b[i] + s * c[i] (McCalpin's STREAM
 * benchmark, its fourth kernel), over three arrays of --bytes in all, by --threads
 * threads, each pinned to one core of --cores in turn, repeated until SIGTERM or SIGINT
 * (or for --seconds). --threads 0: no stressor, it only waits (and probes).
 *
 * --probe B[,B...]: the control of `perfweave boundness`, timed by this process before it
 * says "ready", on --probe-core (pinned there when given): per B a reference triad over
 * three arrays of B bytes in all (once untimed, then repeated), and a chain of
 * dependent multiply-adds in a register. Run alone (--threads 0) and beside the
 * stressor's threads, their times tell whether the stressor loads the memory system on
 * this machine (docs/boundness.md "The control").
 *
 * Once every array is touched (and the probe has run) it prints "ready" (the caller
 * starts the measured program then); at the end one line of what it moved:
 *   done seconds S bytes B bytes_per_s R threads N
 * and with --probe, on that line, the probe's CPU seconds (its thread's clock):
 *   control_bytes B[,B...] control_passes P[,P...] control_triad_s T[,T...] control_fma_s F
 * (T per triad pass, one per B; F for the whole chain). Exit status 2 and one line on a usage or
 * memory error. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

typedef struct worker {
    pthread_t id;
    int core; /* -1: not pinned */
    double *a, *b, *c;
    size_t n;
    int64_t passes;
} worker;

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void triad_plain(double *restrict a, const double *restrict b, const double *restrict c,
                        size_t n)
{
    const double s = 3.0;
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

#if defined(__x86_64__)
#include <immintrin.h>
/* With AVX, a's stores bypass the caches (as STREAM built with streaming stores): no
 * read for ownership, so one core moves about twice the bytes. Arrays are page-aligned
 * (mmap) and chunks are multiples of 4 doubles but the last. */
__attribute__((target("avx"))) static void triad_avx(double *restrict a, const double *restrict b,
                                                     const double *restrict c, size_t n)
{
    const __m256d s = _mm256_set1_pd(3.0);
    size_t i = 0;
    if (((uintptr_t)a & 31) == 0)
        for (; i + 4 <= n; i += 4)
            _mm256_stream_pd(a + i, _mm256_add_pd(_mm256_loadu_pd(b + i),
                                                  _mm256_mul_pd(s, _mm256_loadu_pd(c + i))));
    for (; i < n; i++)
        a[i] = b[i] + 3.0 * c[i];
}
#endif

/* the probe's chain: FMA_STEPS dependent multiply-adds, one at a time, in a register */
#define FMA_STEPS 20000000L
#define PROBE_MOVED (1LL << 28) /* bytes each of the probe's triads reads and writes */
#define PROBE_SIZES 16

__attribute__((noinline)) static double fma_chain(long steps, double x)
{
    double y = x;
    for (long i = 0; i < steps; i++) {
        y = y * 0.999999 + 1e-7;
        __asm__ volatile("" : "+x"(y)); /* kept in a register, one step after another */
    }
    return y;
}

static void (*triad)(double *restrict, const double *restrict, const double *restrict,
                     size_t) = triad_plain;

static void pin(int core)
{
    if (core < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* A thread's slice, touched first by the thread itself (its pages on its node). */
static void touch(worker *w)
{
    for (size_t i = 0; i < w->n; i++) {
        w->a[i] = 0.0;
        w->b[i] = 1.0;
        w->c[i] = 2.0;
    }
}

static pthread_barrier_t ready;

static void *work(void *p)
{
    worker *w = p;
    pin(w->core);
    touch(w);
    pthread_barrier_wait(&ready);
    /* the slice in chunks of 1 MiB per array, so that a stop is seen within one */
    const size_t chunk = (1 << 20) / sizeof(double);
    while (!stop) {
        for (size_t i = 0; i < w->n && !stop; i += chunk)
            triad(w->a + i, w->b + i, w->c + i, w->n - i < chunk ? w->n - i : chunk);
        if (!stop)
            w->passes++;
    }
    return NULL;
}

static double *map_array(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

typedef struct probe {
    int sizes;                    /* 0: no probe */
    long long bytes[PROBE_SIZES]; /* each triad's three arrays */
    int core;                     /* -1: not pinned */
    int passes[PROBE_SIZES];
    double triad_s[PROBE_SIZES], fma_s; /* CPU seconds: per triad pass, the whole chain */
} probe;

/* One of the control's triads: a plain triad (the kind of loop a program has: no
 * streaming stores) over the first n elements of a, b and c, timed by this thread's CPU
 * clock. */
static void probe_triad(probe *p, int k, double *a, double *b, double *c)
{
    size_t n = (size_t)(p->bytes[k] / 3) / sizeof(double);
    long long passes = PROBE_MOVED / (long long)(3 * n * sizeof(double));
    p->passes[k] = passes < 3 ? 3 : passes > 100000 ? 100000 : (int)passes;
    triad_plain(a, b, c, n); /* into the caches, as a program's second pass finds them */
    int64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int j = 0; j < p->passes[k]; j++)
        triad_plain(a, b, c, n);
    p->triad_s[k] = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e9 / p->passes[k];
}

/* The control, on p->core: each triad, over the start of three arrays touched once (of
 * the largest size), then the FMA chain; the arrays unmapped after. 0 on success. */
static int run_probe(probe *p)
{
    pin(p->core);
    long long most = 0;
    for (int k = 0; k < p->sizes; k++)
        most = p->bytes[k] > most ? p->bytes[k] : most;
    size_t n = (size_t)(most / 3) / sizeof(double);
    double *a = map_array(n * sizeof(double)), *b = map_array(n * sizeof(double)),
           *c = map_array(n * sizeof(double));
    if (!a || !b || !c)
        return -1;
    for (size_t i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    for (int k = 0; k < p->sizes; k++)
        probe_triad(p, k, a, b, c);
    munmap(a, n * sizeof(double));
    munmap(b, n * sizeof(double));
    munmap(c, n * sizeof(double));
    int64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    volatile double sink = fma_chain(FMA_STEPS, 1.0);
    (void)sink;
    p->fma_s = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e9;
    return 0;
}

/* "B[,B...]" -> p's sizes, each at least three pages; -1 when malformed */
static int parse_sizes(const char *s, probe *p)
{
    for (p->sizes = 0; *s && p->sizes < PROBE_SIZES;) {
        char *end;
        long long b = strtoll(s, &end, 10);
        if (end == s || b < 3 * 4096)
            return -1;
        p->bytes[p->sizes++] = b;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return *s ? -1 : 0;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "pw-stream: %s (usage: pw-stream [--threads N] [--cores LIST] [--bytes B] "
            "[--seconds S] [--probe B[,B...]] [--probe-core C])\n",
            why);
    return 2;
}

/* "0,2-3" -> cores; returns their count, -1 when malformed */
static int parse_cores(const char *s, int *cores, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0)
            return -1;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo)
                return -1;
            s = end;
        }
        for (long c = lo; c <= hi && n < max; c++)
            cores[n++] = (int)c;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    int nthreads = 1, ncores = 0, cores[1024];
    double seconds = 0;
    long long bytes = 3LL << 28;
    probe pr = {.core = -1};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v)
            return usage("an option without its value");
        if (!strcmp(argv[i], "--threads"))
            nthreads = (int)strtol(v, &end, 10);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtoll(v, &end, 10);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(v, &end);
        else if (!strcmp(argv[i], "--probe"))
            end = parse_sizes(v, &pr) ? NULL : (char *)v + strlen(v);
        else if (!strcmp(argv[i], "--probe-core"))
            pr.core = (int)strtol(v, &end, 10);
        else if (!strcmp(argv[i], "--cores")) {
            ncores = parse_cores(v, cores, 1024);
            end = ncores < 0 ? NULL : (char *)v + strlen(v);
        } else
            return usage("unknown option");
        if (!end || *end)
            return usage("a malformed value");
        i++;
    }
    if (nthreads < 0 || nthreads > 1024 || bytes < 3 * 4096)
        return usage("--threads must be 0-1024 and --bytes at least 12288");
    if (pr.core < -1)
        return usage("--probe-core must be a core");
    size_t n = nthreads ? (size_t)(bytes / 3) / sizeof(double) : 0;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx"))
        triad = triad_avx;
#endif
    double *a = NULL, *b = NULL, *c = NULL;
    if (n) {
        a = map_array(n * sizeof(double));
        b = map_array(n * sizeof(double));
        c = map_array(n * sizeof(double));
    }
    if (n && (!a || !b || !c)) {
        fprintf(stderr, "pw-stream: cannot map %lld bytes: %s\n", bytes, strerror(errno));
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* blocked but in sigsuspend below: a stop that comes before it is not lost */
    sigset_t stops, waiting;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stops, &waiting);
    worker *ws = calloc((size_t)nthreads + 1, sizeof *ws);
    if (!ws)
        return usage("out of memory");
    pthread_barrier_init(&ready, NULL, (unsigned)nthreads + 1);
    size_t per = nthreads ? n / (size_t)nthreads : 0;
    for (int t = 0; t < nthreads; t++) {
        size_t first = (size_t)t * per;
        ws[t] = (worker){.core = ncores ? cores[t % ncores] : -1,
                         .a = a + first,
                         .b = b + first,
                         .c = c + first,
                         .n = t == nthreads - 1 ? n - first : per};
        if (pthread_create(&ws[t].id, NULL, work, &ws[t]) != 0) {
            fprintf(stderr, "pw-stream: cannot start thread %d\n", t);
            return 2;
        }
    }
    pthread_barrier_wait(&ready);
    int64_t t0 = now_ns(CLOCK_MONOTONIC); /* the stressor's threads run from here */
    if (pr.sizes && run_probe(&pr) != 0) {
        fprintf(stderr, "pw-stream: cannot map the probe's arrays: %s\n", strerror(errno));
        stop = 1;
        for (int t = 0; t < nthreads; t++)
            pthread_join(ws[t].id, NULL);
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    if (seconds > 0) {
        pthread_sigmask(SIG_SETMASK, &waiting, NULL);
        struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        while (!stop && nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        stop = 1;
    }
    while (!stop)
        sigsuspend(&waiting);
    int64_t passes = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(ws[t].id, NULL);
        passes += ws[t].passes * (int64_t)ws[t].n;
    }
    double s = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    double moved = (double)passes * 3 * sizeof(double);
    printf("done seconds %.6f bytes %.0f bytes_per_s %.6g threads %d", s, moved,
           s > 0 ? moved / s : 0.0, nthreads);
    const char *key[] = {" control_bytes ", " control_passes ", " control_triad_s "};
    for (int f = 0; pr.sizes && f < 3; f++)
        for (int k = 0; k < pr.sizes; k++) {
            fputs(k ? "," : key[f], stdout);
            if (f == 0)
                printf("%lld", pr.bytes[k]);
            else if (f == 1)
                printf("%d", pr.passes[k]);
            else
                printf("%.9g", pr.triad_s[k]);
        }
    if (pr.sizes)
        printf(" control_fma_s %.9g", pr.fma_s);
    printf("\n");
    return 0;
}

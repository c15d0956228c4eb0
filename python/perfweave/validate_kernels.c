/* Kernels whose memory traffic and page faults are known by construction, for
 * `perfweave validate` (python/perfweave/validation.py compiles this file with the
 * system's C compiler when it runs, so that the flags that change a kernel's traffic,
 * e.g. -fprefetch-loop-arrays, are the user's to choose, and calls it with ctypes).
 *
 * The kernels are those of Jagode et al., "PAPI's PCP component: memory traffic on IBM
 * POWER9" (../shared/papers/papi-pcp-memory-traffic-multicomponent.txt): the reference
 * GEMM (Listing 3), the capped GEMV (Listings 1-2), the combined S1CF loop nest (Listing 8)
 * and S2CF's re-sort (Listing 9); and "touch", which writes one byte into each of N fresh
 * pages: N page faults. Each repetition works on the next of `copies` data sets, so that
 * no repetition finds the previous one's data in the cache (the paper gives every
 * repetition its own matrix). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { PW_GEMM, PW_GEMV, PW_S1CF, PW_S2CF, PW_TOUCH };

struct pw_set {
    double *a, *b, *c;
};

struct pw_kernel {
    int kind;
    long n, m, p; /* GEMM: n; GEMV: y has m rows, A p rows of n; S1CF/S2CF: n */
    long copies;
    struct pw_set *sets;
    double sink;
};

static double *fill(long count, double v)
{
    double *x = malloc((size_t)count * sizeof(double));
    if (x)
        for (long i = 0; i < count; i++)
            x[i] = v + (double)(i % 7);
    return x;
}

/* the element counts of a data set's three arrays */
static void counts(const struct pw_kernel *k, long out[3])
{
    long n = k->n;
    switch (k->kind) {
    case PW_GEMM:
        out[0] = out[1] = out[2] = n * n;
        break;
    case PW_GEMV:
        out[0] = k->p * n, out[1] = n, out[2] = k->m;
        break;
    default: /* double complex: two doubles an element */
        out[0] = 2 * n * n * n, out[1] = 0, out[2] = 2 * n * n * n;
    }
}

void pw_kernel_free(struct pw_kernel *k)
{
    if (!k)
        return;
    for (long i = 0; k->sets && i < k->copies; i++) {
        free(k->sets[i].a);
        free(k->sets[i].b);
        free(k->sets[i].c);
    }
    free(k->sets);
    free(k);
}

/* Allocates and writes `copies` data sets (every page touched, so that a kernel
 * takes no page fault); NULL when memory is short. */
struct pw_kernel *pw_kernel_new(int kind, long n, long m, long p, long copies)
{
    struct pw_kernel *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    *k = (struct pw_kernel){.kind = kind, .n = n, .m = m, .p = p, .copies = copies};
    if (kind == PW_TOUCH)
        return k;
    k->sets = calloc((size_t)copies, sizeof(*k->sets));
    if (!k->sets) {
        pw_kernel_free(k);
        return NULL;
    }
    long c[3];
    counts(k, c);
    for (long i = 0; i < copies; i++) {
        struct pw_set *s = &k->sets[i];
        s->a = fill(c[0], 1.0);
        s->b = c[1] ? fill(c[1], 2.0) : NULL;
        s->c = fill(c[2], 0.0);
        if (!s->a || (c[1] && !s->b) || !s->c) {
            pw_kernel_free(k);
            return NULL;
        }
    }
    return k;
}

static void gemm(long n, const double *a, const double *b, double *c)
{
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double sum = 0;
            for (long l = 0; l < n; l++)
                sum += a[i * n + l] * b[l * n + j];
            c[i * n + j] = sum;
        }
}

/* y = A x where row i of A is row i % p of the p rows kept (the paper's cap) */
static void gemv(long m, long n, long p, const double *a, const double *x, double *y)
{
    for (long i = 0; i < m; i++) {
        const double *row = a + (i % p) * n;
        double sum = 0;
        for (long l = 0; l < n; l++)
            sum += row[l] * x[l];
        y[i] = sum;
    }
}

/* planes = rows = cols = n; in read in order, out written with a stride */
static void s1cf(long n, const double *in, double *out)
{
    for (long plane = 0; plane < n; plane++)
        for (long row = 0; row < n; row++)
            for (long col = 0; col < n; col++) {
                long from = 2 * (plane * n * n + row * n + col);
                long to = 2 * (col * n * n + plane * n + row);
                out[to] = in[from];
                out[to + 1] = in[from + 1];
            }
}

/* in ordered [Y][PLANES][X][ROWS], traversed PLANES, X, Y, ROWS into out in order; Y = 4,
 * X = n / 4, PLANES = ROWS = n: n^3 elements as S1CF */
static void s2cf(long n, const double *in, double *out)
{
    long ny = 4, nx = n / 4, np = n, nr = n, to = 0;
    for (long plane = 0; plane < np; plane++)
        for (long x = 0; x < nx; x++)
            for (long y = 0; y < ny; y++)
                for (long row = 0; row < nr; row++) {
                    long from = 2 * (((y * np + plane) * nx + x) * nr + row);
                    out[to++] = in[from];
                    out[to++] = in[from + 1];
                }
}

/* n fresh pages mapped, one byte written in each, unmapped: n page faults */
static int touch(long n)
{
    long page = sysconf(_SC_PAGESIZE);
    char *mem =
        mmap(NULL, (size_t)(n * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -1;
    /* a huge page would take one fault for 512 pages */
    madvise(mem, (size_t)(n * page), MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++)
        ((volatile char *)mem)[i * page] = 1;
    munmap(mem, (size_t)(n * page));
    return 0;
}

/* Runs reps repetitions; the thread's CPU time they took, in ns (clock_gettime), or -1
 * when touch could not map its pages. */
long long pw_kernel_run(struct pw_kernel *k, long reps)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (long r = 0; r < reps; r++) {
        struct pw_set *s = k->sets ? &k->sets[r % k->copies] : NULL;
        switch (k->kind) {
        case PW_GEMM:
            gemm(k->n, s->a, s->b, s->c);
            break;
        case PW_GEMV:
            gemv(k->m, k->n, k->p, s->a, s->b, s->c);
            break;
        case PW_S1CF:
            s1cf(k->n, s->a, s->c);
            break;
        case PW_S2CF:
            s2cf(k->n, s->a, s->c);
            break;
        default:
            if (touch(k->n))
                return -1;
        }
        if (s) /* keeps the compiler from dropping a kernel whose result is unread */
            k->sink += s->c[r % 3];
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
}

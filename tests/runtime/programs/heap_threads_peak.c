/* test_heap.py's threads-at-once program: THREADS threads start together (a barrier) and
 * each, for ROUNDS rounds, makes PAIRS malloc(64)/free pairs (site P) and renews a ring of
 * RING blocks of 200 bytes (site R: about RING x 200 bytes live per thread); halfway, each
 * allocates an array of 4 MiB (site L), all four are live at once between two barriers
 * for 0.2 s (its peak: THREADS x 4 MiB), and freed. The program counts its own live bytes with atomics (per
 * site R and in all, updated after each allocation returns and before each free) and keeps
 * the most it saw; it times each array's life by CLOCK_MONOTONIC. Lines printed:
 *   P count bytes
 *   R count bytes peak          peak: the most bytes of site R live at once it saw
 *   L count bytes peak byte_s   byte_s: the arrays' bytes x seconds live
 *   T peak                      the most bytes live at once of all its allocations
 * Usage: heap_threads_peak [ROUNDS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 4
#define PAIRS 2000
#define RING 1000
#define SMALL 200
#define LARGE (4L << 20)

static long rounds = 40;
static pthread_barrier_t start, hold, release;
static long live_r, peak_r, live_all, peak_all;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void raise_to(long *peak, long v)
{
    long cur = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (v > cur &&
           !__atomic_compare_exchange_n(peak, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* n bytes live more (after an allocation) or fewer (n < 0, before a free) */
static void count_live(long n, int ring)
{
    raise_to(&peak_all, __atomic_add_fetch(&live_all, n, __ATOMIC_SEQ_CST));
    if (ring)
        raise_to(&peak_r, __atomic_add_fetch(&live_r, n, __ATOMIC_SEQ_CST));
}

typedef struct counts {
    long p, r, l;
    double l_byte_s;
} counts;

static void *worker(void *arg)
{
    counts *c = arg;
    void **ring = calloc(RING, sizeof *ring);
    count_live(RING * (long)sizeof *ring, 0);
    pthread_barrier_wait(&start);
    for (long k = 0; k < rounds; k++) {
        for (int i = 0; i < PAIRS; i++) {
            void *volatile p = malloc(64); // @site P
            count_live(64, 0);
            count_live(-64, 0);
            free(p);
            c->p++;
        }
        for (int i = 0; i < RING; i++) {
            if (ring[i]) {
                count_live(-SMALL, 1);
                free(ring[i]);
            }
            ring[i] = malloc(SMALL); // @site R
            count_live(SMALL, 1);
            c->r++;
        }
        if (k == rounds / 2) {
            char *big = malloc(LARGE); // @site L
            double t0 = now_s();
            count_live(LARGE, 0);
            c->l++;
            memset(big, 1, 4096);
            if (pthread_barrier_wait(&hold) == PTHREAD_BARRIER_SERIAL_THREAD)
                nanosleep(&(struct timespec){0, 200000000}, NULL); /* all four live 0.2 s */
            pthread_barrier_wait(&release);
            count_live(-LARGE, 0);
            c->l_byte_s += LARGE * (now_s() - t0);
            free(big);
        }
    }
    for (int i = 0; i < RING; i++) {
        count_live(-SMALL, 1);
        free(ring[i]);
    }
    count_live(-RING * (long)sizeof *ring, 0);
    free(ring);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_barrier_init(&hold, NULL, THREADS);
    pthread_barrier_init(&release, NULL, THREADS);
    pthread_t t[THREADS];
    counts c[THREADS];
    memset(c, 0, sizeof c);
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, &c[i]) != 0)
            return 1;
    long p = 0, r = 0, l = 0;
    double l_byte_s = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        p += c[i].p, r += c[i].r, l += c[i].l, l_byte_s += c[i].l_byte_s;
    }
    printf("P %ld %ld\nR %ld %ld %ld\nL %ld %ld %ld %.6f\nT %ld\n", p, p * 64, r, r * SMALL, peak_r,
           l, l * LARGE, (long)THREADS * LARGE, l_byte_s, peak_all);
    return 0;
}

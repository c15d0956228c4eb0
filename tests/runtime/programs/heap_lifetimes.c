/* test_heap.py's lifetimes and call paths (built with -O2: frames without frame pointers,
 * unwound by their .eh_frame rules). Site S: short-lived objects, a ring of 64 blocks of 4
 * KiB, each replaced after the 63 others (about 0.1-0.3 ms of life, far under the
 * kernel's 4 ms tick), for 0.6 s; site L: long-lived ones, 16 blocks of 1 MiB allocated
 * at the start, block j freed (j + 1) x 30 ms later. Prints "site count bytes byte_s"
 * by its own clock (CLOCK_MONOTONIC read after each malloc and before each free). Site P:
 * one block allocated through outer -> middle -> inner, the call path the profile must
 * give frame by frame (the markers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING 64
#define SMALL 4096
#define BIG (1 << 20)
#define NBIG 16

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *volatile sink;

__attribute__((noinline)) static void *alloc_s(size_t n)
{
    void *p = malloc(n); /* @site S */
    __asm__ volatile("" ::: "memory"); /* not a tail call: the site is this line */
    return p;
}
__attribute__((noinline)) static void *alloc_l(size_t n)
{
    void *p = malloc(n); /* @site L */
    memset(p, 1, 4096); /* touched; and not alloc_s's code (folded into one at -O2) */
    return p;
}

__attribute__((noinline)) static void inner(void)
{
    sink = malloc(100); /* @site P0 */
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void middle(void)
{
    inner(); /* @site P1 */
    __asm__ volatile("" ::: "memory"); /* not a tail call: each its own frame */
}
__attribute__((noinline)) static void outer(void)
{
    middle(); /* @site P2 */
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    outer(); /* @site P3 */
    free(sink);
    void *big[NBIG], *ring[RING];
    double tb[NBIG], ts[RING], bs_s = 0, bs_l = 0;
    for (int j = 0; j < NBIG; j++) {
        big[j] = alloc_l(BIG);
        tb[j] = now();
    }
    double t0 = now();
    long count_s = 0;
    int freed = 0;
    for (long i = 0; now() - t0 < 0.6 || freed < NBIG; i++) {
        int k = (int)(i % RING);
        if (i >= RING) {
            bs_s += SMALL * (now() - ts[k]);
            free(ring[k]);
        }
        ring[k] = alloc_s(SMALL);
        ts[k] = now();
        count_s++;
        if (freed < NBIG && now() - t0 >= (freed + 1) * 0.03) {
            bs_l += BIG * (now() - tb[freed]);
            free(big[freed++]);
        }
        for (double t = now(); now() - t < 2e-6;)
            ;
    }
    for (int k = 0; k < RING; k++) {
        bs_s += SMALL * (now() - ts[k]);
        free(ring[k]);
    }
    printf("S %ld %ld %.9g\nL %d %ld %.9g\n", count_s, count_s * SMALL, bs_s, NBIG,
           (long)NBIG * BIG, bs_l);
    return 0;
}

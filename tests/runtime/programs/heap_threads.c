/* test_heap.py's threaded program: the main thread allocates alone first (the heap
 * module's one recording thread, plain updates), then THREADS threads and the main thread
 * allocate at once (the switch to atomics happens while the main thread records). Each
 * thread counts its own allocations; the lines printed are the sums:
 *   M count bytes    the main thread's site (malloc(40), one live at a time)
 *   W count bytes    the workers' site (malloc(96), RING live per thread)
 *   C count bytes    the workers' calloc site (calloc(3, 100), freed at once)
 * Usage: heap_threads [PAIRS [kill]]   (kill: SIGKILL itself after printing) */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define RING 16

static long pairs = 20000;
static void *volatile sink;

static void main_pairs(long n, long *count)
{
    for (long i = 0; i < n; i++) {
        sink = malloc(40); // @site M
        free(sink);
        ++*count;
    }
}

static void *worker(void *arg)
{
    long *count = arg;
    void *ring[RING] = {0};
    for (long i = 0; i < pairs; i++) {
        free(ring[i % RING]);
        ring[i % RING] = malloc(96); // @site W
        count[0]++;
        void *c = calloc(3, 100); // @site C
        count[1]++;
        free(c);
    }
    for (int k = 0; k < RING; k++)
        free(ring[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        pairs = atol(argv[1]);
    long m = 0, w[THREADS][2] = {{0}};
    main_pairs(1000, &m);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, w[i]) != 0)
            return 1;
    main_pairs(pairs, &m);
    long wc = 0, cc = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        wc += w[i][0];
        cc += w[i][1];
    }
    printf("M %ld %ld\nW %ld %ld\nC %ld %ld\n", m, m * 40, wc, wc * 96, cc, cc * 300);
    fflush(stdout);
    if (argc > 2 && !strcmp(argv[2], "kill"))
        raise(SIGKILL);
    return 0;
}

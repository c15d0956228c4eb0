/* No MPI: T threads (argv[1]) each call sched_yield N times (argv[2]); the main thread
 * never does. Prints its pid, the calls made, the sum of their return values and the ns
 * the threads spent in their loops (each loop timed around all its calls). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

static long n;

typedef struct {
    long calls, rc;
    long long ns;
} result;

static void *worker(void *arg)
{
    result *r = arg;
    long long t0 = now_ns();
    for (long i = 0; i < n; i++) {
        r->rc += sched_yield();
        r->calls++;
    }
    r->ns = now_ns() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    n = argc > 2 ? atol(argv[2]) : 1000;
    pthread_t tid[64];
    result res[64] = {{0}};
    if (threads < 1 || threads > 64)
        return 2;
    for (int t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, worker, &res[t]);
    long calls = 0, rc = 0;
    long long ns = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        calls += res[t].calls;
        rc += res[t].rc;
        ns += res[t].ns;
    }
    printf("pid %d\ncalls %ld\nrc %ld\nloop_ns %lld\n", (int)getpid(), calls, rc, ns);
    return 0;
}

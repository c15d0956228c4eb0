/* Sampling activities, ground truth for thread synchronisation: the main thread
 * computes for 0.5 s (spin), then starts 3 threads and joins them; for SECONDS (default
 * 1.5) each thread takes one mutex, spins 5 ms holding it and releases it, over and
 * over. At any time one thread computes with the lock and two block in
 * pthread_mutex_lock, while main waits in pthread_join: of 0.5 + 4 x SECONDS thread
 * seconds, 0.5 + SECONDS compute (31 % at 1.5 s) and 3 x SECONDS wait (69 %).
 * Usage: mutex_contend [SECONDS] */
#include <pthread.h>
#include <stdlib.h>

#include "spin.h"

#define NTHREADS 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double deadline;

__attribute__((noinline)) static void locked_work(void)
{
    while (now() < deadline) {
        pthread_mutex_lock(&lock);
        spin(0.005);
        pthread_mutex_unlock(&lock);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    locked_work();
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    spin(0.5);
    deadline = now() + seconds;
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    return 0;
}

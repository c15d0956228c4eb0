/* Sampling activities, ground truth for thread synchronisation: the main thread
 * computes for 0.5 s (spin), then starts 3 threads and joins them; for SECONDS (default
 * 1.5) each thread takes one mutex, spins 5 ms holding it and releases it, over and
 * over. At any time one thread computes with the lock and two block in
 * pthread_mutex_lock, while main waits in pthread_join: of 0.5 + 4 x SECONDS thread
 * seconds, 0.5 + SECONDS compute (31 % at 1.5 s) and 3 x SECONDS wait (69 %). Prints on
 * stderr what each thread measured of its wall time: `worker N wait W_S held H_S life
 * L_S` (in pthread_mutex_lock, holding the lock, from its start to its end) for each
 * worker, then `main spin S_S join J_S`. Usage: mutex_contend [SECONDS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

#define NTHREADS 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double deadline;

typedef struct {
    double wait, held, life;
} times;

/* wait: from just before pthread_mutex_lock to its return; held: from then to just
 * before pthread_mutex_unlock (a thread that loses its core right after unlocking is not
 * holding the lock meanwhile); the rest of its life is the loop and the unlocks. */
__attribute__((noinline)) static void locked_work(times *m)
{
    double t0 = now(), t = t0;
    while (t < deadline) {
        double ask = now();
        pthread_mutex_lock(&lock);
        double got = now();
        spin(0.005);
        double done = now();
        pthread_mutex_unlock(&lock);
        t = now();
        m->wait += got - ask;
        m->held += done - got;
    }
    m->life = t - t0;
}

static void *worker(void *arg)
{
    locked_work(arg);
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    double t0 = now();
    spin(0.5);
    double t1 = now();
    deadline = t1 + seconds;
    pthread_t t[NTHREADS];
    times m[NTHREADS] = {{0}};
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, &m[i]);
    double t2 = now();
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    double t3 = now();
    for (int i = 0; i < NTHREADS; i++)
        fprintf(stderr, "worker %d wait %.6f held %.6f life %.6f\n", i, m[i].wait, m[i].held,
                m[i].life);
    fprintf(stderr, "main spin %.6f join %.6f\n", t1 - t0, t3 - t2);
    return 0;
}

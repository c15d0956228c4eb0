/* More threads than the sampler's table (256 slots): creates N threads one after the
 * other, each burning ~2 ms, so N + 1 (main) threads ask to be sampled.
 * Usage: many_threads N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *work(void *arg)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 1000; i++)
            x += i;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 2000000);
    return arg;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 300;
    for (int i = 0; i < n; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, work, NULL) != 0 || pthread_join(th, NULL) != 0)
            return 1;
    }
    printf("%d threads\n", n);
    return 0;
}

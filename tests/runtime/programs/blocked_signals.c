/* A thread that blocks every signal while it works, next to a main thread that does not:
 * the program runs as without perfweave; only the main thread's work is sampled.
 * Prints "done". */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "spin.h"

__attribute__((noinline)) void blocked_work(void) { spin(0.6); }
__attribute__((noinline)) void open_work(void) { spin(0.6); }

static void *worker(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    blocked_work();
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    open_work();
    pthread_join(t, NULL);
    printf("done\n");
    return 0;
}

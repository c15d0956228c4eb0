/* A program with its own SIGPROF timer and handler (as gprof-like tools install):
 * it burns SECONDS (default 1) of its CPU time (CLOCK_PROCESS_CPUTIME_ID, the time
 * ITIMER_PROF counts, so the same number of SIGPROF however busy the machine) with
 * ITIMER_PROF at 1 ms and prints how many SIGPROF it handled. perfweave's sampler must
 * leave SIGPROF to it.
 * Usage: prof_handler [SECONDS] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t ticks;
static void on_prof(int sig) { (void)sig; ticks++; }

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    signal(SIGPROF, on_prof);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 10000; i++)
            x += i * 0.5;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    printf("handled %d SIGPROF\n", (int)ticks);
    return 0;
}

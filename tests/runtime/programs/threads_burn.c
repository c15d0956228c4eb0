/* Sampling of threads the program creates: the main thread and NTHREADS (default 2)
 * pthreads each burn CPU in their own function for SECONDS (default 1): main_work,
 * worker_work. Also forks a child that burns 0.2 s and exits, and runs /bin/true, to
 * show that fork and exec are left alone. Each thread prints on stderr, at its end, its
 * CPU time, which a busy machine makes less than its SECONDS, and the wall time of its
 * work function: tid TID cpu CPU_S work WALL_S. The second worker ends by pthread_exit,
 * the others by returning. Usage: threads_burn [SECONDS] [NTHREADS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spin.h"

static double seconds = 1.0;

__attribute__((noinline)) void worker_work(void) { spin(seconds); }
__attribute__((noinline)) void main_work(void) { spin(seconds); }

static void report(double work)
{
    fprintf(stderr, "tid %ld cpu %.6f work %.6f\n", (long)syscall(SYS_gettid),
            thread_cpu_seconds(), work);
}

static void *worker(void *arg)
{
    double t0 = now();
    worker_work();
    report(now() - t0);
    if ((long)arg == 1)
        pthread_exit(NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = atof(argv[1]);
    int n = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t t[16];
    for (int i = 0; i < n && i < 16; i++)
        pthread_create(&t[i], NULL, worker, (void *)(long)i);
    double t0 = now();
    main_work();
    double work = now() - t0;
    for (int i = 0; i < n && i < 16; i++)
        pthread_join(t[i], NULL);
    pid_t p = fork();
    if (p == 0) {
        spin(0.2);
        _exit(7);
    }
    int status = 0;
    waitpid(p, &status, 0);
    int rc = system("/bin/true");
    printf("child exit %d, system %d\n", WEXITSTATUS(status), rc);
    report(work);
    return 3;
}

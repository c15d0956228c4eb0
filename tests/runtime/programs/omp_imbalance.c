/* Thread synchronisation with OpenMP: two threads, thread 0 works 20 ms and thread 1
 * 10 ms per step before a barrier, for SECONDS seconds (default 2): thread 1 waits at the
 * barrier half of its time, so about a quarter of all samples are in the OpenMP
 * runtime's barrier and three quarters in task(). Prints on stderr what each thread
 * measured of its wall time: `thread T task TASK_S barrier BARRIER_S`.
 * Usage: omp_imbalance [SECONDS] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void task(double seconds) { spin(seconds); }

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int steps = (int)(seconds / 0.02), threads = 0;
#pragma omp parallel num_threads(2)
    {
        int me = omp_get_thread_num();
        double in_task = 0, in_barrier = 0;
#pragma omp single
        threads = omp_get_num_threads();
        for (int i = 0; i < steps; i++) {
            double t0 = now();
            task(me == 0 ? 0.02 : 0.01);
            double t1 = now();
#pragma omp barrier
            in_task += t1 - t0;
            in_barrier += now() - t1;
        }
#pragma omp critical
        fprintf(stderr, "thread %d task %.6f barrier %.6f\n", me, in_task, in_barrier);
    }
    printf("threads %d\n", threads);
    return 0;
}

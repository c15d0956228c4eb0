/* Thread synchronisation with OpenMP: two threads, thread 0 works 20 ms and thread 1
 * 10 ms per step before a barrier, for SECONDS seconds (default 2): thread 1 waits at the
 * barrier half of its time, so about a quarter of all samples are in the OpenMP
 * runtime's barrier and three quarters in task(). Usage: omp_imbalance [SECONDS] */
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
#pragma omp single
        threads = omp_get_num_threads();
        for (int i = 0; i < steps; i++) {
            task(me == 0 ? 0.02 : 0.01);
#pragma omp barrier
        }
    }
    printf("threads %d\n", threads);
    return 0;
}

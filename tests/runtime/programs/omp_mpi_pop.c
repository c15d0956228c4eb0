/* MPI+OpenMP with known thread factors (perfweave pop's sampled thread factors): each
 * step, a parallel region in which thread t spins (1 + t) units, then the master alone
 * spins one unit (serial code, the other threads idle), then an MPI_Allreduce. Work is
 * spun for wall-clock time (omp_get_wtime); each rank prints what it measured, per
 * thread its work inside the parallel regions and the master's serial work, and the
 * run delay around them (run_delay.h: a thread that waited for a core spun longer by
 * at most that wait):
 *   rank R threads N serial_s S work_s W0 W1 ... serial_delay_s SD delay_s D0 D1 ...
 * Usage: omp_mpi_pop [STEPS [THREADS [UNIT_S]]] (defaults 40, 2, 0.004) */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "run_delay.h"

static volatile double sink;

__attribute__((noinline)) static double spin(double seconds)
{
    double t0 = omp_get_wtime();
    while (omp_get_wtime() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
    return omp_get_wtime() - t0;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int steps = argc > 1 ? atoi(argv[1]) : 40, threads = argc > 2 ? atoi(argv[2]) : 2;
    double unit = argc > 3 ? atof(argv[3]) : 0.004, serial = 0, serial_delay = 0, x = 1, y;
    double *work = calloc(threads, sizeof *work), *delay = calloc(threads, sizeof *delay);
    for (int s = 0; s < steps; s++) {
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num();
            double d = run_delay();
            work[t] += spin((1 + t) * unit);
            delay[t] += run_delay() - d;
        }
        double d = run_delay();
        serial += spin(unit);
        serial_delay += run_delay() - d;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    /* one write per line, so that the ranks' lines do not interleave */
    char line[4096];
    int n = snprintf(line, sizeof line, "rank %d threads %d serial_s %.6f work_s", rank, threads,
                     serial);
    for (int t = 0; t < threads && n < (int)sizeof line - 16; t++)
        n += snprintf(line + n, sizeof line - n, " %.6f", work[t]);
    n += snprintf(line + n, sizeof line - n, " serial_delay_s %.6f delay_s", serial_delay);
    for (int t = 0; t < threads && n < (int)sizeof line - 16; t++)
        n += snprintf(line + n, sizeof line - n, " %.6f", delay[t]);
    printf("%s\n", line);
    free(work);
    free(delay);
    MPI_Finalize();
    return 0;
}

/* MPI+OpenMP with a known imbalance among threads: each rank runs parallel loops of one
 * iteration per thread (schedule(static, 1)) in which thread 0 works 3 units and every
 * other thread 1 unit, so the others wait at the loop's implicit barrier 2 of every 3
 * units. Work is spun for wall-clock time (omp_get_wtime), and the program measures
 * what the sampler should see: per rank, the wall time of the regions, the threads' work
 * in them, and the span from the first region's start to the last one's end, as
 *   rank R threads N run_s T region_s G work_s W from A to B serial_to C
 * (A, B: that span's ends by omp_get_wtime, CLOCK_MONOTONIC). Then 0.3 s of serial work
 * in the main thread, ending at C, and an MPI_Allreduce, the workers idle.
 * Usage: omp_mpi_imbalance [SECONDS [THREADS]] (defaults 2 and 3; unit 4 ms) */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

__attribute__((noinline)) static double relax(double seconds)
{
    double t0 = omp_get_wtime();
    while (omp_get_wtime() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
    return omp_get_wtime() - t0;
}

/* one time step: the parallel loop whose barrier the light threads wait at */
__attribute__((noinline)) static double sweep(double unit, int threads, int *nthreads)
{
    double work = 0;
#pragma omp parallel num_threads(threads) reduction(+ : work)
    {
        int n = omp_get_num_threads();
#pragma omp for schedule(static, 1)
        for (int i = 0; i < n; i++)
            work += relax(i == 0 ? 3 * unit : unit);
#pragma omp master
        *nthreads = n;
    }
    return work;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nthreads = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double seconds = argc > 1 ? atof(argv[1]) : 2.0, unit = 0.004;
    int threads = argc > 2 ? atoi(argv[2]) : 3;
    int steps = (int)(seconds / (3 * unit));
    double work = 0, region = 0, t_first = omp_get_wtime();
    for (int s = 0; s < steps; s++) {
        double t0 = omp_get_wtime();
        work += sweep(unit, threads, &nthreads);
        region += omp_get_wtime() - t0;
    }
    double run = omp_get_wtime() - t_first, total = 0;
    relax(0.3);
    double t_serial = omp_get_wtime();
    MPI_Allreduce(&work, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d threads %d run_s %.4f region_s %.4f work_s %.4f from %.6f to %.6f "
           "serial_to %.6f\n", rank, nthreads, run, region, work, t_first, t_first + run,
           t_serial);
    MPI_Finalize();
    return 0;
}

/* Sampling ground truth with MPI: every rank calls work() for 0.2 s per step, rank 1
 * twice as long (0.4 s), then all meet in MPI_Barrier; 4 steps. The other ranks wait
 * in the barrier while rank 1 works. Each rank prints on stderr its wall time in
 * work() (CLOCK_MONOTONIC), its own measure on a machine however busy:
 *   rank R work WORK_S */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include "spin.h"

__attribute__((noinline)) void work(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5; // @site work
}

int main(int argc, char **argv)
{
    double in_work = 0;
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int step = 0; step < 4; step++) {
        double t = now();
        work(rank == 1 ? 0.4 : 0.2);
        in_work += now() - t;
        MPI_Barrier(MPI_COMM_WORLD); // @site barrier
    }
    MPI_Finalize();
    fprintf(stderr, "rank %d work %.6f\n", rank, in_work);
    return 0;
}

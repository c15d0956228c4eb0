/* The last rank sleeps 0.3 s before MPI_Barrier: every other rank waits about 0.3 s
 * in it, the late rank hardly at all. The ranks leave the first barrier at times that
 * differ when they share cores, so each prints what its own clock (CLOCK_MONOTONIC)
 * saw around its two barriers: "barrier RANK FIRST_IN FIRST_OUT LATE_IN LATE_OUT". */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

int main(int argc, char **argv)
{
    int rank, size;
    double t[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t[0] = now();
    MPI_Barrier(MPI_COMM_WORLD); /* @site first */
    t[1] = now();
    if (rank == size - 1)
        usleep(300000);
    t[2] = now();
    MPI_Barrier(MPI_COMM_WORLD); /* @site late */
    t[3] = now();
    MPI_Finalize();
    printf("barrier %d %.9f %.9f %.9f %.9f\n", rank, t[0], t[1], t[2], t[3]);
    return 0;
}

/* Rank 1 makes 2 barriers, then calls MPI_Abort(..., 5); the others wait in a
 * receive that never completes. Rank 1 prints "aborting" first and gives the launcher
 * 0.2 s to forward it: MPICH's launcher, once told of the abort, kills the ranks and may
 * exit before it has read what is still in its pipes (with or without perfweave). */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        printf("aborting\n");
        fflush(stdout);
        usleep(200000);
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}

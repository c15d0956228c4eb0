/* The last rank sleeps 0.3 s before MPI_Barrier: every other rank waits >= 0.3 s
 * in it, the late rank hardly at all. */
#include <mpi.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD); /* @site first */
    if (rank == size - 1)
        usleep(300000);
    MPI_Barrier(MPI_COMM_WORLD); /* @site late */
    MPI_Finalize();
    return 0;
}

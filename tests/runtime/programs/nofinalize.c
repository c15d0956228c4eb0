/* Every rank makes 3 MPI_Allreduce calls and returns from main without
 * MPI_Finalize, with exit code 0. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, a = 1, b;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d leaves without MPI_Finalize\n", rank);
    fflush(stdout);
    return 0;
}

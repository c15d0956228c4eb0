/* Every rank says "rank R initialised (pid P)" on stdout as soon as MPI_Init returns,
 * then all meet in one MPI_Barrier and finalize: a test knows from the line that a rank
 * got through MPI_Init (and so that its peers' MPI_Init returned too), and its pid. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d initialised (pid %d)\n", rank, (int)getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

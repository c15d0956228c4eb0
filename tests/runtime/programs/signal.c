/* Every rank makes 4 MPI_Barrier calls, then the rank given as argv[2] raises
 * the signal named by argv[1] (TERM, INT or KILL) while the others wait in a receive. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 4; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    if (rank == atoi(argv[2]))
        raise(strcmp(argv[1], "INT") == 0    ? SIGINT
              : strcmp(argv[1], "KILL") == 0 ? SIGKILL
                                             : SIGTERM);
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}

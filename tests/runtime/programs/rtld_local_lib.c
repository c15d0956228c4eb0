/* A plug-in that uses MPI, loaded by rtld_local_main.c with RTLD_LOCAL, so that
 * the MPI library is not in the process's global symbol scope (as when a Python
 * extension links MPI). Makes 4 MPI_Allreduce calls of 2 doubles. */
#include <mpi.h>

int run_solver(int *argc, char ***argv)
{
    double in[2] = {1, 2}, out[2];
    int rank;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 4; i++)
        MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
    MPI_Finalize();
    return out[0] > 0 ? 0 : 1;
}

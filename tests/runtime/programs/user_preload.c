/* Each rank prints what user_preload_lib.c's function returns, or -1 when that library
 * is not in the process, then calls MPI_Barrier 3 times. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int (*marker)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "user_preload_marker");
    printf("rank %d marker %d\n", rank, marker ? marker() : -1);
    fflush(stdout);
    for (int i = 0; i < 3; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

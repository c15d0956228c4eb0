/* The trivial MPI job of bench/launch_overhead.py: MPI_Init and MPI_Finalize, nothing
 * between, so the run is the launch's fixed cost alone. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return 0;
}

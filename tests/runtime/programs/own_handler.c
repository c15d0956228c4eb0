/* A program with its own SIGTERM handler: it counts the signal and exits 0
 * after MPI_Finalize. perfweave must not take the signal from it. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>

static volatile sig_atomic_t got;
static void on_term(int sig) { got = sig; }

int main(int argc, char **argv)
{
    int rank;
    signal(SIGTERM, on_term);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    raise(SIGTERM);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d handled signal %d\n", rank, (int)got);
    MPI_Finalize();
    return 0;
}

/* Late Sender with a barrier, for the clock-condition tests: 2 ranks x 6 iterations;
 * rank 0 sleeps 20 ms and sends 8 bytes to rank 1, which waits in MPI_Recv from the
 * start of the iteration; then both enter MPI_Barrier. A message is received
 * microseconds after its send (rank 1 waits in the receive; milliseconds when it waits
 * for a core), far less than the skew the test gives rank 1's clock. */
#include <mpi.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    double x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 6; i++) {
        if (rank == 0) {
            usleep(20000);
            MPI_Send(&x, 1, MPI_DOUBLE, 1, i, MPI_COMM_WORLD); /* @site send */
        } else if (rank == 1) {
            MPI_Recv(&x, 1, MPI_DOUBLE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site recv */
        }
        MPI_Barrier(MPI_COMM_WORLD); /* @site barrier */
    }
    MPI_Finalize();
    return 0;
}

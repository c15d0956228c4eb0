/* Ring exchange, 10 rounds: each rank posts MPI_Irecv from the left and MPI_Isend
 * of 100 ints to the right, then MPI_Waitall on both. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, size, sbuf[100] = {0}, rbuf[100];
    MPI_Request req[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < 10; i++) {
        MPI_Irecv(rbuf, 100, MPI_INT, left, i, MPI_COMM_WORLD, &req[0]); /* @site irecv */
        MPI_Isend(sbuf, 100, MPI_INT, right, i, MPI_COMM_WORLD, &req[1]); /* @site isend */
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE); /* @site waitall */
    }
    MPI_Finalize();
    return 0;
}

/* Receive requests completed out of the order of their posts, 3 rounds on 2 ranks:
 * rank 0 sends message j (j = 0..3) of j + 1 ints with MPI_Isend, tag 7, then
 * MPI_Waitall; rank 1 posts 4 MPI_Irecv from MPI_ANY_SOURCE, tag 7, and completes
 * request 3 and 1 by MPI_Wait, request 0 by MPI_Test until it is done, request 2 by
 * MPI_Wait. MPI matches a channel's messages in the order of posting: request j
 * receives message j, (j + 1) * 4 bytes. A barrier ends each round. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, buf[4][4] = {{0}}, done = 0;
    MPI_Request req[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int round = 0; round < 3; round++) {
        if (rank == 0) {
            for (int j = 0; j < 4; j++)
                MPI_Isend(buf[j], j + 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &req[j]);
            MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        } else if (rank == 1) {
            for (int j = 0; j < 4; j++)
                MPI_Irecv(buf[j], 4, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &req[j]);
            MPI_Wait(&req[3], MPI_STATUS_IGNORE);
            MPI_Wait(&req[1], MPI_STATUS_IGNORE);
            for (done = 0; !done;)
                MPI_Test(&req[0], &done, MPI_STATUS_IGNORE);
            MPI_Wait(&req[2], MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}

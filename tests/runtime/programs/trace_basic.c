/* Traced by test_trace.py on 4 ranks:
 *   rank 0 sleeps 0.2 s, then MPI_Send of 10 ints, tag 5, to rank 1, which is
 *     already waiting in MPI_Recv(MPI_ANY_SOURCE, MPI_ANY_TAG);
 *   a ring: MPI_Irecv from the left, MPI_Isend to the right (tag 1, 10 ints),
 *     MPI_Waitall(MPI_STATUSES_IGNORE);
 *   MPI_Comm_split into even and odd ranks; MPI_Barrier and MPI_Bcast (root 0 of
 *     the half, 10 ints) on the half; MPI_Comm_free;
 *   argv[1] (default 300) calls of MPI_Comm_rank, to fill small trace buffers. */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, buf[10] = {0}, r2[10];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        usleep(200000);
        MPI_Send(buf, 10, MPI_INT, 1, 5, MPI_COMM_WORLD); /* @site send */
    } else if (rank == 1) {
        MPI_Recv(buf, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site recv */
    }
    MPI_Request rq[2];
    MPI_Irecv(r2, 10, MPI_INT, (rank + size - 1) % size, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(buf, 10, MPI_INT, (rank + 1) % size, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Barrier(half);
    MPI_Bcast(buf, 10, MPI_INT, 0, half);
    MPI_Comm_free(&half);
    int calls = argc > 1 ? atoi(argv[1]) : 300;
    for (int i = 0; i < calls; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    return 0;
}

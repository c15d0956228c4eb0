/* Persistent ring: MPI_Send_init / MPI_Recv_init of 16 doubles (128 bytes) once,
 * 20 rounds of MPI_Startall + MPI_Waitall, then MPI_Request_free of both. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, size;
    double sbuf[16] = {0}, rbuf[16];
    MPI_Request req[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Recv_init(rbuf, 16, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &req[0]); /* @site recv_init */
    MPI_Send_init(sbuf, 16, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &req[1]); /* @site send_init */
    for (int i = 0; i < 20; i++) {
        MPI_Startall(2, req); /* @site startall */
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    MPI_Start(&req[0]); /* @site start */
    MPI_Start(&req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
    MPI_Finalize();
    return 0;
}

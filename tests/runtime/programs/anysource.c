/* Rank 0 receives one 256-byte message from every other rank with MPI_ANY_SOURCE
 * and MPI_ANY_TAG; the senders use their rank as tag. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, seen = 0;
    char buf[256] = {0};
    MPI_Status st;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        for (int i = 1; i < size; i++) {
            MPI_Recv(buf, 256, MPI_CHAR, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st); /* @site recv */
            seen += st.MPI_SOURCE == st.MPI_TAG;
        }
        printf("anysource: %d of %d matched\n", seen, size - 1);
    } else {
        MPI_Send(buf, 256, MPI_CHAR, 0, rank, MPI_COMM_WORLD); /* @site send */
    }
    MPI_Finalize();
    return 0;
}

/* Exact counts and bytes by construction (run on 4 ranks):
 *   rank 0 -> rank 1: 5 MPI_Send of 1000 doubles (8000 bytes each)
 *   every rank: 3 MPI_Bcast of 16 ints from root 0, 2 MPI_Allreduce of 4 doubles,
 *               4 MPI_Barrier, 1 MPI_Gather of 10 ints to root 0,
 *               1 MPI_Alltoall of 3 ints to each rank. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, i;
    static double big[1000];
    int ints[16] = {0}, g[10] = {0}, gall[10 * 64], a2a_s[3 * 64], a2a_r[3 * 64];
    double d[4] = {1, 2, 3, 4}, dsum[4];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < 5; i++) {
        if (rank == 0)
            MPI_Send(big, 1000, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD); /* @site send */
        else if (rank == 1)
            MPI_Recv(big, 1000, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site recv */
    }
    for (i = 0; i < 3; i++)
        MPI_Bcast(ints, 16, MPI_INT, 0, MPI_COMM_WORLD); /* @site bcast */
    for (i = 0; i < 2; i++)
        MPI_Allreduce(d, dsum, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
    for (i = 0; i < 4; i++)
        MPI_Barrier(MPI_COMM_WORLD); /* @site barrier */
    MPI_Gather(g, 10, MPI_INT, gall, 10, MPI_INT, 0, MPI_COMM_WORLD); /* @site gather */
    MPI_Alltoall(a2a_s, 3, MPI_INT, a2a_r, 3, MPI_INT, MPI_COMM_WORLD); /* @site alltoall */
    printf("counts rank %d done\n", rank);
    MPI_Finalize();
    return 0;
}

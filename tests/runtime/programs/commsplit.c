/* MPI_Comm_split into even and odd ranks, one MPI_Allreduce of 8 ints on each
 * half, then MPI_Comm_free. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, in[8] = {0}, out[8];
    MPI_Comm half;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half); /* @site split */
    MPI_Allreduce(in, out, 8, MPI_INT, MPI_SUM, half); /* @site allreduce */
    MPI_Comm_free(&half); /* @site free */
    MPI_Finalize();
    return 0;
}

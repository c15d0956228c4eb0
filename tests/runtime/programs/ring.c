/* A ring with exact counts by construction (tests/runtime/test_slurm.py): every rank
 * sends argv[1] (default 100) messages of one int to the next rank with MPI_Send and
 * receives as many from the previous one with MPI_Recv (even ranks send first, odd ranks
 * receive first), then exits with the code argv[2] (default 0) after MPI_Finalize.
 * Per rank: 1 MPI_Comm_rank, 1 MPI_Comm_size, N MPI_Send, N MPI_Recv. Run on 2 or more
 * ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, i, in = 0;
    int n = argc > 1 ? atoi(argv[1]) : 100, code = argc > 2 ? atoi(argv[2]) : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (i = 0; i < n; i++) {
        if (rank % 2 == 0) {
            MPI_Send(&i, 1, MPI_INT, right, 0, MPI_COMM_WORLD);
            MPI_Recv(&in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&i, 1, MPI_INT, right, 0, MPI_COMM_WORLD);
        }
    }
    printf("ring rank %d of %d sent %d\n", rank, size, n);
    MPI_Finalize();
    return code;
}

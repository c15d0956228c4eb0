/* Rank r calls sched_yield (r + 1) * N times (N = argv[1]) between MPI_Init and
 * MPI_Finalize, outside any MPI call, and prints "rank R calls C". */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank;
    long n = argc > 1 ? atol(argv[1]) : 1000, calls = 0, rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long i = 0; i < (rank + 1) * n; i++) {
        rc += sched_yield();
        calls++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d calls %ld rc %ld\n", rank, calls, rc);
    MPI_Finalize();
    return 0;
}

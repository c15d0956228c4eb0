/* Root causes of waiting by construction (tests/runtime/test_rootcause_runs.py). Each rank
 * measures its own computation (spin.h: CLOCK_MONOTONIC) and writes "compute RANK S"
 * lines, one per computation, to $RC_OUT.RANK. argv[1] is the scenario:
 *   two       2 ranks x 10 iterations: rank 0 computes 50 ms and sends, rank 1
 *             computes 10 ms and receives, then a barrier. Rank 1 waits ~40 ms per
 *             iteration in MPI_Recv (Late Sender), caused by rank 0's computation.
 *   chain     4 ranks x 5 iterations: every rank computes 20 ms, rank 3 200 ms more;
 *             rank 3 sends to 2, rank 2 receives it and sends to 1, rank 1 receives;
 *             then a barrier. Rank 2 waits ~200 ms for rank 3, rank 1 ~200 ms for
 *             rank 2 (which was late only by its own wait): one root cause, rank 3.
 *   pipeline  4 ranks: rank k receives from k-1 (rank 0 from none), computes 30 ms and
 *             sends to k+1: the critical path runs through every rank's computation.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

static FILE *out;

static void compute(int rank, double s)
{
    double t0 = now();
    spin(s);
    fprintf(out, "compute %d %.9f\n", rank, now() - t0);
}

int main(int argc, char **argv)
{
    int rank, size, x = 0;
    char path[4096];
    const char *mode = argc > 1 ? argv[1] : "two";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(path, sizeof path, "%s.%d", getenv("RC_OUT") ? getenv("RC_OUT") : "rc", rank);
    out = fopen(path, "w");
    if (!out)
        return 1;
    /* the ranks leave MPI_Init at different times: start the scenario together */
    MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(mode, "two")) {
        for (int i = 0; i < 10; i++) {
            if (rank == 0) {
                compute(rank, 0.050);
                MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            } else {
                compute(rank, 0.010);
                MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(mode, "chain")) {
        for (int i = 0; i < 5; i++) {
            compute(rank, rank == 3 ? 0.220 : 0.020);
            if (rank == 3)
                MPI_Send(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD);
            if (rank == 2) {
                MPI_Recv(&x, 1, MPI_INT, 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            }
            if (rank == 1)
                MPI_Recv(&x, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else {
        if (rank > 0)
            MPI_Recv(&x, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        compute(rank, 0.030);
        if (rank < size - 1)
            MPI_Send(&x, 1, MPI_INT, rank + 1, 0, MPI_COMM_WORLD);
    }
    fclose(out);
    MPI_Finalize();
    return 0;
}

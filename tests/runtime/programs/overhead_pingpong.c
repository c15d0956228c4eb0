/* 2 ranks: ITERS x (ping-pong of 1 KiB, about 50 us of computation, an MPI_Allreduce).
 * Rank 0 prints "calls N", the MPI calls each rank makes between MPI_Init and
 * MPI_Finalize (Comm_rank, then 2 + 1 per iteration). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spin.h"

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 300, rank;
    char buf[1024] = {0};
    double x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
        }
        double t0 = now();
        while (now() - t0 < 50e-6)
            x += 1;
        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("calls %d\n", 1 + 3 * iters);
    MPI_Finalize();
    return 0;
}

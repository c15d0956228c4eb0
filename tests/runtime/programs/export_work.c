/* Known work, calls and bytes for the Caliper and CUBE exports, 2 ranks
 * (tests/runtime/test_export_profiles.py).
 *   compute(): spin 0.1 s x (rank + 1) x SCALE (the first argument, default 1), under
 *     main; with SCALE 0, not called at all.
 *   Late Sender: rank 1 enters MPI_Recv right after the barrier; rank 0 first spins
 *     0.2 s in delay(), then sends: a Late Sender of about 0.2 s on rank 1. Each prints
 *     "send_enter"/"recv_enter" (its clock, CLOCK_MONOTONIC, one clock on one host) right
 *     before its call, so the test knows the wait the program made.
 *   exchange(): rank 0 sends MSGS messages of COUNT doubles to rank 1 (MPI_Send), which
 *     answers each with one of COUNT / 2 doubles (MPI_Send); MPI_Recv on both sides. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "spin.h"

#define MSGS 5
#define COUNT 4096

static double buf[COUNT];

__attribute__((noinline)) static void compute(int rank, double scale)
{
    spin(0.1 * (rank + 1) * scale);
}

__attribute__((noinline)) static void delay(void)
{
    spin(0.2);
}

__attribute__((noinline)) static void exchange(int rank)
{
    for (int i = 0; i < MSGS; i++) {
        if (rank == 0) {
            MPI_Send(buf, COUNT, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, COUNT / 2, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, COUNT, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, COUNT / 2, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv)
{
    int rank, token = 7;
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (scale > 0)
        compute(rank, scale);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        delay();
        fprintf(stderr, "send_enter %.9f\n", now());
        MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        fprintf(stderr, "recv_enter %.9f\n", now());
        MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    exchange(rank);
    MPI_Finalize();
    return 0;
}

/* The trace's window starts where the MPI_Init wrapper returns
 * (tests/runtime/test_init_window.py): init_window T_MS [kill]. Each rank reads its clock
 * (CLOCK_MONOTONIC) right after MPI_Init returns and right before its first MPI call,
 * computes T in between, and prints
 *   rank R first_ns F
 * (F: the time between the two readings), then calls MPI_Barrier; with "kill" it then
 * ends by SIGKILL (its trace description stays the one written at MPI_Init). */
#include "spin.h"
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long long a = now_ns();
    double unit = (argc > 1 ? atoi(argv[1]) : 20) * 1e-3;
    spin(unit);
    long long b = now_ns();
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("rank %d first_ns %lld\n", rank, b - a);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 2 && strcmp(argv[2], "kill") == 0)
        raise(SIGKILL);
    MPI_Finalize();
    return 0;
}

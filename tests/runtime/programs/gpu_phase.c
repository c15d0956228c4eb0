/* A phase of known duration on every rank, for the GPU power figures per interval
 * (test_gpu_nvml.py): MPI_Init, a barrier, 400 ms asleep between two readings of
 * CLOCK_MONOTONIC printed as "phase RANK BEGIN_NS END_NS", a barrier, MPI_Finalize.
 * Without MPI (-DNO_MPI) the same phase in one process, rank 0. */
#include <stdio.h>
#include <time.h>
#ifndef NO_MPI
#include <mpi.h>
#endif
#include "spin.h"

int main(int argc, char **argv)
{
    int rank = 0;
#ifndef NO_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
#else
    (void)argc;
    (void)argv;
#endif
    struct timespec ts = {0, 400000000};
    long long b = now_ns();
    nanosleep(&ts, NULL);
    long long e = now_ns();
    printf("phase %d %lld %lld\n", rank, b, e);
    fflush(stdout);
#ifndef NO_MPI
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
#endif
    return 0;
}

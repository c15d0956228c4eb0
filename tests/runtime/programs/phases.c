/* Activity-over-time ground truth: three phases of PHASE_MS milliseconds each, entered
 * together after a barrier: (1) computation only, (2) MPI_Allreduce in a loop, (3)
 * MPI_Sendrecv around a ring in a loop. Rank 0 prints each phase's CLOCK_MONOTONIC
 * start and end (ns), the clock of the node timeline; every rank prints on stderr the
 * share of phase 3 it spent in its MPI_Sendrecv loops ("rank R p2p_share S"): the
 * rest is the MPI_Allreduce that ends each loop, whose waits grow on a busy machine.
 * Usage: phases [PHASE_MS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spin.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long len = (argc > 1 ? atoll(argv[1]) : 600) * 1000000LL;
    double buf[64] = {0}, out[64];
    volatile double x = 0;
    long long t[4];
    MPI_Barrier(MPI_COMM_WORLD);
    t[0] = now_ns();
    while (now_ns() - t[0] < len) /* phase 1: compute */
        for (int i = 0; i < 1000; i++)
            x += i * 0.5;
    MPI_Barrier(MPI_COMM_WORLD);
    t[1] = now_ns();
    long long end = t[1] + len;
    int go = 1;
    while (go) { /* phase 2: collectives; everyone stops at the same iteration */
        MPI_Allreduce(buf, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        int more = now_ns() < end;
        MPI_Allreduce(&more, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
    t[2] = now_ns();
    end = t[2] + len;
    go = 1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long long in_p2p = 0;
    while (go) { /* phase 3: point-to-point */
        long long s = now_ns();
        for (int k = 0; k < 20; k++)
            MPI_Sendrecv(buf, 64, MPI_DOUBLE, right, 0, out, 64, MPI_DOUBLE, left, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        in_p2p += now_ns() - s;
        int more = now_ns() < end;
        MPI_Allreduce(&more, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
    t[3] = now_ns();
    fprintf(stderr, "rank %d p2p_share %.4f\n", rank, (double)in_p2p / (double)(t[3] - t[2]));
    if (rank == 0)
        printf("phase compute %lld %lld\nphase coll %lld %lld\nphase p2p %lld %lld\n", t[0],
               t[1], t[1], t[2], t[2], t[3]);
    MPI_Finalize();
    return 0;
}

/* Message-heavy programs, timed inside (rank 0 prints "elapsed_s X", MPI_Init to
 * MPI_Finalize by MPI_Wtime):
 *   msg_heavy app N     an application-like step: halo exchange of 4 KiB with both
 *                       neighbours (4 calls), ~20 us of computation, an Allreduce
 *                       every 10 steps; N steps.
 *   msg_heavy tiny N    the worst case for any wrapper: 64-byte exchanges with
 *                       almost no computation between calls; N steps. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HALO 512

int main(int argc, char **argv)
{
    int rank, size, app = argc > 1 && strcmp(argv[1], "app") == 0;
    int steps = argc > 2 ? atoi(argv[2]) : 10000;
    int halo = app ? HALO : 8, work = app ? 20000 : 200, every = app ? 10 : 50;
    static double out[HALO], in[HALO];
    double acc = 0, sum;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int s = 0; s < steps; s++) {
        MPI_Sendrecv(out, halo, MPI_DOUBLE, right, 0, in, halo, MPI_DOUBLE, left, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(out, halo, MPI_DOUBLE, left, 1, in, halo, MPI_DOUBLE, right, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int k = 0; k < work; k++)
            acc += in[k % halo] * 1e-9 + k * 1e-12;
        out[s % halo] = acc;
        if (s % every == 0)
            MPI_Allreduce(&acc, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double t1 = MPI_Wtime();
    if (rank == 0)
        printf("elapsed_s %.6f\nacc %g\n", t1 - t0, acc);
    MPI_Finalize();
    return 0;
}

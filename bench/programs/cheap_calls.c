/* Cost of cheap MPI calls: N x MPI_Comm_rank, N x MPI_Comm_rank from two call sites in
 * turn (each call finds its site by hashing: the previous call's site is the other one),
 * N/10 x 0-byte MPI_Allreduce and N/10 x 0-byte MPI_Sendrecv to itself (a send and a
 * receive row of the communication matrix), timed inside the program. Prints
 * "comm_rank_ns X", "comm_rank_2sites_ns Y", "allreduce0_ns Z" and "sendrecv_self0_ns W"
 * (rank 0, per call). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, r, n = argc > 1 ? atoi(argv[1]) : 1000000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double t1 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    double t4 = MPI_Wtime();
    for (int i = 0; i < n / 2; i++) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    }
    double t5 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    int m = n / 10;
    double t2 = MPI_Wtime();
    for (int i = 0; i < m; i++)
        MPI_Allreduce(MPI_IN_PLACE, &r, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    double t3 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    double t6 = MPI_Wtime();
    for (int i = 0; i < m; i++)
        MPI_Sendrecv(&r, 0, MPI_INT, rank, 5, &r, 0, MPI_INT, rank, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    double t7 = MPI_Wtime();
    if (rank == 0)
        printf("comm_rank_ns %.2f\ncomm_rank_2sites_ns %.2f\nallreduce0_ns %.2f\n"
               "sendrecv_self0_ns %.2f\n",
               1e9 * (t1 - t0) / n, 1e9 * (t5 - t4) / (n / 2 * 2), 1e9 * (t3 - t2) / m,
               1e9 * (t7 - t6) / m);
    MPI_Finalize();
    return 0;
}

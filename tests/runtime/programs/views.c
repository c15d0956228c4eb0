/* The HTML report's views by construction (tests/runtime/test_html_views.py), 3 ranks:
 * 1. a hot loop: each rank runs argv[2] million iterations (default 100) of hot()'s
 *    loop, whose line is marked "@site hot" (no clock read in it: a system call there
 *    would take samples of its own);
 * 2. a ring of argv[1] (default 100) MPI_Sendrecv with nonblocking pairs on every other
 *    step (MPI_Isend + MPI_Irecv + MPI_Waitall);
 * 3. rank 0 sleeps 0.3 s before MPI_Barrier: the other ranks wait there (Wait at
 *    Barrier), the run's interval with the most time in MPI.
 * Every rank counts its own MPI calls between MPI_Init and MPI_Finalize and prints
 * "rank R calls N" on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double acc;

__attribute__((noinline)) static void hot(long n)
{
    for (long i = 0; i < n; i++)
        acc += i * 0.25; /* @site hot */
}

int main(int argc, char **argv)
{
    int rank, size, in = 0, out = 0, calls = 0;
    int n = argc > 1 ? atoi(argv[1]) : 100;
    long burn = (long)((argc > 2 ? atof(argv[2]) : 100) * 1e6);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    calls += 2;
    hot(burn);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < n; i++) {
        if (i % 2) {
            MPI_Request rq[2];
            MPI_Irecv(&in, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &rq[0]);
            MPI_Isend(&out, 1, MPI_INT, right, 1, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
            calls += 3;
        } else {
            MPI_Sendrecv(&out, 1, MPI_INT, right, 0, &in, 1, MPI_INT, left, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            calls += 1;
        }
    }
    if (rank == 0) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    calls += 1;
    fprintf(stderr, "rank %d calls %d\n", rank, calls);
    MPI_Finalize();
    return 0;
}

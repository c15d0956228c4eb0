/* Traced by test_trace.py on 4 ranks:
 *   rank 0 sleeps 0.2 s, then MPI_Send of 10 ints, tag 5, to rank 1, which is
 *     already waiting in MPI_Recv(MPI_ANY_SOURCE, MPI_ANY_TAG);
 *   a ring: MPI_Irecv from the left, MPI_Isend to the right (tag 1, 10 ints),
 *     MPI_Waitall(MPI_STATUSES_IGNORE);
 *   MPI_Comm_split into even and odd ranks; MPI_Barrier and MPI_Bcast (root 0 of
 *     the half, 10 ints) on the half; MPI_Comm_free;
 *   argv[1] (default 300) calls of MPI_Comm_rank, to fill small trace buffers.
 * Ranks 0 and 1 read CLOCK_MONOTONIC (the trace's clock) right before and after the
 * MPI_Send and the MPI_Recv and print "clock RANK BEFORE AFTER" (ns) after MPI_Finalize:
 * the ranks leave MPI_Init at different times, so the receiver's wait is not 0.2 s but
 * what these readings say. A macro, not a function: the program's only function stays
 * main (test_interop_runs.py counts the regions of -finstrument-functions). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOW_NS(t)                                                                          \
    do {                                                                                   \
        struct timespec ts_;                                                               \
        clock_gettime(CLOCK_MONOTONIC, &ts_);                                              \
        (t) = (long long)ts_.tv_sec * 1000000000LL + ts_.tv_nsec;                          \
    } while (0)

int main(int argc, char **argv)
{
    int rank, size, buf[10] = {0}, r2[10];
    long long before = 0, after = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        usleep(200000);
        NOW_NS(before);
        MPI_Send(buf, 10, MPI_INT, 1, 5, MPI_COMM_WORLD); /* @site send */
        NOW_NS(after);
    } else if (rank == 1) {
        NOW_NS(before);
        MPI_Recv(buf, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site recv */
        NOW_NS(after);
    }
    MPI_Request rq[2];
    MPI_Irecv(r2, 10, MPI_INT, (rank + size - 1) % size, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(buf, 10, MPI_INT, (rank + 1) % size, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Barrier(half);
    MPI_Bcast(buf, 10, MPI_INT, 0, half);
    MPI_Comm_free(&half);
    int calls = argc > 1 ? atoi(argv[1]) : 300;
    for (int i = 0; i < calls; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Finalize();
    if (rank < 2)
        printf("clock %d %lld %lld\n", rank, before, after);
    return 0;
}

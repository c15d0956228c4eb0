/* Completions of nonblocking MPI-IO requests (tests/runtime/test_io_mpi.py):
 *   io_nb_wait DIR MB
 * File phase: each rank writes DIR/nb.R (MPI_COMM_SELF) with MPI_File_iwrite_at of MB MiB
 * completed by MPI_Wait, one completed by an MPI_Test loop, two by MPI_Waitall, two by
 * MPI_Waitany twice, then reads the first MiB back with MPI_File_iread_at and MPI_Wait.
 * After a barrier and a pause of 200 ms, a point-to-point phase: rank 1 posts MPI_Irecv and waits in
 * MPI_Wait for rank 0's MPI_Isend, which comes 300 ms later, then both wait for each other
 * in MPI_Waitall. Each rank prints its pid and, in CLOCK_MONOTONIC ns (the node timeline's
 * clock), each phase's start and end, the time it spent in the completion calls and
 * how many it made: "rank R KEY VALUE". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

static long long waited, calls; /* ns in completion calls, and how many */

static void wait_one(MPI_Request *r)
{
    long long t = now_ns();
    MPI_Wait(r, MPI_STATUS_IGNORE);
    waited += now_ns() - t;
    calls++;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size < 2) {
        fprintf(stderr, "usage: io_nb_wait DIR MB (2 ranks or more)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]) << 20;
    char *buf = calloc((size_t)n, 1), path[4096];
    snprintf(path, sizeof path, "%s/nb.%d", argv[1], rank);
    MPI_File fh;
    MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_Request req[2];
    MPI_Offset at = 0;
    long long t0 = now_ns();
    MPI_File_iwrite_at(fh, at, buf, n, MPI_BYTE, &req[0]);
    at += n;
    wait_one(&req[0]);
    MPI_File_iwrite_at(fh, at, buf, n, MPI_BYTE, &req[0]);
    at += n;
    for (int flag = 0; !flag;) {
        long long t = now_ns();
        MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE);
        waited += now_ns() - t;
        calls++;
    }
    for (int k = 0; k < 2; k++, at += n)
        MPI_File_iwrite_at(fh, at, buf, n, MPI_BYTE, &req[k]);
    long long t = now_ns();
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    waited += now_ns() - t;
    calls++;
    for (int k = 0; k < 2; k++, at += n)
        MPI_File_iwrite_at(fh, at, buf, n, MPI_BYTE, &req[k]);
    for (int k = 0; k < 2; k++) {
        int index;
        t = now_ns();
        MPI_Waitany(2, req, &index, MPI_STATUS_IGNORE);
        waited += now_ns() - t;
        calls++;
    }
    MPI_File_iread_at(fh, 0, buf, 1 << 20, MPI_BYTE, &req[0]);
    wait_one(&req[0]);
    long long t1 = now_ns(), file_waited = waited, file_calls = calls;
    MPI_File_close(&fh);

    MPI_Barrier(MPI_COMM_WORLD);
    usleep(200000);
    waited = calls = 0;
    long long t2 = now_ns();
    char msg[64] = {0};
    if (rank == 0) {
        usleep(300000);
        MPI_Isend(msg, 64, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &req[0]);
        wait_one(&req[0]);
    } else if (rank == 1) {
        MPI_Irecv(msg, 64, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &req[0]);
        wait_one(&req[0]);
    }
    if (rank < 2) {
        int peer = 1 - rank;
        MPI_Isend(msg, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(msg + 1, 1, MPI_CHAR, peer, 1, MPI_COMM_WORLD, &req[1]);
        t = now_ns();
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        waited += now_ns() - t;
        calls++;
    }
    long long t3 = now_ns();
    printf("rank %d pid %d\nrank %d file_t0 %lld\nrank %d file_t1 %lld\nrank %d file_wait %lld\n"
           "rank %d file_calls %lld\nrank %d p2p_t0 %lld\nrank %d p2p_t1 %lld\n"
           "rank %d p2p_wait %lld\nrank %d p2p_calls %lld\n",
           rank, (int)getpid(), rank, t0, rank, t1, rank, file_waited, rank, file_calls, rank, t2,
           rank, t3, rank, waited, rank, calls);
    free(buf);
    MPI_Finalize();
    return 0;
}

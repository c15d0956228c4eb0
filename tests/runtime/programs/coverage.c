/* Bytes of the less common calls, on 4 ranks (r = rank, n = 4):
 *   MPI_Gatherv to root 0: rank r sends r+1 ints; root receives 1+2+3+4 = 10 ints
 *   MPI_Scatterv from root 0: root sends 10 ints, rank r receives r+1 ints
 *   MPI_Allgatherv: rank r sends r+1 ints, receives 10 ints
 *   MPI_Alltoallv: rank r sends 2 ints to each rank, receives 2 from each (8 each way)
 *   MPI_Alltoallw: 1 double to each rank both ways (32 bytes each way)
 *   MPI_Reduce_scatter: recvcounts {1,2,3,4} ints: sends 10 ints, receives r+1
 *   MPI_Reduce_scatter_block: 3 ints per rank: sends 12 ints, receives 3
 *   MPI_Ibcast of 5 doubles from root 1 + MPI_Wait; MPI_Iallreduce of 6 ints + MPI_Wait
 *   MPI_Exscan, MPI_Scan of 2 ints
 *   RMA: window of 100 ints; between two fences each rank MPI_Put 10 ints to its right
 *        neighbour and MPI_Get 20 ints from its left; then MPI_Accumulate 4 ints and
 *        MPI_Fetch_and_op / MPI_Compare_and_swap of 1 int under lock_all
 *   MPI-IO: each rank MPI_File_write_at 1000 bytes at offset 1000 r, then
 *        MPI_File_read_at them back; then MPI_File_write_at_all of 64 ints. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int r, n, i;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int sbuf[64] = {0}, rbuf[64], counts[4] = {1, 2, 3, 4}, displs[4] = {0, 1, 3, 6};
    int c2[4] = {2, 2, 2, 2}, d2[4] = {0, 2, 4, 6};
    MPI_Gatherv(sbuf, r + 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatterv(sbuf, counts, displs, MPI_INT, rbuf, r + 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allgatherv(sbuf, r + 1, MPI_INT, rbuf, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(sbuf, c2, d2, MPI_INT, rbuf, c2, d2, MPI_INT, MPI_COMM_WORLD);
    double ws[4] = {0}, wr[4];
    int ones[4] = {1, 1, 1, 1}, wd[4] = {0, 8, 16, 24};
    MPI_Datatype wt[4] = {MPI_DOUBLE, MPI_DOUBLE, MPI_DOUBLE, MPI_DOUBLE};
    MPI_Alltoallw(ws, ones, wd, wt, wr, ones, wd, wt, MPI_COMM_WORLD);
    MPI_Reduce_scatter(sbuf, rbuf, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(sbuf, rbuf, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Request req;
    double d5[5] = {0};
    MPI_Ibcast(d5, 5, MPI_DOUBLE, 1, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Iallreduce(sbuf, rbuf, 6, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Exscan(sbuf, rbuf, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(sbuf, rbuf, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    int *base;
    MPI_Win win;
    MPI_Win_allocate(100 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_fence(0, win);
    MPI_Put(sbuf, 10, MPI_INT, (r + 1) % n, 0, 10, MPI_INT, win);
    MPI_Get(rbuf, 20, MPI_INT, (r + n - 1) % n, 20, 20, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(sbuf, 4, MPI_INT, (r + 1) % n, 50, 4, MPI_INT, MPI_SUM, win);
    int one = 1, old, cmp = 0;
    MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 60, MPI_SUM, win);
    MPI_Compare_and_swap(&one, &cmp, &old, MPI_INT, 0, 61, win);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);

    char path[] = "/tmp/perfweave-coverage-XXXXXX";
    if (r == 0) {
        int fd = mkstemp(path);
        if (fd >= 0)
            close(fd);
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    char block[1000] = {0};
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 1000 * r, block, 1000, MPI_CHAR, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_read_at(fh, 1000 * r, block, 1000, MPI_CHAR, MPI_STATUS_IGNORE);
    MPI_File_write_at_all(fh, 4000 + 256 * r, sbuf, 64, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0)
        remove(path);
    MPI_Finalize();
    return 0;
}

/* MPI-IO with known bytes per rank (tests/runtime/test_io_mpi.py):
 *   io_mpiio DIR N
 * Rank r owns the region [r * REGION, (r + 1) * REGION) of DIR/mpiio.dat and writes in it
 * N collective MPI_File_write_at_all of (r + 1) * 16 ints, where the MPI library has them
 * (MPI-4: MPICH 4) N MPI_File_write_at_all_c of (r + 1) * 8 doubles, one split collective
 * MPI_File_write_all_begin/_end of 100 bytes at its file pointer, one MPI_File_iwrite_at of
 * 50 bytes; then reads back the first part with N MPI_File_read_at_all. Each rank prints
 * what it wrote and read, by construction: "rank R KEY VALUE". Before MPI-IO, each rank
 * creates DIR/own.R.so.1 and stats it once: the program's own call on a shared object's
 * name. */
#include <mpi.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGION (1 << 20)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        fprintf(stderr, "usage: io_mpiio DIR N\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/own.%d.so.1", argv[1], rank);
    close(open(path, O_CREAT | O_WRONLY, 0644));
    struct stat sb;
    stat(path, &sb);
    snprintf(path, sizeof path, "%s/mpiio.dat", argv[1]);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);

    int ints = (rank + 1) * 16;
    int *buf = calloc((size_t)ints, sizeof(int));
    char bytes[100] = {0};
    long long written = 0, writes = 0, read = 0, reads = 0, has_c = 0;
    MPI_Offset base = (MPI_Offset)rank * REGION, at = base;
    for (int i = 0; i < n; i++, at += ints * 4) {
        MPI_File_write_at_all(fh, at, buf, ints, MPI_INT, MPI_STATUS_IGNORE);
        written += ints * 4;
        writes++;
    }
#if MPI_VERSION >= 4
    double *dbuf = calloc((size_t)(rank + 1) * 8, sizeof(double));
    for (int i = 0; i < n; i++, at += (rank + 1) * 64) {
        MPI_File_write_at_all_c(fh, at, dbuf, (MPI_Count)(rank + 1) * 8, MPI_DOUBLE,
                                MPI_STATUS_IGNORE);
        written += (rank + 1) * 64;
        writes++;
    }
    has_c = 1;
#endif
    MPI_File_seek(fh, at, MPI_SEEK_SET);
    MPI_File_write_all_begin(fh, bytes, 100, MPI_BYTE);
    MPI_Status st;
    MPI_File_write_all_end(fh, bytes, &st);
    at += 100;
    written += 100;
    writes++;
    MPI_Request req;
    MPI_File_iwrite_at(fh, at, bytes, 50, MPI_BYTE, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    at += 50;
    written += 50;
    writes++;
    for (int i = 0; i < n; i++) {
        MPI_File_read_at_all(fh, base + (MPI_Offset)i * ints * 4, buf, ints, MPI_INT, &st);
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        read += got;
        reads++;
    }
    MPI_File_close(&fh);
    printf("rank %d written %lld\nrank %d writes %lld\nrank %d read %lld\nrank %d reads %lld\n"
           "rank %d has_c %lld\nrank %d last_byte %lld\n",
           rank, written, rank, writes, rank, read, rank, reads, rank, has_c, rank,
           (long long)at - 1);
    free(buf);
    MPI_Finalize();
    return 0;
}

/* For bench/io_darshan.py: I/O whose counts are known, the same under Darshan and under
 * perfweave run --io.  io_darshan DIR, under MPI; rank R:
 *   POSIX  DIR/posix.R: open; 4 x write 100 B; pwrite 1000 B at 10000; lseek 0;
 *          2 x read 100 B; stat; fstat; fsync; fdatasync; close
 *   STDIO  DIR/stdio.R: fopen "w"; fprintf 8 B; fwrite 500 B; fflush; fclose;
 *          fopen "r"; fread 200 B; fseek 0; fread 100 B; fclose
 *   MPI-IO DIR/shared.dat (all ranks): MPI_File_open (collective); write_at 1024 B at
 *          R*1024 (independent); write_at_all 4096 B at N*1024 + R*4096 (collective);
 *          read_at 512 B at R*1024 (independent); sync; close
 * Rank 0 prints "seconds T", T the time from MPI_Init's return to the last rank's end
 * (a barrier), with printf before MPI_Finalize: Darshan counts <STDOUT> from MPI_Init
 * to MPI_Finalize. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char buf[8192];

static int posix(const char *path)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 4; i++)
        if (write(fd, buf, 100) != 100)
            return 1;
    if (pwrite(fd, buf, 1000, 10000) != 1000 || lseek(fd, 0, SEEK_SET) != 0)
        return 1;
    for (int i = 0; i < 2; i++)
        if (read(fd, buf, 100) != 100)
            return 1;
    struct stat st;
    if (stat(path, &st) || fstat(fd, &st) || fsync(fd) || fdatasync(fd))
        return 1;
    return close(fd) != 0;
}

static int stdio(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "x=%05d\n", 7) != 8 || fwrite(buf, 1, 500, f) != 500)
        return 1;
    if (fflush(f) || fclose(f))
        return 1;
    if (!(f = fopen(path, "r")) || fread(buf, 1, 200, f) != 200 || fseek(f, 0, SEEK_SET))
        return 1;
    return fread(buf, 1, 100, f) != 100 || fclose(f);
}

static int mpiio(const char *path, int rank, int size)
{
    MPI_File fh;
    MPI_Status st;
    int err =
        MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    if (err != MPI_SUCCESS)
        return 1;
    err |= MPI_File_write_at(fh, (MPI_Offset)rank * 1024, buf, 1024, MPI_BYTE, &st);
    err |= MPI_File_write_at_all(fh, (MPI_Offset)size * 1024 + (MPI_Offset)rank * 4096, buf, 4096,
                                 MPI_BYTE, &st);
    err |= MPI_File_read_at(fh, (MPI_Offset)rank * 1024, buf, 512, MPI_BYTE, &st);
    err |= MPI_File_sync(fh);
    err |= MPI_File_close(&fh);
    return err != MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        fprintf(stderr, "usage: io_darshan DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double t0 = MPI_Wtime();
    memset(buf, 'x', sizeof buf);
    char path[4096];
    snprintf(path, sizeof path, "%s/posix.%d", argv[1], rank);
    int bad = posix(path);
    snprintf(path, sizeof path, "%s/stdio.%d", argv[1], rank);
    bad |= stdio(path);
    snprintf(path, sizeof path, "%s/shared.dat", argv[1]);
    bad |= mpiio(path, rank, size);
    if (bad) {
        fprintf(stderr, "io_darshan: rank %d: an I/O call failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("seconds %.6f\n", MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}

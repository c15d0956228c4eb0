/* io_segments DIR N: the segment trace's ground truth (tests/runtime/test_io_segments.py).
 * Each process (each rank when built with -DWITH_MPI) opens DIR/seg.R (R: its rank, 0
 * without MPI), writes 3 x 10 bytes with write() (offsets 0, 10, 20), then N pwrites of
 * 100 * (i + 1) bytes at offset 4096 * (i + 1), preads 50 bytes at 0 and 100 at 4096,
 * stats the file and closes it: 1 open, N + 3 writes, 2 reads, 1 stat, 1 close. With MPI,
 * a barrier comes between the writes and the reads. Prints "path DIR/seg.R". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int rank = 0;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    int n = atoi(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/seg.%d", argv[1], rank);
    static char buf[100 * 1000];
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || n > 1000)
        return 3;
    for (int i = 0; i < 3; i++)
        if (write(fd, buf, 10) != 10)
            return 4;
    for (int i = 0; i < n; i++)
        if (pwrite(fd, buf, 100 * (size_t)(i + 1), 4096 * (off_t)(i + 1)) < 0)
            return 5;
#ifdef WITH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
    if (pread(fd, buf, 50, 0) != 50 || pread(fd, buf, 100, 4096) != 100)
        return 6;
    struct stat st;
    if (stat(path, &st) != 0)
        return 7;
    close(fd);
    printf("path %s\n", path);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}

/* I/O cases under MPI (tests/runtime/test_io_mpi.py), each rank on its own file:
 *   io_ranks loop DIR SECONDS  open (O_CREAT | O_TRUNC), write 1 byte, close, in a loop
 *                              for about SECONDS by the program's own clock
 *   io_ranks mmap DIR PAGES    map a file of 4 * PAGES pages, touch PAGES of them (every
 *                              fourth page), unmap
 * Each rank prints "rank R KEY VALUE" lines of what it did. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        fprintf(stderr, "usage: io_ranks loop|mmap DIR N\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d.dat", argv[2], argv[1], rank);
    if (!strcmp(argv[1], "loop")) {
        double seconds = atof(argv[3]), t0 = now();
        long n = 0;
        while (n % 64 || now() - t0 < seconds) {
            int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
            if (fd < 0 || write(fd, "x", 1) != 1)
                MPI_Abort(MPI_COMM_WORLD, 3);
            close(fd);
            n++;
        }
        printf("rank %d opens %ld\n", rank, n);
    } else {
        long page = sysconf(_SC_PAGESIZE), pages = atol(argv[3]);
        size_t len = (size_t)(4 * pages * page);
        int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
            MPI_Abort(MPI_COMM_WORLD, 3);
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            MPI_Abort(MPI_COMM_WORLD, 3);
        for (long i = 0; i < pages; i++)
            m[4 * i * page] = (char)i;
        munmap(m, len);
        close(fd);
        printf("rank %d touched %ld\nrank %d mapped %ld\n", rank, pages * page, rank, (long)len);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

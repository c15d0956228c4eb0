/* For bench/io_overhead.py: the cost of I/O calls, timed inside the program.
 *   io_calls write DIR N     N 1-byte write() to DIR/w.dat; prints "ns_per_call X"
 *   io_calls fwrite DIR N    N 1-byte fwrite() to DIR/f.dat (buffered); likewise
 *   io_calls mpi-io DIR N    under MPI: each rank N x (open, 4 KiB write, close) of its
 *                            file, then a barrier; prints "seconds X" (rank 0)
 *   io_calls mpi-compute DIR SECONDS  under MPI: additions, an allreduce every 10 ms;
 *                            prints "blocks N" (rank 0: work done in the time) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    const char *mode = argv[1];
    char path[4096];
    long n = atol(argv[3]);
    if (!strcmp(mode, "write") || !strcmp(mode, "fwrite")) {
        snprintf(path, sizeof path, "%s/%s.dat", argv[2], mode);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        FILE *f = fdopen(fd, "w");
        double t0 = now();
        if (mode[0] == 'w') {
            for (long i = 0; i < n; i++)
                if (write(fd, "x", 1) != 1)
                    return 3;
        } else {
            for (long i = 0; i < n; i++)
                fwrite("x", 1, 1, f);
        }
        double t = now() - t0;
        fclose(f);
        unlink(path);
        printf("ns_per_call %.3f\n", t * 1e9 / (double)n);
        return 0;
    }
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double t0 = now();
    if (!strcmp(mode, "mpi-io")) {
        static char buf[4096];
        snprintf(path, sizeof path, "%s/io.%d.dat", argv[2], rank);
        for (long i = 0; i < n; i++) {
            int fd = open(path, O_CREAT | O_WRONLY, 0644);
            if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
                MPI_Abort(MPI_COMM_WORLD, 3);
            close(fd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        unlink(path);
        if (rank == 0)
            printf("seconds %.6f\n", now() - t0);
    } else {
        /* the same number of rounds on every rank: 10 ms of additions, an allreduce */
        long blocks = 0, rounds = (long)(atof(argv[3]) * 100);
        volatile double x = 0;
        double sum = 0;
        for (long r = 0; r < rounds; r++) {
            double end = t0 + 0.01 * (double)(r + 1);
            while (now() < end) {
                for (int k = 0; k < 1000; k++)
                    x += 1.0;
                blocks++;
            }
            MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        long total = 0;
        MPI_Reduce(&blocks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("blocks %ld\n", total);
    }
    MPI_Finalize();
#endif
    return 0;
}

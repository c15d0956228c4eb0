/* For bench/io_overhead.py: the cost of I/O calls, timed inside the program.
 *   io_calls write DIR N     N 1-byte write() to DIR/w.dat; prints "ns_per_call X"
 *                            (the thread's CPU time per call: other work on the
 *                            machine does not count) and "wall_ns_per_call X"
 *   io_calls fwrite DIR N    N 1-byte fwrite() to DIR/f.dat (buffered); likewise
 *   io_calls fprintf DIR N   N fprintf() of a formatted line of four numbers; likewise
 *   io_calls mpi-io DIR N    under MPI: each rank N x (open, 4 KiB write, close) of its
 *                            file, then a barrier; prints "seconds X" (rank 0)
 *   io_calls mpi-checkpoint DIR MIB  under MPI: each rank writes MIB MiB to its file in
 *                            1 MiB writes, fsyncs and closes it, reads it back in 1 MiB
 *                            reads (a file per process, like IOR's); "seconds X"
 *   io_calls mpi-ascii DIR N under MPI: each rank fprintf's N formatted lines of four
 *                            numbers to its file (an ASCII output step); "seconds X"
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

#ifdef WITH_MPI
/* The end of an I/O case: every rank done, its file removed, rank 0 prints the time. */
static void finish(const char *path, int rank, double t0)
{
    MPI_Barrier(MPI_COMM_WORLD);
    unlink(path);
    if (rank == 0)
        printf("seconds %.6f\n", now() - t0);
}
#endif

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    const char *mode = argv[1];
    char path[4096];
    long n = atol(argv[3]);
    if (!strcmp(mode, "write") || !strcmp(mode, "fwrite") || !strcmp(mode, "fprintf")) {
        snprintf(path, sizeof path, "%s/%s.dat", argv[2], mode);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        FILE *f = fdopen(fd, "w");
        double t0 = now(), c0 = cpu();
        if (mode[0] == 'w') {
            for (long i = 0; i < n; i++)
                if (write(fd, "x", 1) != 1)
                    return 3;
        } else if (mode[1] == 'w') {
            for (long i = 0; i < n; i++)
                fwrite("x", 1, 1, f);
        } else {
            for (long i = 0; i < n; i++)
                fprintf(f, "%10ld %.10e %.10e %.10e\n", i, i * 0.5, i * 0.25, i * 0.125);
        }
        double c = cpu() - c0, t = now() - t0;
        fclose(f);
        unlink(path);
        printf("ns_per_call %.3f\nwall_ns_per_call %.3f\n", c * 1e9 / (double)n,
               t * 1e9 / (double)n);
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
        finish(path, rank, t0);
    } else if (!strcmp(mode, "mpi-checkpoint")) {
        static char buf[1 << 20];
        memset(buf, rank + 1, sizeof buf);
        snprintf(path, sizeof path, "%s/ckpt.%d.dat", argv[2], rank);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        for (long i = 0; i < n; i++)
            if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
                MPI_Abort(MPI_COMM_WORLD, 3);
        fsync(fd);
        close(fd);
        fd = open(path, O_RDONLY);
        for (long i = 0; i < n; i++)
            if (fd < 0 || read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
                MPI_Abort(MPI_COMM_WORLD, 4);
        close(fd);
        finish(path, rank, t0);
    } else if (!strcmp(mode, "mpi-ascii")) {
        snprintf(path, sizeof path, "%s/out.%d.txt", argv[2], rank);
        FILE *f = fopen(path, "w");
        if (!f)
            MPI_Abort(MPI_COMM_WORLD, 3);
        for (long i = 0; i < n; i++)
            fprintf(f, "%10ld %.10e %.10e %.10e\n", i, i * 0.5, i * 0.25, i * 0.125);
        fclose(f);
        finish(path, rank, t0);
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

/* I/O between MPI calls, for perfweave pop's useful time (time in I/O calls outside MPI
 * is not useful): each of STEPS steps, rank r spins (1 + r) units, then writes
 * (1 + r) x 4 MiB to its own file and fsyncs it, then an MPI_Barrier. The program
 * measures its I/O (the open, the writes, the fsyncs, the close) and its spinning by
 * its own clock (CLOCK_MONOTONIC) and prints
 *   rank R compute_s C io_s I bytes B
 * Its region of interest (MPI_Pcontrol(1)..(0)) holds the steps, the open and the close.
 * Usage: pop_io DIR [STEPS [UNIT_S]] (defaults 10, 0.01) */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void spin(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        fprintf(stderr, "usage: pop_io DIR [STEPS [UNIT_S]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    double unit = argc > 3 ? atof(argv[3]) : 0.01, compute = 0, io = 0;
    enum { MIB = 4 << 20 };
    char *buf = malloc(MIB), path[4096];
    memset(buf, 'x', MIB);
    snprintf(path, sizeof path, "%s/pop_io.%d", argv[1], rank);
    long bytes = 0;
    /* the region of interest: what the program measures, not its set-up before it (the
     * buffer's pages: 6-11 ms under load, computation it does not count; perfweave's own
     * work in the MPI_Init wrapper is outside the trace's window) */
    MPI_Pcontrol(1);
    double t = now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    io += now() - t;
    if (fd < 0) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int s = 0; s < steps; s++) {
        t = now();
        spin((1 + rank) * unit);
        compute += now() - t;
        t = now();
        for (int k = 0; k <= rank; k++)
            bytes += write(fd, buf, MIB);
        fsync(fd);
        io += now() - t;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    t = now();
    close(fd);
    io += now() - t;
    MPI_Pcontrol(0);
    printf("rank %d compute_s %.6f io_s %.6f bytes %ld\n", rank, compute, io, bytes);
    free(buf);
    MPI_Finalize();
    return 0;
}

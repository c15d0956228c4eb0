/* all_phases DIR: the ground truth of `perfweave run --all`'s correlation per phase
 * (tests/runtime/test_run_all.py). Before MPI_Init each rank writes 3 blocks of 4096
 * bytes to DIR/before.R; in the app phase it computes 0.3 s (rank 0: 0.5 s, so that the
 * others wait in the allreduce), exchanges halos with nonblocking calls, and writes 5
 * blocks of 8192 bytes to DIR/app.R. The halo exchange runs between MPI_Pcontrol(2) and
 * MPI_Pcontrol(1): the phase "pcontrol 2" (docs/regions.md). Prints per rank, through
 * syscall() (no I/O call of its own): the bytes written in each phase and the seconds it measured inside its MPI
 * calls between MPI_Init and MPI_Finalize (CLOCK_MONOTONIC around each call), and the
 * microseconds of the exchange and of its MPI calls alone. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "spin.h"

static long write_blocks(const char *path, int n, size_t size)
{
    static char buf[8192];
    long written = 0;
    memset(buf, 'a', sizeof buf);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        ssize_t k = write(fd, buf, size);
        if (k > 0)
            written += k;
    }
    close(fd);
    return written;
}

int main(int argc, char **argv)
{
    char path[4096], out[512];
    int rank = 0, size = 1;
    const char *dir = argc > 1 ? argv[1] : ".";
    snprintf(path, sizeof path, "%s/before.%d", dir, (int)getpid());
    long before = write_blocks(path, 3, 4096);
    MPI_Init(&argc, &argv);
    double mpi = 0, t;
    t = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mpi += now() - t;
    spin(rank == 0 ? 0.5 : 0.3);
    double v = rank, sum = 0;
    t = now();
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mpi += now() - t;
    double halo[4096], recv[4096];
    memset(halo, 0, sizeof halo);
    MPI_Pcontrol(2);
    double loop0 = now(), loop_mpi = mpi;
    for (int step = 0; step < 20; step++) {
        MPI_Request req[2];
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        t = now();
        MPI_Irecv(recv, 4096, MPI_DOUBLE, left, step, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(halo, 4096, MPI_DOUBLE, right, step, MPI_COMM_WORLD, &req[1]);
        mpi += now() - t;
        spin(0.005);
        t = now();
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        mpi += now() - t;
    }
    double loop = now() - loop0;
    loop_mpi = mpi - loop_mpi;
    MPI_Pcontrol(1);
    snprintf(path, sizeof path, "%s/app.%d", dir, rank);
    long app = write_blocks(path, 5, 8192);
    spin(0.05);
    t = now();
    MPI_Barrier(MPI_COMM_WORLD);
    mpi += now() - t;
    int k = snprintf(out, sizeof out,
                     "rank %d before %ld app %ld mpi_us %ld loop_us %ld loop_mpi_us %ld\n", rank,
                     before, app, (long)(mpi * 1e6), (long)(loop * 1e6), (long)(loop_mpi * 1e6));
    syscall(SYS_write, 1, out, (size_t)k);
    MPI_Finalize();
    return 0;
}

/* The program of the ReFrame check (tests/runtime/reframe/): STEPS steps (default 5); in
 * each, every rank spins WORK_MS ms of CLOCK_MONOTONIC time, the last rank 1.5 times as
 * long (a known imbalance: the others wait for it in MPI_Sendrecv), writes 64 KiB to
 * its own file, then the ranks exchange 8 KiB with their ring neighbours and sum a
 * value. The work argument makes a run slower by a known factor. Each rank prints on
 * stderr its own measure of its spinning, on a machine however busy:
 *   rank R work WORK_S
 * Usage: reframe_work [WORK_MS [STEPS]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include "spin.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double work_s = (argc > 1 ? atof(argv[1]) : 100.0) / 1000.0;
    int steps = argc > 2 ? atoi(argv[2]) : 5;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static char out[8192], in[8192], block[65536];
    char name[64];
    snprintf(name, sizeof name, "reframe_work.%d.out", rank);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double in_work = 0, sum = 0, one = 1;
    for (int s = 0; s < steps; s++) {
        double t = now();
        spin(rank == size - 1 ? 1.5 * work_s : work_s);
        in_work += now() - t;
        if (write(fd, block, sizeof block) != sizeof block)
            return 1;
        MPI_Sendrecv(out, sizeof out, MPI_CHAR, (rank + 1) % size, 0, in, sizeof in, MPI_CHAR,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    close(fd);
    unlink(name);
    fprintf(stderr, "rank %d work %.6f\n", rank, in_work);
    MPI_Finalize();
    return 0;
}

/* Ranks that compute until they are killed (tests/runtime/test_signal_ending.py): after
 * MPI_Init and one MPI_Barrier each rank spins in rounds of about 1 ms of arithmetic,
 * calling no MPI, and after each round stores how many it has done (8 bytes, native
 * int64) at the start of the file named by argv[1] followed by its rank, then its pid
 * (8 bytes), so whoever signals the run knows every rank is computing. */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argc > 1 ? argv[1] : "compute_forever", rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int64_t pid = getpid(), zero = 0;
    if (fd < 0 || pwrite(fd, &zero, sizeof zero, 0) != sizeof zero ||
        pwrite(fd, &pid, sizeof pid, sizeof zero) != sizeof pid)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD);
    volatile double x = 0;
    for (int64_t done = 0;;) {
        for (double t0 = now(); now() - t0 < 1e-3;)
            for (int i = 0; i < 1000; i++)
                x += i * 0.5;
        done++;
        if (pwrite(fd, &done, sizeof done, 0) != sizeof done)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* A ring that runs until it is killed (tests/runtime/test_trace_killed.py): each
 * iteration every rank sends its counter to the next rank and receives from the previous
 * one with one MPI_Sendrecv, then, every 8 iterations, joins an MPI_Allreduce. After each
 * completed iteration the rank stores how many it has completed (8 bytes, native int64)
 * at the start of the file named by argv[1] followed by its rank (then its pid, 8 bytes),
 * so whoever kills the run knows how far every rank got: ground truth taken from the run
 * itself. */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argc > 1 ? argv[1] : "ring_forever", rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t pid = getpid(), zero = 0;
    if (pwrite(fd, &zero, sizeof zero, 0) != sizeof zero ||
        pwrite(fd, &pid, sizeof pid, sizeof zero) != sizeof pid)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    struct timespec pause = {0, 200000}; /* 0.2 ms: about 5000 iterations a second */
    for (int64_t done = 0;;) {
        int64_t out = done, in = -1, sum = 0;
        MPI_Sendrecv(&out, 1, MPI_INT64_T, right, 1, &in, 1, MPI_INT64_T, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (done % 8 == 7)
            MPI_Allreduce(&in, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        done++;
        if (pwrite(fd, &done, sizeof done, 0) != sizeof done)
            MPI_Abort(MPI_COMM_WORLD, 2);
        nanosleep(&pause, NULL);
    }
}

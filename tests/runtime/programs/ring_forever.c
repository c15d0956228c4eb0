/* A ring that runs until it is killed (tests/runtime/test_trace_killed.py): each
 * iteration every rank sends its counter to the next rank and receives from the previous
 * one with one MPI_Sendrecv, then, every 8 iterations, joins an MPI_Allreduce. After each
 * completed iteration the rank stores how many it has completed (8 bytes, native int64)
 * at the start of the file named by argv[1] followed by its rank (then its pid, 8 bytes),
 * so whoever kills the run knows how far every rank got: ground truth taken from the run
 * itself. With a second argument "thread", each rank first starts a thread that only
 * sleeps, with no signal blocked (as MPI libraries' progress threads are), and stores its
 * thread id after the pid (8 bytes): a signal sent to that thread is handled there while
 * the main thread goes on. */
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int64_t sleeper_tid;

static void *sleeper(void *arg)
{
    (void)arg;
    __atomic_store_n(&sleeper_tid, (int64_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    for (;;)
        sleep(1000);
    return NULL;
}

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
    int64_t pid = getpid(), zero = 0, tid = 0;
    if (argc > 2 && !strcmp(argv[2], "thread")) {
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
        while (!(tid = __atomic_load_n(&sleeper_tid, __ATOMIC_ACQUIRE)))
            usleep(1000);
    }
    if (pwrite(fd, &zero, sizeof zero, 0) != sizeof zero ||
        pwrite(fd, &pid, sizeof pid, sizeof zero) != sizeof pid ||
        pwrite(fd, &tid, sizeof tid, 2 * sizeof zero) != sizeof tid)
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

/* io_segments DIR N [thread]: the segment trace's ground truth
 * (tests/runtime/test_io_segments.py). Each process (each rank when built with -DWITH_MPI)
 * opens DIR/seg.R (R: its rank, 0 without MPI), writes 3 x 10 bytes with write() (offsets
 * 0, 10, 20), then N pwrites of 100 * (i + 1) bytes at offset 4096 * (i + 1), preads 50
 * bytes at 0 and 100 at 4096, stats the file and closes it: 1 open, N + 3 writes, 2 reads,
 * 1 stat, 1 close. With MPI, a barrier comes between the writes and the reads. Prints
 * "path DIR/seg.R". With "thread" (MPI, built with -pthread): a second thread does all
 * that (MPI_THREAD_SERIALIZED: the main thread waits for it), then a third thread, which
 * makes no MPI call, writes 1 byte to DIR/helper.R (each prints "tid NAME TID"); then the
 * main thread calls MPI_Barrier. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#include <pthread.h>
#endif

static int rank, n;
static const char *dir;

static int segments(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seg.%d", dir, rank);
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
    return 0;
}

#ifdef WITH_MPI
static void *worker(void *rc)
{
    printf("tid worker %d\n", (int)gettid());
    *(int *)rc = segments();
    return NULL;
}

static void *helper(void *rc)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/helper.%d", dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    *(int *)rc = fd < 0 || write(fd, "h", 1) != 1;
    close(fd);
    printf("tid helper %d\n", (int)gettid());
    return NULL;
}
#endif

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    dir = argv[1];
    n = atoi(argv[2]);
    int rc = 0;
#ifdef WITH_MPI
    int threaded = argc > 3 && !strcmp(argv[3], "thread"), provided;
    MPI_Init_thread(&argc, &argv, threaded ? MPI_THREAD_SERIALIZED : MPI_THREAD_SINGLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (threaded) {
        pthread_t t;
        int rc2 = 0;
        pthread_create(&t, NULL, worker, &rc);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, helper, &rc2);
        pthread_join(t, NULL);
        rc = rc ? rc : rc2 ? 8 : 0;
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        rc = segments();
    }
    MPI_Finalize();
#else
    rc = segments();
#endif
    return rc;
}

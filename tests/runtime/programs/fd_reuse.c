/* A program that closes every descriptor from 3 up, as daemons and process managers do,
 * then opens its own (a pipe, a socket pair, a file), which take the numbers freed, and
 * does I/O on them for SECONDS (default 1) in a thread it starts then (a thread's first
 * unwinds are where an unwinder validates memory), checking every byte it reads back. Built
 * with -fno-asynchronous-unwind-tables -fno-unwind-tables, its functions have no
 * call-frame information, so an unwinder follows their frame chain. Prints one line (a
 * launcher interleaves the lines of its ranks, never their parts):
 *   first N fds P0 P1 S0 S1 F bytes N bad M
 * the number its first open() got after closing (3), the numbers of its pipe, socket pair
 * and file, the bytes read back and how many differed from what was written.
 * With -DWITH_MPI: the descriptors are closed before MPI_Init, except the launcher's
 * (MPICH's PMI_FD), and the ranks sum their counts at the end (rank 0 prints "total").
 * Usage: fd_reuse [SECONDS] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include "spin.h"

#define BLOCK 512

static void fill(unsigned char *b, long seq)
{
    for (int i = 0; i < BLOCK; i++)
        b[i] = (unsigned char)(seq * 131 + i * 7);
}

static long mismatches(const unsigned char *b, long seq)
{
    unsigned char want[BLOCK];
    fill(want, seq);
    long bad = 0;
    for (int i = 0; i < BLOCK; i++)
        bad += b[i] != want[i];
    return bad;
}

/* one block through a descriptor pair (written, then read back whole) */
__attribute__((noinline)) static long through(int w, int r, long seq, long *bytes)
{
    unsigned char out[BLOCK], in[BLOCK];
    fill(out, seq);
    if (write(w, out, BLOCK) != BLOCK)
        return BLOCK;
    long got = 0;
    while (got < BLOCK) {
        ssize_t n = read(r, in + got, BLOCK - got);
        if (n <= 0)
            return BLOCK;
        got += n;
    }
    *bytes += BLOCK;
    return mismatches(in, seq);
}

/* busy work between blocks, where most samples land */
__attribute__((noinline)) static double churn(long seq)
{
    volatile double x = 0;
    for (int i = 0; i < 20000; i++)
        x += (i ^ seq) * 0.5;
    return x;
}

__attribute__((noinline)) static long io_round(const int *fd, long seq, long *bytes)
{
    long bad = through(fd[1], fd[0], seq, bytes) + through(fd[2], fd[3], seq + 1, bytes);
    unsigned char out[BLOCK];
    fill(out, seq + 2);
    if (write(fd[4], out, BLOCK) != BLOCK)
        bad += BLOCK;
    churn(seq);
    return bad;
}

__attribute__((noinline)) static long io_loop(const int *fd, double seconds, long *bytes)
{
    long bad = 0, seq = 0;
    for (double t0 = now(); now() - t0 < seconds; seq += 3)
        bad += io_round(fd, seq, bytes);
    /* the file, read back from its start */
    unsigned char in[BLOCK];
    if (lseek(fd[4], 0, SEEK_SET) != 0)
        return bad + 1;
    for (long s = 0; s < seq; s += 3) {
        if (read(fd[4], in, BLOCK) != BLOCK)
            return bad + BLOCK;
        *bytes += BLOCK;
        bad += mismatches(in, s + 2);
    }
    return bad;
}

typedef struct work {
    const int *fd;
    double seconds;
    long bytes, bad;
} work;

static void *worker(void *p)
{
    work *w = p;
    w->bad = io_loop(w->fd, w->seconds, &w->bytes);
    return NULL;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1;
    const char *keep = getenv("PMI_FD");
    int kept = keep ? atoi(keep) : -1;
    /* close_range where the kernel has it (one call, as daemons do now), else a loop */
    if (kept > 3 ? close_range(3, kept - 1, 0) == 0 && close_range(kept + 1, ~0U, 0) == 0
                 : close_range(kept == 3 ? 4 : 3, ~0U, 0) == 0) {
    } else {
        long max = sysconf(_SC_OPEN_MAX);
        for (int i = 3; i < (max > 0 && max < 65536 ? max : 65536); i++)
            if (i != kept)
                close(i);
    }
    int first = open("/dev/null", O_RDONLY);
    close(first);
    int fd[5];
    char path[] = "/tmp/fd_reuse.XXXXXX";
    if (pipe(fd) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, fd + 2) != 0 ||
        (fd[4] = mkstemp(path)) < 0)
        return 2;
    unlink(path);
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    work w = {fd, seconds, 0, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, worker, &w) != 0 || pthread_join(th, NULL) != 0)
        return 3;
    long bytes = w.bytes, bad = w.bad;
    printf("first %d fds %d %d %d %d %d bytes %ld bad %ld\n", first, fd[0], fd[1], fd[2],
           fd[3], fd[4], bytes, bad);
#ifdef WITH_MPI
    long mine[2] = {bytes, bad}, sum[2];
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Reduce(mine, sum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("total bytes %ld bad %ld\n", sum[0], sum[1]);
    MPI_Finalize();
#endif
    return bad != 0;
}

/* io_cases MODE DIR N: the I/O profile's ground truths (tests/runtime/test_io.py).
 *   loop    N times: open DIR/loop.dat, write 1 byte, close
 *   fork    the parent writes N bytes to DIR/parent.dat, a child 2N to DIR/child.dat
 *   kill    N writes of 10 bytes to DIR/kill.dat, then SIGKILL to itself
 *   threads two threads, each with its own descriptor of DIR/shared.dat, N writes of 100
 *           bytes at their own offsets
 *   overlap the main thread (the process's first I/O calls) opens two FIFOs DIR/fifo1,
 *           DIR/fifo2 and blocks in a read of the first; a second thread's first I/O
 *           call, N ms later, is a read of the other that blocks too; a third thread, 3N
 *           ms after the start, writes a byte to each (without an I/O call before).
 *           Prints the two reads' own seconds
 *   notfiles N bytes through a pipe and through a socket pair (write, read, each byte a
 *           call, from two threads), N anonymous mmap/munmap of 1 MiB and N malloc/free
 *           of 1 MiB (malloc maps them), a dup2 of the pipe onto a file's descriptor
 *           and a write there; between them one write of N bytes to DIR/file.dat.
 *           Prints the file write's own microseconds
 *   many    N files DIR/many.NNNNN each opened, written (3 bytes), closed, stat'd and
 *           removed, from the main thread and a second thread (N / 2 each); exits 7
 *           (an exit status of its own) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

static char path[4096];
static int n;
static int p1[2], p2[2];
static double t_second; /* the second thread's read, seconds */

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

static void *second(void *arg)
{
    char c;
    sleep_ms(n);
    double t0 = now();
    if (read(p2[0], &c, 1) != 1)
        exit(3);
    t_second = now() - t0;
    return NULL;
}

static void *waker(void *arg)
{
    sleep_ms(3 * n);
    /* the bytes go through syscall(): the wakeups are not I/O calls of the program */
    syscall(SYS_write, p1[1], "x", 1);
    syscall(SYS_write, p2[1], "x", 1);
    return NULL;
}

static const char *many_dir;

static void *many_files(void *arg)
{
    long k = (long)arg;
    char p[4200];
    struct stat st;
    for (int i = (int)k; i < n; i += 2) {
        snprintf(p, sizeof p, "%s/many.%05d", many_dir, i);
        int fd = open(p, O_WRONLY | O_CREAT, 0644);
        if (fd < 0 || write(fd, "abc", 3) != 3)
            exit(3);
        close(fd);
        stat(p, &st);
        unlink(p);
    }
    return NULL;
}

/* reads the pipe's bytes one call each (a second thread making calls on a pipe) */
static void *pipe_reader(void *arg)
{
    int *pp = arg;
    char c;
    for (int i = 0; i < n; i++)
        if (read(pp[0], &c, 1) != 1)
            exit(3);
    return NULL;
}

static void *writer(void *arg)
{
    long k = (long)arg;
    char buf[100];
    memset(buf, 'a', sizeof buf);
    int fd = open(path, O_WRONLY);
    for (int i = 0; i < n; i++)
        pwrite(fd, buf, 100, (off_t)(k * n + i) * 100);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argv[1], *dir = argv[2];
    n = atoi(argv[3]);
    if (!strcmp(mode, "loop")) {
        snprintf(path, sizeof path, "%s/loop.dat", dir);
        for (int i = 0; i < n; i++) {
            int fd = open(path, O_WRONLY | O_CREAT, 0644);
            write(fd, "x", 1);
            close(fd);
        }
    } else if (!strcmp(mode, "fork")) {
        char buf[4096];
        memset(buf, 'b', sizeof buf);
        pid_t child = fork();
        snprintf(path, sizeof path, "%s/%s.dat", dir, child == 0 ? "child" : "parent");
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int i = 0; i < (child == 0 ? 2 * n : n); i++)
            write(fd, buf, 1);
        close(fd);
        if (child == 0)
            _exit(0);
        waitpid(child, NULL, 0);
        printf("child %d\n", (int)child);
    } else if (!strcmp(mode, "kill")) {
        snprintf(path, sizeof path, "%s/kill.dat", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int i = 0; i < n; i++)
            write(fd, "0123456789", 10);
        kill(getpid(), SIGKILL);
    } else if (!strcmp(mode, "threads")) {
        snprintf(path, sizeof path, "%s/shared.dat", dir);
        close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
        pthread_t t[2];
        for (long k = 0; k < 2; k++)
            pthread_create(&t[k], NULL, writer, (void *)k);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
    } else if (!strcmp(mode, "overlap")) {
        char f1[4200], f2[4200];
        snprintf(f1, sizeof f1, "%s/fifo1", dir);
        snprintf(f2, sizeof f2, "%s/fifo2", dir);
        /* FIFOs opened through open() are files of the program (a pipe() is not);
         * O_RDWR: the open does not wait for a writer, the read does */
        if (mkfifo(f1, 0600) || mkfifo(f2, 0600))
            return 2;
        p1[0] = p1[1] = open(f1, O_RDWR);
        p2[0] = p2[1] = open(f2, O_RDWR);
        if (p1[0] < 0 || p2[0] < 0)
            return 2;
        pthread_t t[2];
        pthread_create(&t[0], NULL, second, NULL);
        pthread_create(&t[1], NULL, waker, NULL);
        char c;
        double t0 = now();
        if (read(p1[0], &c, 1) != 1)
            return 3;
        double t_first = now() - t0;
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        printf("first_us %ld\nsecond_us %ld\n", (long)(t_first * 1e6), (long)(t_second * 1e6));
    } else if (!strcmp(mode, "many")) {
        many_dir = dir;
        pthread_t t;
        pthread_create(&t, NULL, many_files, (void *)1L);
        many_files((void *)0L);
        pthread_join(t, NULL);
        printf("files %d\n", n);
        return 7;
    } else if (!strcmp(mode, "notfiles")) {
        int pp[2], sp[2];
        if (pipe(pp) || socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
            return 2;
        pthread_t t;
        pthread_create(&t, NULL, pipe_reader, pp);
        char c = 'p';
        for (int i = 0; i < n; i++)
            if (write(pp[1], &c, 1) != 1 || write(sp[0], &c, 1) != 1 || read(sp[1], &c, 1) != 1)
                return 3;
        pthread_join(t, NULL);
        for (int i = 0; i < n; i++) {
            void *m =
                mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                return 4;
            ((char *)m)[0] = 1;
            munmap(m, 1 << 20);
            char *h = malloc(1 << 20);
            h[0] = 1;
            free(h);
        }
        snprintf(path, sizeof path, "%s/file.dat", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char *buf = calloc(1, (size_t)n);
        double t0 = now();
        if (write(fd, buf, (size_t)n) != n)
            return 5;
        double t_write = now() - t0;
        /* the pipe's write end onto the file's descriptor: that descriptor is the pipe's */
        dup2(pp[1], fd);
        if (write(fd, &c, 1) != 1)
            return 6;
        printf("write_us %ld\n", (long)(t_write * 1e6));
    }
    printf("pid %d\n", (int)getpid());
    return 0;
}

/* io_cases MODE DIR N: the I/O profile's ground truths (tests/runtime/test_io.py).
 *   loop    N times: open DIR/loop.dat, write 1 byte, close
 *   fork    the parent writes N bytes to DIR/parent.dat, a child 2N to DIR/child.dat
 *   kill    N writes of 10 bytes to DIR/kill.dat, then SIGKILL to itself
 *   threads two threads, each with its own descriptor of DIR/shared.dat, N writes of 100
 *           bytes at their own offsets */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[4096];
static int n;

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
    }
    printf("pid %d\n", (int)getpid());
    return 0;
}

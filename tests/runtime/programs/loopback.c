/* Node-timeline ground truth: burns CPU for BURN_MS milliseconds, then sends MIB MiB
 * over a TCP connection on the loopback interface (from a forked child to this
 * process, 1 MiB per write, 2 ms apart), and prints the bytes received and the CPU
 * time this process used (getrusage: all its threads, not the child), which on a busy
 * machine is less than BURN_MS.
 * Usage: loopback MIB [BURN_MS] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 100;
    long burn_ms = argc > 2 ? atol(argv[2]) : 0;
    volatile double x = 0;
    for (double t0 = now(); now() - t0 < burn_ms / 1000.0;)
        for (int i = 0; i < 100000; i++)
            x += i * 0.5;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || getsockname(ls, (struct sockaddr *)&a, &al) ||
        listen(ls, 1)) {
        perror("socket");
        return 1;
    }
    static char buf[1 << 20];
    pid_t p = fork();
    if (p == 0) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof a))
            _exit(1);
        for (long i = 0; i < mib; i++) {
            size_t off = 0;
            while (off < sizeof buf) {
                ssize_t w = write(c, buf + off, sizeof buf - off);
                if (w <= 0)
                    _exit(1);
                off += (size_t)w;
            }
            usleep(2000);
        }
        close(c);
        _exit(0);
    }
    int s = accept(ls, NULL, NULL);
    long total = 0;
    ssize_t r;
    while ((r = read(s, buf, sizeof buf)) > 0)
        total += r;
    waitpid(p, NULL, 0);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    printf("received %ld bytes\ncpu %.6f\n", total, cpu);
    return total == mib * (long)sizeof buf ? 0 : 1;
}

/* io_phases DIR N MS: the I/O over time's ground truth (tests/runtime/test_io_phases.py).
 * A first phase writes N blocks of 4096 bytes to DIR/phases.dat, one every MS/N ms
 * (MS ms in all), then a second phase with no I/O call sleeps as long as the first took
 * (measured) and 20 % more. Prints (with syscall(), no I/O call) the bytes written and
 * both phases' seconds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

int main(int argc, char **argv)
{
    char path[4096], buf[4096];
    int n = atoi(argv[2]), ms = atoi(argv[3]);
    snprintf(path, sizeof path, "%s/phases.dat", argv[1]);
    memset(buf, 'x', sizeof buf);
    double t0 = now();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 2;
    long written = 0;
    for (int i = 0; i < n; i++) {
        ssize_t k = write(fd, buf, sizeof buf);
        if (k > 0)
            written += k;
        sleep_s(ms / 1000.0 / n);
    }
    close(fd);
    double t1 = now();
    sleep_s(1.2 * (t1 - t0));
    /* through syscall(): the output is not an I/O call of the program's */
    int k = snprintf(buf, sizeof buf, "written %ld\nfirst_us %ld\nsecond_us %ld\n", written,
                     (long)((t1 - t0) * 1e6), (long)((now() - t1) * 1e6));
    syscall(SYS_write, 1, buf, (size_t)k);
    return 0;
}

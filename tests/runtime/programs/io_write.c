/* Sampling activities, ground truth for I/O: for SECONDS (default 2), phases of 20 ms
 * alternate between writing 64 KiB blocks to a temporary file with write() + fsync()
 * (write_phase, lseek back to the start so that the file stays small) and computing
 * (spin): about half of the time in I/O calls. The file is made in DIR (default
 * $TMPDIR, else /tmp) and removed at once. Prints on stderr the wall time of each kind
 * of phase, as the program measured it: `io WALL_S spin WALL_S`.
 * Usage: io_write [SECONDS] [DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"

static char block[64 << 10];

__attribute__((noinline)) static void write_phase(int fd, double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds) {
        if (lseek(fd, 0, SEEK_SET) < 0 || write(fd, block, sizeof block) < 0 || fsync(fd) < 0) {
            perror("io_write");
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/pw_io_write.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("io_write: mkstemp");
        return 1;
    }
    unlink(path);
    memset(block, 'x', sizeof block);
    double t0 = now(), t = t0, mid, io_s = 0, spin_s = 0;
    while (t - t0 < seconds) {
        write_phase(fd, 0.02);
        mid = now();
        io_s += mid - t;
        spin(0.02);
        t = now();
        spin_s += t - mid;
    }
    close(fd);
    fprintf(stderr, "io %.6f spin %.6f\n", io_s, spin_s);
    return 0;
}

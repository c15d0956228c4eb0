/* A program for full-disk runs, with MPI or (built with -DSERIAL) without.
 *   disk_full work SECONDS CODE  computes for SECONDS (with MPI: an MPI_Allreduce every
 *                                millisecond or so, which also decides when all stop),
 *                                prints one line, exits with CODE
 *   disk_full fill SECONDS CODE  writes 64 KiB blocks to ./fill-R.bin until a write
 *                                fails, prints how many bytes it wrote and the errno's
 *                                name, then works like `work` and exits with CODE
 * Every process prints one line: "rank R: ...". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef SERIAL
#include <mpi.h>
#endif
#include "spin.h"

int main(int argc, char **argv)
{
    int rank = 0;
    if (argc < 4)
        return 64;
#ifndef SERIAL
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    char line[200];
    line[0] = 0;
    if (strcmp(argv[1], "fill") == 0) {
        static char block[65536];
        char name[64];
        memset(block, 'x', sizeof block);
        snprintf(name, sizeof name, "fill-%d.bin", rank);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        long long total = 0;
        int err = 0;
        for (;;) {
            ssize_t w = write(fd, block, sizeof block);
            if (w < 0) {
                err = errno;
                break;
            }
            total += w;
        }
        close(fd);
        snprintf(line, sizeof line, "; wrote %lld bytes until %s", total,
                 err == ENOSPC ? "ENOSPC" : strerror(err));
    }
    double seconds = atof(argv[2]), t0 = now(), x = 1;
    long iterations = 0;
    for (int done = 0; !done;) {
        for (int i = 0; i < 20000; i++)
            x = x * 1.0000001 + 1e-9;
        iterations++;
        done = now() - t0 >= seconds;
#ifndef SERIAL
        /* stop together: every rank makes the same collectives */
        int mine = done;
        MPI_Allreduce(&mine, &done, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    }
    printf("rank %d: %ld iterations%s\n", rank, iterations, line);
    fflush(stdout);
#ifndef SERIAL
    MPI_Finalize();
#endif
    return atoi(argv[3]);
}

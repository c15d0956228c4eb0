/* The descriptor numbers a program gets, which POSIX fixes (open and dup return the
 * lowest free one) and programs rely on (a shell redirecting output closes a descriptor
 * and dup2()s onto it). Prints the number of its first open() and, for ARG1 seconds
 * (default 1), takes the lowest free number, frees it and opens or dup2()s onto it
 * again, counting the times it got another number or an error (EBUSY from dup2 while
 * another thread of the process is opening a file). With -DWITH_MPI: the same between
 * MPI_Init and MPI_Finalize. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif
#include "spin.h"

int main(int argc, char **argv)
{
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int first = open("/dev/null", O_RDONLY);
    int other = open("/dev/zero", O_RDONLY);
    long rounds = 0, moved = 0, busy = 0, failed = 0;
    double end = now() + secs;
    close(first);
    while (now() < end) {
        int fd = open("/dev/null", O_RDONLY);          /* the lowest free number */
        close(fd);
        int again = open("/dev/null", O_RDONLY);       /* the same, unless taken */
        if (again != fd)
            moved++;
        if (again >= 0)
            close(again);
        if (dup2(other, fd) != fd) {                   /* onto a number just freed */
            if (errno == EBUSY)
                busy++;
            else
                failed++;
        } else {
            close(fd);
        }
        rounds++;
    }
    printf("first %d\n", first);
    printf("rounds %ld moved %ld busy %ld failed %ld\n", rounds, moved, busy, failed);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}

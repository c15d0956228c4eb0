/* Start-up apart from the app time: sleeps BEFORE seconds before MPI_Init (its own time,
 * not the start-up), computes WORK seconds between MPI_Init and MPI_Finalize, sleeps
 * AFTER seconds after MPI_Finalize (the shutdown), and prints what it measured with
 * CLOCK_MONOTONIC on stderr: `rank R init S app S shutdown S` (MPI_Init's call to its
 * return; its return to MPI_Finalize's call; that call to the end of main). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spin.h"

static void pause_for(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    double before = argc > 1 ? atof(argv[1]) : 0.3;
    double work = argc > 2 ? atof(argv[2]) : 0.3;
    double after = argc > 3 ? atof(argv[3]) : 0.2;
    pause_for(before);
    double t0 = now();
    MPI_Init(&argc, &argv);
    double t1 = now();
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    spin(work);
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now();
    MPI_Finalize();
    pause_for(after);
    double t3 = now();
    fprintf(stderr, "rank %d init %.6f app %.6f shutdown %.6f\n", rank, t1 - t0, t2 - t1,
            t3 - t2);
    return 0;
}

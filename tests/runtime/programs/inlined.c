/* Sampling ground truth for inlined frames: solver() (a real frame) runs hot() and
 * cold(), both inlined into it (always_inline), in slices of 7 ms and 3 ms of
 * CLOCK_MONOTONIC time for SECONDS seconds (default 2): DWARF's inline records must keep
 * hot ~70 % and cold ~30 % of the time (on an idle core) as callers of spin() under
 * main -> solver. On a busy machine a slice that loses its core lasts until the process
 * runs again: solver measures the split of the run (the clock read between the slices)
 * and prints it with the process's CPU time on stderr: hot WALL_S cold WALL_S cpu CPU_S
 * Usage: inlined [SECONDS] */
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

static inline __attribute__((always_inline)) void hot(void) { spin(0.007); }
static inline __attribute__((always_inline)) void cold(void) { spin(0.003); }

__attribute__((noinline)) void solver(double seconds)
{
    double t0 = now(), t = t0, mid, in_hot = 0, in_cold = 0;
    while (t - t0 < seconds) {
        hot();
        mid = now();
        in_hot += mid - t;
        cold();
        t = now();
        in_cold += t - mid;
    }
    fprintf(stderr, "hot %.6f cold %.6f cpu %.6f\n", in_hot, in_cold, cpu_seconds());
}

int main(int argc, char **argv)
{
    solver(argc > 1 ? atof(argv[1]) : 2.0);
    return 0;
}

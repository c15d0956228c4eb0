/* Sampling ground truth for inlined frames: solver() (a real frame) runs hot() and
 * cold(), both inlined into it (always_inline), in slices of 7 ms and 3 ms for SECONDS
 * seconds (default 2): DWARF's inline records must keep hot ~70 % and cold ~30 % of the
 * time as callers of spin() under main -> solver. Usage: inlined [SECONDS] */
#include <stdlib.h>

#include "spin.h"

static inline __attribute__((always_inline)) void hot(void) { spin(0.007); }
static inline __attribute__((always_inline)) void cold(void) { spin(0.003); }

__attribute__((noinline)) void solver(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds) {
        hot();
        cold();
    }
}

int main(int argc, char **argv)
{
    solver(argc > 1 ? atof(argv[1]) : 2.0);
    return 0;
}

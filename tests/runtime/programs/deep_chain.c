/* A stack deeper than a sample holds (32 frames): shallow() spins for SECONDS, then
 * deep() calls itself DEPTH times and spins as long at the bottom, with frame pointers.
 * Each deep() adds to its callee's result after the call, so no call is a tail call.
 * main measures both on its own clock and prints them on stderr:
 *   shallow WALL_S deep WALL_S cpu CPU_S
 * Usage: deep_chain DEPTH [SECONDS] */
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) static void shallow(double s) { spin(s); }

__attribute__((noinline)) static int deep(int n, double s)
{
    if (n == 0) {
        spin(s);
        return 0;
    }
    return deep(n - 1, s) + 1;
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 100;
    double s = argc > 2 ? atof(argv[2]) : 0.5, t0 = now();
    shallow(s);
    double t1 = now();
    int n = deep(depth, s);
    double t2 = now();
    fprintf(stderr, "shallow %.6f deep %.6f cpu %.6f\n", t1 - t0, t2 - t1, cpu_seconds());
    return n != depth;
}

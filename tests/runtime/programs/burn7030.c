/* Sampling ground truth: heavy() and light() spin alternately, 7 ms and 3 ms of
 * CLOCK_MONOTONIC time, for SECONDS seconds (default 2): 70 % / 30 % of the wall time
 * on an idle core. On a busy machine a call that loses its core lasts until the
 * process runs again, so the split is measured here, in the same run: main reads the
 * clock between the calls, so the two functions' wall times tile the run, and prints
 * them with the process's CPU time (getrusage) on stderr:
 *   heavy WALL_S light WALL_S cpu CPU_S
 * Built with frame pointers (-fno-omit-frame-pointer). Usage: burn7030 [SECONDS] */
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void heavy(void) { spin(0.007); }
__attribute__((noinline)) void light(void) { spin(0.003); }

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0, t0 = now(), t = t0, mid;
    double in_heavy = 0, in_light = 0;
    while (t - t0 < seconds) {
        heavy();
        mid = now();
        in_heavy += mid - t;
        light();
        t = now();
        in_light += t - mid;
    }
    fprintf(stderr, "heavy %.6f light %.6f cpu %.6f\n", in_heavy, in_light, cpu_seconds());
    return 0;
}

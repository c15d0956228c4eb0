/* Sampling ground truth: heavy() burns 70 % of the CPU time, light() 30 %, in
 * alternating slices of 7 ms and 3 ms, for SECONDS seconds (default 2). Built with
 * frame pointers (-fno-omit-frame-pointer). Usage: burn7030 [SECONDS] */
#include <stdlib.h>

#include "spin.h"

__attribute__((noinline)) void heavy(void) { spin(0.007); }
__attribute__((noinline)) void light(void) { spin(0.003); }

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0, t0 = now();
    while (now() - t0 < seconds) {
        heavy();
        light();
    }
    return 0;
}

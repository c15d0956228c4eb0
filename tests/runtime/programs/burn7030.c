/* Sampling ground truth: heavy() burns 70 % of the CPU time, light() 30 %, in
 * alternating slices of 7 ms and 3 ms, for SECONDS seconds (default 2). Built with
 * frame pointers (-fno-omit-frame-pointer). Usage: burn7030 [SECONDS] */
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

volatile double sink;

__attribute__((noinline)) static void spin(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
}

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

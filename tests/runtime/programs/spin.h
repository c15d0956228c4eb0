/* Busy work of known duration for the sampling programs: spin(s) burns CPU for s
 * seconds of CLOCK_MONOTONIC time (now()), never inlined so that it is a frame. */
#ifndef PW_TEST_SPIN_H
#define PW_TEST_SPIN_H
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile double sink;

__attribute__((noinline, unused)) static void spin(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
}
#endif

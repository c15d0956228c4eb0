/* Sampled stacks through code without frame pointers: built with -O2
 * -fomit-frame-pointer, main -> outer -> middle -> inner -> hot, where hot burns the CPU
 * for SECONDS (default 1). Each caller adds to the callee's result after the call, so no
 * call is a tail call and every function keeps its frame on the stack.
 * Usage: nofp_chain [SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "spin.h"

__attribute__((noinline)) static double hot(double seconds)
{
    volatile double x = 0;
    for (double t0 = now(); now() - t0 < seconds;)
        for (int i = 0; i < 20000; i++)
            x += i * 0.5;
    return x;
}

__attribute__((noinline)) static double inner(double s) { return hot(s) + 1; }
__attribute__((noinline)) static double middle(double s) { return inner(s) + 2; }
__attribute__((noinline)) static double outer(double s) { return middle(s) + 3; }

int main(int argc, char **argv)
{
    double s = argc > 1 ? atof(argv[1]) : 1;
    printf("%d\n", outer(s) > 0);
    return 0;
}

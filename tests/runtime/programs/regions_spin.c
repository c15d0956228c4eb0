/* Regions as nodes of the samples' call tree (docs/regions.md "Where they appear"): in
 * the phase "compute", the region "alpha" spins ALPHA seconds and the region "beta" spins
 * around its nested region "inner". Each region's wall time by the program's own clock
 * (CLOCK_MONOTONIC, just outside its begin and end) on stderr:
 * `alpha S beta S inner S`. Usage: regions_spin ALPHA BETA INNER */
#include <perfweave/perfweave.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static volatile double sink;

static void spin(double seconds)
{
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            sink += i * 0.5;
}

int main(int argc, char **argv)
{
    double alpha = argc > 1 ? atof(argv[1]) : 0.3, beta = argc > 2 ? atof(argv[2]) : 0.1,
           inner = argc > 3 ? atof(argv[3]) : 0.1;
    perfweave_phase_begin("compute");
    double t0 = now();
    perfweave_region_begin("alpha");
    spin(alpha);
    perfweave_region_end("alpha");
    double t1 = now();
    perfweave_region_begin("beta");
    spin(beta);
    double t2 = now();
    perfweave_region_begin("inner");
    spin(inner);
    perfweave_region_end("inner");
    double t3 = now();
    perfweave_region_end("beta");
    double t4 = now();
    perfweave_phase_end("compute");
    fprintf(stderr, "alpha %.9f beta %.9f inner %.9f\n", t1 - t0, t4 - t1, t3 - t2);
    return 0;
}

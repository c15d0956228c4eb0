/* Sampling while the dynamic loader works: loads and unloads the plug-in given as argv[1]
 * (RTLD_NOW | RTLD_LOCAL) and calls its function, for SECONDS seconds (argv[2], default
 * 1.5), then prints "loops N sum S", and its CPU time on stderr ("cpu CPU_S"). Samples
 * land in the loader and in the libc code it calls while the list of modules changes.
 * Usage: dlopen_loop PLUGIN [SECONDS] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

int main(int argc, char **argv)
{
    double seconds = argc > 2 ? atof(argv[2]) : 1.5, t0 = now();
    long loops = 0, sum = 0;
    while (now() - t0 < seconds) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 2;
        }
        long (*fn)(long) = (long (*)(long))dlsym(h, "plugin_square");
        sum += fn(loops % 10);
        dlclose(h);
        loops++;
    }
    printf("loops %ld sum %ld\n", loops > 0 ? 1L : 0L, sum > 0 ? 1L : 0L);
    fprintf(stderr, "cpu %.6f\n", cpu_seconds());
    return 0;
}

/* A fake tool for perfweave overhead's test: spins MS milliseconds of wall time
 * (CLOCK_MONOTONIC, a spin rather than a sleep, which the kernel's timer slack would
 * lengthen), then executes the command: overhead_tool MS COMMAND... Where
 * OVERHEAD_TOOL_LOG names a file, appends the milliseconds it really spun to it: on a
 * loaded machine the spin loses the CPU across its end now and then, and ends late. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    double ms = atof(argv[1]), t0 = now_ms();
    double t;
    while ((t = now_ms() - t0) < ms)
        ;
    const char *log = getenv("OVERHEAD_TOOL_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "%s %.6f\n", argv[1], t);
        fclose(f);
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}

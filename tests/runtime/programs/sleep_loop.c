/* A long run that costs the machine nothing: usleep(5 ms) in a loop for SECONDS seconds
 * (CLOCK_MONOTONIC), then prints the process's resident memory (VmRSS, kB) at the end.
 * Usage: sleep_loop SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0, t0 = now();
    while (now() - t0 < seconds)
        usleep(5000);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss = atol(line + 6);
    if (f)
        fclose(f);
    printf("rss_kb %ld\n", rss);
    return 0;
}

/* A long run that costs the machine nothing: usleep(5 ms) in a loop for SECONDS seconds
 * (CLOCK_MONOTONIC), then prints the process's resident memory (VmRSS, kB) at the end,
 * and on stderr, for each sleep that lasted beyond its 5 ms (the process waited for a
 * core when it woke up, or a timer's slack), when it ended and by how much:
 * "late AT_S LATE_S" (AT_S on CLOCK_MONOTONIC). Usage: sleep_loop SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0, t0 = now(), t = t0;
    static double at[1 << 16], late[1 << 16];
    int n = 0;
    while (t - t0 < seconds) {
        usleep(5000);
        double t1 = now();
        if (t1 - t > 0.005 && n < (1 << 16)) {
            at[n] = t1;
            late[n++] = t1 - t - 0.005;
        }
        t = t1;
    }
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss = atol(line + 6);
    if (f)
        fclose(f);
    printf("rss_kb %ld\n", rss);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "late %.6f %.6f\n", at[i], late[i]);
    return 0;
}

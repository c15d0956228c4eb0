/* Sleeping under sampling: sleep(1), usleep(300 ms), nanosleep(200 ms), each timed
 * with CLOCK_MONOTONIC and printed; the sampler's signals must not shorten them. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

int main(void)
{
    double t = now();
    unsigned left = sleep(1);
    double a = now() - t;
    t = now();
    usleep(300000);
    double b = now() - t;
    t = now();
    struct timespec ts = {0, 200000000};
    int rc = nanosleep(&ts, NULL);
    double c = now() - t;
    printf("%.4f %u %.4f %.4f %d\n", a, left, b, c, rc);
    return 0;
}

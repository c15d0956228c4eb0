/* The calling thread's run delay: the time it was ready to run but waited for a core
 * (/proc/thread-self/schedstat's second field), which a test adds to a bound where the
 * kernel may preempt a process between two clock readings it cannot bracket more
 * closely. Not instrumented (-finstrument-functions), so that it is no region of its
 * own: its few microseconds are its caller's. */
#ifndef RUN_DELAY_H
#define RUN_DELAY_H
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Seconds, or -1 where unknown (differences of two unknowns are 0). */
__attribute__((no_instrument_function)) static double run_delay(void)
{
    char buf[128];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *end;
    strtoull(buf, &end, 10);
    return (double)strtoull(end, NULL, 10) * 1e-9;
}
#endif

/* An LD_PRELOAD library with a known cost per call, for perfweave overhead's test: its
 * write() spins 1000 ns of CLOCK_MONOTONIC time, then calls the real write. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    long long t0 = now_ns();
    while (now_ns() - t0 < 1000)
        ;
    return real(fd, buf, n);
}

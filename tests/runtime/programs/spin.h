/* The test programs' clock and busy work of known duration: now() and now_ns() read
 * CLOCK_MONOTONIC (seconds, nanoseconds); spin(s) burns CPU for s seconds of it, never
 * inlined so that it is a frame. */
#ifndef PW_TEST_SPIN_H
#define PW_TEST_SPIN_H
#include <sys/resource.h>
#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static volatile double sink;

__attribute__((noinline, unused)) static void spin(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
}
/* The process's CPU time (user + system) so far: what a test expects samples from when
 * the machine is busy and the program gets only part of a core. */
__attribute__((unused)) static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* The calling thread's CPU time so far. */
__attribute__((unused)) static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Busy work of a known CPU time: burns s seconds of the calling thread's own CPU time,
 * however long that takes on a busy machine, so that the thread runs (and is sampled)
 * for at least that long. */
__attribute__((noinline, unused)) static void spin_cpu(double seconds)
{
    double t0 = thread_cpu_seconds();
    while (thread_cpu_seconds() - t0 < seconds)
        for (int i = 0; i < 200; i++)
            sink += i * 0.5;
}
#endif

/* Phases on a common clock, for the wait-state programs (ws_*.c).
 *
 * The tests run every rank on one host, where CLOCK_MONOTONIC is one clock for all
 * ranks. Rank 0 picks a start time and broadcasts it; phase k begins PHASE_S * k
 * seconds after it, and at(k, d) sleeps until d seconds into phase k. A wait is built
 * in by when each rank enters its call, not by barriers, whose exit times vary by
 * milliseconds when ranks share cores: rank 0 calling at(1, 0.2) before MPI_Send and
 * rank 1 calling at(1, 0) before MPI_Recv make a Late Sender of 0.2 s.
 *
 * A rank that wakes while others busy-poll on the shared cores may run a few
 * milliseconds late. So mark(name) records the time right before (or after) a call,
 * and marks_print() writes "mark RANK NAME SECONDS" lines (seconds since the start):
 * the tests compute each expected wait from these, the program's own clock readings,
 * and check the planned values loosely. With each mark goes the thread's run delay so
 * far (the time it was ready to run but waited for a core, /proc/thread-self/schedstat),
 * in "delay RANK NAME SECONDS" lines: how late a mark after a call can be at most. */
#ifndef WS_PHASES_H
#define WS_PHASES_H
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "run_delay.h"
#include "spin.h"

#define PHASE_S 0.6

static double ws_start;

static void phases_init(void)
{
    double t = now() + 0.1;
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    ws_start = t;
}

#define WS_MAX_MARKS 64
static struct {
    const char *name;
    double t, delay;
} ws_marks[WS_MAX_MARKS];
static int ws_nmarks;

static void mark(const char *name)
{
    if (ws_nmarks < WS_MAX_MARKS) {
        ws_marks[ws_nmarks].name = name;
        ws_marks[ws_nmarks].t = now();
        ws_marks[ws_nmarks++].delay = run_delay();
    }
}

/* The lines, to the file $WS_MARKS.RANK where the test names one, else in one write to
 * stdout. A launcher forwarding its ranks' output may cut a rank's one write and put
 * another rank's lines in the cut (Open MPI 4.1, 1.2 KB per rank: "delay 1 isc_wa" then
 * "mark 2 ibarrier ...", 1 run in 8 beside two busy loops). */
static void marks_print(int rank)
{
    char buf[WS_MAX_MARKS * 128];
    int n = 0;
    for (int i = 0; i < ws_nmarks; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "mark %d %s %.9f\ndelay %d %s %.9f\n",
                      rank, ws_marks[i].name, ws_marks[i].t - ws_start, rank, ws_marks[i].name,
                      ws_marks[i].delay);
    const char *to = getenv("WS_MARKS");
    if (to) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", to, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fwrite(buf, 1, (size_t)n, f);
            fclose(f);
            return;
        }
    }
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
}

static void at(int phase, double seconds)
{
    double t = ws_start + PHASE_S * phase + seconds;
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}
#endif

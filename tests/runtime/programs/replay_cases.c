/* Programs for the ideal-network replay (python/perfweave/analysis/replay.py), whose
 * ideal runtime is arithmetic from the program's own clocks.
 *
 * "pingpong" (2 ranks): 5 times, rank 0 computes 100 ms and sends to rank 1, which
 * receives, computes 50 ms and sends back; then rank 0 computes 100 ms and rank 1
 * 150 ms before an MPI_Allreduce. Each rank keeps the ideal network's clock itself: it reads its
 * clock just before and just after each MPI call and adds the time between calls (all of
 * it: preemptions count, as in the trace); a message carries the sender's clock at the
 * send, and a receive takes the later of its own and the message's (eager sends, no
 * transfer time); the MPI_Allreduce takes the latest of all. A second clock does the
 * same with 1 s of latency per message and per step of the MPI_Allreduce (one step for
 * two ranks). Each rank prints both as they are when the MPI_Allreduce returns:
 * "ideal RANK CLOCK SLOW_CLOCK".
 *
 * "cross" (2 ranks): both send to the other, then receive. Messages this small are
 * eager in both MPIs, so the run ends; under rendezvous (eager limit 0) both ranks would
 * block in MPI_Send. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "spin.h"

/* computes until its own clock has advanced by s; returns the seconds measured */
static double compute(double s)
{
    double t0 = now(), t;
    volatile double x = 0;
    do {
        for (int i = 0; i < 1000; i++)
            x += i * 1e-9;
        t = now();
    } while (t - t0 < s);
    return t - t0;
}

static double t_after; /* the clock just after the last MPI call */
static double ideal[2]; /* the ideal clocks: no latency, 1 s of latency */

/* before an MPI call: the time since the last one is the program's own */
static void before(void)
{
    double d = now() - t_after;
    ideal[0] += d;
    ideal[1] += d;
}

static void after(void) { t_after = now(); }

int main(int argc, char **argv)
{
    int rank, buf = 0, other = 0;
    MPI_Init(&argc, &argv);
    after();
    before();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    after();
    if (argc > 1 && strcmp(argv[1], "cross") == 0) {
        MPI_Send(&buf, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
        MPI_Recv(&other, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Finalize();
        return 0;
    }
    double msg[2], got[2];
    for (int i = 0; i < 5; i++) {
        for (int turn = 0; turn < 2; turn++) {
            if (rank == turn) {
                compute(rank == 0 ? 0.100 : 0.050);
                before();
                msg[0] = ideal[0];
                msg[1] = ideal[1];
                MPI_Send(msg, 2, MPI_DOUBLE, 1 - rank, 0, MPI_COMM_WORLD);
                after();
            } else {
                before();
                MPI_Recv(got, 2, MPI_DOUBLE, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                after();
                ideal[0] = got[0] > ideal[0] ? got[0] : ideal[0];
                ideal[1] = got[1] + 1.0 > ideal[1] ? got[1] + 1.0 : ideal[1];
            }
        }
    }
    compute(rank == 0 ? 0.100 : 0.150);
    before();
    MPI_Allreduce(ideal, got, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    after();
    ideal[0] = got[0];
    ideal[1] = got[1] + 1.0;
    MPI_Finalize();
    printf("ideal %d %.9f %.9f\n", rank, ideal[0], ideal[1]);
    return 0;
}

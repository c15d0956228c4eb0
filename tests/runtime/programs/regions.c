/* Call paths through user functions (built with -finstrument-functions), 2 ranks
 * (tests/runtime/test_waitstates.py). main -> solve -> relax computes (spins) for
 * 0.1 s on rank 0 and 0.3 s on rank 1, then solve calls MPI_Allreduce: rank 0 waits
 * there about 0.2 s, at the call path main > solve > MPI_Allreduce (site allreduce).
 * The ranks leave the first MPI_Barrier at times that differ when they share cores, so
 * each rank prints what its own clock (CLOCK_MONOTONIC, the trace's) saw:
 *   "relax RANK SECONDS"      the time relax ran,
 *   "allreduce RANK SECONDS"  when it entered MPI_Allreduce (on a clock common to the
 *                             ranks of a host),
 *   "delay RANK FUNCTION SECONDS"  the run delay (time ready to run but waiting for a
 *                             core, /proc/thread-self/schedstat) over the intervals that
 *                             hold all of main's (solve's) own time and the perfweave
 *                             code around it: the calls next to it are read whole, the
 *                             computation of relax is left out.
 * main and solve themselves only run the few instructions between their calls; the
 * lines are printed after MPI_Finalize so that printing is no part of main's time. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include "run_delay.h"
#include "spin.h"

static double main_delay, solve_delay;

static double relax(double seconds)
{
    solve_delay += run_delay();
    double t0 = now(), t = t0;
    volatile double x = 0;
    while (t - t0 < seconds) {
        for (int i = 0; i < 1000; i++)
            x += i * 1e-9;
        t = now();
    }
    solve_delay -= run_delay();
    return t - t0;
}

static double ran, entered;

static void solve(int rank)
{
    double d = run_delay();
    main_delay += d;
    solve_delay -= d;
    int x = 1, y;
    ran = relax(rank == 0 ? 0.1 : 0.3);
    entered = now();
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
    d = run_delay();
    solve_delay += d;
    main_delay -= d;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    main_delay -= run_delay();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    solve(rank);
    main_delay += run_delay();
    MPI_Finalize();
    printf("relax %d %.9f\nallreduce %d %.9f\ndelay %d main %.9f\ndelay %d solve %.9f\n", rank, ran,
           rank, entered, rank, main_delay, rank, solve_delay);
    return 0;
}

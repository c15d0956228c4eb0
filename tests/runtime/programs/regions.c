/* Call paths through user functions (built with -finstrument-functions), 2 ranks
 * (tests/runtime/test_waitstates.py). main -> solve -> relax computes (spins) for
 * 0.1 s on rank 0 and 0.3 s on rank 1, then solve calls MPI_Allreduce: rank 0 waits
 * there 0.2 s, at the call path main > solve > MPI_Allreduce (site allreduce). Each
 * rank prints "relax RANK SECONDS" with the time relax actually ran. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double relax(double seconds)
{
    double t0 = now(), t = t0;
    volatile double x = 0;
    while (t - t0 < seconds) {
        for (int i = 0; i < 1000; i++)
            x += i * 1e-9;
        t = now();
    }
    return t - t0;
}

static double solve(int rank)
{
    int x = 1, y;
    double ran = relax(rank == 0 ? 0.1 : 0.3);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
    return ran;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double ran = solve(rank);
    printf("relax %d %.9f\n", rank, ran);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

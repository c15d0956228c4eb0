/* Programs for the ideal-network replay (python/perfweave/analysis/replay.py), whose
 * ideal runtime is arithmetic from the program's own clocks.
 *
 * "pingpong" (2 ranks): 5 times, rank 0 computes 20 ms and sends to rank 1, which
 * receives, computes 10 ms and sends back; then rank 0 computes 20 ms and rank 1 30 ms
 * before an MPI_Barrier. On an ideal network the run is the chain of computations:
 * the ping-pong's sum plus the longer of the last two. Each rank prints the seconds it
 * measured: "compute RANK PINGPONG_SECONDS LAST_SECONDS".
 *
 * "cross" (2 ranks): both send to the other, then receive. Messages this small are
 * eager in both MPIs, so the run ends; under rendezvous (eager limit 0) both ranks would
 * block in MPI_Send. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

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

int main(int argc, char **argv)
{
    int rank, buf = 0, other = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && strcmp(argv[1], "cross") == 0) {
        MPI_Send(&buf, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
        MPI_Recv(&other, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Finalize();
        return 0;
    }
    double pingpong = 0, last;
    for (int i = 0; i < 5; i++) {
        if (rank == 0) {
            pingpong += compute(0.020);
            MPI_Send(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            pingpong += compute(0.010);
            MPI_Send(&buf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    }
    last = compute(rank == 0 ? 0.020 : 0.030);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    printf("compute %d %.9f %.9f\n", rank, pingpong, last);
    return 0;
}

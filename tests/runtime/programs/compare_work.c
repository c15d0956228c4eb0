/* Two runs of this program are compared (test_compare.py). Each of STEPS steps:
 * solve() spins for FACTOR x 40 ms of wall time, exchange() sends COUNT doubles to the
 * next rank and receives as many from the previous one (MPI_Sendrecv: exact bytes),
 * and with a third argument 1, only_here() spins 20 ms (a routine of one run only).
 * With a fourth argument DIR, each step also writes the COUNT doubles to DIR/out.RANK
 * (exact bytes for --by file). Each rank prints its own clocks: "rank R solve_s S only_s O".
 * Usage: compare_work FACTOR COUNT ONLY [DIR] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define STEPS 10

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static volatile double sink;

__attribute__((noinline)) static void spin(double seconds)
{
    double end = now() + seconds;
    double x = 1.0;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

__attribute__((noinline)) static void solve(int factor)
{
    spin(factor * 0.040);
}

__attribute__((noinline)) static void only_here(void)
{
    spin(0.020);
}

__attribute__((noinline)) static void exchange(double *out, double *in, int count, int rank,
                                               int size)
{
    MPI_Sendrecv(out, count, MPI_DOUBLE, (rank + 1) % size, 7, in, count, MPI_DOUBLE,
                 (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int rank, size;
    int factor = argc > 1 ? atoi(argv[1]) : 1;
    int count = argc > 2 ? atoi(argv[2]) : 1000;
    int extra = argc > 3 ? atoi(argv[3]) : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *out = calloc(count, sizeof(double)), *in = calloc(count, sizeof(double));
    FILE *file = NULL;
    if (argc > 4) {
        char path[4096];
        snprintf(path, sizeof path, "%s/out.%d", argv[4], rank);
        file = fopen(path, "w");
        if (!file)
            MPI_Abort(MPI_COMM_WORLD, 3);
    }
    double solve_s = 0, only_s = 0;
    for (int step = 0; step < STEPS; step++) {
        double t0 = now();
        solve(factor);
        double t1 = now();
        if (extra)
            only_here();
        double t2 = now();
        exchange(out, in, count, rank, size);
        ssize_t bytes = count * sizeof(double);
        if (file && write(fileno(file), out, bytes) != bytes)
            MPI_Abort(MPI_COMM_WORLD, 4);
        solve_s += t1 - t0;
        only_s += t2 - t1;
    }
    if (file)
        fclose(file);
    printf("rank %d solve_s %.6f only_s %.6f\n", rank, solve_s, only_s);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}

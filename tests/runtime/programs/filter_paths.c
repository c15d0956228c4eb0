/* --filter by call path through ordinary functions (docs/regions.md "Filtering the
 * trace"): solver() and diagnostics() both reach MPI_Allreduce, directly and through a
 * shared helper, and diagnostics() also writes a file. Each rank prints what it called:
 * `rank R KEY N` on stdout (solver_allreduce, diagnostics_allreduce, diagnostics_write,
 * barrier). Built -O0 (frame pointers kept, nothing inlined).
 * Usage: filter_paths STEPS FILE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>

static int solver_calls, diag_calls, diag_writes;

static double sum_all(double x) /* shared by both: only the caller above decides */
{
    double s;
    MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

static double solver(int step)
{
    double r, x = step;
    MPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    solver_calls += 2;
    return r + sum_all(x);
}

static void diagnostics(int step, int fd)
{
    double norm = sum_all(step * 0.5);
    diag_calls++;
    char line[64];
    int n = snprintf(line, sizeof line, "%d %g\n", step, norm);
    if (write(fd, line, (size_t)n) == n)
        diag_writes++;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, steps = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argc > 2 ? argv[2] : "diag", rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double acc = 0;
    for (int step = 0; step < steps; step++) {
        acc += solver(step);
        if (step % 2 == 0)
            diagnostics(step, fd);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    close(fd);
    printf("rank %d solver_allreduce %d\nrank %d diagnostics_allreduce %d\n", rank, solver_calls,
           rank, diag_calls);
    printf("rank %d diagnostics_write %d\nrank %d barrier %d\n", rank, diag_writes, rank, steps);
    fflush(stdout);
    MPI_Finalize();
    return acc < 0;
}

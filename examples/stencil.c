/*
 * perfweave's demo program: a 1-D Jacobi relaxation split over the ranks, with
 * halo exchanges (MPI_Sendrecv), a residual reduction (MPI_Allreduce) every few
 * sweeps, and a deliberate imbalance: the last rank owns 50 % more points, so
 * the others wait for it in the reduction.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N_PER_RANK 200000
#define SWEEPS 400

static double relax(double *u, double *v, int n)
{
    double diff = 0.0;
    for (int i = 1; i <= n; i++) {
        v[i] = 0.5 * (u[i - 1] + u[i + 1]);
        diff += fabs(v[i] - u[i]);
    }
    return diff;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = rank == size - 1 ? N_PER_RANK * 3 / 2 : N_PER_RANK;
    double *u = calloc(n + 2, sizeof *u), *v = calloc(n + 2, sizeof *v);
    if (rank == 0)
        u[0] = v[0] = 1.0;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double residual = 0.0;
    for (int s = 0; s < SWEEPS; s++) {
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[n + 1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double local = relax(u, v, n);
        double *t = u;
        u = v;
        v = t;
        if (s % 10 == 0)
            MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("stencil: %d ranks, %d sweeps, residual %.6e\n", size, SWEEPS, residual);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}

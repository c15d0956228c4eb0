/* The mathlib module's FFTW ground truth, on every rank: a 16^3 plan executed 3 times
 * and destroyed, then a 32^3 plan (likely at the same address) executed once and
 * destroyed: 3 and 1 executes by plan, 2 plans created. Prints both plans' addresses. */
#include <fftw3.h>
#include <mpi.h>
#include <stdio.h>

static void *made[2];

static void transform(int n, int times, int which)
{
    fftw_complex *x = fftw_malloc(sizeof(fftw_complex) * n * n * n);
    for (int i = 0; i < n * n * n; i++)
        x[i][0] = i % 7, x[i][1] = 0;
    fftw_plan p = fftw_plan_dft_3d(n, n, n, x, x, FFTW_FORWARD, FFTW_ESTIMATE); // @site plan
    made[which] = p;
    for (int i = 0; i < times; i++)
        fftw_execute(p); // @site execute
    fftw_destroy_plan(p);
    fftw_free(x);
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    transform(16, 3, 0);
    transform(32, 1, 1);
    printf("rank %d plans %p %p\n", rank, made[0], made[1]);
    MPI_Finalize();
    return 0;
}

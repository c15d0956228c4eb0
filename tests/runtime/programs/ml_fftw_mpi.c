/* The mathlib module's FFTW MPI ground truth, on each of the ranks: one 64 x 64 MPI DFT
 * planned (fftw_mpi_plan_dft_2d, FFTW_ESTIMATE), executed 3 times (twice by fftw_execute, once by
 * fftw_mpi_execute_dft), destroyed. Prints the rank's local rows and the sum of |X(0,0)|
 * over ranks on rank 0 (the input's sum: 64 * 64 * 3 after one forward transform). */
#include <fftw3-mpi.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    const ptrdiff_t n0 = 64, n1 = 64;
    ptrdiff_t local_n0, local_0_start;
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fftw_mpi_init();
    ptrdiff_t alloc = fftw_mpi_local_size_2d(n0, n1, MPI_COMM_WORLD, &local_n0, &local_0_start);
    fftw_complex *x = fftw_alloc_complex(alloc);
    const int sign = FFTW_FORWARD, flags = FFTW_ESTIMATE;
    fftw_plan p = fftw_mpi_plan_dft_2d(n0, n1, x, x, MPI_COMM_WORLD, sign, flags); // @site plan
    for (int run = 0; run < 3; run++) {
        for (ptrdiff_t i = 0; i < local_n0 * n1; i++)
            x[i][0] = 3, x[i][1] = 0;
        if (run < 2)
            fftw_execute(p); // @site execute
        else
            fftw_mpi_execute_dft(p, x, x); // @site mpi_execute
    }
    double dc = local_0_start == 0 ? fabs(x[0][0]) : 0, all = 0;
    MPI_Reduce(&dc, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("rank %d rows %ld", rank, (long)local_n0);
    if (rank == 0)
        printf(" dc %.1f", all);
    printf("\n");
    fftw_destroy_plan(p);
    fftw_free(x);
    fftw_mpi_cleanup();
    MPI_Finalize();
    return 0;
}

/* The mathlib module's fork ground truth: the parent makes 7 dgemm_ calls and two
 * executes of one FFTW plan, then forks; the child makes 3 dgemm_ calls and one execute
 * of the inherited plan and exits (exit: its dump runs); the parent waits for it and
 * ends. Built with -DWITH_MPI, the same inside MPI_Init/MPI_Finalize on every rank. */
#include <fftw3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

#define N 32
static double a[N * N], b[N * N], c[N * N];

void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);

static void gemms(int count)
{
    int n = N;
    double one = 1, zero = 0;
    for (int i = 0; i < count; i++)
        dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n); // @site gemm
}

int main(int argc, char **argv)
{
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    (void)argc;
    (void)argv;
    for (int i = 0; i < N * N; i++)
        a[i] = b[i] = 1;
    fftw_complex *x = fftw_malloc(sizeof(fftw_complex) * 64);
    for (int i = 0; i < 64; i++)
        x[i][0] = x[i][1] = 0;
    fftw_plan p = fftw_plan_dft_1d(64, x, x, FFTW_FORWARD, FFTW_ESTIMATE);
    gemms(7);
    fftw_execute(p);
    fftw_execute(p);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        gemms(3);
        fftw_execute(p);
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("c00 %.1f child %d\n", c[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fftw_destroy_plan(p);
    fftw_free(x);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}

/* One MPI_Allreduce call site inside exchange(), reached from two callers:
 * 3 calls from phase_a() and 5 from phase_b(). With --callsite-depth 1 that is
 * one site; with 2, two. Then 40 distinct MPI_Barrier call sites. */
#include <mpi.h>

__attribute__((noinline)) static void exchange(int *a, int *b)
{
    MPI_Allreduce(a, b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
}

__attribute__((noinline)) static void phase_a(int *a, int *b)
{
    for (int i = 0; i < 3; i++)
        exchange(a, b); /* @site from_a */
}

__attribute__((noinline)) static void phase_b(int *a, int *b)
{
    for (int i = 0; i < 5; i++)
        exchange(a, b); /* @site from_b */
}

#define B MPI_Barrier(MPI_COMM_WORLD);
#define B10 B B B B B B B B B B

int main(int argc, char **argv)
{
    int a = 1, b;
    MPI_Init(&argc, &argv);
    phase_a(&a, &b);
    phase_b(&a, &b);
    B10 B10 B10 B10
    MPI_Pcontrol(0);
    B10
    MPI_Pcontrol(1);
    MPI_Finalize();
    return 0;
}

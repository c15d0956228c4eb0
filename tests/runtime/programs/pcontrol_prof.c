/* The MPI_Pcontrol region in the profile (tests/runtime/test_pcontrol_profile.py):
 * pcontrol_prof T_MS [none]. Every rank
 *   - before any MPI_Pcontrol: an MPI_Barrier and an MPI_Allreduce (recorded, outside the
 *     region), then MPI_Pcontrol(0) (ends nothing: no interval is open);
 *   - twice: outside the region (recording off) computes T and calls MPI_Barrier; then
 *     MPI_Pcontrol(1), computes (1 + 2 rank) T, MPI_Barrier (the others wait for the
 *     last rank), MPI_Allreduce, MPI_Pcontrol(0).
 * With "none" it calls no MPI_Pcontrol (the same calls: no region).
 * Its own clock (CLOCK_MONOTONIC, perfweave's) brackets what the runtime measures: the
 * region lies between the end of each MPI_Pcontrol(1) and the start of the next
 * MPI_Pcontrol(0) (inner, summed over the intervals) and between the start of the one
 * and the end of the other (outer); each MPI call lies within the program's readings around it. It prints
 *   rank R inner_ns I outer_ns O mpi_ns M before_ns B calls N
 * (M: its time around its MPI calls in the region; B: around those before the first
 * MPI_Pcontrol; N: the region's MPI calls) and, for each interval I, its readings
 *   rank R interval I open O in N out X closed C
 * (ns: before MPI_Pcontrol(1), after it, before MPI_Pcontrol(0), after it). */
#include "spin.h"
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the program's time around its MPI calls, added to *acc */
static void barrier(int64_t *acc)
{
    int64_t t = now_ns();
    MPI_Barrier(MPI_COMM_WORLD);
    *acc += now_ns() - t;
}

static void allreduce(int64_t *acc)
{
    double in = 1, out;
    int64_t t = now_ns();
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *acc += now_ns() - t;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t unit = (argc > 1 ? atoi(argv[1]) : 20) * 1000000LL;
    int marks = !(argc > 2 && strcmp(argv[2], "none") == 0);
    int64_t before = 0, mpi = 0, inner = 0, outer = 0, outside = 0;
    int calls = 0;
    barrier(&before);
    allreduce(&before);
    if (marks)
        MPI_Pcontrol(0);
    for (int it = 0; it < 2; it++) {
        spin(unit * 1e-9);
        barrier(&outside);
        int64_t t_open = now_ns();
        if (marks)
            MPI_Pcontrol(1);
        int64_t t_in = now_ns();
        spin((1 + 2 * rank) * unit * 1e-9);
        barrier(&mpi);
        allreduce(&mpi);
        calls += 2;
        int64_t t_out = now_ns();
        if (marks)
            MPI_Pcontrol(0);
        int64_t t_closed = now_ns();
        outer += t_closed - t_open;
        inner += t_out - t_in;
        printf("rank %d interval %d open %lld in %lld out %lld closed %lld\n", rank, it,
               (long long)t_open, (long long)t_in, (long long)t_out, (long long)t_closed);
    }
    printf("rank %d inner_ns %lld outer_ns %lld mpi_ns %lld before_ns %lld calls %d\n", rank,
           (long long)inner, (long long)outer, (long long)mpi, (long long)before,
           calls);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

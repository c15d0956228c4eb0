/* Fields above 32 bits in a compact trace (tests/runtime/test_trace.py), 2 ranks: rank 1
 * spins for 2^32 + 2^28 TSC ticks before MPI_Barrier, so rank 0's barrier lasts more than
 * 2^32 ticks (a duration that needs an extension record) and its next call starts more
 * than 2^32 ticks after the time base of the block (a new BASE record); rank 0 then
 * broadcasts 5 GiB on MPI_COMM_SELF (a datatype of 1 GiB, count 5, in memory reserved but
 * never touched: a broadcast to itself moves nothing), bytes that need one too. Rank 0
 * prints "barrier SECONDS" as its own clock timed the barrier. */
#include <mpi.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>
#include "spin.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        unsigned long long t0 = __rdtsc();
        while (__rdtsc() - t0 < (1ull << 32) + (1ull << 28))
            ;
    }
    double t0 = now();
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = now();
    if (rank == 0) {
        MPI_Datatype gib;
        MPI_Type_contiguous(1 << 30, MPI_CHAR, &gib);
        MPI_Type_commit(&gib);
        void *buf = mmap(NULL, 5ull << 30, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        MPI_Bcast(buf, 5, gib, 0, MPI_COMM_SELF);
        MPI_Type_free(&gib);
        printf("barrier %.9f\n", t1 - t0);
    }
    MPI_Finalize();
    return 0;
}

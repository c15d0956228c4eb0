/* POP metrics' ground truth (tests/runtime/test_pop.py): pop_cases CASE T_MS runs one of
 * the cases below, where "compute c" spins c on the wall clock. Each rank prints on
 * stderr its own measures: "rank R compute C elapsed E" with C its time computing in the
 * region of interest and E the wall time from MPI_Init's return to MPI_Finalize's entry
 * (seconds, CLOCK_MONOTONIC), so the expected metrics follow from the run's own clocks.
 *
 *   sendrecv  2 ranks x 10 iterations: rank 0 computes 5T and sends 8 bytes to rank 1,
 *             which computes T and receives; then MPI_Barrier. LB = (5+1)/2/5 = 0.6,
 *             the critical path is rank 0's computation: SerE ~ 1, TE ~ 1.
 *   pipeline  P ranks x 5 iterations: rank k receives from k-1, computes T, sends to
 *             k+1; then MPI_Barrier. The critical path holds every rank's T: SerE = 1/P.
 *   bcast     P ranks x 5 iterations: rank 0 computes T then MPI_Bcast; the others
 *             MPI_Bcast then compute T; then MPI_Barrier. SerE = T / 2T = 0.5.
 *   pcontrol  P ranks x 2 iterations: outside the region rank k computes (2P-1-2k)T
 *             (the whole run is balanced), inside MPI_Pcontrol(1) .. MPI_Pcontrol(0)
 *             it computes (1+2k)T then MPI_Barrier: LB = P / (2P-1) in the region.
 *   exchange  2 ranks x 5 iterations: compute T, then MPI_Sendrecv of 64 MiB each way:
 *             on an ideal network only the computation is left, TE = C / E. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

volatile double sink;
static double computed; /* seconds computed in the region */

static void compute(double seconds, int in_region)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 100; i++)
            sink += i * 0.5;
    if (in_region)
        computed += now() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double begin = now();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *c = argc > 1 ? argv[1] : "sendrecv";
    double T = (argc > 2 ? atof(argv[2]) : 10) * 1e-3;
    char byte8[8] = {0};
    if (!strcmp(c, "sendrecv")) {
        for (int i = 0; i < 10; i++) {
            if (rank == 0) {
                compute(5 * T, 1);
                MPI_Send(byte8, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            } else if (rank == 1) {
                compute(T, 1);
                MPI_Recv(byte8, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(c, "pipeline")) {
        for (int i = 0; i < 5; i++) {
            if (rank > 0)
                MPI_Recv(byte8, 8, MPI_BYTE, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            compute(T, 1);
            if (rank < size - 1)
                MPI_Send(byte8, 8, MPI_BYTE, rank + 1, 0, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(c, "bcast")) {
        for (int i = 0; i < 5; i++) {
            if (rank == 0)
                compute(T, 1);
            MPI_Bcast(byte8, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
            if (rank != 0)
                compute(T, 1);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    } else if (!strcmp(c, "pcontrol")) {
        for (int i = 0; i < 2; i++) {
            compute((2 * size - 1 - 2 * rank) * T, 0);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Pcontrol(1);
            compute((1 + 2 * rank) * T, 1);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Pcontrol(0);
        }
    } else if (!strcmp(c, "exchange")) {
        size_t n = (size_t)64 << 20;
        char *out = malloc(n), *in = malloc(n);
        memset(out, rank, n);
        memset(in, 0, n);
        int peer = rank ^ 1;
        for (int i = 0; i < 5; i++) {
            compute(T, 1);
            if (peer < size)
                MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, 0, in, (int)n, MPI_BYTE, peer, 0,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        free(out);
        free(in);
    }
    double end = now();
    MPI_Finalize();
    fprintf(stderr, "rank %d compute %.6f elapsed %.6f\n", rank, computed, end - begin);
    return 0;
}

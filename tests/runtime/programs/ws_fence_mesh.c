/* Fences on a 2 x 3 mesh of 6 ranks where only neighbours exchange data
 * (tests/runtime/test_waitstates.py). An opening fence, then ITER epochs: each rank
 * puts one int to each of its 2 or 3 mesh neighbours (non-periodic) and fences.
 * Pair-wise synchronisations: 6 per rank and fence, (ITER + 1) * 36 in all.
 * Unneeded: at each fence, 6 minus the number of ranks that accessed this rank in the
 * epoch it closes: 6 at the opening fence, 6 - neighbours after that; a corner rank
 * has 2 neighbours, the middle ranks 3, so 36 + ITER * (36 - 14) in all. */
#include <mpi.h>

#define ITER 5
#define NX 3
#define NY 2

int main(int argc, char **argv)
{
    int rank, size, buf[8] = {0}, one = 1;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != NX * NY)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int x = rank % NX, y = rank / NX, nb[4], n = 0;
    if (x > 0) nb[n++] = rank - 1;
    if (x < NX - 1) nb[n++] = rank + 1;
    if (y > 0) nb[n++] = rank - NX;
    if (y < NY - 1) nb[n++] = rank + NX;
    MPI_Win_fence(0, win); /* @site open */
    for (int it = 0; it < ITER; it++) {
        for (int i = 0; i < n; i++)
            MPI_Put(&one, 1, MPI_INT, nb[i], i, 1, MPI_INT, win);
        MPI_Win_fence(0, win); /* @site close */
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}

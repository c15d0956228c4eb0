/* Collective wait states by construction, 4 ranks (tests/runtime/test_waitstates.py).
 * Ranks enter their calls at set times of a common clock (phases.h: at(phase, s)) and
 * mark them.
 *   1 Wait at Barrier: rank r enters MPI_Barrier at 0.15 r s: 0.45, 0.3, 0.15, 0 s
 *     (site barrier).
 *   2 Wait at NxN: odd ranks enter MPI_Allreduce at 0.15 s, even ranks at 0: 0.15 s on
 *     ranks 0 and 2 (site allreduce).
 *   3 Late Broadcast: the root, rank 1, enters MPI_Bcast at 0.2 s, the others at 0:
 *     0.2 s on ranks 0, 2 and 3 (site bcast).
 *   4 Early Reduce: the root, rank 2, enters MPI_Reduce at 0, rank 0 at 0.2 s, ranks 1
 *     and 3 at 0.1 s: 0.2 s on rank 2 (site reduce).
 *   5 Early Scan: rank 0 enters MPI_Scan at 0.15 s, rank 3 at 0.3 s, ranks 1 and 2 at 0:
 *     ranks 1 and 2 wait 0.15 s for rank 0; rank 3 is itself the latest of ranks 0-3
 *     (site scan).
 *   6 Balanced MPI_Allreduce: every rank enters at 0 (site balanced).
 * Barrier and N x N Completion (sites barrier and allreduce) are not planned: a rank
 * leaves its call when the kernel runs it again, so the ranks also mark the return
 * (barrier_done, allreduce_done) and the test takes the completion from those. */
#include "phases.h"

int main(int argc, char **argv)
{
    int rank, x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    phases_init();

    at(1, 0.15 * rank);
    mark("barrier");
    MPI_Barrier(MPI_COMM_WORLD); /* @site barrier */
    mark("barrier_done");

    at(2, 0.15 * (rank % 2));
    mark("allreduce");
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site allreduce */
    mark("allreduce_done");

    at(3, rank == 1 ? 0.2 : 0);
    mark("bcast");
    MPI_Bcast(&x, 1, MPI_INT, 1, MPI_COMM_WORLD); /* @site bcast */

    at(4, rank == 2 ? 0 : rank == 0 ? 0.2 : 0.1);
    mark("reduce");
    MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD); /* @site reduce */

    at(5, rank == 0 ? 0.15 : rank == 3 ? 0.3 : 0);
    mark("scan");
    MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site scan */

    at(6, 0);
    mark("balanced");
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* @site balanced */
    marks_print(rank);
    MPI_Finalize();
    return 0;
}

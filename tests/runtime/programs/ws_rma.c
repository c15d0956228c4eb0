/* MPI-2 RMA active-target wait states by construction, 4 ranks
 * (tests/runtime/test_waitstates.py). Ranks enter their calls at set times of a common
 * clock (phases.h: at(phase, s)) and mark them.
 *   1 Late Post: rank 0 starts an access epoch to rank 1 at 0 (start, put, complete);
 *     rank 1 enters MPI_Win_post at 0.15 s: Late Post 0.15 s on rank 0, in
 *     MPI_Win_start, MPI_Put or MPI_Win_complete, whichever blocks in this MPI.
 *   2 Early Wait: rank 1 posts and enters MPI_Win_wait at 0 (site ew_wait); rank 0 starts
 *     and puts at 0.1 s and enters MPI_Win_complete at 0.25 s: Early Wait 0.25 s on rank 1,
 *     of which Late Complete 0.15 s (from the put's end to the complete).
 *   3 Wait at Fence: after the opening fence every rank puts to the next, then enters the
 *     closing fence at 0.05 + 0.15 r s: 0.45, 0.3, 0.15, 0 s (site waf_fence).
 *   4 Early Fence: all but rank 1 enter the closing fence at 0.05 s; rank 1 puts to rank 0
 *     at 0.2 s, then fences: Wait at Fence 0.15 s on ranks 0, 2, 3 (site ef_fence), and
 *     on rank 0, the target of that put, Early Fence 0.15 s.
 *   5 Pair-wise synchronisations: rank 0 starts an access epoch to ranks 1, 2, 3 but puts
 *     to rank 1 only; ranks 1-3 post to rank 0: 3 pair-wise synchronisations at rank 0's
 *     MPI_Win_complete (site pws_complete; 2 unneeded) and 1 at each MPI_Win_wait
 *     (site pws_wait; unneeded on ranks 2 and 3). */
#include "phases.h"

int main(int argc, char **argv)
{
    int rank, size, buf[8] = {0}, one = 1;
    MPI_Win win;
    MPI_Group world, g0, g1, g123;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int r0 = 0, r1 = 1, r123[3] = {1, 2, 3};
    MPI_Group_incl(world, 1, &r0, &g0);
    MPI_Group_incl(world, 1, &r1, &g1);
    MPI_Group_incl(world, 3, r123, &g123);
    phases_init();

    if (rank == 0) {
        at(1, 0);
        mark("lp_start");
        MPI_Win_start(g1, 0, win);                           /* @site lp_start */
        MPI_Put(&one, 1, MPI_INT, 1, 0, 1, MPI_INT, win);    /* @site lp_put */
        MPI_Win_complete(win);                               /* @site lp_complete */
    } else if (rank == 1) {
        at(1, 0.15);
        mark("lp_post");
        MPI_Win_post(g0, 0, win);
        MPI_Win_wait(win);
    }

    if (rank == 0) {
        at(2, 0.1);
        MPI_Win_start(g1, 0, win);
        MPI_Put(&one, 1, MPI_INT, 1, 1, 1, MPI_INT, win);
        mark("ew_put_done");
        at(2, 0.25);
        mark("ew_complete");
        MPI_Win_complete(win);
    } else if (rank == 1) {
        at(2, 0);
        MPI_Win_post(g0, 0, win);
        mark("ew_wait");
        MPI_Win_wait(win);                                   /* @site ew_wait */
    }

    at(3, 0);
    MPI_Win_fence(0, win);
    MPI_Put(&one, 1, MPI_INT, (rank + 1) % size, 2, 1, MPI_INT, win);
    at(3, 0.05 + 0.15 * rank);
    mark("waf_fence");
    MPI_Win_fence(0, win);                                   /* @site waf_fence */

    at(4, 0);
    MPI_Win_fence(0, win);
    if (rank == 1) {
        at(4, 0.2);
        MPI_Put(&one, 1, MPI_INT, 0, 3, 1, MPI_INT, win);
        mark("ef_put_done");
    } else {
        at(4, 0.05);
    }
    mark("ef_fence");
    MPI_Win_fence(0, win);                                   /* @site ef_fence */

    at(5, 0);
    if (rank == 0) {
        MPI_Win_start(g123, 0, win);
        MPI_Put(&one, 1, MPI_INT, 1, 4, 1, MPI_INT, win);
        MPI_Win_complete(win);                               /* @site pws_complete */
    } else {
        MPI_Win_post(g0, 0, win);
        MPI_Win_wait(win);                                   /* @site pws_wait */
    }

    at(6, 0);
    marks_print(rank);
    MPI_Group_free(&g0);
    MPI_Group_free(&g1);
    MPI_Group_free(&g123);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}

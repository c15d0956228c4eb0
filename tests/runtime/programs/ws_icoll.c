/* Nonblocking collectives with wait states by construction, 3 ranks
 * (tests/runtime/test_waitstates.py). Ranks start their operations at set times of a
 * common clock (phases.h) and mark them; the wait is charged at the call that completes
 * the request, by the rule of the blocking twin.
 *   1 Ibarrier + Wait: rank 0 starts at 0.2 s, the others at 0 and wait at once:
 *     Wait at Barrier 0.2 s on ranks 1 and 2 (site ib_wait).
 *   2 Iallreduce + Wait: rank 2 starts at 0.2 s: Wait at N x N 0.2 s on ranks 0 and 1
 *     (site iar_wait).
 *   3 Ibcast + Wait, root 1 late by 0.2 s: Late Broadcast 0.2 s on ranks 0 and 2
 *     (site ibc_wait).
 *   4 Ireduce + Wait, root 0 early: rank 1 starts at 0.2 s, rank 2 at 0.1 s: Early
 *     Reduce 0.2 s on rank 0 (site ird_wait).
 *   5 Ibarrier, rank 0 late by 0.2 s; rank 1 completes it in a loop of MPI_Test (no
 *     wait: site tl_test), rank 2 in MPI_Wait (0.2 s: site tl_wait).
 *   6 MPI_Waitall on rank 1 of an Irecv and an Ibarrier: rank 0 starts the Ibarrier at
 *     0.15 s and sends at 0.3 s: Late Sender 0.3 s in the Waitall, which is charged
 *     once (site wa_waitall); rank 2 waits 0.15 s at the barrier (site wa_wait).
 *   7 Two outstanding Iallreduces, on MPI_COMM_WORLD and a duplicate: rank 0 starts
 *     them at 0.1 and 0.2 s, the others at 0 and wait for the duplicate's first: 0.2 s
 *     there (site ov_dup_wait), nothing in the next Wait (site ov_world_wait).
 *   8 Iscan completed by MPI_Waitall: rank 0 starts at 0.2 s: Early Scan 0.2 s on ranks
 *     1 and 2 (site isc_waitall).
 * With the argument "leak", only: an Ibarrier whose request is never completed (its
 * state read with MPI_Request_get_status, which does not free it). */
#include <string.h>
#include <unistd.h>

#include "phases.h"

static void leak(void)
{
    MPI_Request rq;
    int flag = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    while (!flag) {
        MPI_Request_get_status(rq, &flag, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, x = 1, y = 0, flag = 0;
    MPI_Request rq, rs[2];
    MPI_Comm dup;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && !strcmp(argv[1], "leak")) {
        leak();
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    phases_init();

    at(1, rank == 0 ? 0.2 : 0);
    mark("ibarrier");
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    mark("ib_wait");
    MPI_Wait(&rq, MPI_STATUS_IGNORE); /* @site ib_wait */

    at(2, rank == 2 ? 0.2 : 0);
    mark("iallreduce");
    MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
    mark("iar_wait");
    MPI_Wait(&rq, MPI_STATUS_IGNORE); /* @site iar_wait */

    at(3, rank == 1 ? 0.2 : 0);
    mark("ibcast");
    MPI_Ibcast(&x, 1, MPI_INT, 1, MPI_COMM_WORLD, &rq);
    mark("ibc_wait");
    MPI_Wait(&rq, MPI_STATUS_IGNORE); /* @site ibc_wait */

    at(4, rank == 0 ? 0 : rank == 1 ? 0.2 : 0.1);
    mark("ireduce");
    MPI_Ireduce(&x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &rq);
    mark("ird_wait");
    MPI_Wait(&rq, MPI_STATUS_IGNORE); /* @site ird_wait */

    at(5, rank == 0 ? 0.2 : 0);
    mark("tl_ibarrier");
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    mark("tl_wait");
    if (rank == 1) {
        for (flag = 0; !flag; usleep(1000))
            MPI_Test(&rq, &flag, MPI_STATUS_IGNORE); /* @site tl_test */
    } else {
        MPI_Wait(&rq, MPI_STATUS_IGNORE); /* @site tl_wait */
    }

    at(6, rank == 0 ? 0.15 : 0);
    if (rank == 1)
        MPI_Irecv(&y, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, &rs[0]);
    mark("wa_ibarrier");
    MPI_Ibarrier(MPI_COMM_WORLD, &rs[1]);
    if (rank == 0) {
        at(6, 0.3);
        mark("wa_send");
        MPI_Send(&x, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
    }
    mark("wa_wait");
    if (rank == 1)
        MPI_Waitall(2, rs, MPI_STATUSES_IGNORE); /* @site wa_waitall */
    else
        MPI_Wait(&rs[1], MPI_STATUS_IGNORE); /* @site wa_wait */

    at(7, rank == 0 ? 0.1 : 0);
    mark("ov_world");
    MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rs[0]);
    if (rank == 0)
        at(7, 0.2);
    mark("ov_dup");
    MPI_Iallreduce(&x, &flag, 1, MPI_INT, MPI_SUM, dup, &rs[1]);
    mark("ov_dup_wait");
    MPI_Wait(&rs[1], MPI_STATUS_IGNORE); /* @site ov_dup_wait */
    mark("ov_world_wait");
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE); /* @site ov_world_wait */

    at(8, rank == 0 ? 0.2 : 0);
    mark("iscan");
    MPI_Iscan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
    mark("isc_waitall");
    MPI_Waitall(1, &rq, MPI_STATUSES_IGNORE); /* @site isc_waitall */

    at(9, 0);
    marks_print(rank);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}

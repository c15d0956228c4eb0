/* Point-to-point wait states by construction, 3 ranks (tests/runtime/test_waitstates.py).
 * Ranks enter their calls at set times of a common clock (phases.h: at(phase, s)) and
 * mark them.
 *   1 Late Sender: rank 1 enters MPI_Recv at 0, rank 0 MPI_Send at 0.2 s:
 *     Late Sender 0.2 s on rank 1 (site ls_recv).
 *   2 Late Receiver: rank 0 enters MPI_Ssend at 0, rank 1 MPI_Recv at 0.15 s:
 *     Late Receiver 0.15 s on rank 0 (site lr_send).
 *   3 Wrong order, same source: rank 0 sends tag 1 at 0 and tag 2 at 0.15 s; rank 1
 *     receives tag 2 first (Late Sender 0.15 s, site wo_same), then tag 1, which was sent
 *     earlier: those 0.15 s are Late Sender, wrong order (same source).
 *   4 Wrong order, different sources: rank 0 sends to rank 2 at 0, rank 1 at 0.15 s;
 *     rank 2 receives from rank 1 first (0.15 s, site wo_diff), then from rank 0:
 *     Late Sender, wrong order (different sources) 0.15 s.
 *   5 Nonblocking: rank 2 posts MPI_Irecv from ranks 0 and 1 and waits in MPI_Waitall
 *     from 0; rank 0 sends at 0.2 s, rank 1 at 0.1 s: Late Sender 0.2 s (the latest
 *     sender) on rank 2 (site ls_waitall).
 * Totals: Late Sender 0.35 s on rank 1, 0.35 s on rank 2; Late Receiver 0.15 s on rank 0. */
#include "phases.h"

int main(int argc, char **argv)
{
    int rank, a = 1, b = 2;
    MPI_Init(&argc, &argv);
    mark("init"); /* the span of Time, with "finalize" */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    phases_init();

    if (rank == 0) {
        at(1, 0.2);
        mark("ls_send");
        MPI_Send(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        at(1, 0);
        mark("ls_recv");
        MPI_Recv(&a, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site ls_recv */
    }

    if (rank == 0) {
        at(2, 0);
        mark("lr_send");
        MPI_Ssend(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD); /* @site lr_send */
    } else if (rank == 1) {
        at(2, 0.15);
        mark("lr_recv");
        MPI_Recv(&a, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    if (rank == 0) {
        at(3, 0);
        MPI_Send(&a, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        at(3, 0.15);
        mark("wo_send2");
        MPI_Send(&b, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
    } else if (rank == 1) {
        at(3, 0);
        mark("wo_same");
        MPI_Recv(&b, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site wo_same */
        MPI_Recv(&a, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    at(4, rank == 1 ? 0.15 : 0);
    if (rank == 0) {
        MPI_Send(&a, 1, MPI_INT, 2, 3, MPI_COMM_WORLD);
    } else if (rank == 1) {
        mark("wd_send");
        MPI_Send(&b, 1, MPI_INT, 2, 3, MPI_COMM_WORLD);
    } else {
        mark("wo_diff");
        MPI_Recv(&b, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site wo_diff */
        MPI_Recv(&a, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    if (rank == 2) {
        MPI_Request rq[2];
        at(5, 0);
        MPI_Irecv(&a, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&b, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, &rq[1]);
        mark("ls_waitall");
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE); /* @site ls_waitall */
    } else {
        at(5, rank == 0 ? 0.2 : 0.1);
        mark("wa_send");
        MPI_Send(&a, 1, MPI_INT, 2, 4, MPI_COMM_WORLD);
    }
    at(6, 0);
    mark("finalize");
    marks_print(rank);
    MPI_Finalize();
    return 0;
}

/* The communication matrix's ground truth by construction (test_comm_matrix.py), any
 * number of ranks N >= 3; r is the world rank:
 *   ring:     RING messages of RING_BYTES(r) bytes, MPI_Send to (r + 1) % N, MPI_Recv from
 *             (r - 1) % N (even ranks send first)
 *   nonblock: NB messages of NB_BYTES(r) bytes, MPI_Isend to (r + 2) % N, MPI_Irecv from
 *             (r - 2) % N, MPI_Waitall
 *   anysrc:   every rank but 0 sends ANY_BYTES(r) bytes to rank 0, which receives them
 *             from MPI_ANY_SOURCE into a larger buffer, status ignored
 *   split:    MPI_Comm_split(color r % 2, key -r): in each part, sub-rank i does one
 *             MPI_Sendrecv of SPLIT_BYTES(r) bytes to sub-rank i + 1, from sub-rank i - 1
 *             (cyclic), then an MPI_Bcast of BCAST_INTS ints from its sub-rank 0
 *   coll:     one MPI_Allreduce of ALLRED_INTS ints on MPI_COMM_WORLD
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define RING 3
#define RING_BYTES(r) (100 * ((r) + 1))
#define NB 2
#define NB_BYTES(r) (64 * ((r) + 1))
#define ANY_BYTES(r) (8 * ((r) + 1))
#define SPLIT_BYTES(r) (1000 + (r))
#define BCAST_INTS 25
#define ALLRED_INTS 16

static char buf[8][8192];

int main(int argc, char **argv)
{
    int r, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int i = 0; i < RING; i++) {
        if (r % 2 == 0) {
            MPI_Send(buf[0], RING_BYTES(r), MPI_BYTE, next, 1, MPI_COMM_WORLD);
            MPI_Recv(buf[1], RING_BYTES(prev), MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf[1], RING_BYTES(prev), MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(buf[0], RING_BYTES(r), MPI_BYTE, next, 1, MPI_COMM_WORLD);
        }
    }
    MPI_Request req[2 * NB];
    int to = (r + 2) % n, from = (r + n - 2) % n;
    for (int i = 0; i < NB; i++) {
        MPI_Irecv(buf[2 + i], NB_BYTES(from), MPI_BYTE, from, 2, MPI_COMM_WORLD, &req[i]);
        MPI_Isend(buf[0], NB_BYTES(r), MPI_BYTE, to, 2, MPI_COMM_WORLD, &req[NB + i]);
    }
    MPI_Status st[2 * NB];
    MPI_Waitall(2 * NB, req, st);
    if (r == 0) {
        for (int i = 1; i < n; i++)
            MPI_Recv(buf[4], (int)sizeof buf[4], MPI_BYTE, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    } else {
        MPI_Send(buf[0], ANY_BYTES(r), MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    MPI_Comm part;
    int pr, pn;
    MPI_Comm_split(MPI_COMM_WORLD, r % 2, -r, &part);
    MPI_Comm_rank(part, &pr);
    MPI_Comm_size(part, &pn);
    int pnext = (pr + 1) % pn, pprev = (pr + pn - 1) % pn;
    int prev_world; /* the sender's world rank gives its size */
    MPI_Group wg, pg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_group(part, &pg);
    MPI_Group_translate_ranks(pg, 1, &pprev, wg, &prev_world);
    MPI_Sendrecv(buf[0], SPLIT_BYTES(r), MPI_BYTE, pnext, 4, buf[5], SPLIT_BYTES(prev_world),
                 MPI_BYTE, pprev, 4, part, MPI_STATUS_IGNORE);
    MPI_Bcast(buf[6], BCAST_INTS, MPI_INT, 0, part);
    MPI_Group_free(&wg);
    MPI_Group_free(&pg);
    MPI_Comm_free(&part);
    MPI_Allreduce(MPI_IN_PLACE, buf[7], ALLRED_INTS, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

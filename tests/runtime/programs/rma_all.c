/* Every one-sided operation in every kind of epoch on every kind of window
 * (tests/runtime/test_rma_trace.py). Each rank targets the next one, (rank + 1) % size.
 *
 * For each window, created in turn by MPI_Win_create, MPI_Win_allocate,
 * MPI_Win_allocate_shared and MPI_Win_create_dynamic (+ MPI_Win_attach), each rank runs
 *   1 a fence epoch:      Win_fence, the 6 blocking operations, Win_fence
 *   2 a PSCW epoch:       Win_post (to the previous rank), Win_start (the next), the 6
 *                         blocking operations, Win_complete, Win_wait
 *   3 a lock epoch:       Win_lock (exclusive), the 6 blocking and the 4 request-based
 *                         operations (each completed by MPI_Wait), Win_flush, Win_unlock
 *   4 a lock_all epoch:   Win_lock_all, the 10 operations, Win_flush_all,
 *                         Win_flush_local, Win_flush_local_all, Win_unlock_all
 * so per rank: Put, Get, Accumulate, Get_accumulate, Fetch_and_op and Compare_and_swap
 * 16 calls each, Rput, Rget, Raccumulate and Rget_accumulate 8 each, MPI_Wait 32,
 * Win_fence 8, Win_lock and Win_unlock 8 (each epoch ends with a shared lock of the
 * rank's own window to read what the previous rank's Fetch_and_op calls added), every
 * other synchronisation 4, one window creation of each kind and 4 Win_free. Put, Get, Accumulate and Get_accumulate move 2 ints, the atomics 1. The
 * values are checked (Fetch_and_op adds 1, Compare_and_swap swaps a known value), so a
 * wrong result is an exit status of 3. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { N = 16 };
static int rank, size, target;
static MPI_Aint base_disp; /* displacement of element 0 on the target (dynamic: address) */
static MPI_Aint unit = 1;  /* displacement of one int: 1, or sizeof(int) on a dynamic window */
static int errors;

static MPI_Aint at(int i) { return base_disp + i * unit; }

/* Origin and result buffers of the blocking operations: they complete at the end of
 * the epoch, after blocking_ops has returned. */
static int two[2], got[2], res[2], one = 1, old = -1, cmp = 0, swap = 7;

static void blocking_ops(MPI_Win win)
{
    two[0] = two[1] = rank;
    MPI_Put(two, 2, MPI_INT, target, at(0), 2, MPI_INT, win);
    MPI_Get(got, 2, MPI_INT, target, at(2), 2, MPI_INT, win);
    MPI_Accumulate(two, 2, MPI_INT, target, at(4), 2, MPI_INT, MPI_SUM, win);
    MPI_Get_accumulate(two, 2, MPI_INT, res, 2, MPI_INT, target, at(6), 2, MPI_INT, MPI_SUM,
                       win);
    MPI_Fetch_and_op(&one, &got[0], MPI_INT, target, at(8), MPI_SUM, win);
    MPI_Compare_and_swap(&swap, &cmp, &old, MPI_INT, target, at(9), win);
}

static void request_ops(MPI_Win win)
{
    MPI_Request r;
    MPI_Rput(two, 2, MPI_INT, target, at(10), 2, MPI_INT, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Rget(got, 2, MPI_INT, target, at(2), 2, MPI_INT, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Raccumulate(two, 2, MPI_INT, target, at(12), 2, MPI_INT, MPI_SUM, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Rget_accumulate(two, 2, MPI_INT, res, 2, MPI_INT, target, at(14), 2, MPI_INT,
                        MPI_SUM, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

static void epochs(int *w, MPI_Win win, MPI_Group prev, MPI_Group next)
{
    int fetched = -1;
    memset(w, 0, sizeof(int) * N);
    MPI_Win_fence(0, win);
    blocking_ops(win);
    MPI_Win_fence(0, win);
    /* after the fence: the previous rank added 1 at 8 and swapped 0 for 7 at 9 */
    if (w[8] != 1 || w[9] != 7)
        errors++;

    MPI_Win_post(prev, 0, win);
    MPI_Win_start(next, 0, win);
    blocking_ops(win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
    blocking_ops(win);
    request_ops(win);
    MPI_Win_flush(target, win);
    MPI_Win_unlock(target, win);

    MPI_Win_lock_all(0, win);
    blocking_ops(win);
    request_ops(win);
    MPI_Win_flush_all(win);
    MPI_Win_flush_local(target, win);
    MPI_Win_flush_local_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    /* 4 epochs of one Fetch_and_op each by the previous rank */
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    fetched = w[8];
    MPI_Win_unlock(rank, win);
    if (fetched != 4)
        errors++;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    target = (rank + 1) % size;
    int prev_rank = (rank + size - 1) % size;
    MPI_Group world, prev, next;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &prev_rank, &prev);
    MPI_Group_incl(world, 1, &target, &next);

    static int created[N];
    int *w;
    MPI_Win win;

    MPI_Win_create(created, sizeof created, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    base_disp = 0;
    epochs(created, win, prev, next);
    MPI_Win_free(&win);

    MPI_Win_allocate(sizeof(int) * N, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win);
    epochs(w, win, prev, next);
    MPI_Win_free(&win);

    MPI_Win_allocate_shared(sizeof(int) * N, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w,
                            &win);
    epochs(w, win, prev, next);
    MPI_Win_free(&win);

    /* a dynamic window: displacements are addresses, its unit is one byte */
    static int attached[N];
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, attached, sizeof attached);
    MPI_Aint mine, all[1024];
    MPI_Get_address(attached, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD);
    base_disp = all[target];
    unit = sizeof(int);
    epochs(attached, win, prev, next);
    MPI_Win_detach(win, attached);
    MPI_Win_free(&win);

    MPI_Group_free(&prev);
    MPI_Group_free(&next);
    MPI_Group_free(&world);
    if (errors)
        fprintf(stderr, "rank %d: %d wrong results\n", rank, errors);
    MPI_Finalize();
    return errors ? 3 : 0;
}

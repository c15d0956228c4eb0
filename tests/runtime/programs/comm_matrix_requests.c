/* The communication matrix of requests, matched probes and one-sided calls, by
 * construction (test_comm_matrix.py), N >= 3 ranks; r is the world rank:
 *   anyirecv: every rank but 0 sends ANY_BYTES(r) bytes to rank 0 (tag 10), which posts
 *             N - 1 MPI_Irecv from MPI_ANY_SOURCE into 4 KiB buffers and completes them
 *             with MPI_Waitall(MPI_STATUSES_IGNORE); again (tag 11, WANY_BYTES(r)) with
 *             MPI_Waitany(MPI_STATUS_IGNORE) and again (tag 12, TEST_BYTES(r)) one at a
 *             time with MPI_Test(MPI_STATUS_IGNORE) until done
 *   persist:  MPI_Send_init of PERS_BYTES(r) bytes to (r + 1) % N and MPI_Recv_init from
 *             (r - 1) % N, PERS rounds of MPI_Startall and MPI_Waitall; every rank but 0
 *             MPI_Send_init of PANY_BYTES(r) bytes to rank 0, PERS rounds of MPI_Start and
 *             MPI_Wait, while rank 0 starts one MPI_Recv_init from MPI_ANY_SOURCE
 *             PERS * (N - 1) times, each completed by MPI_Wait(MPI_STATUS_IGNORE)
 *   mprobe:   every rank but 0 sends MP_BYTES(r) bytes to rank 0 (tag 30), received by
 *             MPI_Mprobe(MPI_ANY_SOURCE) and MPI_Mrecv; then IMP_BYTES(r) (tag 31) by
 *             MPI_Improbe and MPI_Imrecv, MPI_Wait
 *   rma:      a window of 4 KiB on MPI_COMM_WORLD: in a fence epoch MPI_Put of
 *             PUT_BYTES(r) bytes to (r + 1) % N and MPI_Get of GET_BYTES(r) bytes from
 *             (r + 2) % N; then a passive epoch (MPI_Win_lock shared on (r + 1) % N) with
 *             one MPI_Put of LOCK_BYTES(r) bytes
 *   sendrecv: MPI_Sendrecv of SR_BYTES(r) bytes to (r + 1) % N, from (r - 1) % N, even
 *             ranks after sleeping SR_SLEEP_MS; each rank prints "sendrecv R SECONDS",
 *             the call's time by its own clock
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ANY_BYTES(r) (16 * ((r) + 1))
#define WANY_BYTES(r) (24 * ((r) + 1))
#define TEST_BYTES(r) (40 * ((r) + 1))
#define PERS 3
#define PERS_BYTES(r) (200 + (r))
#define PANY_BYTES(r) (300 + 2 * (r))
#define MP_BYTES(r) (500 + (r))
#define IMP_BYTES(r) (600 + (r))
#define PUT_BYTES(r) (8 * ((r) + 1))
#define GET_BYTES(r) (4 * ((r) + 1))
#define LOCK_BYTES(r) (12 * ((r) + 1))
#define SR_BYTES(r) (700 + (r))
#define SR_SLEEP_MS 100

static char out[4096], in[16][4096];

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
    int r, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n > 16)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int next = (r + 1) % n, prev = (r + n - 1) % n;

    /* anyirecv */
    MPI_Request req[16];
    if (r == 0) {
        for (int i = 0; i < n - 1; i++)
            MPI_Irecv(in[i], 4096, MPI_BYTE, MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, &req[i]);
        MPI_Waitall(n - 1, req, MPI_STATUSES_IGNORE);
        for (int i = 0; i < n - 1; i++)
            MPI_Irecv(in[i], 4096, MPI_BYTE, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &req[i]);
        for (int i = 0, k; i < n - 1; i++)
            MPI_Waitany(n - 1, req, &k, MPI_STATUS_IGNORE);
        for (int i = 0; i < n - 1; i++) {
            int done = 0;
            MPI_Irecv(in[0], 4096, MPI_BYTE, MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &req[0]);
            while (!done)
                MPI_Test(&req[0], &done, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Send(out, ANY_BYTES(r), MPI_BYTE, 0, 10, MPI_COMM_WORLD);
        MPI_Send(out, WANY_BYTES(r), MPI_BYTE, 0, 11, MPI_COMM_WORLD);
        MPI_Send(out, TEST_BYTES(r), MPI_BYTE, 0, 12, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* persist */
    MPI_Request pr[2];
    MPI_Send_init(out, PERS_BYTES(r), MPI_BYTE, next, 20, MPI_COMM_WORLD, &pr[0]);
    MPI_Recv_init(in[1], PERS_BYTES(prev), MPI_BYTE, prev, 20, MPI_COMM_WORLD, &pr[1]);
    for (int i = 0; i < PERS; i++) {
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    MPI_Request one;
    if (r == 0) {
        MPI_Recv_init(in[2], 4096, MPI_BYTE, MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &one);
        for (int i = 0; i < PERS * (n - 1); i++) {
            MPI_Start(&one);
            MPI_Wait(&one, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Send_init(out, PANY_BYTES(r), MPI_BYTE, 0, 21, MPI_COMM_WORLD, &one);
        for (int i = 0; i < PERS; i++) {
            MPI_Start(&one);
            MPI_Wait(&one, MPI_STATUS_IGNORE);
        }
    }
    MPI_Request_free(&one);
    MPI_Barrier(MPI_COMM_WORLD);

    /* mprobe */
    if (r == 0) {
        for (int i = 0; i < n - 1; i++) {
            MPI_Message m;
            MPI_Status st;
            int count;
            MPI_Mprobe(MPI_ANY_SOURCE, 30, MPI_COMM_WORLD, &m, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            MPI_Mrecv(in[3], count, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < n - 1; i++) {
            MPI_Message m;
            MPI_Status st;
            int flag = 0, count;
            while (!flag)
                MPI_Improbe(MPI_ANY_SOURCE, 31, MPI_COMM_WORLD, &flag, &m, &st);
            MPI_Get_count(&st, MPI_BYTE, &count);
            MPI_Imrecv(in[4], count, MPI_BYTE, &m, &one);
            MPI_Wait(&one, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Send(out, MP_BYTES(r), MPI_BYTE, 0, 30, MPI_COMM_WORLD);
        MPI_Send(out, IMP_BYTES(r), MPI_BYTE, 0, 31, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* rma */
    MPI_Win win;
    MPI_Win_create(in[5], 4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(out, PUT_BYTES(r), MPI_BYTE, next, 0, PUT_BYTES(r), MPI_BYTE, win);
    MPI_Get(in[6], GET_BYTES(r), MPI_BYTE, (r + 2) % n, 1024, GET_BYTES(r), MPI_BYTE, win);
    MPI_Win_fence(0, win);
    MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
    MPI_Put(out, LOCK_BYTES(r), MPI_BYTE, next, 2048, LOCK_BYTES(r), MPI_BYTE, win);
    MPI_Win_unlock(next, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);

    /* sendrecv: a late partner makes the receive wait */
    if (r % 2 == 0)
        sleep_ms(SR_SLEEP_MS);
    double t0 = MPI_Wtime();
    MPI_Sendrecv(out, SR_BYTES(r), MPI_BYTE, next, 40, in[7], SR_BYTES(prev), MPI_BYTE, prev, 40,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("sendrecv %d %.6f\n", r, MPI_Wtime() - t0);
    MPI_Finalize();
    return 0;
}

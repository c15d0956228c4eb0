/* Wrong Order is a matter of one thread, 3 ranks, MPI_THREAD_MULTIPLE
 * (tests/runtime/test_waitstates.py).
 *   1 Two threads of rank 0 receive side by side, each from its own peer and in the
 *     order that peer sends: thread A from rank 1 (sent at 0.1 and 0.4 s), thread B from
 *     rank 2 (sent at 0.2 and 0.3 s), all receives posted at 0. Every receive is a Late
 *     Sender (sites t_recv1, t_recv2: the first and second receive of either thread);
 *     none is in the wrong order, whichever thread's records come first in the rank's
 *     trace.
 *   2 One thread (rank 0's main thread) receives rank 1's message of tag 2 (sent at
 *     0.3 s) before its message of tag 1 (sent at 0.1 s): Late Sender and Wrong Order
 *     (same source) of 0.3 s at site wo_recv. */
#include <pthread.h>

#include "phases.h"

static pthread_mutex_t marking = PTHREAD_MUTEX_INITIALIZER;

/* A receiving thread of rank 0: two messages from its peer. */
struct receiver {
    int peer;
    const char *marks[2];
};

static void *receive(void *arg)
{
    const struct receiver *r = arg;
    MPI_Status st;
    int x;
    at(1, 0);
    for (int k = 0; k < 2; k++) {
        pthread_mutex_lock(&marking); /* mark() is not thread-safe */
        mark(r->marks[k]);
        pthread_mutex_unlock(&marking);
        if (k == 0)
            MPI_Recv(&x, 1, MPI_INT, r->peer, 1, MPI_COMM_WORLD, &st); /* @site t_recv1 */
        else
            MPI_Recv(&x, 1, MPI_INT, r->peer, 1, MPI_COMM_WORLD, &st); /* @site t_recv2 */
    }
    return NULL;
}

static void send_at(double s, int tag, const char *name)
{
    int x = 1;
    at(1, s);
    mark(name);
    MPI_Send(&x, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, provided, x = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    phases_init();

    if (rank == 0) {
        pthread_t a, b;
        struct receiver ra = {1, {"ta_recv1", "ta_recv2"}}, rb = {2, {"tb_recv1", "tb_recv2"}};
        pthread_create(&a, NULL, receive, &ra);
        pthread_create(&b, NULL, receive, &rb);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (rank == 1) {
        send_at(0.1, 1, "sa_send1");
        send_at(0.4, 1, "sa_send2");
    } else {
        send_at(0.2, 1, "sb_send1");
        send_at(0.3, 1, "sb_send2");
    }

    at(2, 0);
    if (rank == 0) {
        mark("wo_recv");
        MPI_Recv(&x, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site wo_recv */
        MPI_Recv(&x, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* @site wo_recv1 */
    } else if (rank == 1) {
        at(2, 0.1);
        mark("wo_send1");
        MPI_Send(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
        at(2, 0.3);
        mark("wo_send2");
        MPI_Send(&x, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
    }
    at(3, 0);
    marks_print(rank);
    MPI_Finalize();
    return 0;
}

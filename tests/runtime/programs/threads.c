/* MPI_THREAD_MULTIPLE: the main thread and one pthread each make 50
 * MPI_Comm_rank calls and 10 MPI_Allreduce calls of 2 ints, each thread on its own
 * duplicate of MPI_COMM_WORLD. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static MPI_Comm comms[2];

static void *work(void *arg)
{
    MPI_Comm comm = comms[(long)arg];
    int r, in[2] = {1, 2}, out[2];
    for (int i = 0; i < 50; i++)
        MPI_Comm_rank(comm, &r); /* @site rank */
    for (int i = 0; i < 10; i++)
        MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, comm); /* @site allreduce */
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    pthread_t t;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_create(&t, NULL, work, (void *)1L);
    work((void *)0L);
    pthread_join(t, NULL);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return 0;
}

/* A rank that forks a child while it runs, as programs do for helpers (system(), a
 * compressor, a worker): every rank calls sched_yield P times and MPI_Barrier B times;
 * rank 0 then forks a child that calls sched_yield C times and exits normally (exit:
 * its atexit handlers run), waits for it, and every rank makes one more barrier.
 * Prints "rank R pid PID" per rank and "child PID" for the child.
 * Usage: fork_child_calls P B C */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long p = atol(argv[1]), b = atol(argv[2]), c = atol(argv[3]);
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long i = 0; i < p; i++)
        sched_yield();
    for (long i = 0; i < b; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    if (rank == 0) {
        pid_t child = fork();
        if (child == 0) {
            for (long i = 0; i < c; i++)
                sched_yield();
            printf("child %d\n", (int)getpid());
            fflush(stdout);
            exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

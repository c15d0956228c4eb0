/* A rank that dies of SIGKILL after known numbers of calls (tests/runtime/test_killed_profile.py).
 * Usage: killed_at MODE N P C
 * Every rank: N MPI_Sendrecv of one int64 around the ring; MPI_Comm_rank (rank + 1) times
 * from each of SITES distinct call sites; P sched_yield (the example module's function);
 * then, unless C < 0, rank 0 forks a child that calls sched_yield C times and, in MODE
 * kill and child-kill, raises SIGKILL (else exits normally), and waits for it; every rank
 * joins one MPI_Barrier, prints "rank R pid PID done" and, in MODE kill, raises SIGKILL;
 * in MODE end and child-kill, it calls MPI_Finalize. The child prints "child PID". */
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SITES 64
/* one call site per expansion: SITES distinct return addresses */
#define S1(i) for (int k = 0; k <= rank; k++) MPI_Comm_rank(MPI_COMM_WORLD, &me);
#define S4(i) S1(i) S1(i) S1(i) S1(i)
#define S16(i) S4(i) S4(i) S4(i) S4(i)
#define S64 S16(0) S16(1) S16(2) S16(3)

int main(int argc, char **argv)
{
    int kill_mode = argc > 1 && strcmp(argv[1], "kill") == 0;
    int child_kill = kill_mode || (argc > 1 && strcmp(argv[1], "child-kill") == 0);
    long n = atol(argv[2]), p = atol(argv[3]), c = atol(argv[4]);
    int rank, size, me;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (long i = 0; i < n; i++) {
        int64_t out = i, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT64_T, right, 1, &in, 1, MPI_INT64_T, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    S64
    for (long i = 0; i < p; i++)
        sched_yield();
    if (rank == 0 && c >= 0) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            for (long i = 0; i < c; i++)
                sched_yield();
            printf("child %d\n", (int)getpid());
            fflush(stdout);
            if (child_kill)
                raise(SIGKILL);
            exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d pid %d done\n", rank, (int)getpid());
    fflush(stdout);
    if (kill_mode)
        raise(SIGKILL);
    MPI_Finalize();
    return 0;
}

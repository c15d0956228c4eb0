/* A job stuck for a while (tests/runtime/test_snapshot.py, --hang): rank 1 waits in
 * MPI_Recv for rank 0, which computes (sleeps, outside MPI) until the file DIR/go exists;
 * the other ranks wait in MPI_Barrier. Then rank 0 sends, all meet in MPI_Barrier, each
 * prints "rank R done" and the exit status is 3 (the program's own, to be passed on).
 * Usage: hang_recv DIR */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char go[4096];
    snprintf(go, sizeof go, "%s/go", argc > 1 ? argv[1] : ".");
    long v = 42;
    if (rank == 0) {
        while (access(go, F_OK) != 0)
            usleep(20000);
        MPI_Send(&v, 1, MPI_LONG, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(&v, 1, MPI_LONG, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE); // @site recv
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d done\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 3;
}

/* Known MPI calls in phases, each followed by a pause outside MPI during which a test takes
 * a live snapshot (tests/runtime/test_snapshot.py).
 * Usage: snapshot_waits DIR N PHASES
 * Phase p (1..PHASES): p * N iterations of one MPI_Sendrecv of 8 bytes around the ring
 * (nonblocking: MPI_Irecv, MPI_Send, MPI_Wait) and one MPI_Allreduce of one int; then
 * the rank's own counts so far ("irecv send wait allreduce") go to DIR/counts-R-p (written
 * whole, then renamed) and it sleeps until DIR/go-p exists. At the end "rank R done C"
 * (C: its MPI calls) on stdout and exit status 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argv[1];
    long n = atol(argv[2]), phases = atol(argv[3]);
    long irecv = 0, send = 0, wait = 0, allreduce = 0;
    for (long p = 1; p <= phases; p++) {
        for (long i = 0; i < p * n; i++) {
            long out = rank, in = -1;
            MPI_Request req;
            MPI_Irecv(&in, 1, MPI_LONG, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &req);
            irecv++;
            MPI_Send(&out, 1, MPI_LONG, (rank + 1) % size, 7, MPI_COMM_WORLD);
            send++;
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            wait++;
            int one = 1, sum = 0;
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            allreduce++;
        }
        char path[4096], tmp[4096];
        snprintf(path, sizeof path, "%s/counts-%d-%ld", dir, rank, p);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        fprintf(f, "%ld %ld %ld %ld\n", irecv, send, wait, allreduce);
        fclose(f);
        rename(tmp, path);
        snprintf(path, sizeof path, "%s/go-%ld", dir, p);
        while (access(path, F_OK) != 0)
            usleep(20000);
    }
    printf("rank %d done %ld\n", rank, irecv + send + wait + allreduce);
    MPI_Finalize();
    return 0;
}

/* Counter ground truth: between two barriers each rank touches PAGES fresh pages
 * (one write per page of a fresh anonymous mapping: one page fault each), so the
 * second barrier's call site has PAGES page faults "before" it, the first one few.
 * Each rank prints "stretch RANK WALL CPU": the seconds of CLOCK_MONOTONIC and of its
 * CPU time (CLOCK_THREAD_CPUTIME_ID, what perf::TASK-CLOCK counts) between the barriers;
 * on a busy machine the CPU is well below the wall time.
 * Usage: pagefaults [PAGES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long pages = argc > 1 ? atol(argv[1]) : 20000;
    long page = sysconf(_SC_PAGESIZE);
    MPI_Barrier(MPI_COMM_WORLD); // @site quiet
    double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
    char *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED)
        MPI_Abort(MPI_COMM_WORLD, 1);
    madvise(m, pages * page, MADV_NOHUGEPAGE); /* one fault per small page */
    for (long i = 0; i < pages; i++)
        m[i * page] = 1;
    cpu = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu;
    wall = seconds(CLOCK_MONOTONIC) - wall;
    MPI_Barrier(MPI_COMM_WORLD); // @site touched
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("stretch %d %.9f %.9f\n", rank, wall, cpu);
    if (rank == 0)
        printf("touched %ld pages\n", pages);
    munmap(m, pages * page);
    MPI_Finalize();
    return 0;
}

/* Counter ground truth: between two barriers each rank touches PAGES fresh pages
 * (one write per page of a fresh anonymous mapping: one page fault each), so the
 * second barrier's call site has PAGES page faults "before" it, the first one few.
 * Usage: pagefaults [PAGES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long pages = argc > 1 ? atol(argv[1]) : 20000;
    long page = sysconf(_SC_PAGESIZE);
    MPI_Barrier(MPI_COMM_WORLD); // @site quiet
    char *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED)
        MPI_Abort(MPI_COMM_WORLD, 1);
    madvise(m, pages * page, MADV_NOHUGEPAGE); /* one fault per small page */
    for (long i = 0; i < pages; i++)
        m[i * page] = 1;
    MPI_Barrier(MPI_COMM_WORLD); // @site touched
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("touched %ld pages\n", pages);
    munmap(m, pages * page);
    MPI_Finalize();
    return 0;
}

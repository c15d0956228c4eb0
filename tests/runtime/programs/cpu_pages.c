/* Known work between two barriers, measured by the program itself: each rank burns
 * about SECONDS (default 0.4) of CPU and touches PAGES (default 5000) new pages between
 * the barriers marked "start" and "done", and prints its own CPU time over that stretch
 * (getrusage of the thread) and the pages touched:
 *   rank R cpu_ns N pages P
 * Usage: cpu_pages [SECONDS] [PAGES] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static long long cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double seconds = argc > 1 ? atof(argv[1]) : 0.4;
    long pages = argc > 2 ? atol(argv[2]) : 5000, psize = sysconf(_SC_PAGESIZE);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *mem = mmap(NULL, pages * psize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (mem == MAP_FAILED)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD); // @site start
    long long c0 = cpu_ns();
    for (long p = 0; p < pages; p++)
        mem[p * psize] = (char)p;
    volatile double x = 0;
    while (cpu_ns() - c0 < seconds * 1e9)
        for (int i = 0; i < 100000; i++)
            x += i * 0.5;
    long long c1 = cpu_ns();
    MPI_Barrier(MPI_COMM_WORLD); // @site done
    printf("rank %d cpu_ns %lld pages %ld\n", rank, c1 - c0, pages);
    munmap(mem, pages * psize);
    MPI_Finalize();
    return 0;
}

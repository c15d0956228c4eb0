/* Counters on call-tree nodes, ground truth: main -> phase_touch -> toucher() writes once
 * to each of PAGES fresh 4 KiB pages of one anonymous mapping (a page fault each) and
 * then spins 30 ms without faulting; main -> phase_compute burns 0.3 s without faulting.
 * main first spins 30 ms, so that the faults of the process's start-up (charged to the
 * first sample) do not land in toucher. Every spin is of the thread's CPU time
 * (spin_cpu): it runs, and is sampled, that long however busy the machine (30 ms of
 * the clock could pass without the process running, and without a sample). Prints the
 * pages touched and the thread's CPU time (user and system: the faults are the kernel's
 * work) in toucher, by its own clock.
 * Usage: touch_tree [PAGES] (default 100000) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spin.h"

__attribute__((noinline)) long toucher(char *m, long pages, long page)
{
    for (long i = 0; i < pages; i++)
        m[i * page] = 1;
    spin_cpu(0.03); /* the faults' last sample lands here, not in the next phase */
    return pages;
}

static double toucher_cpu;

__attribute__((noinline)) long phase_touch(long pages)
{
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED)
        return -1;
    madvise(m, pages * page, MADV_NOHUGEPAGE); /* one fault per small page */
    double t0 = thread_cpu_seconds();
    long n = toucher(m, pages, page);
    toucher_cpu = thread_cpu_seconds() - t0;
    munmap(m, pages * page);
    return n;
}

__attribute__((noinline)) void phase_compute(double seconds) { spin_cpu(seconds); }

int main(int argc, char **argv)
{
    long pages = argc > 1 ? atol(argv[1]) : 100000;
    spin_cpu(0.03);
    long n = phase_touch(pages);
    phase_compute(0.3);
    printf("touched %ld pages in %.6f s\n", n, toucher_cpu);
    return n == pages ? 0 : 1;
}

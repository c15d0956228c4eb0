/* Counters at sampling ticks, ground truth: touch_pages() maps, touches (one write per
 * 4 KiB page: a page fault each) and unmaps 10 MiB over and over for 1 s, then compute()
 * burns 1 s without faulting. */
#include <stddef.h>
#include <sys/mman.h>

#include "spin.h"

__attribute__((noinline)) void touch_pages(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds) {
        size_t n = 10 << 20;
        char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return;
        madvise(m, n, MADV_NOHUGEPAGE);
        for (size_t i = 0; i < n; i += 4096)
            m[i] = 1;
        munmap(m, n);
    }
}

__attribute__((noinline)) void compute(double seconds) { spin(seconds); }

int main(void)
{
    touch_pages(1.0);
    compute(1.0);
    return 0;
}

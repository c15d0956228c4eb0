// heap_sites.c's three sites in C++: new[] and delete[] (through operator new, malloc),
// each site a std::vector<char *> of blocks; prints "site count bytes byte_s" by its own
// clock. Run with MPI (tests/runtime/test_heap.py).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

static double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static void hold(double s)
{
    double t0 = now();
    while (now() - t0 < s) {
    }
}

struct Site {
    long long count = 0, bytes = 0;
    double byte_s = 0;
};

__attribute__((noinline)) static char *alloc_a(size_t n) { return new char[n]; } // @site A
__attribute__((noinline)) static char *alloc_b(size_t n) { return new char[n]; } // @site B
__attribute__((noinline)) static char *alloc_c(size_t n) { return new char[n]; } // @site C

// n blocks of size, `live` of them live at a time (a block is freed when the one `live`
// later is made), `each` seconds after each allocation, `pause` after the last one
static void phase(Site &s, char *(*alloc)(size_t), size_t size, int n, int live, double each,
                  double pause)
{
    std::vector<char *> blocks(live);
    std::vector<double> born(live);
    for (int i = 0; i < n + live; i++) {
        int k = i % live;
        if (i >= live) {
            s.byte_s += size * (now() - born[k]);
            delete[] blocks[k];
        }
        if (i < n) {
            blocks[k] = alloc(size);
            born[k] = now();
            s.count++;
            s.bytes += size;
            hold(each);
        }
        if (i == n - 1)
            hold(pause);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Site a, b, c;
    phase(a, alloc_a, 2 << 20, 100, 100, 0, 0.2);
    phase(b, alloc_b, 65536, 10000, 100, 0.00002, 0);
    phase(c, alloc_c, 8 << 20, 7, 7, 0, 0.1);
    std::printf("A %lld %lld %.9g\nB %lld %lld %.9g\nC %lld %lld %.9g\n", a.count, a.bytes,
                a.byte_s, b.count, b.bytes, b.byte_s, c.count, c.bytes, c.byte_s);
    MPI_Finalize();
    return 0;
}

// C++17 aligned new under --place (tests/runtime/test_heap_place.py): libstdc++'s
// operator new(size_t, std::align_val_t) asks aligned_alloc for the size rounded up to the
// alignment (every size here is a multiple of it already). Sites: NB new of a struct
// alignas(64) of 3 MiB, x 2; NC new[] of 32 768 cells alignas(64) (2 MiB), x 2; N2M
// operator new[](4 MiB, std::align_val_t{2 << 20}), x 2; NS new[] of 1 024 cells (64 KiB),
// x 3. Every block is written, checked and deleted. Prints "alloc NAME COUNT SIZE" (SIZE:
// bytes asked of the allocator), "align NAME ALIGNMENT ok|BAD", "check ok" (else "check
// FAILED" and exit status 3). With MPI when argv[1] is "mpi".
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "pattern.h"

namespace {

constexpr std::size_t MIB = std::size_t(1) << 20;
constexpr std::size_t ALIGN_2M = std::size_t(2) << 20;

struct alignas(64) Cell {
    double v[8];
};
struct alignas(64) Block {
    unsigned char b[3 << 20];
};

// clang-format off
__attribute__((noinline)) Block *new_block() { return new Block; } // @site NB
__attribute__((noinline)) Cell *new_cells(std::size_t n) { return new Cell[n]; } // @site NC
__attribute__((noinline)) void *new_2m(std::size_t n) { return operator new[](n, std::align_val_t{ALIGN_2M}); } // @site N2M
__attribute__((noinline)) Cell *new_small(std::size_t n) { return new Cell[n]; } // @site NS
// clang-format on

void report(const char *name, int count, std::size_t size, std::size_t align, void *const *p)
{
    bool aligned = true;
    for (int i = 0; i < count; i++)
        aligned = aligned && reinterpret_cast<std::uintptr_t>(p[i]) % align == 0;
    std::printf("alloc %s %d %zu\n", name, count, size);
    std::printf("align %s %zu %s\n", name, align, aligned ? "ok" : "BAD");
}

} // namespace

int main(int argc, char **argv)
{
    bool mpi = argc > 1 && !std::strcmp(argv[1], "mpi");
    if (mpi)
        MPI_Init(&argc, &argv);
    void *nb[2], *nc[2], *n2m[2], *ns[3];
    for (int i = 0; i < 2; i++) {
        nb[i] = new_block();
        nc[i] = new_cells(32768);
        n2m[i] = new_2m(4 * MIB);
        fill(static_cast<unsigned char *>(nb[i]), sizeof(Block), i);
        fill(static_cast<unsigned char *>(nc[i]), 32768 * sizeof(Cell), i + 10);
        fill(static_cast<unsigned char *>(n2m[i]), 4 * MIB, i + 20);
    }
    for (int i = 0; i < 3; i++) {
        ns[i] = new_small(1024);
        fill(static_cast<unsigned char *>(ns[i]), 1024 * sizeof(Cell), i + 30);
    }
    report("NB", 2, sizeof(Block), alignof(Block), nb);
    report("NC", 2, 32768 * sizeof(Cell), alignof(Cell), nc);
    report("N2M", 2, 4 * MIB, ALIGN_2M, n2m);
    report("NS", 3, 1024 * sizeof(Cell), alignof(Cell), ns);
    for (int i = 0; i < 2; i++) {
        check(static_cast<unsigned char *>(nb[i]), sizeof(Block), i);
        check(static_cast<unsigned char *>(nc[i]), 32768 * sizeof(Cell), i + 10);
        check(static_cast<unsigned char *>(n2m[i]), 4 * MIB, i + 20);
        delete static_cast<Block *>(nb[i]);
        delete[] static_cast<Cell *>(nc[i]);
        operator delete[](n2m[i], std::align_val_t{ALIGN_2M});
    }
    for (int i = 0; i < 3; i++) {
        check(static_cast<unsigned char *>(ns[i]), 1024 * sizeof(Cell), i + 30);
        delete[] static_cast<Cell *>(ns[i]);
    }
    std::printf("check %s\n", bad ? "FAILED" : "ok");
    std::fflush(stdout);
    if (mpi)
        MPI_Finalize();
    return bad ? 3 : 0;
}

/* The aligned allocators under --place (tests/runtime/test_heap_place.py). Each site's
 * blocks are written and checked, each pointer checked against its alignment. Sites: P64
 * posix_memalign(64, 3 MiB) x 4; P2M posix_memalign(2 MiB, 2 MiB) x 3; AA aligned_alloc(4096,
 * 1.5 MiB) x 2; MA memalign(256, 1 MiB) x 2; VA valloc(1 MiB + 100) x 2; PV pvalloc(1 MiB +
 * 100) x 2 (usable to the page); S posix_memalign(64, 64 KiB) x 10; BIG posix_memalign(2
 * MiB, 8 MiB) x 2; G2 posix_memalign(2 GiB, 1 MiB), past the arenas' largest alignment; OM
 * memalign(48, 2 MiB) and OA aligned_alloc(24, 2 MiB), alignments that are not powers of
 * two (glibc 2.36 rounds them up, later ones may refuse aligned_alloc's); R16: a P2M block
 * moved by realloc to 16 MiB, R4: and back to 4 MiB, its first 2 MiB checked after each
 * move; P2M's blocks are freed and 3 taken again (RE, the arena's free blocks reused with
 * their alignment). Prints "alloc NAME COUNT SIZE" for every allocation made (NAME's
 * blocks, each SIZE bytes asked), "align NAME ALIGNMENT ok|BAD", "err CASE RC ERRNO NULL"
 * for the calls that fail or keep errno (to compare with a run without perfweave), "check
 * ok" (else "check FAILED" and exit status 3). With MPI when argv[1] is "mpi". */
#include <errno.h>
#include <malloc.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* clang-format off */
__attribute__((noinline)) static void *alloc_p64(size_t n) { void *p = NULL; return posix_memalign(&p, 64, n) ? NULL : p; } /* @site P64 */
__attribute__((noinline)) static void *alloc_p2m(size_t n) { void *p = NULL; return posix_memalign(&p, 2 * MIB, n) ? NULL : p; } /* @site P2M */
__attribute__((noinline)) static void *alloc_aa(size_t n) { return aligned_alloc(4096, n); } /* @site AA */
__attribute__((noinline)) static void *alloc_ma(size_t n) { return memalign(256, n); } /* @site MA */
__attribute__((noinline)) static void *alloc_va(size_t n) { return valloc(n); } /* @site VA */
__attribute__((noinline)) static void *alloc_pv(size_t n) { return pvalloc(n); } /* @site PV */
__attribute__((noinline)) static void *alloc_s(size_t n) { void *p = NULL; return posix_memalign(&p, 64, n) ? NULL : p; } /* @site S */
__attribute__((noinline)) static void *alloc_big(size_t n) { void *p = NULL; return posix_memalign(&p, 2 * MIB, n) ? NULL : p; } /* @site BIG */
__attribute__((noinline)) static void *alloc_g2(size_t n) { void *p = NULL; return posix_memalign(&p, (size_t)2 << 30, n) ? NULL : p; } /* @site G2 */
__attribute__((noinline)) static void *alloc_om(size_t n) { return memalign(48, n); } /* @site OM */
__attribute__((noinline)) static void *alloc_oa(size_t n) { return aligned_alloc(24, n); } /* @site OA */
__attribute__((noinline)) static void *move_r16(void *p, size_t n) { return realloc(p, n); } /* @site R16 */
__attribute__((noinline)) static void *move_r4(void *p, size_t n) { return realloc(p, n); } /* @site R4 */
__attribute__((noinline)) static void *alloc_re(size_t n) { void *p = NULL; return posix_memalign(&p, 2 * MIB, n) ? NULL : p; } /* @site RE */
/* clang-format on */

/* count blocks of n bytes from fn, each aligned to `align`, written, usable to `usable`. */
static void take(const char *name, void *(*fn)(size_t), int count, size_t n, size_t align,
                 size_t usable, unsigned char **out)
{
    int aligned = 1, made = 0;
    for (int i = 0; i < count; i++) {
        out[i] = fn(n);
        if (!out[i])
            continue;
        made++;
        aligned &= (uintptr_t)out[i] % align == 0;
        bad |= malloc_usable_size(out[i]) < usable;
        fill(out[i], n, i);
    }
    printf("alloc %s %d %zu\n", name, made, n);
    printf("align %s %zu %s\n", name, align, aligned ? "ok" : "BAD");
}

static void check_free(unsigned char **p, int count, size_t n)
{
    for (int i = 0; i < count; i++) {
        if (!p[i])
            continue;
        check(p[i], n, i);
        free(p[i]);
    }
}

/* A call that fails (or succeeds keeping errno): its return code, errno, NULL result. */
static void error_case(const char *name, int rc, void *p)
{
    int e = errno;
    printf("err %s %d %d %d\n", name, rc, e, rc != 0 || p == NULL);
    if (!rc)
        free(p);
}

int main(int argc, char **argv)
{
    int mpi = argc > 1 && !strcmp(argv[1], "mpi");
    if (mpi)
        MPI_Init(&argc, &argv);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p64[4], *p2m[3], *aa[2], *ma[2], *va[2], *pv[2], *s[10], *big[2], *g2[1],
        *om[1], *oa[1], *re[3];
    take("P64", alloc_p64, 4, 3 * MIB, 64, 3 * MIB, p64);
    take("P2M", alloc_p2m, 3, 2 * MIB, 2 * MIB, 2 * MIB, p2m);
    take("AA", alloc_aa, 2, 1536 * KIB, 4096, 1536 * KIB, aa);
    take("MA", alloc_ma, 2, MIB, 256, MIB, ma);
    take("VA", alloc_va, 2, MIB + 100, page, MIB + 100, va);
    take("PV", alloc_pv, 2, MIB + 100, page, (MIB + 100 + page - 1) / page * page, pv);
    take("S", alloc_s, 10, 64 * KIB, 64, 64 * KIB, s);
    take("BIG", alloc_big, 2, 8 * MIB, 2 * MIB, 8 * MIB, big);
    take("G2", alloc_g2, 1, MIB, (size_t)2 << 30, MIB, g2);
    take("OM", alloc_om, 1, 2 * MIB, 64, 2 * MIB, om);
    take("OA", alloc_oa, 1, 2 * MIB, 32, 2 * MIB, oa);

    /* a P2M block out of the arena by realloc and back */
    unsigned char *r = move_r16(p2m[0], 16 * MIB);
    check(r, 2 * MIB, 0);
    fill(r + 2 * MIB, 14 * MIB, 99);
    printf("alloc R16 1 %zu\n", 16 * MIB);
    r = move_r4(r, 4 * MIB);
    check(r, 2 * MIB, 0);
    check(r + 2 * MIB, 2 * MIB, 99);
    bad |= malloc_usable_size(r) < 4 * MIB;
    printf("alloc R4 1 %zu\n", 4 * MIB);
    free(r);
    p2m[0] = NULL;
    check_free(p2m, 3, 2 * MIB);
    take("RE", alloc_re, 3, 2 * MIB, 2 * MIB, 2 * MIB, re);

    check_free(p64, 4, 3 * MIB);
    check_free(aa, 2, 1536 * KIB);
    check_free(ma, 2, MIB);
    check_free(va, 2, MIB + 100);
    check_free(pv, 2, MIB + 100);
    check_free(s, 10, 64 * KIB);
    check_free(big, 2, 8 * MIB);
    check_free(g2, 1, MIB);
    check_free(om, 1, 2 * MIB);
    check_free(oa, 1, 2 * MIB);
    check_free(re, 3, 2 * MIB);

    /* errors, as the C library gives them, and errno kept by a placed success (KEPT) */
    void *p = NULL;
    int rc;
    volatile size_t huge = SIZE_MAX - 4096; /* not known to the compiler */
    errno = 0;
    rc = posix_memalign(&p, 24, 2 * MIB);
    error_case("posix_memalign_24", rc, p);
    errno = 0;
    rc = posix_memalign(&p, 4, 2 * MIB);
    error_case("posix_memalign_4", rc, p);
    errno = 0;
    rc = posix_memalign(&p, 0, 2 * MIB);
    error_case("posix_memalign_0", rc, p);
    errno = 0;
    rc = posix_memalign(&p, 64, huge);
    error_case("posix_memalign_huge", rc, p);
    errno = 0;
    p = aligned_alloc((size_t)1 << 62, 2 * MIB);
    error_case("aligned_alloc_2^62", 0, p);
    errno = 0;
    p = memalign(4096, huge);
    error_case("memalign_huge", 0, p);
    errno = 0;
    p = pvalloc(huge + 4086);
    error_case("pvalloc_overflow", 0, p);
    errno = 0;
    p = valloc(huge);
    error_case("valloc_huge", 0, p);
    errno = 1234;
    rc = posix_memalign(&p, 4096, 2 * MIB); /* @site KEPT */
    error_case("posix_memalign_kept", rc, p);
    printf("alloc KEPT %d %zu\n", rc == 0, 2 * MIB);
    errno = 1234;
    p = aligned_alloc(64, 2 * MIB); /* @site KEPTA */
    error_case("aligned_alloc_kept", 0, p);
    printf("alloc KEPTA %d %zu\n", p != NULL, 2 * MIB);

    printf("check %s\n", bad ? "FAILED" : "ok");
    fflush(stdout);
    if (mpi)
        MPI_Finalize();
    return bad ? 3 : 0;
}

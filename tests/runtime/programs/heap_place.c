/* Placement by --place (tests/runtime/test_heap_place.py): site A 100 x 2 MiB, all live at
 * once, every byte written and checked; site B 10 000 x 64 KiB, 100 live at a time; site C
 * 7 x 8 MiB, all live at once; site D one calloc of 1000 x 2 KiB (2 048 000 bytes in all,
 * each element 2 KiB), checked zero; site R one block of 2 MiB grown by realloc to 8 MiB
 * and shrunk to 3 MiB, its first 2 MiB checked after each move. With MPI when argv[1] is
 * "mpi". Prints "check ok" when every byte was as written (else "check FAILED" and exit
 * status 3), the process's AnonHugePages (kB, /proc/self/smaps_rollup) with its pid as
 * "huge PID KB", and "pid PID". argv[2] "kill": SIGKILL itself at the end; "fork": first a
 * child that allocates and frees 3 blocks at site A and exits. */
#include <malloc.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pattern.h"

#define MIB (1 << 20)

__attribute__((noinline)) static void *alloc_a(size_t n) { return malloc(n); } /* @site A */
__attribute__((noinline)) static void *alloc_b(size_t n) { return malloc(n); } /* @site B */
__attribute__((noinline)) static void *alloc_c(size_t n) { return malloc(n); } /* @site C */
__attribute__((noinline)) static void *alloc_d(size_t n, size_t m) { return calloc(n, m); } /* @site D */
__attribute__((noinline)) static void *alloc_r(size_t n) { return malloc(n); } /* @site R */

static int malloc_usable_size_ok(void *p, size_t n) { return malloc_usable_size(p) >= n; }

static long huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "AnonHugePages:", 14))
            kb = atol(line + 14);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    int mpi = argc > 1 && !strcmp(argv[1], "mpi");
    if (mpi)
        MPI_Init(&argc, &argv);
    if (argc > 2 && !strcmp(argv[2], "fork")) {
        pid_t child = fork();
        if (child == 0) {
            for (int i = 0; i < 3; i++) {
                unsigned char *p = alloc_a(2 * MIB);
                fill(p, 2 * MIB, i);
                check(p, 2 * MIB, i);
                free(p);
            }
            exit(bad ? 3 : 0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("child %d %d\n", (int)child, WEXITSTATUS(status));
    }
    unsigned char *a[100], *b[100] = {0}, *c[7];
    for (int i = 0; i < 100; i++) {
        a[i] = alloc_a(2 * MIB);
        fill(a[i], 2 * MIB, i);
    }
    for (int i = 0; i < 10000; i++) {
        int k = i % 100;
        free(b[k]);
        b[k] = alloc_b(65536);
        b[k][0] = (unsigned char)i;
    }
    for (int k = 0; k < 100; k++)
        free(b[k]);
    for (int i = 0; i < 7; i++) {
        c[i] = alloc_c(8 * MIB);
        fill(c[i], 8 * MIB, i);
    }
    unsigned char *d = alloc_d(1000, 2048);
    for (int i = 0; i < 2048000; i++)
        bad |= d[i] != 0;
    fill(d, 2048000, 5);
    unsigned char *r = alloc_r(2 * MIB);
    fill(r, 2 * MIB, 9);
    r = realloc(r, 8 * MIB); /* out of the arena @site R8 */
    check(r, 2 * MIB, 9);
    fill(r, 8 * MIB, 11);
    r = realloc(r, 3 * MIB); /* back into it @site R3 */
    check(r, 3 * MIB, 11);
    bad |= malloc_usable_size_ok(r, 3 * MIB) == 0;
    for (int i = 0; i < 100; i++)
        check(a[i], 2 * MIB, i);
    for (int i = 0; i < 7; i++)
        check(c[i], 8 * MIB, i);
    check(d, 2048000, 5);
    printf("check %s\nhuge %d %ld\npid %d\n", bad ? "FAILED" : "ok", (int)getpid(), huge_kb(),
           (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 100; i++)
        free(a[i]);
    for (int i = 0; i < 7; i++)
        free(c[i]);
    free(d);
    free(r);
    if (argc > 2 && !strcmp(argv[2], "kill"))
        raise(SIGKILL);
    if (mpi)
        MPI_Finalize();
    return bad ? 3 : 0;
}

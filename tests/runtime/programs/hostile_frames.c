/* Code built without frame pointers uses the frame-pointer register for anything: gfortran
 * -O2 kept an array descriptor's offset times 8 (-8) there in NPB CG's hottest loop. Each
 * spin_NAME function below spins for MS milliseconds of CPU time (default 40) with the
 * register (rbp) holding one such value, or the address of a frame on the stack whose
 * saved frame pointer is one (the walk reads it from memory), so that samples land with
 * it there. Built with -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables: without
 * unwind information libunwind guesses frames from that register, and where its guess
 * fails the sampler walks the frame pointers itself. x86-64 only.
 * Usage: hostile_frames [MS]; prints "held N values". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int held;
static const char *volatile last; /* makes each function's code its own: none is folded */

/* One function per value, so that its samples are known by their function. */
#define SPIN(name)                                                                                 \
    __attribute__((noinline)) static void spin_##name(uintptr_t fp, unsigned long n)              \
    {                                                                                              \
        if (!n)                                                                                    \
            return;                                                                                \
        __asm__ volatile("mov %[fp], %%rbp\n\t"                                                    \
                         "1: sub $1, %[n]\n\t"                                                     \
                         "jnz 1b"                                                                  \
                         : [n] "+r"(n)                                                             \
                         : [fp] "r"(fp)                                                            \
                         : "rbp", "cc");                                                           \
        held++;                                                                                    \
        last = #name;                                                                              \
    }

SPIN(calibrate)
SPIN(minus8)        /* the NPB CG value: "fp + 16" wraps to 8 */
SPIN(minus16)       /* wraps to 0 */
SPIN(last_page)     /* the address space's last page */
SPIN(kernel)        /* the kernel's half */
SPIN(user_top)      /* the top of user space, not mapped */
SPIN(null_page)     /* the first page */
SPIN(below_sp)      /* in the stack's range, below its live part */
SPIN(stack_top)     /* a frame that would end past the top of the stack */
SPIN(chain_minus16) /* a frame on the stack whose saved frame pointer is -16 */
SPIN(chain_kernel)  /* ... is an address in the kernel's half */

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* spin iterations per ms of CPU time: the fastest of three runs, the least disturbed */
static double per_ms(void)
{
    unsigned long n = 20000000;
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        double t0 = cpu_ms();
        spin_calibrate(0, n);
        double dt = cpu_ms() - t0;
        if (dt > 0 && dt < best)
            best = dt;
    }
    return n / best;
}

static uintptr_t stack_top(void)
{
    pthread_attr_t a;
    void *lo = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &lo, &size);
        pthread_attr_destroy(&a);
    }
    return (uintptr_t)lo + size;
}

int main(int argc, char **argv)
{
    double ms = argc > 1 ? atof(argv[1]) : 40;
    unsigned long n = (unsigned long)(ms * per_ms());
    volatile uintptr_t here = 0;
    spin_minus8((uintptr_t)-8, n);
    spin_minus16((uintptr_t)-16, n);
    spin_last_page(UINTPTR_MAX - 4095, n);
    spin_kernel(0xffff800000000000ULL, n);
    spin_user_top(0x00007ffffffff000ULL, n);
    spin_null_page(8, n);
    spin_below_sp((uintptr_t)&here - 65536, n);
    spin_stack_top(stack_top() - sizeof(uintptr_t), n);
    /* [saved frame pointer, return address]: the return address is a page that no code is
     * in, as a stale frame's may be */
    volatile uintptr_t frame[2] = {(uintptr_t)-16, 0x10000};
    spin_chain_minus16((uintptr_t)frame, n);
    frame[0] = 0xffff800000000000ULL;
    spin_chain_kernel((uintptr_t)frame, n);
    printf("held %d values\n", held - 3);
    return 0;
}

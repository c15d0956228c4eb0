/*
 * Wall-clock sampling of call stacks (--sample): a POSIX timer per thread
 * (CLOCK_MONOTONIC, delivered to that thread with SIGEV_THREAD_ID) raises a real-time
 * signal of our own, never SIGPROF or SIGALRM, so programs with their own handlers for
 * those keep them. The handler records the time, what the thread was doing (computation,
 * or the family of the MPI call it is in: the core's pw_thread_activity, kept by the MPI
 * wrappers) and the stack by frame pointers, each frame checked to lie in the thread's
 * own stack.
 *
 * Memory is bounded: each thread has a buffer of --sample-capacity samples; when it is
 * full, every other sample is dropped (the oldest kept) and the thread's interval doubles,
 * so about capacity/2..capacity samples cover the whole run, evenly, whatever its length.
 *
 * The handler is async-signal-safe: no locks, no allocation, only the thread's own buffer
 * and timer_settime. Threads sampled: the main thread from the start, every thread the
 * program creates (pthread_create, so OpenMP's too) from its start, any other thread
 * from its first MPI call, and the threads that exist when the module starts (a library's
 * constructor started them before this runtime's: OpenBLAS's workers) from then on. At exit the samples are written to samples/rank-R.samples or
 * samples/HOST.PID.samples (+ .json), addresses as (module, offset).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "samples.h"
#include "perfweave/format/samples.h" /* its files: kinds, records, versions */
#include "wrap.h"

#if defined(PW_HAVE_LIBUNWIND) /* CMake: libunwind.h found; the library is dlopen'd */
#include <link.h>
#include <libunwind.h>
#define PW_STR_(x) #x
#define PW_STR(x) PW_STR_(x) /* the library's name of a libunwind.h macro */
#endif

#define PW_SAMPLE_THREADS 256

/* A sample's state is the thread's pw_thread_activity (pw.h): 0 computation, 1 + family in
 * a measured call, PW_ACTIVITY_SLEEP and PW_ACTIVITY_WAIT set by the wrappers below. */
#define STATE_SLEEP PW_ACTIVITY_SLEEP
#define STATE_WAIT PW_ACTIVITY_WAIT
/* Handlers of the program that this thread entered or left (program_handler counts
 * each twice): a wrapped call during which one ran was the program's to end, whatever
 * our handler found (ended_a_call), as the program's handler may have ended it before
 * ours ran. Volatile, as the fields below, because the handlers write them: glibc
 * declares the functions the wrappers call (syscall, ...) as leaf functions, which lets
 * the compiler keep a static variable in a register across them. */
static PW_TLS volatile unsigned handled;
/* The wrapped blocking calls in progress in this thread, innermost last (a program's
 * handler may make one while another waits): what the handlers note of them (see "How a
 * wrapper resumes a call" below). In the thread's own memory, not the wrappers' frames:
 * a wrapper left without returning (its thread cancelled in the call, or a handler that
 * jumped out of it with siglongjmp) leaves its record behind, which the next call drops
 * (its frame is below the new call's: the stack grows down). */
#define PW_NESTED_CALLS 8
typedef struct blocked_call {
    uintptr_t frame;          /* the wrapper's frame */
    unsigned handled;         /* handled when the call began */
    volatile int interrupted; /* our signal alone ended the real call just made */
    volatile int resuming;    /* the call is being made again after our signal */
    clockid_t clock;          /* the clock of its timeout */
    volatile int woke;        /* a handler of the program ran in it, */
    volatile int64_t woken;   /* first at this time on that clock */
} blocked_call;
static PW_TLS blocked_call calls[PW_NESTED_CALLS];
static PW_TLS volatile int ncalls;
/* Our timer's signals still to send to end a call being made again (nudge) */
static PW_TLS volatile int nudges;
static pid_t start_pid;

typedef struct sample {
    int64_t t;
    int16_t state, depth;
    int32_t have_ctr; /* counters[] read */
    int64_t counters[PW_SAMPLE_COUNTERS];
    uintptr_t frames[PW_SAMPLE_FRAMES]; /* [0]: the interrupted pc + 1 (a "return" address) */
} sample;

typedef struct thr {
    timer_t timer;
    int ok, tid;
    int adopted; /* an existing thread's slot, set up by another: its handler takes it */
    pid_t pid;   /* the process it runs in (process_vm_readv), read once at its start */
    uintptr_t stack_lo, stack_hi; /* [lo, hi): its stack; from sp up to hi all mapped */
    int64_t interval_ns;
    uint64_t rng; /* xorshift state: jitter of each interval */
    int n, cap, thinned;
    int64_t taken;
    int64_t unwound, fallbacks; /* samples by libunwind; by frame pointers instead */
    sample *buf;
} thr;

/* The start of what the handler reads in place: the interrupted thread's stack from its
 * stack pointer sp up, [sp, t->stack_hi), mapped as long as the thread runs; 0 (nothing)
 * when sp is not in that stack (the thread runs on another). Nothing else is read in place:
 * libunwind's other reads go through process_vm_readv, which fails where a read would
 * fault, and the frame walk stops there. */
static uintptr_t live_stack(const thr *t, uintptr_t sp)
{
    return sp >= t->stack_lo && sp < t->stack_hi ? sp : 0;
}

/* [a, a + len) lies in [lo, hi), lo != 0. a comes from the interrupted code's registers or
 * stack and may be any value, so no sum here may wrap: with rbp = -8 (gfortran -O2 keeps
 * an array's offset times 8 there), "a + 16 <= hi" held and the frame walk read address
 * 0 with every signal blocked, which killed the process. */
static inline int in_range(uintptr_t a, size_t len, uintptr_t lo, uintptr_t hi)
{
    return lo && a >= lo && a < hi && hi - a >= len;
}

static thr threads[PW_SAMPLE_THREADS];
static int nthreads;            /* slots claimed: beyond PW_SAMPLE_THREADS, threads not sampled */
static int no_timer, no_memory; /* threads not sampled: timer_create or the buffer failed */
static PW_TLS thr *self;
static int sig;
static int started;
static int nmaps;                /* mappings snapshotted for threads found running at start */
static thr *adopt(uintptr_t sp); /* such a thread's slot, taken by its handler */

/* Arm the thread's timer once, for the interval +-50 % at random: a fixed period would
 * alias with a program's own periodic phases (and keep sampling the same one). */
static void set_interval(thr *t)
{
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    int64_t ns = t->interval_ns / 2 + (int64_t)(t->rng % (uint64_t)(t->interval_ns + 1));
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = ns / 1000000000LL;
    its.it_value.tv_nsec = ns % 1000000000LL;
    timer_settime(t->timer, 0, &its, NULL);
}

/* A context's program counter, frame pointer and stack pointer (0 where unknown). */
static void context_regs(const ucontext_t *uc, uintptr_t *pc, uintptr_t *fp, uintptr_t *sp)
{
#if defined(__x86_64__)
    *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    *fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    *sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    *pc = (uintptr_t)uc->uc_mcontext.pc;
    *fp = (uintptr_t)uc->uc_mcontext.regs[29];
    *sp = (uintptr_t)uc->uc_mcontext.sp;
#else
    (void)uc;
    *pc = *fp = *sp = 0;
#endif
}

/* A stack deeper than a sample's frames keeps its innermost frames and, in place of the
 * last PW_OUTER_FRAMES of them, its outermost ones: the program's root (main, a thread's
 * start) is never cut off by a deep call (MPI_Init runs the constructors of the
 * components it opens, which may sleep or wait in wrapped calls: 32 frames and more).
 * The walk goes on, remembering the last frames in a ring, up to PW_DEEPEST frames. */
#define PW_OUTER_FRAMES 8
#define PW_DEEPEST 1024
typedef struct deep_stack {
    uintptr_t ring[PW_OUTER_FRAMES];
    int n;   /* frames beyond the sample's */
    int cut; /* the walk stopped at PW_DEEPEST: the outermost frames are not known */
} deep_stack;

/* The walk's next frame a: into frames[] (*d of them), or the ring; 0: stop walking. */
static int add_frame(uintptr_t *frames, int *d, deep_stack *x, uintptr_t a)
{
    if (*d < PW_SAMPLE_FRAMES)
        frames[(*d)++] = a;
    else
        x->ring[x->n++ % PW_OUTER_FRAMES] = a;
    x->cut = *d + x->n >= PW_DEEPEST;
    return !x->cut;
}

/* The walk reached the outermost frame: frames[] ends with the stack's outermost
 * PW_OUTER_FRAMES (the last of its own, then those of the ring) after its innermost. */
static void end_frames(uintptr_t *frames, const deep_stack *x)
{
    int m = x->n < PW_OUTER_FRAMES ? x->n : PW_OUTER_FRAMES,
        keep = PW_SAMPLE_FRAMES - PW_OUTER_FRAMES;
    if (x->cut || !m)
        return;
    memmove(frames + keep, frames + keep + m, (size_t)(PW_OUTER_FRAMES - m) * sizeof *frames);
    for (int k = 0; k < m; k++)
        frames[PW_SAMPLE_FRAMES - m + k] = x->ring[(x->n - m + k) % PW_OUTER_FRAMES];
}

/* libunwind, when its header was there at build time and its library is here at run
 * time (dlopen'd, so that a program using another unwinder is not disturbed and
 * libperfweave needs nothing more): stacks through code without frame pointers (-O2's
 * default on x86-64), from the DWARF call-frame information.
 *
 * Its memory and registers are ours to give: libunwind's generic library unwinds in an
 * address space of our own (unw_create_addr_space), whose accessors read the registers
 * from the signal's ucontext and memory directly inside the interrupted stack, else by
 * process_vm_readv on our own process, which fails where a read would fault. libunwind's
 * local address space validates such reads (when the call-frame information is missing
 * and it follows the frame chain) by writing them to a pipe it opens at its
 * initialisation; that descriptor is a number the program may close and reuse (daemons
 * close every descriptor from 3), after which the handler would block in read() on the
 * program's pipe or write into its files. So that pipe is never used, and it is closed
 * once libunwind has made it (the program's first open() gets 3 again). Unwind tables
 * are still found by the library's own find_proc_info, on its local address space (it
 * reads the tables in place, as before, without validation).
 *
 * Async-signal safety: libunwind takes its own locks with all signals blocked and
 * allocates from its own mmap'd pools; its per-thread cache lives in dynamic TLS, which
 * glibc allocates with malloc at a thread's first use, so each sampled thread unwinds
 * once outside the handler first (warm_unwind). It finds unwind tables with
 * dl_iterate_phdr, which takes the loader's (recursive) lock: a sample that lands in the
 * dynamic loader (dlopen, dlclose, lazy binding: the link map may be changing), or
 * anywhere while the loader says the list of modules is changing (_r_debug.r_state),
 * or in libunwind itself uses frame pointers instead, as do samples where libunwind fails
 * (counted: fallbacks). So does a sample in the few instructions where a thread holds the
 * loader's lock but the lock does not name it as owner yet (or any more): inside
 * pthread_mutex_lock/unlock called from the loader or from dl_iterate_phdr. There
 * libunwind's dl_iterate_phdr would wait for the thread itself, for ever (seen in a
 * dlopen/dlclose loop); such a sample is known by its pc in those functions or by a
 * return address into the loader or dl_iterate_phdr near the top of its stack. */
#if defined(PW_HAVE_LIBUNWIND)
/* What one unwind reads: the registers of a context, and memory. [lo, hi) is the part
 * of the thread's stack known mapped (from below the stack pointer's red zone to the
 * top); pages elsewhere that process_vm_readv could read in this unwind are read in place
 * after that (mapped text and tables; the loader's list of modules is stable meanwhile:
 * see unwind()). */
#define PW_UNW_PAGES 8
typedef struct unw_view {
    const ucontext_t *uc;
    uintptr_t pc, fp; /* non-zero: the registers' values instead of the context's */
    uintptr_t lo, hi;
    uintptr_t page[PW_UNW_PAGES];
    int npages;
    pid_t pid; /* the sampled thread's process (process_vm_readv) */
} unw_view;

enum { UNW_LOADER, UNW_LOCAL_LIB, UNW_LIBC, UNW_GENERIC_LIB, UNW_NTEXT };
static struct {
    unw_addr_space_t as, local; /* ours; the library's local one (its table lookup) */
    int (*find)(unw_addr_space_t, unw_word_t, unw_proc_info_t *, int, void *);
    void (*put)(unw_addr_space_t, unw_proc_info_t *, void *);
    int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
    int (*step)(unw_cursor_t *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
    uintptr_t lo[UNW_NTEXT], hi[UNW_NTEXT]; /* text of the loader, libunwind(s), libc */
    uintptr_t glo[4], ghi[4]; /* libc functions that take or release the loader's lock */
    int nguard;
} unw;

static int text_ranges(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name ? info->dlpi_name : "";
    int k = strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld64.so", 7) == 0 ? UNW_LOADER
            : strncmp(base, "libunwind.", 10) == 0                                ? UNW_LOCAL_LIB
            : strncmp(base, "libunwind-", 10) == 0                                ? UNW_GENERIC_LIB
            : strncmp(base, "libc.so", 7) == 0                                    ? UNW_LIBC
                                                                                  : -1;
    for (int i = 0; k >= 0 && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!unw.lo[k] || lo < unw.lo[k])
            unw.lo[k] = lo;
        if (hi > unw.hi[k])
            unw.hi[k] = hi;
    }
    return 0;
}

static int unw_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    unw_view *v = arg;
    if (write)
        return -UNW_EINVAL;
    if (in_range(addr, sizeof *val, v->lo, v->hi)) {
        memcpy(val, (const void *)addr, sizeof *val);
        return 0;
    }
    uintptr_t page = addr & ~(uintptr_t)4095;
    int one_page = ((addr + sizeof *val - 1) & ~(uintptr_t)4095) == page;
    for (int i = 0; one_page && i < v->npages && i < PW_UNW_PAGES; i++)
        if (v->page[i] == page) {
            memcpy(val, (const void *)addr, sizeof *val);
            return 0;
        }
    struct iovec to = {val, sizeof *val}, from = {(void *)addr, sizeof *val};
    if (process_vm_readv(v->pid, &to, 1, &from, 1, 0) != (ssize_t)sizeof *val)
        return -UNW_EINVAL;
    if (one_page)
        v->page[v->npages++ % PW_UNW_PAGES] = page;
    return 0;
}

/* libunwind's register numbers to the ucontext's */
static int unw_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    const unw_view *v = arg;
    if (write)
        return -UNW_EREADONLYREG;
#if defined(__x86_64__)
    static const int greg[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                 REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                 REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
    if (reg < 0 || reg > UNW_X86_64_RIP)
        return -UNW_EBADREG;
    *val = (unw_word_t)v->uc->uc_mcontext.gregs[greg[reg]];
    if (reg == UNW_X86_64_RIP && v->pc)
        *val = v->pc;
    if (reg == UNW_X86_64_RBP && v->fp)
        *val = v->fp;
#elif defined(__aarch64__)
    if (reg >= UNW_AARCH64_X0 && reg <= UNW_AARCH64_X30)
        *val = v->uc->uc_mcontext.regs[reg - UNW_AARCH64_X0];
    else if (reg == UNW_AARCH64_SP)
        *val = v->uc->uc_mcontext.sp;
    else if (reg == UNW_AARCH64_PC)
        *val = v->pc ? v->pc : v->uc->uc_mcontext.pc;
    else
        return -UNW_EBADREG;
    if (reg == UNW_AARCH64_X29 && v->fp)
        *val = v->fp;
#else
    (void)reg, (void)val, (void)v;
    return -UNW_EBADREG;
#endif
    return 0;
}

static int unw_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                            void *arg)
{
    (void)as, (void)reg, (void)val, (void)write, (void)arg;
    return -UNW_EBADREG;
}

/* The library's own table lookup, on its local address space (tables read in place);
 * the null argument is its "no validation" */
static int unw_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need,
                              void *arg)
{
    (void)as, (void)arg;
    return unw.find(unw.local, ip, pi, need, NULL);
}

static void unw_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)as, (void)arg;
    unw.put(unw.local, pi, NULL);
}

/* The two lowest free descriptors: where a pipe made next goes. */
static void lowest_free(int fd[2])
{
    int n = 0;
    for (int i = 0; n < 2 && i < 65536; i++)
        if (fcntl(i, F_GETFD) < 0 && errno == EBADF)
            fd[n++] = i;
}

/* Whether a and b are the two ends of one pipe that libunwind made: non-blocking,
 * close-on-exec, read and write end (Ginit.c's open_pipe). */
static int unw_pipe(int a, int b)
{
    struct stat sa, sb;
    int fa = fcntl(a, F_GETFL), fb = fcntl(b, F_GETFL);
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && S_ISFIFO(sa.st_mode) &&
           sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev && fa >= 0 && fb >= 0 &&
           (fa & O_NONBLOCK) && (fb & O_NONBLOCK) && (fa & O_ACCMODE) == O_RDONLY &&
           (fb & O_ACCMODE) == O_WRONLY && (fcntl(a, F_GETFD) & FD_CLOEXEC) &&
           (fcntl(b, F_GETFD) & FD_CLOEXEC);
}

static void unwinder_load(void)
{
    if (!pw_opt.sample_libunwind)
        return;
    const char *name = "libunwind-" PW_STR(UNW_TARGET) ".so.8";
    /* the pipe is closed only when libunwind was not the program's before */
    int ours = !dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD), fd[2] = {-1, -1};
    if (ours)
        lowest_free(fd);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        pw_debug("--sample: no %s here; stacks by frame pointers", name);
        return;
    }
    unw_addr_space_t *local = dlsym(h, PW_STR(unw_local_addr_space));
    unw_accessors_t *(*accessors)(unw_addr_space_t);
    unw_addr_space_t (*create)(unw_accessors_t *, int);
    int (*policy)(unw_addr_space_t, unw_caching_policy_t);
    *(void **)&accessors = dlsym(h, PW_STR(unw_get_accessors));
    *(void **)&create = dlsym(h, PW_STR(unw_create_addr_space));
    *(void **)&policy = dlsym(h, PW_STR(unw_set_caching_policy));
    *(void **)&unw.init_remote = dlsym(h, PW_STR(unw_init_remote));
    *(void **)&unw.get_reg = dlsym(h, PW_STR(unw_get_reg));
    *(void **)&unw.step = dlsym(h, PW_STR(unw_step));
    unw_accessors_t *la = local && accessors ? accessors(*local) : NULL; /* its init */
    if (ours && fd[0] >= 0 && fd[1] >= 0 && unw_pipe(fd[0], fd[1])) {
        close(fd[0]);
        close(fd[1]);
    }
    if (!la || !la->find_proc_info || !create || !policy || !unw.init_remote || !unw.get_reg ||
        !unw.step) {
        pw_log("--sample: this libunwind lacks functions perfweave needs; frame pointers used");
        unw.step = NULL;
        return;
    }
    unw_accessors_t a;
    memset(&a, 0, sizeof a);
    unw.local = *local;
    unw.find = la->find_proc_info;
    unw.put = la->put_unwind_info;
    a.find_proc_info = unw_find_proc_info;
    a.put_unwind_info = unw.put ? unw_put_unwind_info : NULL;
    a.get_dyn_info_list_addr = la->get_dyn_info_list_addr;
    a.access_mem = unw_access_mem;
    a.access_reg = unw_access_reg;
    a.access_fpreg = unw_access_fpreg;
    unw.as = create(&a, 0);
    if (!unw.as) {
        unw.step = NULL;
        return;
    }
    policy(unw.as, UNW_CACHE_PER_THREAD); /* no lock between threads */
    dl_iterate_phdr(text_ranges, NULL);
    static const char *const guarded[] = {"pthread_mutex_lock", "pthread_mutex_unlock",
                                          "dl_iterate_phdr", "pthread_mutex_trylock"};
    for (size_t i = 0; i < sizeof guarded / sizeof *guarded; i++) {
        void *f = dlsym(RTLD_DEFAULT, guarded[i]);
        Dl_info info;
        const ElfW(Sym) *sym = NULL;
        if (f && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
            unw.glo[unw.nguard] = (uintptr_t)f;
            unw.ghi[unw.nguard++] = (uintptr_t)f + sym->st_size;
        }
    }
}

static int guarded(uintptr_t a)
{
    for (int k = 0; k < unw.nguard; k++)
        if (a >= unw.glo[k] && a < unw.ghi[k])
            return 1;
    return 0;
}

/* Words near the top of the interrupted stack that point into the dynamic loader or a
 * guarded function: return addresses of the frames the pc's function was called from
 * (stale values only cost a sample libunwind's precision). */
#define PW_GUARD_WORDS 32
static int near_loader(const thr *t, uintptr_t sp)
{
    /* the 4 KiB block holding sp is mapped (the last push wrote there); words beyond it
     * are read with process_vm_readv, which fails where a plain read would fault */
    uintptr_t w[PW_GUARD_WORDS];
    size_t n = PW_GUARD_WORDS, here = ((sp | 4095) + 1 - sp) / sizeof(uintptr_t);
    if (here >= n) {
        memcpy(w, (const void *)sp, sizeof w);
    } else {
        memcpy(w, (const void *)sp, here * sizeof *w);
        struct iovec to = {w + here, (n - here) * sizeof *w};
        struct iovec from = {(void *)(sp + here * sizeof *w), (n - here) * sizeof *w};
        if (process_vm_readv(t->pid, &to, 1, &from, 1, 0) != (ssize_t)to.iov_len)
            n = here;
    }
    for (size_t i = 0; i < n; i++)
        if ((w[i] >= unw.lo[UNW_LOADER] && w[i] < unw.hi[UNW_LOADER]) || guarded(w[i]))
            return 1;
    return 0;
}

/* The stack of context uc, whose stack pointer is sp, by libunwind into frames[d..] (the
 * frames beyond the sample's into x): the depth, or -1 when libunwind failed before the
 * outermost frame. pc, fp: when non-zero, the walk starts there instead (a wrapper's
 * frame, pc a return address in it); *last: the stack pointer of the last frame reached;
 * *ended: the walk reached the outermost frame (or PW_DEEPEST). */
static int unwind_context(const thr *t, const ucontext_t *uc, uintptr_t sp, uintptr_t pc,
                          uintptr_t fp, uintptr_t *frames, int d, deep_stack *x, uintptr_t *last,
                          int *ended)
{
    unw_view v;
    v.uc = uc;
    v.pc = pc ? pc - 1 : 0; /* inside the call that returns to pc: its frame's rules */
    v.fp = fp;
    v.npages = 0;
    v.pid = t->pid;
    /* below sp: the red zone (128 bytes on x86-64), which libunwind does not read */
    v.lo = live_stack(t, sp);
    v.hi = t->stack_hi;
    unw_cursor_t c;
    *ended = 0;
    if (unw.init_remote(&c, unw.as, &v) < 0)
        return -1;
    int rc = 0, first = 1;
    unw_word_t at = 0;
    for (;;) {
        unw_word_t ip = 0;
        if (unw.get_reg(&c, UNW_REG_IP, &ip) < 0 || !ip)
            break;
        unw.get_reg(&c, UNW_REG_SP, &at);
        /* the first: pc + 1 (or the return address pc), then return addresses */
        if (!add_frame(frames, &d, x, first ? ip + 1 : ip) || (rc = unw.step(&c)) <= 0)
            break;
        first = 0;
    }
    *last = at;
    if (rc < 0 && d < PW_SAMPLE_FRAMES) /* failed before the outermost frame */
        return -1;
    *ended = rc >= 0; /* a failure beyond the sample's frames leaves the innermost ones */
    return d;
}

/* A first unwind in this thread, outside any handler: libunwind's TLS and caches. */
static void warm_unwind(const thr *t)
{
    ucontext_t uc;
    uintptr_t frames[PW_SAMPLE_FRAMES], pc, fp, sp;
    if (unw.step && getcontext(&uc) == 0) {
        context_regs(&uc, &pc, &fp, &sp);
        deep_stack x = {.n = 0};
        int ended;
        unwind_context(t, &uc, sp, 0, 0, frames, 0, &x, &sp, &ended);
    }
}

/* The stack of the interrupted context by libunwind into frames[]; the depth, or -1 when
 * libunwind is not to be used for it or failed before the outermost frame. */
static int unwind(const thr *t, void *ucv, uintptr_t pc, uintptr_t sp, uintptr_t *frames)
{
    if (!unw.step)
        return -1;
    static const int own[] = {UNW_LOADER, UNW_LOCAL_LIB, UNW_GENERIC_LIB};
    for (size_t k = 0; k < sizeof own / sizeof *own; k++)
        if (pc >= unw.lo[own[k]] && pc < unw.hi[own[k]])
            return -1;
    if (guarded(pc) || near_loader(t, sp))
        return -1;
    /* the loader is changing the list of modules (dlopen, dlclose: the state debuggers
     * read, RT_ADD / RT_DELETE until consistent again), possibly from libc code it calls
     * (malloc, mmap, memcpy): libunwind would read that list half-made */
    if (__atomic_load_n(&_r_debug.r_state, __ATOMIC_RELAXED) != RT_CONSISTENT)
        return -1;
    uintptr_t last = 0, anchor = pw_call_anchor;
    deep_stack x = {.n = 0};
    int ended;
    int d = unwind_context(t, ucv, sp, 0, 0, frames, 0, &x, &last, &ended);
    /* In a measured call whose wrapper the walk did not reach: code without unwind tables
     * (OpenBLAS's assembly kernels) ended it. It goes on from the wrapper's frame. */
    if (d > 0 && d + 1 < PW_SAMPLE_FRAMES && anchor && last < anchor && anchor >= sp &&
        anchor < t->stack_hi) {
        deep_stack y = x;
        int more_ended, more = unwind_context(t, ucv, sp, pw_call_here, anchor, frames, d, &y,
                                              &last, &more_ended);
        if (more > d) { /* frames[d]: pw_call_here, a return address in the wrapper */
            d = more;
            x = y;
            ended = more_ended;
        }
    }
    if (d > 0 && ended)
        end_frames(frames, &x);
    /* the outermost frame, the program's _start below libc's __libc_start_main: start-up
     * code, which the frame-pointer walk never reaches either (the stack starts at main) */
    uintptr_t lo = unw.lo[UNW_LIBC], hi = unw.hi[UNW_LIBC];
    if (d >= 2 && d < PW_SAMPLE_FRAMES && frames[d - 2] > lo && frames[d - 2] <= hi &&
        !(frames[d - 1] > lo && frames[d - 1] <= hi))
        d--;
    return d;
}
#define PW_UNWINDER (unw.step ? "libunwind" : "frame pointers")
#else
static void unwinder_load(void) {}
static void warm_unwind(const thr *t) { (void)t; }
static int unwind(const thr *t, void *ucv, uintptr_t pc, uintptr_t sp, uintptr_t *frames)
{
    (void)t, (void)ucv, (void)pc, (void)sp, (void)frames;
    return -1;
}
#define PW_UNWINDER "frame pointers"
#endif

/* The frame-pointer chain from fp into frames[d..]: [fp] = caller's fp, [fp + 8] = return
 * address; each fp in the thread's live stack above sp (live_stack: code built without
 * frame pointers leaves any value in the register), aligned, growing. *reached: the chain
 * passed through the frame `stop`. */
static int fp_chain(const thr *t, uintptr_t fp, uintptr_t sp, uintptr_t *frames, int d,
                    deep_stack *x, uintptr_t stop, int *reached)
{
    uintptr_t lo = live_stack(t, sp);
    while (in_range(fp, 2 * sizeof(uintptr_t), lo, t->stack_hi) &&
           (fp & (sizeof(uintptr_t) - 1)) == 0) {
        if (fp == stop)
            *reached = 1;
        uintptr_t next = ((uintptr_t *)fp)[0], ret = ((uintptr_t *)fp)[1];
        if (ret < 4096 || !add_frame(frames, &d, x, ret) || next <= fp)
            break;
        fp = next;
    }
    return d;
}

/* A sample at a function's entry (push %rbp, or the endbr64 before it), right after
 * the push (mov %rsp,%rbp), or at a ret (after pop %rbp): rbp still holds the caller's
 * frame, so the chain starts at the caller's caller and the caller is lost (a sample in
 * now()'s prologue read main;deep;...;deep;now, its caller spin missing). Its return
 * address is then at sp, or sp + 8 after the push: returned, or 0. The code bytes are
 * read with process_vm_readv, which fails where a plain read would fault (execute-only
 * pages, pc at the end of a mapping). */
static uintptr_t frame_not_made(const thr *t, uintptr_t pc, uintptr_t sp)
{
#if defined(__x86_64__)
    unsigned char c[4];
    struct iovec to = {c, sizeof c}, from = {(void *)pc, sizeof c};
    if (process_vm_readv(t->pid, &to, 1, &from, 1, 0) != (ssize_t)sizeof c)
        return 0;
    size_t at;
    if (c[0] == 0x55 || c[0] == 0xc3 || (c[0] == 0xf3 && c[1] == 0xc3) ||
        (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa))
        at = 0; /* push %rbp, ret, rep ret, endbr64 */
    else if (c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xe5)
        at = sizeof(uintptr_t); /* mov %rsp,%rbp */
    else
        return 0;
    if (!in_range(sp, at + sizeof(uintptr_t), live_stack(t, sp), t->stack_hi))
        return 0;
    uintptr_t ret = *(const uintptr_t *)(sp + at);
    return ret >= 4096 ? ret : 0;
#else
    (void)t, (void)pc, (void)sp;
    return 0;
#endif
}

/* Frame pointers: [fp] = caller's fp, [fp + 8] = return address. Inside an MPI call
 * the chain usually breaks in the MPI library (built without frame pointers): then the
 * stack goes on from the wrapper's own frame (pw_call_anchor), so that the sample
 * still has the MPI function and the program's frames above it. */
static int fp_walk(const thr *t, uintptr_t pc, uintptr_t fp, uintptr_t sp, uintptr_t *frames)
{
    int d = 0, reached = 0;
    deep_stack x = {.n = 0};
    uintptr_t anchor = pw_call_anchor;
    if (pc) {
        frames[d++] = pc + 1;
        uintptr_t caller = frame_not_made(t, pc, sp);
        if (caller)
            frames[d++] = caller;
    }
    int n = fp_chain(t, fp, sp, frames, d, &x, anchor, &reached);
    if (!anchor || reached || anchor < sp || d + 1 >= PW_SAMPLE_FRAMES) {
        end_frames(frames, &x);
        return n;
    }
    frames[d++] = pw_call_here; /* a return address in the wrapper */
    x = (deep_stack){.n = 0};   /* the chain from the anchor instead */
    n = fp_chain(t, anchor, sp, frames, d, &x, 0, &reached);
    end_frames(frames, &x);
    return n;
}

/* Whether our signal alone ended a blocking system call with EINTR (the wrappers then
 * call it again). The kernel hands a handler the registers of the interrupted context
 * with the call's result already set to -EINTR when it will not restart it; a program's
 * handler that ours lands in has no such register. The program's own signals that
 * arrived with ours are held by our handler's mask (all signals) and delivered right
 * after it: pending and not blocked in the interrupted context, the call is theirs. One
 * that was handled before ours landed left the same registers: the caller checks that
 * no handler of the program ran during the call (handled). */
static int ended_a_call(void *ucv)
{
    ucontext_t *uc = ucv;
#if defined(__x86_64__)
    if (uc->uc_mcontext.gregs[REG_RAX] != -EINTR)
        return 0;
#elif defined(__aarch64__)
    if ((int64_t)uc->uc_mcontext.regs[0] != -EINTR)
        return 0;
#endif
    sigset_t p;
    if (sigpending(&p) != 0)
        return 1;
    for (int s = 1; s < NSIG; s++)
        if (s != sig && sigismember(&p, s) == 1 && !sigismember(&uc->uc_sigmask, s))
            return 0;
    return 1;
}

/* Our signal alone ended the real call that the innermost wrapped call just made: the
 * wrapper makes it again. */
static void note_interruption(void *ucv)
{
    int n = ncalls;
    if (n > 0 && handled == calls[n - 1].handled && ended_a_call(ucv))
        calls[n - 1].interrupted = 1;
}

/* A call being made again must end (a handler of the program ran meanwhile): this
 * thread's timer fires NUDGE_NS from now rather than at the next sample, and its signal
 * ends the call's system call; one that lands before it, in the few instructions to it,
 * sets the timer again, up to PW_NUDGES times. 1: the timer is set. */
#define NUDGE_NS 20000
#define PW_NUDGES 50
static int nudge(thr *t, void *ucv)
{
    int n = ncalls;
    if (nudges <= 0 || n == 0 || !calls[n - 1].resuming || (ucv && ended_a_call(ucv))) {
        nudges = 0; /* done: the call has ended, or its system call now does */
        return 0;
    }
    nudges--;
    struct itimerspec its = {{0, 0}, {0, NUDGE_NS}};
    timer_settime(t->timer, 0, &its, NULL);
    return 1;
}

static void on_sample(int signo, siginfo_t *si, void *ucv)
{
    (void)signo;
    (void)si;
    int saved = errno;
    thr *t = self;
    note_interruption(ucv);
    if (!t && nmaps) {
        uintptr_t pc0, fp0, sp0;
        context_regs(ucv, &pc0, &fp0, &sp0);
        t = adopt(sp0);
    }
    if (!t || !t->ok) {
        errno = saved;
        return;
    }
    if (t->n == t->cap) { /* full: keep every other sample, sample half as often */
        for (int i = 0; i < t->cap / 2; i++)
            t->buf[i] = t->buf[2 * i];
        t->n = t->cap / 2;
        t->thinned++;
        t->interval_ns *= 2;
    }
    sample *s = &t->buf[t->n];
    s->t = pw_now();
    s->state = (int16_t)pw_thread_activity;
    s->have_ctr = pw_hooks.read_events ? pw_hooks.read_events(s->counters, PW_SAMPLE_COUNTERS) : 0;
    uintptr_t pc, fp, sp;
    context_regs(ucv, &pc, &fp, &sp);
    int d = unwind(t, ucv, pc, sp, s->frames);
    if (d >= 0) {
        t->unwound++;
    } else {
        d = fp_walk(t, pc, fp, sp, s->frames);
        t->fallbacks += PW_UNWINDER[0] == 'l';
    }
    s->depth = (int16_t)d;
    t->n++;
    t->taken++;
    if (!nudge(t, ucv))
        set_interval(t); /* the next one */
    errno = saved;
}

/* Threads that exist when the module starts were not made through pthread_create's
 * trampoline: a library's constructor ran before the runtime's (libopenblas, loaded as
 * the program's dependency, starts its workers there). Each gets a slot and a timer from
 * the starting thread; its handler adopts the slot at the first sample (self is the
 * thread's own). Their stacks' bounds are the mapping that holds the interrupted stack
 * pointer, from a snapshot of /proc/self/maps taken here. The runtime's own threads are
 * named "perfweave..." (pw_thread_name) and left out. */
#define PW_MAX_MAPS 2048
static uintptr_t maps_lo[PW_MAX_MAPS], maps_hi[PW_MAX_MAPS];

static void snapshot_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    while (nmaps < PW_MAX_MAPS && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r' &&
            perms[1] == 'w') {
            maps_lo[nmaps] = lo;
            maps_hi[nmaps] = hi;
            nmaps++;
        }
    }
    fclose(f);
}

static int runtime_thread(int tid)
{
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1; /* gone */
    int got = fgets(name, sizeof name, f) != NULL;
    fclose(f);
    return got && strncmp(name, "perfweave", 9) == 0;
}

static int arm(thr *t);

static void adopt_existing_threads(void)
{
    int me = (int)syscall(SYS_gettid), any = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid <= 0 || tid == me || runtime_thread(tid))
            continue;
        int i = __atomic_fetch_add(&nthreads, 1, __ATOMIC_RELAXED);
        if (i >= PW_SAMPLE_THREADS)
            break;
        thr *t = &threads[i];
        t->tid = tid;
        t->adopted = 1;
        if (arm(t) == 0)
            any = 1;
    }
    closedir(d);
    if (any)
        snapshot_maps();
}

/* In the handler: the slot another thread set up for this one, with its stack's bounds
 * (the mapping holding sp); NULL if none. */
static thr *adopt(uintptr_t sp)
{
    int tid = (int)syscall(SYS_gettid);
    int n = nthreads < PW_SAMPLE_THREADS ? nthreads : PW_SAMPLE_THREADS;
    for (int i = 0; i < n; i++) {
        thr *t = &threads[i];
        if (t->adopted && t->tid == tid && __atomic_load_n(&t->ok, __ATOMIC_ACQUIRE)) {
            /* a mapping of the snapshot may be the stack merged with a neighbour, which
             * may be gone since: the top of the stack is its thread's descriptor, where
             * the C library puts it (above the static TLS, at the top of the block) */
            uintptr_t top = (uintptr_t)pthread_self();
            for (int k = 0; k < nmaps; k++)
                if (sp >= maps_lo[k] && sp < maps_hi[k]) {
                    t->stack_lo = maps_lo[k];
                    t->stack_hi = top > sp && top < maps_hi[k] ? top : maps_hi[k];
                    break;
                }
            self = t;
            return t;
        }
    }
    return NULL;
}

/* Sample the calling thread from now on (the module's thread_start). */
static void sample_thread(void)
{
    if (!started || self)
        return;
    if (nmaps) { /* an existing thread already given a slot: its own, with its bounds */
        int tid = (int)syscall(SYS_gettid);
        for (int k = 0; k < nthreads && k < PW_SAMPLE_THREADS; k++)
            if (threads[k].adopted && threads[k].tid == tid) {
                uintptr_t here = (uintptr_t)__builtin_frame_address(0);
                adopt(here);
                return;
            }
    }
    int i = __atomic_fetch_add(&nthreads, 1, __ATOMIC_RELAXED);
    if (i >= PW_SAMPLE_THREADS)
        return;
    thr *t = &threads[i];
    t->cap = pw_opt.sample_capacity < 16 ? 16 : (int)pw_opt.sample_capacity;
    t->cap &= ~1;
    t->buf = pw_alloc((size_t)t->cap * sizeof(sample));
    if (!t->buf) {
        __atomic_fetch_add(&no_memory, 1, __ATOMIC_RELAXED);
        return;
    }
    pthread_attr_t a;
    void *lo = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &lo, &size);
        pthread_attr_destroy(&a);
    }
    t->stack_lo = (uintptr_t)lo;
    t->stack_hi = (uintptr_t)lo + size;
    t->tid = (int)syscall(SYS_gettid);
    warm_unwind(t);
    self = t;
    arm(t);
}

/* A slot's timer, to its thread (t->tid), and its first interval; 0 on success. */
static int arm(thr *t)
{
    if (!t->buf) {
        t->cap = pw_opt.sample_capacity < 16 ? 16 : (int)pw_opt.sample_capacity;
        t->cap &= ~1;
        t->buf = pw_alloc((size_t)t->cap * sizeof(sample));
        if (!t->buf) {
            __atomic_fetch_add(&no_memory, 1, __ATOMIC_RELAXED);
            return -1;
        }
    }
    t->pid = getpid();
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = sig;
    ev._sigev_un._tid = t->tid;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t->timer) != 0) {
        pw_log("--sample: cannot create a timer for thread %d", t->tid);
        __atomic_fetch_add(&no_timer, 1, __ATOMIC_RELAXED);
        return -1;
    }
    t->interval_ns = (pw_opt.sample_interval_ms > 0 ? pw_opt.sample_interval_ms : 10) * 1000000LL;
    t->rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)t->tid << 17) ^ (uint64_t)pw_now();
    __atomic_store_n(&t->ok, 1, __ATOMIC_RELEASE);
    set_interval(t);
    return 0;
}

/* The module's dump: the samples, at the process's end (not from a signal handler: the
 * writing allocates; a process killed by a signal has no samples). */
static int write_samples(int state, int in_signal)
{
    (void)state;
    if (in_signal || !started || getpid() != start_pid) /* a forked child has no timers */
        return 0;
    started = 0;
    int n = nthreads < PW_SAMPLE_THREADS ? nthreads : PW_SAMPLE_THREADS;
    for (int i = 0; i < n; i++)
        if (threads[i].ok) {
            threads[i].ok = 0;
            timer_delete(threads[i].timer);
        }
    char path[4300];
    pw_objects_refresh();
    pw_process_path(path, sizeof path, "samples", ".samples");
    pw_file out;
    pw_file_open(&out, path);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        thr *t = &threads[i];
        for (int k = 0; k < t->n; k++) {
            const sample *s = &t->buf[k];
            pw_sample_rec r;
            memset(&r, 0, sizeof r);
            r.t = s->t;
            r.thread = i;
            r.activity = s->state;
            r.depth = s->depth;
            for (int c = 0; c < PW_SAMPLE_COUNTERS; c++)
                r.counters[c] = s->have_ctr && c < pw_nevents ? s->counters[c] : -1;
            for (int f = 0; f < s->depth; f++) {
                uint64_t off = 0;
                r.object[f] = pw_object_of(s->frames[f], &off);
                r.offset[f] = r.object[f] < 0 ? (int64_t)s->frames[f] : (int64_t)off;
            }
            if (pw_file_write(&out, &r, sizeof r) != 0)
                break;
            total++;
        }
    }
    if (pw_file_close(&out) != 0)
        return 0; /* marked; a JSON without its records would describe nothing */
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_SAMPLES_MAGIC, PW_SAMPLES_VERSION);
    pw_json_int(&j, "frames", PW_SAMPLE_FRAMES);
    pw_json_strs(&j, "counters", pw_event_names,
                 (size_t)(pw_nevents < PW_SAMPLE_COUNTERS ? pw_nevents : PW_SAMPLE_COUNTERS));
    pw_json_int(&j, "samples", total);
    int64_t fallbacks = 0;
    for (int i = 0; i < n; i++)
        fallbacks += threads[i].fallbacks;
    pw_json_str(&j, "unwinder", PW_UNWINDER);
    pw_json_int(&j, "unwind_fallbacks", fallbacks); /* samples by frame pointers instead */
    pw_json_open(&j, "dropped", '{');               /* threads never sampled, and why */
    pw_json_int(&j, "threads", nthreads > PW_SAMPLE_THREADS ? nthreads - PW_SAMPLE_THREADS : 0);
    pw_json_int(&j, "timers", no_timer);
    pw_json_int(&j, "memory", no_memory);
    pw_json_close(&j);
    pw_json_int(&j, "t_start", pw_t_start);
    pw_json_int(&j, "t_end", pw_now());
    pw_json_open(&j, "activities", '['); /* the activities, by index */
#define PW_NAME(name, value, str) pw_json_str(&j, NULL, str);
#define PW_MPI_NAME(name, value, str) pw_json_str(&j, NULL, "mpi_" str);
    PW_ACTIVITIES(PW_NAME, PW_MPI_NAME)
#undef PW_NAME
#undef PW_MPI_NAME
    pw_json_close(&j);
    pw_json_open(&j, "threads", '[');
    for (int i = 0; i < n; i++) {
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "tid", threads[i].tid);
        pw_json_int(&j, "taken", threads[i].taken);
        pw_json_int(&j, "kept", threads[i].n);
        pw_json_int(&j, "thinned", threads[i].thinned);
        pw_json_int(&j, "interval_ns", threads[i].interval_ns);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_objects_json(&j, "objects"); /* the loaded objects: path, build-id */
    pw_json_end(&j);
    pw_process_path(path, sizeof path, "samples", ".json");
    pw_buf_to_file(&b, path);
    return 0;
}

/* Threads the program creates are sampled from their first instruction: the new thread
 * runs a trampoline that starts its timer, then the program's function. */
typedef struct start_arg {
    void *(*fn)(void *);
    void *arg;
} start_arg;

static void *trampoline(void *p)
{
    start_arg a = *(start_arg *)p;
    free(p);
    pw_thread_begin(); /* every module's start of a thread: ours samples it */
    return a.fn(a.arg);
}

/* Threads of the MPI library and its runtime (progress, PMIx, UCX, libevent) are not
 * the program's work, and interrupting their poll loops would only change them. */
static int library_thread(const void *caller)
{
    static const char *skip[] = {"libmpi",       "libopen-",  "libpmix",  "libucs",   "libucp",
                                 "libuct",       "libfabric", "libevent", "libhwloc", "libpsm",
                                 "libperfweave", "libpapi",   "libpcp",   "libnvidia"};
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strncmp(base, skip[i], strlen(skip[i])) == 0)
            return 1;
    return 0;
}

PW_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    PW_REAL(pthread_create);
    if (!started || library_thread(__builtin_return_address(0)))
        return real_pthread_create(thread, attr, fn, arg);
    start_arg *a = malloc(sizeof *a);
    if (!a)
        return real_pthread_create(thread, attr, fn, arg);
    a->fn = fn;
    a->arg = arg;
    int rc = real_pthread_create(thread, attr, trampoline, a);
    if (rc != 0)
        free(a);
    return rc;
}

static int64_t clock_ns(clockid_t c)
{
    struct timespec t = {0, 0};
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* A handler of the program begins: when, on the clock of the innermost wrapped call it
 * interrupted (its frame is above the interrupted stack pointer), the first in the call.
 * The kernel decides a call's outcome, EINTR or its timeout, and the time left it
 * reports, when the signal ends it, before the handler runs (for as long as it likes,
 * or waiting for a CPU); so does a wrapper, from this time (program_ended). */
static void note_woken(void *uc)
{
    int n = ncalls;
    if (n == 0 || calls[n - 1].woke)
        return;
    uintptr_t pc, fp, sp;
    context_regs(uc, &pc, &fp, &sp);
    if (calls[n - 1].frame <= sp)
        return;
    int saved = errno;
    calls[n - 1].woken = clock_ns(calls[n - 1].clock);
    calls[n - 1].woke = 1;
    errno = saved;
}

/* The program's handlers, run through program_handler once the sampler has started, so
 * that a thread counts the handlers it runs (handled): a program's signal that ended a
 * blocking call and was handled before ours landed (ours blocked by the program's
 * sa_mask until its handler returned, or arriving as it returned) leaves the call's
 * registers as ours would (-EINTR), and only the count tells the call was the
 * program's. A call being made again after our signal, whose new system call a handler
 * that runs just before it cannot end, is ended by our timer (nudge). sigaction and
 * signal report the program's own handler and flags; what the
 * kernel holds otherwise (a handler set before the sampler started, or by the C library
 * itself) is reported and left as it is. */
PW_REAL_DECLARE(sigaction);
PW_REAL_DECLARE(signal);
static void *program_fn[NSIG]; /* the program's handler of each signal */
static int program_info[NSIG]; /* it takes (int, siginfo_t *, void *): SA_SIGINFO */

static void program_handler(int s, siginfo_t *si, void *uc)
{
    handled++;
    note_woken(uc);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    if (!fn) /* never: set before this handler is installed for s */
        ;
    else if (__atomic_load_n(&program_info[s], __ATOMIC_ACQUIRE))
        ((void (*)(int, siginfo_t *, void *))fn)(s, si, uc);
    else
        ((void (*)(int))fn)(s);
    handled++; /* after it too: a wrapper it called counted from inside it */
    /* a call being made again, whose system call may not have begun yet, is ended: the
     * innermost, if it was interrupted (its frame is above the stack pointer) */
    int n = ncalls, saved = errno;
    uintptr_t pc, fp, sp;
    context_regs(uc, &pc, &fp, &sp);
    if (n > 0 && calls[n - 1].resuming && calls[n - 1].frame > sp && self && self->ok) {
        nudges = PW_NUDGES;
        nudge(self, NULL);
    }
    errno = saved;
}

/* What the kernel holds for s, as the program set it */
static void program_view(int s, struct sigaction *sa, void *fn, int info)
{
    if (sa->sa_sigaction != program_handler)
        return;
    sa->sa_handler = (void (*)(int))fn;
    sa->sa_flags = (sa->sa_flags & ~SA_SIGINFO) | (info ? SA_SIGINFO : 0);
}

PW_EXPORT int sigaction(int s, const struct sigaction *act, struct sigaction *old)
{
    PW_REAL_RESOLVE(sigaction);
    if (!started || s <= 0 || s >= NSIG || s == sig)
        return real_sigaction(s, act, old);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    int info = program_info[s];
    struct sigaction through, was;
    if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN) {
        __atomic_store_n(&program_info[s], !!(act->sa_flags & SA_SIGINFO), __ATOMIC_RELEASE);
        __atomic_store_n(&program_fn[s], (void *)act->sa_handler, __ATOMIC_RELEASE);
        through = *act;
        through.sa_sigaction = program_handler;
        through.sa_flags |= SA_SIGINFO;
        act = &through;
    }
    int rc = real_sigaction(s, act, &was);
    if (rc != 0) {
        __atomic_store_n(&program_fn[s], fn, __ATOMIC_RELEASE);
        __atomic_store_n(&program_info[s], info, __ATOMIC_RELEASE);
        return rc;
    }
    if (old) {
        program_view(s, &was, fn, info);
        *old = was;
    }
    return 0;
}

/* signal: the C library's (its flags and mask for the handler), then our handler in front */
PW_EXPORT sighandler_t signal(int s, sighandler_t h)
{
    PW_REAL_RESOLVE(signal);
    PW_REAL_RESOLVE(sigaction);
    if (!started || s <= 0 || s >= NSIG || s == sig)
        return real_signal(s, h);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    sighandler_t was = real_signal(s, h);
    if (was == SIG_ERR)
        return was;
    if ((void *)was == (void *)program_handler)
        was = (sighandler_t)fn;
    struct sigaction now;
    if (h != SIG_DFL && h != SIG_IGN && real_sigaction(s, NULL, &now) == 0 && now.sa_handler == h)
        sigaction(s, &now, NULL);
    return was;
}

/* Helpers of the blocking-call wrappers below (real functions: PW_REAL, wrap.h) */

/* The sample state while blocked: state, unless in an MPI call; returns the old one. */
static int block_begin(int blocking, int state)
{
    int old = pw_thread_activity;
    if (blocking && old == 0)
        pw_thread_activity = state;
    return old;
}

/* How a wrapper resumes a call that our signal ended, so that the program sees what it
 * sees without perfweave. The wrapper makes the program's call as the program made it
 * (the real function: its cancellation point, SA_RESTART, results, siginfo and time
 * left written by the kernel). When it fails with EINTR because of our signal alone
 * (our handler found that our signal ended it: ended_a_call, note_interruption; and no
 * handler of the program has run since the wrapper began: handled), the wrapper makes
 * it again for what is left; any other EINTR is the program's, returned as it is.
 *
 * One race is left by that alone: a program's signal handled after the wrapper decided
 * to make the call again and before the new system call began (a few instructions; or
 * longer, when the thread loses its processor there) does not end the new call, which
 * waits on to its timeout or event as if the signal had never come (under 1 ms
 * sampling, 0.08 % of the socket calls that a program's signal ended went on to their
 * timeout). So while a call is being made again (resuming), a handler of the program
 * that runs there (program_handler: the innermost call, whose wrapper's frame is above
 * the interrupted stack pointer) sets this thread's sampling timer to fire NUDGE_NS
 * later (nudge): our signal then ends the new system call, the wrapper sees that a
 * handler of the program ran, and returns EINTR, as without perfweave but up to
 * NUDGE_NS after the handler. No signal of the program is ever blocked, taken or queued
 * again: it reaches the thread the kernel chooses, with its own siginfo, and ends the
 * call in the kernel. (Before, the wrappers that can set a signal mask atomically
 * made the call again with the program's signals blocked until the new call unblocked
 * them, sigtimedwait waited for them too and queued them again, writing their siginfo
 * into the program's buffer on EINTR, in up to half the calls that such a signal ended
 * under 1 ms sampling; sleeps on CLOCK_MONOTONIC and CLOCK_REALTIME waited in sigtimedwait
 * with them blocked; the other wrappers had the race above.)
 *
 * The kernel decides a call's outcome when the program's signal ends it, before the
 * handler runs: EINTR, with the time left counted then. A call made again decides after
 * the handler, which may run past the call's timeout (or wait that long for a CPU). So
 * the program's handler notes when it began (note_woken, on the call's clock), and the
 * time left after EINTR is counted from then; a call made again that then returned its
 * timeout, or a sleep that completed, returns EINTR when the handler began before the
 * deadline (program_ended), with what the kernel leaves on EINTR (poll's revents and
 * select's fd sets as they were). Before, a relative sleep whose time passed in a long
 * handler returned 0, in about 1 in 8 of the calls our signal had ended first. */

/* The wrapper whose frame is FRAME (PW_FRAME, in the wrapper) begins a call with a
 * timeout on CLOCK: its record, innermost; records left behind, below it, are dropped. */
static blocked_call *call_enter(uintptr_t frame, clockid_t clock)
{
    int n = ncalls;
    while (n > 0 && calls[n - 1].frame <= frame) /* left behind */
        n--;
    if (n == PW_NESTED_CALLS) /* deeper nesting: the innermost share the last record */
        n--;
    blocked_call *c = &calls[n];
    c->frame = frame;
    c->handled = handled;
    c->interrupted = c->resuming = c->woke = 0;
    c->clock = clock;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* complete before a handler can see it */
    ncalls = n + 1;
    return c;
}
#define PW_FRAME ((uintptr_t)__builtin_frame_address(0))

static void call_leave(blocked_call *c) { ncalls = (int)(c - calls); }

/* The real call is made (again). */
static inline void call_try(blocked_call *c) { c->interrupted = 0; }

/* After the real call, which failed with EINTR if eintr: whether to make it again (our
 * signal alone ended it). Resuming is set before the count is read: a handler of the
 * program that runs after this test has its call nudged. */
static int call_again(blocked_call *c, int eintr)
{
    if (!eintr)
        return 0;
    c->resuming = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return c->interrupted && handled == c->handled;
}

/* The call, made again after our signal, ended by its timeout (timed_out), DEADLINE on
 * the call's clock: whether a handler of the program had run in it before that, and so
 * the program's signal came while the call waited. The kernel ends such a call with
 * EINTR. Made again, it may have found its timeout passed before its new system call
 * began: the program's handler, run there, took longer than the time left (our timer's
 * signal, nudge, comes only after it), or the thread waited that long for a CPU. The
 * wrapper then returns EINTR, as the kernel would have, with what the kernel leaves on
 * EINTR. */
static int program_ended(blocked_call *c, int timed_out, int64_t deadline)
{
    return timed_out && c->resuming && c->woke && c->woken < deadline;
}

/* poll-style timeouts (ms; < 0: none): the deadline, and the ms left to it */
static int64_t ms_deadline(int ms) { return ms > 0 ? pw_now() + ms * 1000000LL : 0; }

static int ms_left(int ms, int64_t deadline)
{
    if (ms <= 0)
        return ms;
    int64_t d = deadline - pw_now();
    return d <= 0 ? 0 : (int)((d + 999999) / 1000000);
}

static struct timespec ts_of_ns(int64_t n)
{
    return (struct timespec){n / 1000000000LL, n % 1000000000LL};
}

/* timespec timeouts (NULL: none): the deadline, and the time left to it in *left */
static int64_t ts_deadline(const struct timespec *ts)
{
    return ts ? pw_now() + ts->tv_sec * 1000000000LL + ts->tv_nsec : 0;
}

static const struct timespec *ts_left(const struct timespec *ts, int64_t deadline,
                                      struct timespec *left)
{
    if (!ts)
        return NULL;
    int64_t d = deadline - pw_now();
    *left = ts_of_ns(d < 0 ? 0 : d);
    return left;
}

static int ts_blocking(const struct timespec *ts) { return !ts || ts->tv_sec || ts->tv_nsec; }

/* Sleeping is sampled (state "sleep"), and a sleep that our signal interrupts goes on
 * for the time left: nanosleep is never restarted by SA_RESTART, and a program's
 * sleep() must not return early because it is being measured. An interruption by the
 * program's own signals still returns EINTR as it would without perfweave, with the
 * time left in rem (relative sleeps). A relative sleep is made again as an absolute one
 * to its deadline on the clock the kernel counts it on (CLOCK_MONOTONIC for
 * CLOCK_REALTIME, the clock itself otherwise: CPU time, CLOCK_BOOTTIME, the alarm
 * clocks), so that the sampler's signals do not lengthen it. */
PW_REAL_DECLARE(clock_nanosleep);

/* a + the time ts, saturated (a sleep "forever" is {TIME_T_MAX, 0}) */
static int64_t ns_after(int64_t a, const struct timespec *ts)
{
    if (ts->tv_sec >= INT64_MAX / 1000000000LL - 1)
        return INT64_MAX;
    int64_t d = ts->tv_sec * 1000000000LL + ts->tv_nsec;
    return a > INT64_MAX - d ? INT64_MAX : a + d;
}

/* The kernel's rem of a sleep is the time to its timer's latest expiry: for the clocks
 * of high-resolution timers, the deadline plus the thread's timer slack (none for
 * real-time and deadline policies); for CPU time and the alarm clocks, the deadline. */
static int64_t sleep_slack(clockid_t clock)
{
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME &&
        clock != CLOCK_TAI)
        return 0;
    int policy = sched_getscheduler(0);
    if (policy == SCHED_FIFO || policy == SCHED_RR || policy == 6 /* SCHED_DEADLINE */)
        return 0;
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    return slack > 0 ? slack : 0;
}

PW_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                              struct timespec *rem)
{
    PW_REAL_RESOLVE(clock_nanosleep);
    if (!started || !req)
        return real_clock_nanosleep(clock, flags, req, rem);
    int rel = !(flags & TIMER_ABSTIME), rc, again = 0;
    /* the clock the sleep counts on, and its end there */
    clockid_t on = !rel ? clock : clock == CLOCK_REALTIME ? CLOCK_MONOTONIC : clock;
    int64_t end = rel ? ns_after(clock_ns(on), req) : ns_after(0, req);
    struct timespec r, at;
    int state = block_begin(1, STATE_SLEEP);
    blocked_call *c = call_enter(PW_FRAME, on);
    for (;;) {
        call_try(c);
        rc = again ? real_clock_nanosleep(on, TIMER_ABSTIME, &at, NULL)
                   : real_clock_nanosleep(clock, flags, req, &r);
        if (!call_again(c, rc == EINTR))
            break;
        again = rel; /* absolute: the same call */
        at = ts_of_ns(end);
    }
    if (rc == 0 && program_ended(c, 1, end + sleep_slack(clock)))
        rc = EINTR;
    /* a relative sleep made again: what the kernel leaves in rem, counted when the
     * program's signal came (its handler ran) */
    int64_t signalled = c->woke ? c->woken : clock_ns(on);
    call_leave(c);
    pw_thread_activity = state;
    if (rc == EINTR && rel && again) {
        /* a timer due but not fired yet (CPU time is looked at on the scheduler's tick):
         * the kernel says it is about to, 1 ns */
        int64_t left = end + sleep_slack(clock) - signalled;
        r = ts_of_ns(left > 0 ? left : 1);
    }
    if (rc == EINTR && rem && rel)
        *rem = r;
    return rc;
}

PW_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    int rc = clock_nanosleep(CLOCK_REALTIME, 0, req, rem);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

PW_EXPORT int usleep(useconds_t usec)
{
    struct timespec ts = {usec / 1000000, (long)(usec % 1000000) * 1000};
    return nanosleep(&ts, NULL);
}

PW_EXPORT unsigned int sleep(unsigned int seconds)
{
    struct timespec ts = {seconds, 0}, rem = {0, 0};
    if (nanosleep(&ts, &rem) == 0)
        return 0;
    return (unsigned int)rem.tv_sec + (rem.tv_nsec > 0);
}

/* Blocking calls that the kernel never restarts after a handler, whatever SA_RESTART
 * (signal(7)): fd multiplexing (poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2) and waiting for signals (pause, sigsuspend, sigwaitinfo, sigtimedwait).
 * When our signal ended one with EINTR, it is called again for the time left (from a
 * CLOCK_MONOTONIC deadline), so the program sees what it would see without perfweave;
 * its own signals still end them with EINTR. The fd sets, the events array and the
 * revents are not written by the kernel when it returns EINTR. A thread blocked in them
 * (with a timeout other than zero) is sampled in state "wait", unless it is inside an
 * MPI call (the MPI family is kept: MPI libraries poll while waiting). */
/* rc = CALL (a call with a timeout in ms, variable MS; < 0: none), called again for the
 * time left while our signal ends it; TIMED_OUT: rc says its timeout passed, which a
 * signal of the program that came before makes EINTR (program_ended) */
#define BLOCK_MS(ms, call, timed_out)                                                              \
    do {                                                                                           \
        int64_t deadline_ = ms_deadline(ms);                                                       \
        int old_ = block_begin((ms) != 0, STATE_WAIT);                                             \
        blocked_call *c_ = call_enter(PW_FRAME, CLOCK_MONOTONIC);                                  \
        do {                                                                                       \
            call_try(c_);                                                                          \
            rc = (call);                                                                           \
        } while (call_again(c_, rc < 0 && errno == EINTR) && ((ms = ms_left(ms, deadline_)), 1));  \
        if (program_ended(c_, (timed_out), deadline_)) {                                           \
            rc = -1;                                                                               \
            errno = EINTR;                                                                         \
        }                                                                                          \
        call_leave(c_);                                                                            \
        pw_thread_activity = old_;                                                                 \
    } while (0)

/* the same for a timeout TS (const struct timespec *, NULL: none) ending at DEADLINE on
 * CLOCK; CALL uses tp_, the time left of a relative TS */
#define BLOCK_UNTIL(ts, clock, deadline, call, timed_out)                                          \
    do {                                                                                           \
        int64_t deadline_ = (deadline);                                                            \
        struct timespec left_;                                                                     \
        const struct timespec *tp_ = (ts);                                                         \
        int old_ = block_begin(ts_blocking(ts), STATE_WAIT);                                       \
        blocked_call *c_ = call_enter(PW_FRAME, clock);                                            \
        do {                                                                                       \
            call_try(c_);                                                                          \
            rc = (call);                                                                           \
        } while (call_again(c_, rc < 0 && errno == EINTR) &&                                       \
                 (tp_ = ts_left(ts, deadline_, &left_), 1));                                       \
        (void)tp_; /* a CALL without a relative timeout */                                         \
        if (program_ended(c_, (timed_out), deadline_)) {                                           \
            rc = -1;                                                                               \
            errno = EINTR;                                                                         \
        }                                                                                          \
        call_leave(c_);                                                                            \
        pw_thread_activity = old_;                                                                 \
    } while (0)

/* a relative timeout TS, on CLOCK_MONOTONIC */
#define BLOCK_TS(ts, call, timed_out)                                                              \
    BLOCK_UNTIL(ts, CLOCK_MONOTONIC, ts_deadline(ts), call, timed_out)

/* Calls that end with EINTR after any handler and have no timeout: called again, as
 * they were, while our signal ends them. */
#define BLOCK_AGAIN(call) BLOCK_UNTIL((const struct timespec *)NULL, CLOCK_MONOTONIC, 0, call, 0)

/* poll is ppoll with the timeout as a timespec (< 0: none) and no mask */
PW_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    PW_REAL(poll);
    if (!started)
        return real_poll(fds, n, timeout);
    struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000L};
    return ppoll(fds, n, timeout < 0 ? NULL : &ts, NULL);
}

/* poll with _FORTIFY_SOURCE: the same check as glibc's, then poll */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));
PW_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    if (fdslen / sizeof *fds < n)
        __chk_fail();
    return poll(fds, n, timeout);
}

/* What poll and select write when their timeout passes, and not on EINTR: the revents
 * (of the first PW_KEPT_FDS entries) and the fd sets, kept before each call made again
 * and put back when program_ended makes its timeout EINTR. */
#define PW_KEPT_FDS 256

PW_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
    PW_REAL(ppoll);
    if (!started)
        return real_ppoll(fds, n, ts, mask);
    int64_t deadline = ts_deadline(ts);
    struct timespec left;
    const struct timespec *tp = ts;
    short kept[PW_KEPT_FDS];
    nfds_t nkept = 0;
    int old = block_begin(ts_blocking(ts), STATE_WAIT), rc;
    blocked_call *c = call_enter(PW_FRAME, CLOCK_MONOTONIC);
    for (;;) {
        call_try(c);
        rc = real_ppoll(fds, n, tp, mask);
        if (!call_again(c, rc < 0 && errno == EINTR))
            break;
        tp = ts_left(ts, deadline, &left);
        for (nkept = 0; nkept < n && nkept < PW_KEPT_FDS; nkept++)
            kept[nkept] = fds[nkept].revents;
    }
    if (program_ended(c, rc == 0, deadline)) {
        for (nfds_t i = 0; i < nkept; i++)
            fds[i].revents = kept[i];
        rc = -1;
        errno = EINTR;
    }
    call_leave(c);
    pw_thread_activity = old;
    return rc;
}

typedef struct kept_sets {
    fd_set r, w, e;
} kept_sets;

static void keep_sets(kept_sets *k, const fd_set *r, const fd_set *w, const fd_set *e)
{
    if (r)
        k->r = *r;
    if (w)
        k->w = *w;
    if (e)
        k->e = *e;
}

static void put_sets(const kept_sets *k, fd_set *r, fd_set *w, fd_set *e)
{
    if (r)
        *r = k->r;
    if (w)
        *w = k->w;
    if (e)
        *e = k->e;
}

/* the timeval of the time from NOW to DEADLINE (ns), rounded up to microseconds */
static struct timeval tv_left(int64_t deadline, int64_t now)
{
    int64_t d = deadline - now;
    d = d < 0 ? 0 : (d + 999) / 1000;
    return (struct timeval){d / 1000000, d % 1000000};
}

/* select again with the time left to the deadline in *tv; the kernel leaves there what
 * it did not wait of it, as Linux's select does */
PW_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    PW_REAL(select);
    if (!started)
        return real_select(n, r, w, e, tv);
    int64_t deadline = tv ? pw_now() + tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL : 0;
    kept_sets kept;
    int old = block_begin(!tv || tv->tv_sec || tv->tv_usec, STATE_WAIT), rc;
    blocked_call *c = call_enter(PW_FRAME, CLOCK_MONOTONIC);
    for (;;) {
        call_try(c);
        rc = real_select(n, r, w, e, tv);
        if (!call_again(c, rc < 0 && errno == EINTR))
            break;
        if (tv)
            *tv = tv_left(deadline, pw_now());
        keep_sets(&kept, r, w, e);
    }
    if (program_ended(c, rc == 0 && tv, deadline)) {
        put_sets(&kept, r, w, e);
        *tv = tv_left(deadline, c->woken);
        rc = -1;
        errno = EINTR;
    }
    call_leave(c);
    pw_thread_activity = old;
    return rc;
}

PW_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
                      const sigset_t *mask)
{
    PW_REAL(pselect);
    if (!started)
        return real_pselect(n, r, w, e, ts, mask);
    int64_t deadline = ts_deadline(ts);
    struct timespec left;
    const struct timespec *tp = ts;
    kept_sets kept;
    int old = block_begin(ts_blocking(ts), STATE_WAIT), rc;
    blocked_call *c = call_enter(PW_FRAME, CLOCK_MONOTONIC);
    for (;;) {
        call_try(c);
        rc = real_pselect(n, r, w, e, tp, mask);
        if (!call_again(c, rc < 0 && errno == EINTR))
            break;
        tp = ts_left(ts, deadline, &left);
        keep_sets(&kept, r, w, e);
    }
    if (program_ended(c, rc == 0 && ts, deadline)) {
        put_sets(&kept, r, w, e);
        rc = -1;
        errno = EINTR;
    }
    call_leave(c);
    pw_thread_activity = old;
    return rc;
}

PW_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout,
                          const sigset_t *mask)
{
    PW_REAL(epoll_pwait);
    if (!started)
        return real_epoll_pwait(ep, ev, max, timeout, mask);
    int rc;
    BLOCK_MS(timeout, real_epoll_pwait(ep, ev, max, timeout, mask), rc == 0);
    return rc;
}

/* epoll_pwait with no mask is epoll_wait (epoll_wait(2)) */
PW_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    return epoll_pwait(ep, ev, max, timeout, NULL);
}

#if defined(__GLIBC_PREREQ) && __GLIBC_PREREQ(2, 35)
PW_EXPORT int epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *ts,
                           const sigset_t *mask)
{
    PW_REAL(epoll_pwait2);
    if (!started)
        return real_epoll_pwait2(ep, ev, max, ts, mask);
    int rc;
    BLOCK_TS(ts, real_epoll_pwait2(ep, ev, max, tp_, mask), rc == 0);
    return rc;
}
#endif

/* pause and sigsuspend: wait for a handler; ours does not count */
PW_EXPORT int sigsuspend(const sigset_t *mask)
{
    PW_REAL(sigsuspend);
    if (!started)
        return real_sigsuspend(mask);
    int rc;
    BLOCK_AGAIN(real_sigsuspend(mask));
    return rc;
}

/* pause is sigsuspend with the thread's mask */
PW_EXPORT int pause(void)
{
    PW_REAL(pause);
    sigset_t mask;
    if (!started || pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0)
        return real_pause();
    return sigsuspend(&mask);
}

/* Waiting for signals: our signal is taken out of the set, so that a program that
 * blocks every signal and waits for all of them never receives one of ours. */
static const sigset_t *without_ours(const sigset_t *set, sigset_t *copy)
{
    if (!set || !sig || !sigismember(set, sig))
        return set;
    *copy = *set;
    sigdelset(copy, sig);
    return copy;
}

PW_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
    PW_REAL(sigtimedwait);
    if (!started)
        return real_sigtimedwait(set, info, ts);
    sigset_t copy;
    set = without_ours(set, &copy);
    int rc;
    BLOCK_TS(ts, real_sigtimedwait(set, info, tp_), rc < 0 && errno == EAGAIN);
    return rc;
}

/* sigwaitinfo is sigtimedwait without a timeout */
PW_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    return sigtimedwait(set, info, NULL);
}

PW_EXPORT int sigwait(const sigset_t *set, int *signo)
{
    PW_REAL(sigwait); /* glibc's retries EINTR itself */
    if (!started)
        return real_sigwait(set, signo);
    sigset_t copy;
    int old = block_begin(1, STATE_WAIT);
    int rc = real_sigwait(without_ours(set, &copy), signo);
    pw_thread_activity = old;
    return rc;
}

/* The body of a wrapper of FN, called with ARGS, that BLOCK_AGAIN makes again */
#define AGAIN_WRAPPER(rtype, fn, args)                                                             \
    PW_REAL(fn);                                                                                   \
    if (!started)                                                                                  \
        return real_##fn args;                                                                     \
    rtype rc;                                                                                      \
    BLOCK_AGAIN(real_##fn args);                                                                   \
    return rc

/* POSIX semaphores with a deadline: glibc waits on a futex with a timeout, which a
 * handler ends with EINTR whatever SA_RESTART (the kernel restarts only a wait without
 * timeout: sem_wait, and pthread_cond_timedwait retries by itself). The deadline is
 * absolute (on CLOCK_REALTIME for sem_timedwait): the same call again. */
#define SEM_WRAPPER(fn, clock, abs, args)                                                          \
    PW_REAL(fn);                                                                                   \
    if (!started || !(abs))                                                                        \
        return real_##fn args;                                                                     \
    int rc;                                                                                        \
    BLOCK_UNTIL((const struct timespec *)NULL, clock, ns_after(0, abs), real_##fn args,            \
                rc < 0 && errno == ETIMEDOUT);                                                     \
    return rc

PW_EXPORT int sem_timedwait(sem_t *restrict s, const struct timespec *restrict abs)
{
    SEM_WRAPPER(sem_timedwait, CLOCK_REALTIME, abs, (s, abs));
}

#if defined(__GLIBC_PREREQ) && __GLIBC_PREREQ(2, 30)
PW_EXPORT int sem_clockwait(sem_t *restrict s, clockid_t clock, const struct timespec *restrict abs)
{
    SEM_WRAPPER(sem_clockwait, clock, abs, (s, clock, abs));
}
#endif

/* System V IPC: never restarted (signal(7)). semtimedop's timeout is relative: what is
 * left of it; semop is semtimedop without one. */
PW_EXPORT int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *ts)
{
    PW_REAL(semtimedop);
    if (!started)
        return real_semtimedop(id, ops, n, ts);
    int rc;
    BLOCK_TS(ts, real_semtimedop(id, ops, n, tp_), rc < 0 && errno == EAGAIN);
    return rc;
}

PW_EXPORT int semop(int id, struct sembuf *ops, size_t n) { return semtimedop(id, ops, n, NULL); }

PW_EXPORT ssize_t msgrcv(int id, void *m, size_t size, long type, int flags)
{
    AGAIN_WRAPPER(ssize_t, msgrcv, (id, m, size, type, flags));
}

PW_EXPORT int msgsnd(int id, const void *m, size_t size, int flags)
{
    AGAIN_WRAPPER(int, msgsnd, (id, m, size, flags));
}

/* Sockets: accept, connect and the recv and send families are restarted (SA_RESTART)
 * unless the socket has a timeout (SO_RCVTIMEO, SO_SNDTIMEO), which makes a handler end
 * them with EINTR. After ours, the socket is waited for (ppoll, part of the same call)
 * for what is left of that timeout from the call's start, then the call is made again;
 * the timeout passed: EAGAIN, as the kernel says then. The state of the sample is left
 * as it is: most such calls on non-blocking sockets do not wait. */
/* The socket's timeout OPT (SO_RCVTIMEO, SO_SNDTIMEO) in ns; 0: none. */
static int64_t sock_timeout(int fd, int opt)
{
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (getsockopt(fd, SOL_SOCKET, opt, &tv, &len) != 0)
        return 0;
    return tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
}

/* Waiting again for socket FD (EVENTS) for what is left of its timeout OPT from START,
 * as part of call c: 1 ready, 0 the timeout passed (errno EAGAIN), -1 the program's
 * signal (EINTR) or an error. */
static int sock_ready(blocked_call *c, int fd, short events, int opt, int64_t start)
{
    PW_REAL(ppoll);
    int64_t timeout = sock_timeout(fd, opt);
    struct pollfd p = {fd, events, 0};
    for (;;) {
        struct timespec left;
        const struct timespec *tp = NULL;
        if (timeout) {
            int64_t d = start + timeout - pw_now();
            if (d <= 0) {
                errno = EAGAIN;
                return 0;
            }
            left = ts_of_ns(d);
            tp = &left;
        }
        call_try(c);
        int rc = real_ppoll(&p, 1, tp, NULL);
        if (rc == 0)
            errno = EAGAIN;
        if (!call_again(c, rc < 0 && errno == EINTR))
            return rc;
    }
}

/* rc = CALL on socket FD (waiting for EVENTS, its timeout OPT), again after our signal */
#define SOCK_CALL(fd, events, opt, call)                                                           \
    do {                                                                                           \
        int64_t start_ = pw_now();                                                                 \
        blocked_call *c_ = call_enter(PW_FRAME, CLOCK_MONOTONIC);                                  \
        for (;;) {                                                                                 \
            call_try(c_);                                                                          \
            rc = (call);                                                                           \
            if (!call_again(c_, rc < 0 && errno == EINTR))                                         \
                break;                                                                             \
            if (sock_ready(c_, fd, events, opt, start_) <= 0) {                                    \
                rc = -1;                                                                           \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        call_leave(c_);                                                                            \
    } while (0)

/* The body of the wrapper of socket call FN, called with ARGS */
#define SOCK_WRAPPER(rtype, fn, fd, events, opt, args)                                             \
    PW_REAL(fn);                                                                                   \
    if (!started)                                                                                  \
        return real_##fn args;                                                                     \
    rtype rc;                                                                                      \
    SOCK_CALL(fd, events, opt, real_##fn args);                                                    \
    return rc

PW_EXPORT int accept(int fd, __SOCKADDR_ARG a, socklen_t *restrict len)
{
    SOCK_WRAPPER(int, accept, fd, POLLIN, SO_RCVTIMEO, (fd, a, len));
}

PW_EXPORT int accept4(int fd, __SOCKADDR_ARG a, socklen_t *restrict len, int flags)
{
    SOCK_WRAPPER(int, accept4, fd, POLLIN, SO_RCVTIMEO, (fd, a, len, flags));
}

PW_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    SOCK_WRAPPER(ssize_t, recv, fd, POLLIN, SO_RCVTIMEO, (fd, buf, n, flags));
}

PW_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags, __SOCKADDR_ARG a,
                           socklen_t *restrict len)
{
    SOCK_WRAPPER(ssize_t, recvfrom, fd, POLLIN, SO_RCVTIMEO, (fd, buf, n, flags, a, len));
}

PW_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    SOCK_WRAPPER(ssize_t, recvmsg, fd, POLLIN, SO_RCVTIMEO, (fd, m, flags));
}

/* recvmmsg's own timeout is looked at only after a message came (recvmmsg(2)); waiting
 * for the first one is the socket's */
PW_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *ts)
{
    SOCK_WRAPPER(int, recvmmsg, fd, POLLIN, SO_RCVTIMEO, (fd, v, n, flags, ts));
}

PW_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    SOCK_WRAPPER(ssize_t, send, fd, POLLOUT, SO_SNDTIMEO, (fd, buf, n, flags));
}

PW_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, __CONST_SOCKADDR_ARG a,
                         socklen_t len)
{
    SOCK_WRAPPER(ssize_t, sendto, fd, POLLOUT, SO_SNDTIMEO, (fd, buf, n, flags, a, len));
}

PW_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    SOCK_WRAPPER(ssize_t, sendmsg, fd, POLLOUT, SO_SNDTIMEO, (fd, m, flags));
}

/* connect: a TCP connection that our signal interrupted goes on being made, so it is
 * waited for by connecting again (the kernel's own restart does so): "already
 * connected" then means made. A socket timeout (SO_SNDTIMEO) that passed meanwhile ends
 * it as the kernel would (EINPROGRESS; EAGAIN for a local socket): found at our next
 * signal, so up to one sampling interval late. */
PW_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG a, socklen_t len)
{
    PW_REAL(connect);
    if (!started)
        return real_connect(fd, a, len);
    int64_t start = pw_now();
    int rc, retried = 0;
    blocked_call *c = call_enter(PW_FRAME, CLOCK_MONOTONIC);
    for (;;) {
        call_try(c);
        rc = real_connect(fd, a, len);
        if (retried && rc < 0 && errno == EISCONN) {
            rc = 0;
            break;
        }
        if (retried && rc < 0 && errno == EALREADY)
            errno = EINPROGRESS; /* its timeout passed in the call again */
        if (!call_again(c, rc < 0 && errno == EINTR))
            break;
        retried = 1;
        int64_t timeout = sock_timeout(fd, SO_SNDTIMEO);
        if (timeout && pw_now() - start >= timeout) {
            errno = a.__sockaddr__ && a.__sockaddr__->sa_family == AF_UNIX ? EAGAIN : EINPROGRESS;
            rc = -1;
            break;
        }
    }
    call_leave(c);
    return rc;
}

/* io_getevents (libaio; glibc has none): never restarted. The time left of its relative
 * timeout. Where libaio is not loaded, a program calling it has its own: the system call
 * stands in. A program making the system call itself (syscall(SYS_io_getevents)) cannot
 * be wrapped and sees the EINTR. */
struct io_event;
PW_EXPORT int io_getevents(void *ctx, long min, long nr, struct io_event *ev, struct timespec *ts)
{
    PW_REAL_OPTIONAL(io_getevents);
    int rc;
#define PW_GETEVENTS(t)                                                                            \
    (real_io_getevents ? real_io_getevents(ctx, min, nr, ev, (struct timespec *)(t))               \
                       : (int)syscall(SYS_io_getevents, ctx, min, nr, ev, (t)))
    if (!started)
        return PW_GETEVENTS(ts);
    BLOCK_TS(ts, PW_GETEVENTS(tp_), rc == 0 && min > 0);
#undef PW_GETEVENTS
    return rc;
}

/* In the core's constructor (the process is measured). */
static void start(void)
{
    if (!pw_opt.sample)
        return;
    sig = SIGRTMAX - 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask); /* the program's signals wait until it returns: ended_a_call */
    if (sigaction(sig, &sa, NULL) != 0) {
        pw_log("--sample: cannot install the handler of signal %d; no samples", sig);
        return;
    }
    unwinder_load();
    /* looked up now (sigaction's was, by the call above): a handler may call them, and
     * dlsym is no call for a handler */
    PW_REAL_RESOLVE(signal);
    started = 1;
    pw_want_anchor = 1; /* MPI wrappers keep their frame for fp_walk */
    start_pid = getpid();
    pw_thread_begin(); /* the main thread, from now (and the other modules' start in it) */
    adopt_existing_threads();
}

const pw_module pw_module_samples = {
    .name = "samples",
    .version = PW_SAMPLES_VERSION,
    .start = start,
    .thread_start = sample_thread,
    .dump = write_samples,
};

/*
 * The samples module's stack walks (samples_internal.h): the stack of the context a
 * sample interrupted, by libunwind when it is here and may be used there, else by frame
 * pointers, every read checked to lie in the thread's own stack or made with
 * process_vm_readv, which fails where a read would fault. Runs in the signal handler:
 * no locks, no allocation (libunwind's own: see below).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "perfweave/format/samples.h" /* PW_SAMPLE_FRAMES */
#include "samples_internal.h"

#if defined(PW_HAVE_LIBUNWIND) /* CMake: libunwind.h found; the library is dlopen'd */
#include <link.h>
#include <libunwind.h>
#define PW_STR_(x) #x
#define PW_STR(x) PW_STR_(x) /* the library's name of a libunwind.h macro */
#endif

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
 * once outside the handler first (pw_samples_warm_unwind). It finds unwind tables with
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

void pw_samples_unwinder_load(void)
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
void pw_samples_warm_unwind(const thr *t)
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
void pw_samples_unwinder_load(void) {}
void pw_samples_warm_unwind(const thr *t) { (void)t; }
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

/* The stack of the interrupted context ucv into frames[] (its depth): libunwind's, else
 * the frame pointers' (counted: fallbacks). */
int pw_samples_stack(thr *t, void *ucv, uintptr_t *frames)
{
    uintptr_t pc, fp, sp;
    context_regs(ucv, &pc, &fp, &sp);
    int d = unwind(t, ucv, pc, sp, frames);
    if (d >= 0) {
        t->unwound++;
    } else {
        d = fp_walk(t, pc, fp, sp, frames);
        t->fallbacks += PW_UNWINDER[0] == 'l';
    }
    return d;
}

const char *pw_samples_unwinder(void) { return PW_UNWINDER; }

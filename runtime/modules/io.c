/*
 * The io module (--io): the program's I/O per (file, layer, thread), call sites, bytes
 * over time (docs/io.md), in three files:
 *
 *   io.c           the module: its start, end and forked child, and the process's I/O
 *                  time with overlapping calls of its threads counted once (io.h);
 *   io_store.c     the record store, io/HOST.PID.pwio: per file, layer, thread and call
 *                  site, and the recording functions the wrappers call;
 *   io_segments.c  the segment trace (--trace), io/HOST.PID.segments: each call's
 *                  interval.
 *
 * The wrappers are generated from runtime/io/io.spec (gen_io.py); MPI-IO calls come from
 * the MPI module's wrappers through the hook pw_io_file_call (io.h).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io.h"

int pw_io_on;
int pw_io_shared;
PW_TLS int pw_io_role;
int64_t pw_io_solo_start;
int pw_io_inflight;
int64_t pw_io_busy_start;
int64_t *pw_io_busy_ticks, *pw_io_solo_ticks;
static int io_owner;          /* 1: a thread took role 1 */
static int claim_done;        /* the second thread has looked at the first one's call */
static int64_t pw_io_adopted; /* ... and taken the one that began at this tick (0: none) */

/* Whether the kernel has the cheap membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED (8) and
 * its registration (16), by MEMBARRIER_CMD_QUERY (0). The registration itself is left to
 * the second I/O thread (pw_io_claim), which alone needs it: registering waits for an RCU
 * grace period when the process's memory has another user, 7-26 ms measured in one rank
 * of two at its start under MPICH, a wait every process paid when the module's start
 * registered. */
static int membarrier_ok(void)
{
#ifdef SYS_membarrier
    long cmds = syscall(SYS_membarrier, 0, 0, 0);
    return cmds > 0 && (cmds & (8 | 16)) == (8 | 16);
#else
    return 0;
#endif
}

int pw_io_claim(void)
{
    int zero = 0;
    if (__atomic_compare_exchange_n(&io_owner, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return pw_io_role = 1;
    pw_io_role = 2;
    if (__atomic_load_n(&pw_io_shared, __ATOMIC_SEQ_CST))
        return 2; /* shared already (a third thread, or no membarrier) */
    /* registered (16) before the flag is set: the registration may wait for an RCU grace
     * period (membarrier_ok), and once the flag is set the first thread's call in flight
     * waits for this thread's look (adopted); without it, MEMBARRIER_CMD_GLOBAL (1),
     * slower, needs none */
    long fence = 8;
#ifdef SYS_membarrier
    if (syscall(SYS_membarrier, 16, 0, 0) != 0)
        fence = 1;
#endif
    zero = 0;
    if (!__atomic_compare_exchange_n(&pw_io_shared, &zero, 1, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_RELAXED))
        return 2; /* shared since (a third thread) */
        /* the first thread's loads of pw_io_shared after this see 1; its call in flight, if
     * any, is in pw_io_solo_start (MEMBARRIER_CMD_PRIVATE_EXPEDITED: 8) */
#ifdef SYS_membarrier
    if (syscall(SYS_membarrier, fence, 0, 0) != 0)
        syscall(SYS_membarrier, 1, 0, 0);
#else
    (void)fence;
#endif
    int64_t s = __atomic_load_n(&pw_io_solo_start, __ATOMIC_SEQ_CST);
    if (s != 0) {
        if (__atomic_fetch_add(&pw_io_inflight, 1, __ATOMIC_ACQ_REL) == 0)
            __atomic_store_n(&pw_io_busy_start, s, __ATOMIC_RELAXED);
        __atomic_store_n(&pw_io_adopted, s, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&claim_done, 1, __ATOMIC_RELEASE);
    return 2;
}

/* The first thread's call that began alone when a second thread came: was it taken into
 * the in-flight count? (waits for the second thread's look: a few microseconds, once) */
static int adopted(const pw_io_call *c)
{
    while (!__atomic_load_n(&claim_done, __ATOMIC_ACQUIRE))
        sched_yield();
    return __atomic_load_n(&pw_io_adopted, __ATOMIC_RELAXED) == c->t0;
}

void pw_io_begin_shared(pw_io_call *c, int solo_began)
{
    if (solo_began) {
        __atomic_store_n(&pw_io_solo_start, 0, __ATOMIC_RELAXED);
        if (adopted(c)) {
            c->first = 0; /* counted in flight already, its period begun */
            return;
        }
    }
    c->first = __atomic_fetch_add(&pw_io_inflight, 1, __ATOMIC_ACQ_REL) == 0;
    if (!solo_began)
        c->t0 = pw_ticks();
    if (c->first)
        __atomic_store_n(&pw_io_busy_start, c->t0, __ATOMIC_RELAXED);
}

void pw_io_leave_shared(pw_io_call *c, int solo_began)
{
    if (solo_began && !adopted(c)) { /* ended before the second thread looked */
        if (pw_io_solo_ticks)
            *pw_io_solo_ticks += c->t1 - c->t0;
        return;
    }
    /* the start read before leaving: a call that begins after this one left starts a
     * new period; one that began before it keeps the count above 0 */
    int64_t start = __atomic_load_n(&pw_io_busy_start, __ATOMIC_RELAXED);
    if (__atomic_sub_fetch(&pw_io_inflight, 1, __ATOMIC_ACQ_REL) == 0 && pw_io_busy_ticks)
        __atomic_fetch_add(pw_io_busy_ticks, c->t1 - start, __ATOMIC_RELAXED);
}

void *pw_io_real(const char *name, int *looked)
{
    void *p = pw_wrap_next(name);
    *looked = 1;
    if (!p)
        pw_debug("io: the C library has no %s: its wrapper passes calls on as ENOSYS", name);
    return p;
}

static void start(void)
{
    if (!pw_opt.io || !pw_experiment_dir() || pw_io_store_start() != 0)
        return;
    pw_io_shared = !membarrier_ok(); /* without it: every call counted in flight */
    PW_HOOK_OFFER(pw_io_file_call, pw_io_file_call);
    __atomic_store_n(&pw_io_on, 1, __ATOMIC_RELEASE);
}

/* In a child of fork (the core's pthread_atfork handler runs it): a store of its own
 * with the names (not the counts) of its parent's, or none, which its parent's header
 * then counts. */
static void in_child(void)
{
    if (!pw_io_on)
        return;
    pw_io_inflight = 0;
    pw_io_role = 0; /* the child's one thread is its first I/O thread */
    io_owner = claim_done = 0;
    pw_io_solo_start = pw_io_adopted = 0;
    pw_io_shared = !membarrier_ok();
    pw_wrap_depth++;
    if (pw_io_store_fork() != 0) {
        pw_io_on = 0;
        pw_io_busy_ticks = pw_io_solo_ticks = NULL;
    }
    pw_wrap_depth--;
}

/* The process ends: the store says how (its counts are in the file already). */
static int dump(int state, int in_signal)
{
    (void)in_signal;
    if (pw_io_on)
        pw_io_store_end(state);
    return 0;
}

const pw_module pw_module_io = {
    .name = "io",
    .version = PW_IO_VERSION,
    .start = start,
    .dump = dump,
    .fork_child = in_child,
};

/*
 * The samples module's wrappers of blocking calls (samples_internal.h): a call that our
 * signal interrupted (EINTR) is made again for what is left of it, so that the program
 * sees what it would see without perfweave; the program's own signals still end it. Each
 * wrapped call in progress has a record in its thread, which the signal handlers note
 * (ours: on_sample; the program's: program_handler) and the wrapper reads. While blocked,
 * a thread's samples say it sleeps or waits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "samples_internal.h"
#include "wrap.h"

/* A sample's activity is the thread's pw_thread_activity (pw.h): 0 computation, 1 + family in
 * a measured call, PW_ACTIVITY_SLEEP and PW_ACTIVITY_WAIT set by the wrappers below. */
/* The wrapped blocking calls in progress in this thread, innermost last (a program's
 * handler may make one while another waits): what the handlers note of them (see "How a
 * wrapper resumes a call" below). In the thread's own memory, not the wrappers' frames:
 * a wrapper left without returning (its thread cancelled in the call, or a handler that
 * jumped out of it with siglongjmp) leaves its record behind, which the next call drops
 * (its frame is below the new call's: the stack grows down). */
#define PW_NESTED_CALLS 8
typedef struct blocked_call {
    uintptr_t frame;          /* the wrapper's frame */
    unsigned handled;         /* pw_samples_handled when the call began */
    volatile int interrupted; /* our signal alone ended the real call just made */
    volatile int resuming;    /* the call is being made again after our signal */
    clockid_t clock;          /* the clock of its timeout */
    volatile int woke;        /* a handler of the program ran in it, */
    volatile int64_t woken;   /* first at this time on that clock */
} blocked_call;
static PW_TLS blocked_call calls[PW_NESTED_CALLS];
static PW_TLS volatile int ncalls;
/* Our timer's signals still to send to end a call being made again (pw_samples_nudge) */
static PW_TLS volatile int nudges;

/* Whether our signal alone ended a blocking system call with EINTR (the wrappers then
 * call it again). The kernel hands a handler the registers of the interrupted context
 * with the call's result already set to -EINTR when it will not restart it; a program's
 * handler that ours lands in has no such register. The program's own signals that
 * arrived with ours are held by our handler's mask (all signals) and delivered right
 * after it: pending and not blocked in the interrupted context, the call is theirs. One
 * that was handled before ours landed left the same registers: the caller checks that
 * no handler of the program ran during the call (pw_samples_handled). */
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
        if (s != pw_samples_sig && sigismember(&p, s) == 1 && !sigismember(&uc->uc_sigmask, s))
            return 0;
    return 1;
}

/* Our signal alone ended the real call that the innermost wrapped call just made: the
 * wrapper makes it again. */
void pw_samples_note_interruption(void *ucv)
{
    int n = ncalls;
    if (n > 0 && pw_samples_handled == calls[n - 1].handled && ended_a_call(ucv))
        calls[n - 1].interrupted = 1;
}

/* A call being made again must end (a handler of the program ran meanwhile): this
 * thread's timer fires NUDGE_NS from now rather than at the next sample, and its signal
 * ends the call's system call; one that lands before it, in the few instructions to it,
 * sets the timer again, up to PW_NUDGES times. 1: the timer is set. */
#define NUDGE_NS 20000
#define PW_NUDGES 50
int pw_samples_nudge(thr *t, void *ucv)
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
void pw_samples_note_woken(void *uc)
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

/* A handler of the program has run: a call being made again, whose system call may not
 * have begun yet, is ended: the innermost, if it was interrupted (its frame is above the
 * stack pointer). */
void pw_samples_nudge_resumed(void *uc)
{
    int n = ncalls, saved = errno;
    uintptr_t pc, fp, sp;
    context_regs(uc, &pc, &fp, &sp);
    if (n > 0 && calls[n - 1].resuming && calls[n - 1].frame > sp && pw_samples_self &&
        pw_samples_self->ok) {
        nudges = PW_NUDGES;
        pw_samples_nudge(pw_samples_self, NULL);
    }
    errno = saved;
}

/* Helpers of the blocking-call wrappers below (real functions: PW_REAL, wrap.h) */

/* The samples' activity while blocked: activity, unless in an MPI call; returns the old
 * one. */
static int block_begin(int blocking, int activity)
{
    int old = pw_thread_activity;
    if (blocking && old == 0)
        pw_thread_activity = activity;
    return old;
}

/* How a wrapper resumes a call that our signal ended, so that the program sees what it
 * sees without perfweave. The wrapper makes the program's call as the program made it
 * (the real function: its cancellation point, SA_RESTART, results, siginfo and time
 * left written by the kernel). When it fails with EINTR because of our signal alone
 * (our handler found that our signal ended it: ended_a_call, pw_samples_note_interruption; and no
 * handler of the program has run since the wrapper began: pw_samples_handled), the
 * wrapper makes
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
 * later (pw_samples_nudge): our signal then ends the new system call, the wrapper sees that a
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
 * the program's handler notes when it began (pw_samples_note_woken, on the call's clock), and the
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
    c->handled = pw_samples_handled;
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
    return c->interrupted && pw_samples_handled == c->handled;
}

/* The call, made again after our signal, ended by its timeout (timed_out), DEADLINE on
 * the call's clock: whether a handler of the program had run in it before that, and so
 * the program's signal came while the call waited. The kernel ends such a call with
 * EINTR. Made again, it may have found its timeout passed before its new system call
 * began: the program's handler, run there, took longer than the time left (our timer's
 * signal, pw_samples_nudge, comes only after it), or the thread waited that long for a CPU. The
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

/* Sleeping is sampled (activity "sleep"), and a sleep that our signal interrupts goes on
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
    if (!pw_samples_started || !req)
        return real_clock_nanosleep(clock, flags, req, rem);
    int rel = !(flags & TIMER_ABSTIME), rc, again = 0;
    /* the clock the sleep counts on, and its end there */
    clockid_t on = !rel ? clock : clock == CLOCK_REALTIME ? CLOCK_MONOTONIC : clock;
    int64_t end = rel ? ns_after(clock_ns(on), req) : ns_after(0, req);
    struct timespec r, at;
    int old = block_begin(1, PW_ACTIVITY_SLEEP);
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
    pw_thread_activity = old;
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
 * (with a timeout other than zero) is sampled in activity "wait", unless it is inside an
 * MPI call (the MPI family is kept: MPI libraries poll while waiting). */
/* rc = CALL (a call with a timeout in ms, variable MS; < 0: none), called again for the
 * time left while our signal ends it; TIMED_OUT: rc says its timeout passed, which a
 * signal of the program that came before makes EINTR (program_ended) */
#define BLOCK_MS(ms, call, timed_out)                                                              \
    do {                                                                                           \
        int64_t deadline_ = ms_deadline(ms);                                                       \
        int old_ = block_begin((ms) != 0, PW_ACTIVITY_WAIT);                                       \
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
        int old_ = block_begin(ts_blocking(ts), PW_ACTIVITY_WAIT);                                 \
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
    if (!pw_samples_started)
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
    if (!pw_samples_started)
        return real_ppoll(fds, n, ts, mask);
    int64_t deadline = ts_deadline(ts);
    struct timespec left;
    const struct timespec *tp = ts;
    short kept[PW_KEPT_FDS];
    nfds_t nkept = 0;
    int old = block_begin(ts_blocking(ts), PW_ACTIVITY_WAIT), rc;
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
    if (!pw_samples_started)
        return real_select(n, r, w, e, tv);
    int64_t deadline = tv ? pw_now() + tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL : 0;
    kept_sets kept;
    int old = block_begin(!tv || tv->tv_sec || tv->tv_usec, PW_ACTIVITY_WAIT), rc;
    blocked_call *c = call_enter(PW_FRAME, CLOCK_MONOTONIC);
    int again = 0;
    for (;;) {
        call_try(c);
        rc = real_select(n, r, w, e, tv);
        if (!call_again(c, rc < 0 && errno == EINTR))
            break;
        again = 1;
        if (tv)
            *tv = tv_left(deadline, pw_now());
        keep_sets(&kept, r, w, e);
    }
    /* a call made again that the program's signal ended: the kernel counted what it left
     * from the new call, which may have begun after the handler (nudged: its timer, and
     * any wait for a CPU, counted too); the program is owed the time left when its handler
     * began, as the kernel counts it without perfweave */
    if (again && rc < 0 && errno == EINTR && c->woke && tv)
        *tv = tv_left(deadline, c->woken);
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
    if (!pw_samples_started)
        return real_pselect(n, r, w, e, ts, mask);
    int64_t deadline = ts_deadline(ts);
    struct timespec left;
    const struct timespec *tp = ts;
    kept_sets kept;
    int old = block_begin(ts_blocking(ts), PW_ACTIVITY_WAIT), rc;
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
    if (!pw_samples_started)
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
    if (!pw_samples_started)
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
    if (!pw_samples_started)
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
    if (!pw_samples_started || pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0)
        return real_pause();
    return sigsuspend(&mask);
}

/* Waiting for signals: our signal is taken out of the set, so that a program that
 * blocks every signal and waits for all of them never receives one of ours. */
static const sigset_t *without_ours(const sigset_t *set, sigset_t *copy)
{
    if (!set || !pw_samples_sig || !sigismember(set, pw_samples_sig))
        return set;
    *copy = *set;
    sigdelset(copy, pw_samples_sig);
    return copy;
}

PW_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
    PW_REAL(sigtimedwait);
    if (!pw_samples_started)
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
    if (!pw_samples_started)
        return real_sigwait(set, signo);
    sigset_t copy;
    int old = block_begin(1, PW_ACTIVITY_WAIT);
    int rc = real_sigwait(without_ours(set, &copy), signo);
    pw_thread_activity = old;
    return rc;
}

/* The body of a wrapper of FN, called with ARGS, that BLOCK_AGAIN makes again */
#define AGAIN_WRAPPER(rtype, fn, args)                                                             \
    PW_REAL(fn);                                                                                   \
    if (!pw_samples_started)                                                                       \
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
    if (!pw_samples_started)                                                                       \
        return real_##fn args;                                                                     \
    int rc;                                                                                        \
    BLOCK_UNTIL((const struct timespec *)NULL, clock, deadline_ns(abs), real_##fn args,            \
                rc < 0 && errno == ETIMEDOUT);                                                     \
    return rc

/* an absolute deadline's ns (NULL, which the C library's call refuses or faults on: 0) */
static int64_t deadline_ns(const struct timespec *abs) { return abs ? ns_after(0, abs) : 0; }

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
    if (!pw_samples_started)
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
 * the timeout passed: EAGAIN, as the kernel says then. The samples' activity is left
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
    if (!pw_samples_started)                                                                       \
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
    if (!pw_samples_started)
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
    if (!pw_samples_started)
        return PW_GETEVENTS(ts);
    BLOCK_TS(ts, PW_GETEVENTS(tp_), rc == 0 && min > 0);
#undef PW_GETEVENTS
    return rc;
}

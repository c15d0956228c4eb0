/* A program's signal that comes right after the sampler's, while a sleep is interrupted.
 * sleep_race N: N times, a one-shot SIGALRM (ITIMER_REAL, a handler of the program) fires
 * 0.2-2.2 ms after the timer is set (swept over the sampling period), during a sleep of
 * 20 ms, by turns: nanosleep; clock_nanosleep relative on CLOCK_MONOTONIC and on
 * CLOCK_REALTIME; clock_nanosleep TIMER_ABSTIME on CLOCK_MONOTONIC and on CLOCK_REALTIME.
 * Every sleep is called once before, so that the first has no symbols to look up.
 *
 * Ground truth, from the program itself: a signal handled while the program was in the
 * sleep call must end the sleep with EINTR; one handled before the call ("early", the
 * thread was not running when the timer expired) proves nothing. Where the handler
 * found it had interrupted a system call that returns EINTR (its return register holds
 * -EINTR: "syscall") it is certain; where not ("held": a wrapper held the signal back and
 * handed it over, or it came before the sleep's system call began), a sleep that goes
 * on is excused only when the thread was preempted during the call (an involuntary
 * context switch: the only way for a timer 0.2 ms away to expire in the few instructions
 * before the system call), which leaves the sleep going on without perfweave too.
 * A sleep that goes on against that is "lost". Every sleep that returns EINTR leaves in
 * rem, if relative, the time not slept: more than nothing, at most the request, at least
 * the request less the time the call took; if absolute, rem as it was ("badrem").
 * Prints "syscall held excused early lost badrem". */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#define REQ_NS 20000000L

static volatile sig_atomic_t fired, in_syscall, calling, was_calling;

static void on_alarm(int s, siginfo_t *si, void *ucv)
{
    (void)s;
    (void)si;
    ucontext_t *uc = ucv;
#if defined(__x86_64__)
    long ret = (long)uc->uc_mcontext.gregs[REG_RAX];
#elif defined(__aarch64__)
    long ret = (long)uc->uc_mcontext.regs[0];
#else
#error "the return register of an interrupted system call: x86_64 and aarch64 only"
#endif
    in_syscall = ret == -EINTR;
    was_calling = calling;
    fired = 1;
}

static long ns(const struct timespec *t) { return t->tv_sec * 1000000000L + t->tv_nsec; }

static long now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return ns(&t);
}

static struct timespec ts_of(long n) { return (struct timespec){n / 1000000000L, n % 1000000000L}; }

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* sleeps return EINTR all the same */
    sigaction(SIGALRM, &sa, NULL);
    struct timespec tiny = {0, 1000};
    for (int kind = 0; kind < 5; kind++) { /* symbols looked up, pages touched */
        nanosleep(&tiny, NULL);
        clock_nanosleep(kind == 2 ? CLOCK_REALTIME : CLOCK_MONOTONIC, 0, &tiny, NULL);
    }
    int syscall_ = 0, held = 0, excused = 0, early = 0, lost = 0, badrem = 0;
    for (int i = 0; i < n; i++) {
        int kind = i % 5;
        clockid_t clock = kind == 2 || kind == 4 ? CLOCK_REALTIME : CLOCK_MONOTONIC;
        int abs_ = kind >= 3;
        struct timespec req = ts_of(REQ_NS), rem = {-1, -1};
        if (abs_)
            req = ts_of(now(clock) + REQ_NS);
        long us = 200 + (i * 37) % 2000;
        struct itimerval it = {{0, 0}, {0, us}};
        struct rusage ru0, ru1;
        getrusage(RUSAGE_THREAD, &ru0);
        fired = 0;
        long t0 = now(CLOCK_MONOTONIC);
        setitimer(ITIMER_REAL, &it, NULL);
        calling = 1;
        int rc;
        if (kind == 0)
            rc = nanosleep(&req, &rem) == 0 ? 0 : errno;
        else
            rc = clock_nanosleep(clock, abs_ ? TIMER_ABSTIME : 0, &req, &rem);
        calling = 0;
        long took = now(CLOCK_MONOTONIC) - t0;
        getrusage(RUSAGE_THREAD, &ru1);
        while (!fired) /* the sleep ended first (it cannot: 20 ms against 2.2 ms) */
            ;
        if (rc == EINTR && (abs_ ? rem.tv_sec != -1 || rem.tv_nsec != -1
                                 : ns(&rem) <= 0 || ns(&rem) > REQ_NS ||
                                       ns(&rem) < REQ_NS - took))
            badrem++;
        if (!was_calling) {
            early++;
        } else if (in_syscall) {
            syscall_++;
            lost += rc != EINTR;
        } else {
            held++;
            if (rc != EINTR && ru1.ru_nivcsw != ru0.ru_nivcsw)
                excused++;
            else
                lost += rc != EINTR;
        }
    }
    printf("%d %d %d %d %d %d\n", syscall_, held, excused, early, lost, badrem);
    return 0;
}

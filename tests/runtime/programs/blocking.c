/* Blocking calls that the kernel never restarts after a signal handler, under sampling.
 * blocking MODE: MODE is poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2, pause, sigsuspend, sigtimedwait, sigwaitinfo or sigwaitall. Each case
 * blocks for 300 ms by construction and prints "MODE CASE rc errno-name result elapsed":
 *   timeout: nothing happens, the call's own timeout (300 ms) ends it;
 *   ready:   a thread makes the call's event happen at 300 ms (timeout 5 s);
 *   own:     the program's own SIGALRM (SA_RESTART) at 300 ms ends it with EINTR.
 * Everything but elapsed is the same with and without perfweave. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MS 300

static int pipefd[2];
static volatile sig_atomic_t alarms;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void on_alarm(int s) { (void)s; alarms++; }

static void alarm_in(int ms)
{
    struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void *writer(void *arg)
{
    struct timespec ts = {0, MS * 1000000L};
    nanosleep(&ts, NULL);
    if ((long)arg)
        kill(getpid(), SIGUSR2);
    else if (write(pipefd[1], "x", 1) != 1)
        abort();
    return NULL;
}

static const char *ename(int e)
{
    return e == 0 ? "0" : e == EINTR ? "EINTR" : e == EAGAIN ? "EAGAIN" : strerror(e);
}

/* one call of MODE with a timeout of ms (-1: none); result: what it reported */
static int call(const char *mode, int ms, int *result)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    const struct timespec *tp = ms < 0 ? NULL : &ts;
    struct pollfd p = {pipefd[0], POLLIN, 0};
    fd_set r;
    FD_ZERO(&r);
    FD_SET(pipefd[0], &r);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    sigset_t none, usr2;
    sigemptyset(&none);
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    siginfo_t si;
    int rc = -2;
    *result = 0;
    if (!strcmp(mode, "poll")) {
        rc = poll(&p, 1, ms);
        *result = p.revents;
    } else if (!strcmp(mode, "ppoll")) {
        rc = ppoll(&p, 1, tp, NULL);
        *result = p.revents;
    } else if (!strcmp(mode, "select")) {
        rc = select(pipefd[0] + 1, &r, NULL, NULL, ms < 0 ? NULL : &tv);
        *result = FD_ISSET(pipefd[0], &r) * 10 + (ms >= 0 && rc == 0 && tv.tv_sec == 0 &&
                                                  tv.tv_usec == 0);
    } else if (!strcmp(mode, "pselect")) {
        rc = pselect(pipefd[0] + 1, &r, NULL, NULL, tp, NULL);
        *result = FD_ISSET(pipefd[0], &r);
    } else if (!strncmp(mode, "epoll", 5)) {
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 42}, out = {0, {0}};
        epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev);
        if (!strcmp(mode, "epoll_wait"))
            rc = epoll_wait(ep, &out, 1, ms);
        else if (!strcmp(mode, "epoll_pwait"))
            rc = epoll_pwait(ep, &out, 1, ms, &none);
        else
            rc = epoll_pwait2(ep, &out, 1, tp, &none);
        int e = errno;
        *result = (int)out.data.u32;
        close(ep);
        errno = e;
    } else if (!strcmp(mode, "pause")) {
        rc = pause();
    } else if (!strcmp(mode, "sigsuspend")) {
        rc = sigsuspend(&none);
    } else if (!strcmp(mode, "sigtimedwait")) {
        rc = sigtimedwait(&usr2, &si, tp);
    } else if (!strcmp(mode, "sigwaitinfo")) {
        rc = sigwaitinfo(&usr2, &si);
    } else if (!strcmp(mode, "sigwaitall")) {
        /* every signal blocked and waited for: must get the program's SIGALRM only */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        alarm_in(MS);
        rc = sigwaitinfo(&all, &si);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return rc;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "poll";
    if (pipe(pipefd) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART; /* these calls return EINTR all the same */
    sigaction(SIGALRM, &sa, NULL);
    int sigwaits = !strncmp(mode, "sig", 3) && strcmp(mode, "sigsuspend");
    if (sigwaits) { /* SIGUSR2 is waited for: blocked in every thread */
        sigset_t usr2;
        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    }
    int signal_only = !strcmp(mode, "pause") || !strcmp(mode, "sigsuspend") ||
                      !strcmp(mode, "sigwaitall");
    const char *cases[] = {"timeout", "ready", "own"};
    for (int c = 0; c < 3; c++) {
        if (signal_only && c < 2)
            continue;
        if (!strcmp(mode, "sigwaitinfo") && c == 0)
            continue; /* no timeout */
        pthread_t th;
        if (c == 1)
            pthread_create(&th, NULL, writer, (void *)(long)sigwaits);
        if (c == 2 && strcmp(mode, "sigwaitall"))
            alarm_in(MS);
        int result, rc;
        double t = now();
        rc = call(mode, c == 0 ? MS : c == 1 ? 5000 : 5000, &result);
        int e = rc < 0 ? errno : 0;
        double dt = now() - t;
        if (c == 1) {
            pthread_join(th, NULL);
            char x;
            if (!sigwaits && read(pipefd[0], &x, 1) != 1)
                return 3;
        }
        printf("%s %s %d %s %d %.4f\n", mode, cases[c], rc, ename(e), result, dt);
        fflush(stdout);
    }
    return alarms == 0 && signal_only && strcmp(mode, "sigwaitall") ? 4 : 0;
}

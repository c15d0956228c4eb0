/* Blocking calls that the kernel never restarts after a signal handler, under sampling.
 *
 * blocking MODE: MODE is poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2, pause, sigsuspend, sigtimedwait, sigwaitinfo, sigwaitall, a sleep
 * (nanosleep, usleep, clock_nanosleep[_CLOCK][_abs]: see sleeps[]), a semaphore, System V
 * IPC, a socket call or io_getevents. Each case blocks for 300 ms by construction and
 * prints "MODE CASE rc errno-name result elapsed":
 *   timeout: nothing happens, the call's own timeout (300 ms) ends it;
 *   ready:   a thread makes the call's event happen at 300 ms (timeout 5 s);
 *   own:     the program's own SIGALRM (SA_RESTART) at 300 ms ends it with EINTR.
 * blocking MODE masked: case "own" only, its handler run with every signal blocked (a
 * common sa_mask) for 3 ms, so that a sampler's signal waits for it to return.
 * Everything but elapsed is the same with and without perfweave; a kernel that refuses
 * MODE (the alarm clocks without a real-time clock) prints "MODE unsupported E<errno>".
 *
 * blocking race N MODE...: for each MODE, N calls each ended by the program's SIGALRM
 * at 50 to 300 us (swept), so that under 1 ms sampling the sampler's signal often
 * ends the call just before it, or lands just after it. Prints for each MODE
 * "MODE n ended early late before lost bad outcome" (see race()).
 * blocking race-slow N MODE...: the same with a 10 ms timeout and a handler that runs
 * for 12 ms: the call's timeout passes while the handler runs, as when a thread waits
 * that long for a CPU after its signal (the kernel still ends the call with EINTR). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <semaphore.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MS 300
#define RACE_MS 50 /* a race call's timeout; the backup signal comes at twice that */
#define SLOW_RACE_MS 10      /* race-slow: its timeout, */
#define SLOW_HANDLER_US 12000 /* and how long its handler runs */

static int pipefd[2];
static volatile sig_atomic_t alarms;
static const char *mode;
static int ready_case; /* the writer thread makes the event happen */

/* what the calls wait on */
static sem_t psem;               /* POSIX semaphore, 0 */
static int svsem = -1, svq = -1; /* System V semaphore (0) and message queue */
static int sv[2] = {-1, -1};     /* socket pair: [0] waits, [1] the other end */
static int listener = -1;        /* a listening socket (accept, connect) */
static int ep = -1, conn = -1;   /* a call's epoll instance, connecting socket */
static struct sockaddr_un addr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cond_flag;
static aio_context_t aio;
typedef int getevents_fn(aio_context_t, long, long, struct io_event *, struct timespec *);
static getevents_fn *getevents(void); /* the io_getevents the program calls */
static struct msgbuf1k {
    long type;
    char text[1024];
} msg = {1, {0}};

/* clock_nanosleep on each kind of clock, relative or absolute */
static const struct sleep_mode {
    const char *name;
    clockid_t clock;
    int abs;
} sleeps[] = {
    {"clock_nanosleep", CLOCK_MONOTONIC, 0},
    {"clock_nanosleep_abs", CLOCK_MONOTONIC, 1},
    {"clock_nanosleep_realtime", CLOCK_REALTIME, 0},
    {"clock_nanosleep_realtime_abs", CLOCK_REALTIME, 1},
    {"clock_nanosleep_boottime", CLOCK_BOOTTIME, 0},
    {"clock_nanosleep_boottime_abs", CLOCK_BOOTTIME, 1},
    /* the process's CPU time: it sleeps while it does not advance (a signal ends it) */
    {"clock_nanosleep_cputime", CLOCK_PROCESS_CPUTIME_ID, 0},
    {"clock_nanosleep_realtime_alarm", CLOCK_REALTIME_ALARM, 0},
    {"clock_nanosleep_boottime_alarm", CLOCK_BOOTTIME_ALARM, 1},
};

static int is(const char *m) { return !strcmp(mode, m); }
static int sigwaits(void) { return !strncmp(mode, "sig", 3) && !is("sigsuspend"); }
/* modes waiting for the pipe to be readable */
static int piped(void)
{
    return strstr(mode, "poll") || strstr(mode, "select") || is("io_getevents");
}

static const struct sleep_mode *sleep_mode(void)
{
    for (size_t i = 0; i < sizeof sleeps / sizeof *sleeps; i++)
        if (is(sleeps[i].name))
            return &sleeps[i];
    return NULL;
}

static long ns_of(const struct timespec *t) { return t->tv_sec * 1000000000L + t->tv_nsec; }

static struct timespec ts_of(long n) { return (struct timespec){n / 1000000000L, n % 1000000000L}; }

static long now_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return ns_of(&t);
}

static double now(void) { return now_ns(CLOCK_MONOTONIC) * 1e-9; }

/* The thread's voluntary context switches: it slept in a call */
static long nvcsw(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

/* The time the thread spent runnable, waiting for a CPU (ns; -1: not known) */
static long run_delay(void)
{
    char buf[128];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    long run, wait;
    return sscanf(buf, "%ld %ld", &run, &wait) == 2 ? wait : -1;
}

static int masked_handler; /* MODE masked: the handler blocks every signal for 3 ms */
static int racing;         /* race(): the handler notes when and where it ran */
static long handler_ns;    /* race-slow: how long the handler runs */

/* race(): the program is in the call; its handler ran during it; when and where it
 * first ran in this call */
static volatile sig_atomic_t calling, in_call, fired, was_calling, in_syscall;
static volatile long fired_at, nvcsw_at;
/* the thread's voluntary context switches when the first handler in the call returned */
static volatile long nvcsw_done;

static void on_alarm(int s, siginfo_t *si, void *ucv)
{
    (void)s;
    (void)si;
    alarms++;
    if (racing) {
        int e = errno;
        in_call += calling;
        if (!fired) {
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
            fired_at = now_ns(CLOCK_MONOTONIC);
            nvcsw_at = nvcsw();
            fired = 1;
        }
        long t = now_ns(CLOCK_MONOTONIC);
        while (now_ns(CLOCK_MONOTONIC) - t < handler_ns)
            ;
        if (in_call == 1)
            nvcsw_done = nvcsw();
        errno = e;
    }
    if (masked_handler) {
        double t = now();
        while (now() - t < 0.003)
            ;
    }
}

static void alarm_in(int ms)
{
    struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void set_timeout(int fd, int opt, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* the sending side full: a send would block */
static void fill_socket(void)
{
    char buf[4096] = {0};
    while (send(sv[0], buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
    while (send(sv[0], buf, 1, MSG_DONTWAIT) > 0)
        ;
}

/* the message queue full: a msgsnd would block */
static void fill_queue(void)
{
    while (msgsnd(svq, &msg, sizeof msg.text, IPC_NOWAIT) == 0)
        ;
}

/* a unix socket connected to the listener, left unaccepted: with a backlog of 0, the
 * next connect blocks */
static int client(void)
{
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&addr, sizeof addr) != 0)
        abort();
    return c;
}

static void setup(void)
{
    if (!strncmp(mode, "sem_", 4))
        sem_init(&psem, 0, 0);
    if (is("semop") || is("semtimedop"))
        svsem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600); /* value 0 */
    if (is("msgrcv") || is("msgsnd"))
        svq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (!strncmp(mode, "recv", 4) || !strncmp(mode, "send", 4)) {
        socketpair(AF_UNIX, strncmp(mode, "send", 4) ? SOCK_DGRAM : SOCK_STREAM, 0, sv);
        int small = 4096; /* a send blocks soon */
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    if (is("accept") || is("connect")) {
        listener = socket(AF_UNIX, SOCK_STREAM, 0);
        addr.sun_family = AF_UNIX;
        snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "pw-blocking-%d", (int)getpid());
        if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
            listen(listener, is("connect") ? 0 : 8) != 0)
            abort();
        if (is("connect"))
            client(); /* the backlog full */
    }
    if (is("io_getevents") && (syscall(SYS_io_setup, 8, &aio) != 0 || !getevents()))
        abort();
}

static void teardown(void)
{
    if (svsem >= 0)
        semctl(svsem, 0, IPC_RMID);
    if (svq >= 0)
        msgctl(svq, IPC_RMID, NULL);
    if (aio)
        syscall(SYS_io_destroy, aio);
    for (int i = 0; i < 2; i++)
        if (sv[i] >= 0)
            close(sv[i]);
    if (listener >= 0)
        close(listener);
    svsem = svq = sv[0] = sv[1] = listener = -1;
    aio = 0;
}

/* The call's event, from another thread at 300 ms */
static void *writer(void *arg)
{
    (void)arg;
    struct timespec ts = {0, MS * 1000000L};
    nanosleep(&ts, NULL);
    char buf[65536];
    struct sembuf up = {0, 1, 0};
    if (sigwaits()) {
        kill(getpid(), SIGUSR2);
    } else if (!strncmp(mode, "sem_", 4)) {
        sem_post(&psem);
    } else if (svsem >= 0) {
        semop(svsem, &up, 1);
    } else if (is("msgrcv")) {
        msgsnd(svq, &msg, sizeof msg.text, 0);
    } else if (is("msgsnd")) {
        msgrcv(svq, &msg, sizeof msg.text, 0, 0);
    } else if (!strncmp(mode, "recv", 4)) {
        send(sv[1], "x", 1, 0);
    } else if (!strncmp(mode, "send", 4)) {
        while (recv(sv[1], buf, sizeof buf, MSG_DONTWAIT) > 0)
            ;
    } else if (is("accept")) {
        client();
    } else if (is("connect")) {
        close(accept(listener, NULL, NULL));
    } else if (is("pthread_cond_timedwait")) {
        pthread_mutex_lock(&mu);
        cond_flag = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
    } else if (piped() && write(pipefd[1], "x", 1) != 1) {
        abort();
    }
    return NULL;
}

/* libaio's io_getevents where the program has it (perfweave's wrapper stands for it),
 * else the system call: looked up once, in setup(), not in the call, where the bare
 * program's search for libaio.so.1 (a dlopen of a library that is not installed, with
 * its file-system look-ups, which may sleep) made a window of up to a few hundred us
 * before the system call: a handler that ran there after such a sleep was neither
 * "before" nor an ended call (race-slow, 1 of 50 bare calls lost on an idle machine) */
static int raw_getevents(aio_context_t ctx, long min, long n, struct io_event *ev,
                         struct timespec *ts)
{
    return (int)syscall(SYS_io_getevents, ctx, min, n, ev, ts);
}
static getevents_fn *getevents_found;
static getevents_fn *getevents(void)
{
    if (getevents_found)
        return getevents_found;
    getevents_fn *f = (getevents_fn *)dlsym(RTLD_DEFAULT, "io_getevents");
    void *lib = f ? NULL : dlopen("libaio.so.1", RTLD_NOW);
    if (lib)
        f = (getevents_fn *)dlsym(lib, "io_getevents");
    return getevents_found = f ? f : raw_getevents;
}

static const char *ename(int e)
{
    static char other[16];
    snprintf(other, sizeof other, "E%d", e);
    return e == 0           ? "0"
           : e == EINTR     ? "EINTR"
           : e == EAGAIN    ? "EAGAIN"
           : e == ETIMEDOUT ? "ETIMEDOUT"
                            : other;
}

/* What a call waits with, made before it (and before the program's signal is set):
 * socket timeouts of ms, the sending side full, an epoll instance, a socket to connect. */
static void prepare(int ms)
{
    if (!strncmp(mode, "recv", 4))
        set_timeout(sv[0], SO_RCVTIMEO, ms);
    if (!strncmp(mode, "send", 4)) {
        set_timeout(sv[0], SO_SNDTIMEO, ms);
        fill_socket();
    }
    if (is("accept"))
        set_timeout(listener, SO_RCVTIMEO, ms);
    if (is("connect")) {
        conn = socket(AF_UNIX, SOCK_STREAM, 0);
        set_timeout(conn, SO_SNDTIMEO, ms);
    }
    if (is("msgsnd"))
        fill_queue();
    if (!strncmp(mode, "epoll", 5)) {
        ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 42};
        epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev);
    }
}

static void finish(void)
{
    int e = errno;
    if (ep >= 0)
        close(ep);
    if (conn >= 0)
        close(conn); /* its connection, if made, fills the backlog again */
    ep = conn = -1;
    errno = e;
}

/* Whether a time left after EINTR is right: at most the request (a sleep: plus the
 * thread's timer slack, as the kernel's rem is counted to the timer's latest expiry), at
 * least the request less the time to the signal (select: its microseconds), and some
 * unless the signal came after the request's end (the kernel counts it when the signal
 * ends the call, before the handler runs; a thread that waited that long for a CPU after
 * it gets 0 from select) */
static long last_left; /* the last one (ns), to describe a call */
static int left_ok(long left, long most, long least)
{
    last_left = left;
    return left >= 0 && (left > 0 || least <= 0) && left <= most && left >= least;
}

/* The time from a call's start t0 (CLOCK_MONOTONIC) to the program's signal: to its
 * handler's start where race() noted it, else the whole call (took) */
static long to_signal(long t0, long took)
{
    return racing && fired ? fired_at - t0 : took;
}

/* that slack, on a sleep's clock: a high-resolution timer's (not CPU time's) */
static long slack(clockid_t clock)
{
    int hr = clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME;
    return hr ? prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) : 0;
}

/* one call of MODE with a timeout of ms (-1: none); result: what it reported, the same
 * with and without perfweave (the time left after EINTR: whether it is right) */
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
    si.si_signo = -1; /* not written unless a signal is taken */
    const struct sleep_mode *sl = sleep_mode();
    struct timespec rem = {-1, -1}, abs;
    int rc = -2;
    *result = 0;
    long t0 = now_ns(CLOCK_MONOTONIC);
    if (!strcmp(mode, "poll")) {
        rc = poll(&p, 1, ms);
        *result = p.revents;
    } else if (!strcmp(mode, "ppoll")) {
        rc = ppoll(&p, 1, tp, NULL);
        *result = p.revents;
    } else if (!strcmp(mode, "select")) {
        rc = select(pipefd[0] + 1, &r, NULL, NULL, ms < 0 ? NULL : &tv);
        long left = tv.tv_sec * 1000000000L + tv.tv_usec * 1000L;
        long took = now_ns(CLOCK_MONOTONIC) - t0;
        *result =
            FD_ISSET(pipefd[0], &r) * 10 + (ms >= 0 && rc == 0 && left == 0) +
            2 * (ms >= 0 && rc < 0 &&
                 left_ok(left, ms * 1000000L, ms * 1000000L - to_signal(t0, took) - 1000));
    } else if (!strcmp(mode, "pselect")) {
        rc = pselect(pipefd[0] + 1, &r, NULL, NULL, tp, NULL);
        *result = FD_ISSET(pipefd[0], &r);
    } else if (!strncmp(mode, "epoll", 5)) {
        struct epoll_event out = {0, {0}};
        if (!strcmp(mode, "epoll_wait"))
            rc = epoll_wait(ep, &out, 1, ms);
        else if (!strcmp(mode, "epoll_pwait"))
            rc = epoll_pwait(ep, &out, 1, ms, &none);
        else
            rc = epoll_pwait2(ep, &out, 1, tp, &none);
        *result = (int)out.data.u32;
    } else if (!strcmp(mode, "pause")) {
        rc = pause();
    } else if (!strcmp(mode, "sigsuspend")) {
        rc = sigsuspend(&none);
    } else if (!strcmp(mode, "sigtimedwait")) {
        rc = sigtimedwait(&usr2, &si, tp);
        *result = si.si_signo;
    } else if (!strcmp(mode, "sigwaitinfo")) {
        rc = sigwaitinfo(&usr2, &si);
        *result = si.si_signo;
    } else if (is("nanosleep")) {
        rc = nanosleep(&ts, &rem);
        long took = now_ns(CLOCK_MONOTONIC) - t0;
        *result = rc < 0 && left_ok(ns_of(&rem), ns_of(&ts) + slack(CLOCK_MONOTONIC),
                                    ns_of(&ts) - to_signal(t0, took));
    } else if (sl) {
        /* the time the call took on the sleep's clock (CPU time: of all the threads), to
         * the signal on the clocks of wall time */
        long c0 = now_ns(sl->clock);
        if (sl->abs)
            abs = ts_of(c0 + ns_of(&ts)); /* an absolute sleep leaves rem as it is */
        int e = clock_nanosleep(sl->clock, sl->abs ? TIMER_ABSTIME : 0, sl->abs ? &abs : &ts, &rem);
        long took = now_ns(sl->clock) - c0;
        long until = slack(sl->clock) > 0 ? to_signal(t0, took) : took; /* not CPU, alarm */
        rc = e ? -1 : 0;
        *result = e == EINTR && (sl->abs ? rem.tv_sec == -1 && rem.tv_nsec == -1
                                         : left_ok(ns_of(&rem), ns_of(&ts) + slack(sl->clock),
                                                   ns_of(&ts) - until));
        errno = e;
    } else if (is("usleep")) {
        rc = usleep(ms * 1000);
    } else if (!strncmp(mode, "sem_", 4)) {
        clock_gettime(is("sem_clockwait") ? CLOCK_MONOTONIC : CLOCK_REALTIME, &abs);
        abs = ts_of(ns_of(&abs) + ns_of(&ts));
        rc = is("sem_wait")        ? sem_wait(&psem)
             : is("sem_timedwait") ? sem_timedwait(&psem, &abs)
                                   : sem_clockwait(&psem, CLOCK_MONOTONIC, &abs);
    } else if (is("pthread_cond_timedwait")) {
        clock_gettime(CLOCK_REALTIME, &abs);
        abs = ts_of(ns_of(&abs) + ns_of(&ts));
        pthread_mutex_lock(&mu);
        int e = 0;
        while (!cond_flag && e == 0)
            e = pthread_cond_timedwait(&cv, &mu, &abs);
        *result = cond_flag;
        cond_flag = 0;
        pthread_mutex_unlock(&mu);
        rc = e ? -1 : 0;
        errno = e;
    } else if (is("semop") || is("semtimedop")) {
        struct sembuf down = {0, -1, 0};
        rc = is("semop") ? semop(svsem, &down, 1) : semtimedop(svsem, &down, 1, tp);
    } else if (is("msgrcv")) {
        rc = (int)msgrcv(svq, &msg, sizeof msg.text, 0, 0);
    } else if (is("msgsnd")) {
        rc = msgsnd(svq, &msg, sizeof msg.text, 0);
    } else if (!strncmp(mode, "recv", 4)) {
        char buf[16];
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        struct mmsghdr mm = {.msg_hdr = mh};
        rc = is("recv")       ? (int)recv(sv[0], buf, sizeof buf, 0)
             : is("recvfrom") ? (int)recvfrom(sv[0], buf, sizeof buf, 0, NULL, NULL)
             : is("recvmsg")  ? (int)recvmsg(sv[0], &mh, 0)
                              : recvmmsg(sv[0], &mm, 1, 0, NULL);
    } else if (!strncmp(mode, "send", 4)) {
        struct iovec iov = {"y", 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        rc = is("send")     ? (int)send(sv[0], "y", 1, 0)
             : is("sendto") ? (int)sendto(sv[0], "y", 1, 0, NULL, 0)
                            : (int)sendmsg(sv[0], &mh, 0);
    } else if (is("accept")) {
        int c = accept(listener, NULL, NULL);
        int e = errno;
        if (c >= 0)
            close(c);
        rc = c >= 0 ? 1 : -1; /* the descriptor: accepted */
        errno = e;
    } else if (is("connect")) {
        rc = connect(conn, (struct sockaddr *)&addr, sizeof addr);
    } else if (is("io_getevents")) {
        struct iocb cb, *cbs[1] = {&cb};
        memset(&cb, 0, sizeof cb);
        cb.aio_lio_opcode = IOCB_CMD_POLL; /* the pipe readable (the "ready" case) */
        cb.aio_fildes = (uint32_t)pipefd[0];
        cb.aio_buf = POLLIN;
        cb.aio_data = 42;
        if (ready_case && syscall(SYS_io_submit, aio, 1, cbs) != 1)
            abort();
        struct io_event ev[1];
        memset(ev, 0, sizeof ev);
        struct timespec t = ts;
        rc = getevents()(aio, 1, 1, ev, ms < 0 ? NULL : &t);
        *result = (int)ev[0].data;
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

/* Whether the kernel refuses MODE here (an alarm clock without a real-time clock, or
 * without CAP_WAKE_ALARM): its errno, printed */
static int unsupported(void)
{
    const struct sleep_mode *sl = sleep_mode();
    struct timespec zero = {0, 0};
    int e = sl ? clock_nanosleep(sl->clock, sl->abs ? TIMER_ABSTIME : 0, &zero, NULL) : 0;
    if (e)
        printf("%s unsupported E%d\n", mode, e);
    return e;
}

/* the cases a mode has */
static int has_case(int c)
{
    int signal_only = is("pause") || is("sigsuspend") || is("sigwaitall") ||
                      is("clock_nanosleep_cputime"); /* its time does not pass */
    if (signal_only)
        return c == 2;
    if (c == 0) /* no timeout */
        return !is("sigwaitinfo") && !is("sem_wait") && !is("semop") && !is("msgrcv") &&
               !is("msgsnd");
    if (c == 1) /* no event to wait for */
        return strstr(mode, "sleep") == NULL;
    /* a handler does not end them: restarted (SA_RESTART), or never EINTR (POSIX) */
    return !is("sem_wait") && !is("pthread_cond_timedwait");
}

/* race N MODE...: for each MODE, N calls, each ended by the program's SIGALRM d after the
 * timer is set, d swept over 50 to 300 us (the sampler's timer is re-armed at random,
 * 0.5-1.5 ms, so its phase at the program's signal is uniform whatever d). Ground truth,
 * from the program itself: a handler that ran while the program was in the call must
 * have ended it with EINTR (a call without a timeout is ended otherwise by a second
 * signal 100 ms later; one with a timeout, by its 50 ms timeout), and the call's result
 * after EINTR is the same every time (the time left right: result, in call()):
 *   ended:  so it did (the timer's second signal may come too, while the thread, on a
 *           loaded machine, still runs the handler or waits for a CPU after it: the call
 *           was ended by the first if the thread did not sleep again after it);
 *   early:  the handler ran before the program made the call (it proves nothing);
 *   late:   the call went on to its timeout, but the handler ran after that and the thread
 *           waited for a CPU at least from the signal to the timeout: the kernel ends such
 *           a call by its timeout too (a loaded machine);
 *   before: the call went on, but the handler ran before the thread first slept in it
 *           (preempted, or delayed, on its way to the call): it goes on without perfweave;
 *   lost:   the call went on otherwise (the race);
 *   bad:    EINTR, with a result other than the first one's (outcome: that result).
 * Lines "LOST ..." and "BAD ..." on stderr describe each such call. */
static void race(int n, int nmodes, char **modes, int ms)
{
    racing = 1;
    for (int m = 0; m < nmodes; m++) {
        mode = modes[m];
        if (unsupported())
            continue;
        setup();
        int ended = 0, early = 0, late = 0, before = 0, lost = 0, bad = 0, outcome = 0;
        int have_outcome = 0;
        for (int i = 0; i < n; i++) {
            long d = 50 + (i * 37L) % 250; /* us */
            prepare(ms);
            long slept0 = nvcsw(), delay0 = run_delay();
            fired = in_call = 0;
            struct itimerval it = {{0, 2 * RACE_MS * 1000}, {0, d}};
            long t0 = now_ns(CLOCK_MONOTONIC);
            setitimer(ITIMER_REAL, &it, NULL);
            calling = 1;
            int result, rc = call(mode, ms, &result);
            int e = rc < 0 ? errno : 0;
            long nvcsw_ret = nvcsw();
            calling = 0;
            long took = now_ns(CLOCK_MONOTONIC) - t0;
            while (!fired) /* the call ended first (it should not) */
                ;
            struct itimerval off = {{0, 0}, {0, 0}};
            setitimer(ITIMER_REAL, &off, NULL);
            long delay = run_delay() - delay0;
            finish();
            if (!was_calling) {
                early++;
                continue;
            }
            /* ended by the first signal: by the only one in the call, or, when the
             * timer's second came while the thread was still in it (a handler, or the
             * wait for a CPU after it, that outlasted the timer's interval on a loaded
             * machine), without sleeping again after the first handler */
            if (rc < 0 && e == EINTR && (in_call == 1 || (in_call > 1 && nvcsw_ret == nvcsw_done))) {
                ended++;
                if (!have_outcome)
                    outcome = result, have_outcome = 1;
                if (result != outcome) {
                    bad++;
                    fprintf(stderr,
                            "BAD %s i=%d d=%ldus took=%ldus result=%d, not %d (left %ldns)\n", mode,
                            i, d, took / 1000, result, outcome, last_left);
                }
                continue;
            }
            long deadline = t0 + ms * 1000000L, due = t0 + d * 1000;
            if (in_call >= 1 && fired_at >= deadline && delay0 >= 0 && delay >= deadline - due)
                late++;
            else if (nvcsw_at == slept0)
                before++;
            else {
                lost++;
                fprintf(stderr,
                        "LOST %s i=%d d=%ldus fired=%ldus took=%ldus rc=%d %s handlers=%d "
                        "syscall=%d slept=%ld run-delay=%ldus\n",
                        mode, i, d, (fired_at - t0) / 1000, took / 1000, rc, ename(e),
                        (int)in_call, (int)in_syscall, nvcsw_at - slept0, delay / 1000);
            }
        }
        printf("%s %d %d %d %d %d %d %d %d\n", mode, n, ended, early, late, before, lost, bad,
               outcome);
        fflush(stdout);
        teardown();
    }
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "poll";
    masked_handler = argc > 2 && !strcmp(argv[2], "masked");
    if (pipe(pipefd) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* these calls return EINTR all the same */
    if (masked_handler)
        sigfillset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    int racer = is("race") || is("race-slow");
    if (racer || sigwaits()) { /* SIGUSR2 is waited for: blocked in every thread */
        sigset_t usr2;
        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    }
    if (racer) {
        if (argc < 4)
            return 2;
        if (is("race-slow"))
            handler_ns = SLOW_HANDLER_US * 1000L;
        race(atoi(argv[2]), argc - 3, argv + 3, is("race") ? RACE_MS : SLOW_RACE_MS);
        return 0;
    }
    if (unsupported())
        return 0;
    setup();
    const char *cases[] = {"timeout", "ready", "own"};
    for (int c = 0; c < 3; c++) {
        if (!has_case(c) || (masked_handler && c != 2))
            continue;
        pthread_t th;
        ready_case = c == 1;
        int ms = c == 0 ? MS : 5000;
        prepare(ms);
        if (c == 1)
            pthread_create(&th, NULL, writer, NULL);
        if (c == 2 && !is("sigwaitall"))
            alarm_in(MS);
        int result, rc;
        double t = now();
        rc = call(mode, ms, &result);
        int e = rc < 0 ? errno : 0;
        double dt = now() - t;
        finish();
        if (c == 1) {
            pthread_join(th, NULL);
            char x;
            if (piped() && read(pipefd[0], &x, 1) != 1)
                return 3;
        }
        printf("%s %s %d %s %d %.4f\n", mode, cases[c], rc, ename(e), result, dt);
        fflush(stdout);
    }
    teardown();
    int signal_only = is("pause") || is("sigsuspend");
    return alarms == 0 && signal_only ? 4 : 0;
}

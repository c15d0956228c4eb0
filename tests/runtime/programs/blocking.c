/* Blocking calls that the kernel never restarts after a signal handler, under sampling.
 * blocking MODE: MODE is poll, ppoll, select, pselect, epoll_wait, epoll_pwait,
 * epoll_pwait2, pause, sigsuspend, sigtimedwait, sigwaitinfo or sigwaitall. Each case
 * blocks for 300 ms by construction and prints "MODE CASE rc errno-name result elapsed":
 *   timeout: nothing happens, the call's own timeout (300 ms) ends it;
 *   ready:   a thread makes the call's event happen at 300 ms (timeout 5 s);
 *   own:     the program's own SIGALRM (SA_RESTART) at 300 ms ends it with EINTR.
 * blocking MODE masked: case "own" only, its handler run with every signal blocked (a
 * common sa_mask) for 3 ms, so that a sampler's signal waits for it to return.
 * Everything but elapsed is the same with and without perfweave. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
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
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MS 300

static int pipefd[2];
static volatile sig_atomic_t alarms;
static const char *mode;
static int ready_case; /* the writer thread makes the event happen */

/* what the calls wait on */
static sem_t psem;                        /* POSIX semaphore, 0 */
static int svsem = -1, svq = -1;          /* System V semaphore (0) and message queue */
static int sv[2] = {-1, -1};              /* socket pair: [0] waits, [1] the other end */
static int listener = -1;                 /* a listening socket (accept, connect) */
static struct sockaddr_un addr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cond_flag;
static aio_context_t aio;
static struct msgbuf1k {
    long type;
    char text[1024];
} msg = {1, {0}};

static int is(const char *m) { return !strcmp(mode, m); }
static int sigwaits(void) { return !strncmp(mode, "sig", 3) && !is("sigsuspend"); }
/* modes waiting for the pipe to be readable */
static int piped(void)
{
    return strstr(mode, "poll") || strstr(mode, "select") || is("io_getevents");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int masked_handler; /* MODE masked: the handler blocks every signal for 3 ms */

static void on_alarm(int s)
{
    (void)s;
    alarms++;
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
    if (is("io_getevents") && syscall(SYS_io_setup, 8, &aio) != 0)
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
 * else the system call */
typedef int getevents_fn(aio_context_t, long, long, struct io_event *, struct timespec *);
static int raw_getevents(aio_context_t ctx, long min, long n, struct io_event *ev,
                         struct timespec *ts)
{
    return (int)syscall(SYS_io_getevents, ctx, min, n, ev, ts);
}
static getevents_fn *getevents(void)
{
    getevents_fn *f = (getevents_fn *)dlsym(RTLD_DEFAULT, "io_getevents");
    void *lib = f ? NULL : dlopen("libaio.so.1", RTLD_NOW);
    if (lib)
        f = (getevents_fn *)dlsym(lib, "io_getevents");
    return f ? f : raw_getevents;
}

static const char *ename(int e)
{
    static char other[16];
    snprintf(other, sizeof other, "E%d", e);
    return e == 0            ? "0"
           : e == EINTR     ? "EINTR"
           : e == EAGAIN    ? "EAGAIN"
           : e == ETIMEDOUT ? "ETIMEDOUT"
                            : other;
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
    } else if (is("nanosleep")) {
        rc = nanosleep(&ts, NULL);
    } else if (is("clock_nanosleep")) {
        int e = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
        rc = e ? -1 : 0;
        errno = e;
    } else if (is("usleep")) {
        rc = usleep(ms * 1000);
    } else if (!strncmp(mode, "sem_", 4)) {
        struct timespec abs;
        clock_gettime(is("sem_clockwait") ? CLOCK_MONOTONIC : CLOCK_REALTIME, &abs);
        abs.tv_sec += ms / 1000;
        abs.tv_nsec += (ms % 1000) * 1000000L;
        if (abs.tv_nsec >= 1000000000L) {
            abs.tv_sec++;
            abs.tv_nsec -= 1000000000L;
        }
        rc = is("sem_wait")        ? sem_wait(&psem)
             : is("sem_timedwait") ? sem_timedwait(&psem, &abs)
                                   : sem_clockwait(&psem, CLOCK_MONOTONIC, &abs);
    } else if (is("pthread_cond_timedwait")) {
        struct timespec abs;
        clock_gettime(CLOCK_REALTIME, &abs);
        abs.tv_sec += ms / 1000 + (abs.tv_nsec + (ms % 1000) * 1000000L) / 1000000000L;
        abs.tv_nsec = (abs.tv_nsec + (ms % 1000) * 1000000L) % 1000000000L;
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
        fill_queue();
        rc = msgsnd(svq, &msg, sizeof msg.text, 0);
    } else if (!strncmp(mode, "recv", 4)) {
        set_timeout(sv[0], SO_RCVTIMEO, ms);
        char buf[16];
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        struct mmsghdr mm = {.msg_hdr = mh};
        rc = is("recv")       ? (int)recv(sv[0], buf, sizeof buf, 0)
             : is("recvfrom") ? (int)recvfrom(sv[0], buf, sizeof buf, 0, NULL, NULL)
             : is("recvmsg")  ? (int)recvmsg(sv[0], &mh, 0)
                              : recvmmsg(sv[0], &mm, 1, 0, NULL);
    } else if (!strncmp(mode, "send", 4)) {
        set_timeout(sv[0], SO_SNDTIMEO, ms);
        fill_socket();
        struct iovec iov = {"y", 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        rc = is("send")     ? (int)send(sv[0], "y", 1, 0)
             : is("sendto") ? (int)sendto(sv[0], "y", 1, 0, NULL, 0)
                            : (int)sendmsg(sv[0], &mh, 0);
    } else if (is("accept")) {
        set_timeout(listener, SO_RCVTIMEO, ms);
        int c = accept(listener, NULL, NULL);
        int e = errno;
        if (c >= 0)
            close(c);
        rc = c >= 0 ? 1 : -1; /* the descriptor: accepted */
        errno = e;
    } else if (is("connect")) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        set_timeout(c, SO_SNDTIMEO, ms);
        rc = connect(c, (struct sockaddr *)&addr, sizeof addr);
        int e = errno;
        close(c); /* its connection, if made, fills the backlog again */
        errno = e;
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

/* the cases a mode has */
static int has_case(int c)
{
    int signal_only = is("pause") || is("sigsuspend") || is("sigwaitall");
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

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "poll";
    masked_handler = argc > 2 && !strcmp(argv[2], "masked");
    if (pipe(pipefd) != 0)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART; /* these calls return EINTR all the same */
    if (masked_handler)
        sigfillset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    if (sigwaits()) { /* SIGUSR2 is waited for: blocked in every thread */
        sigset_t usr2;
        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    }
    setup();
    const char *cases[] = {"timeout", "ready", "own"};
    for (int c = 0; c < 3; c++) {
        if (!has_case(c) || (masked_handler && c != 2))
            continue;
        pthread_t th;
        ready_case = c == 1;
        if (c == 1)
            pthread_create(&th, NULL, writer, NULL);
        if (c == 2 && !is("sigwaitall"))
            alarm_in(MS);
        int result, rc;
        double t = now();
        rc = call(mode, c == 0 ? MS : 5000, &result);
        int e = rc < 0 ? errno : 0;
        double dt = now() - t;
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

/*
 * Ending together on a signal a launcher sends to every process of a job: Ctrl-C
 * (SIGINT), a batch system's SIGTERM, SIGHUP, SIGQUIT.
 *
 * Without perfweave each rank dies of the signal at the moment it is sent (its default
 * action is decided then, whether the rank runs or waits for a core). With perfweave each
 * rank first saves its data (core.c on_signal), for a time of its own, and dies later:
 * MPICH's proxy, as soon as it sees the first rank die, kills the others with SIGKILL
 * while they are still saving, and reports the OR of the wait statuses it collected
 * before that cleanup (SIGINT 2 | SIGKILL 9 = 11, "Segmentation fault"; 9; or 0 when
 * every rank ended before it collected any), never what the same Ctrl-C gives without
 * perfweave (2).
 *
 * So a measured process whose runtime catches such a signal (core.c installed its
 * handler: a program with its own handler is left alone) has a file ending/HOST.PID
 * (8 bytes: its phase and signal), made at its start and removed at its end (by the last
 * to end, the folder too; perfweave run removes what is left). A child of fork has none
 * (nothing watches it as a launcher watches a rank): it ends as it would have. On such a
 * signal the process says "saving", saves, puts the signal's default action back,
 * unblocks it and says "saved". It then waits (PW_ENDING_WAIT_NS at most) until no other
 * live process of its node is saving, or has such a signal pending that it catches (it
 * has not begun to save yet), or may still get one (PW_ENDING_GRACE_NS). If others have
 * saved and wait too, the first to find so writes a moment a little ahead in
 * ending/HOST.at, and each arms a timer that sends it its signal then: the kernel ends
 * them all at that moment, each of its signal, as the launcher's own signal would have,
 * before the launcher can see any of them die. A process with nobody to end with ends at
 * once: at once when it is the node's only one, after PW_ENDING_GRACE_NS when others run
 * on.
 *
 * Other signals (faults, SIGABRT) are one process's own: no waiting. Nothing here can
 * hold a process longer than PW_ENDING_WAIT_NS + PW_ENDING_DELAY_NS past its save, nor
 * kill one that would have lived: a file that cannot be made (full disk, a folder that
 * cannot be written) leaves the process out, ending as it did before, and a moment read
 * that is not a near one is not taken. What runs after on_signal has begun is
 * async-signal-safe: open, pread, pwrite, close, link, unlink, rmdir, the clock, and
 * getdents64, sigtimedwait, sigprocmask, nanosleep and the timer calls as system calls
 * (the samples module's wrappers of sigtimedwait and nanosleep would block the very
 * signal that must end this process at once).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"
#include "wrap.h"

enum { PHASE_RUNNING, PHASE_SAVING, PHASE_SAVED };
typedef struct ending_rec {
    int32_t phase, sig;
} ending_rec;

#define PW_ENDING_WAIT_NS 5000000000LL /* for the others' saves, at most */
#define PW_ENDING_QUIET_NS 2000000LL   /* nobody saving twice, this far apart */
#define PW_ENDING_DELAY_NS 100000000LL /* the moment agreed: for all to have read it */
/* A launcher signals the processes one after another (MPICH's proxy: a kill() each), and
 * under load the last may get it milliseconds after the first: until this long after
 * our own signal, one that runs on as before may be about to get it too (and, signalled
 * after we died, would be killed by the launcher while it saves). A process signalled
 * alone waits this long for nothing. */
#define PW_ENDING_GRACE_NS 200000000LL

/* what each_peer found among the node's other processes */
enum { PEER_SEEN = 1, PEER_SAVED = 2, PEER_AWAITED = 4 };

static int joined;
static int64_t signalled; /* when this process took a job-wide signal (CLOCK_MONOTONIC) */

int pw_ending_job_wide(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

/* EXP/ending/HOST.PID, or EXP/ending with pid 0 */
static int ending_path(char *out, size_t cap, pid_t pid)
{
    char num[24];
    if (!pid)
        return pw_experiment_path(out, cap, "ending");
    pw_fmt_int(num, pid);
    return pw_experiment_path(out, cap, "ending/", pw_hostname, ".", num);
}

static void put_phase(int phase, int sig)
{
    char path[4400];
    ending_rec r = {phase, sig};
    if (!joined || ending_path(path, sizeof path, getpid()) != 0)
        return;
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    /* 8 bytes over the 8 the file holds since its start: no block to allocate */
    ssize_t w = pwrite(fd, &r, sizeof r, 0);
    (void)w;
    close(fd);
}

/* Not a file of the format (no mark when it cannot be made: the process then ends
 * without waiting for the others, as it did before) */
void pw_ending_join(void)
{
    char dir[4400], path[4400];
    ending_rec r = {PHASE_RUNNING, 0};
    joined = 0;
    if (ending_path(dir, sizeof dir, 0) != 0 || ending_path(path, sizeof path, getpid()) != 0)
        return;
    int saved_errno = errno; /* in a forked child too, before fork returns */
    pw_wrap_depth++;
    int fd = -1;
    /* the folder is made by the first, removed by the last to leave (maybe meanwhile) */
    for (int tries = 0; tries < 3 && fd < 0; tries++) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 && (errno != ENOENT || (mkdir(dir, 0777) != 0 && errno != EEXIST)))
            break;
    }
    if (fd >= 0) {
        joined = pw_write_all(fd, &r, sizeof r) == 0;
        if (close(fd) != 0 || !joined) {
            joined = 0;
            unlink(path);
        }
    }
    pw_wrap_depth--;
    errno = saved_errno;
}

void pw_ending_leave(void)
{
    char path[4400];
    if (joined && ending_path(path, sizeof path, getpid()) == 0) {
        int saved_errno = errno;
        pw_wrap_depth++; /* not the program's I/O */
        unlink(path);
        if (ending_path(path, sizeof path, 0) == 0)
            rmdir(path); /* the last one's: a run that ends well leaves no folder */
        pw_wrap_depth--;
        errno = saved_errno;
    }
    joined = 0;
}

/* In a child of fork: the parent's file is not its own */
void pw_ending_forget(void) { joined = 0; }

void pw_ending_saving(int sig)
{
    if (pw_ending_job_wide(sig) && joined) {
        int saved_errno = errno;
        signalled = pw_now();
        pw_wrap_depth++;
        put_phase(PHASE_SAVING, sig);
        pw_wrap_depth--;
        errno = saved_errno;
    }
}

static void nap(int64_t ns)
{
    struct timespec t = {0, ns};
    syscall(SYS_nanosleep, &t, NULL);
}

/* The first n - 1 bytes of a file (0-terminated); its length, -1 when it cannot be read */
static ssize_t slurp(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    buf[got > 0 ? got : 0] = 0;
    return got;
}

/* The hexadecimal mask after "key" in /proc/PID/status's text */
static uint64_t status_mask(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    uint64_t m = 0;
    if (!p)
        return 0;
    for (p += strlen(key); *p == '\t' || *p == ' '; p++)
        ;
    for (; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0)
            break;
        m = m << 4 | (uint64_t)d;
    }
    return m;
}

/* Whether process pid still runs (not gone, not a zombie); *pending: it has a job-wide
 * signal pending that it catches (its handler has not run yet). */
static int alive(pid_t pid, int *pending)
{
    char path[64], num[24], text[4096];
    pw_fmt_int(num, pid);
    strcpy(path, "/proc/");
    strcat(path, num);
    strcat(path, "/status");
    if (slurp(path, text, sizeof text) <= 0)
        return 0;
    const char *state = strstr(text, "State:");
    if (state) {
        for (state += 6; *state == '\t' || *state == ' '; state++)
            ;
        if (*state == 'Z' || *state == 'X') /* a zombie, or dead */
            return 0;
    }
    uint64_t wide =
        1ULL << (SIGINT - 1) | 1ULL << (SIGTERM - 1) | 1ULL << (SIGHUP - 1) | 1ULL << (SIGQUIT - 1);
    uint64_t pend = status_mask(text, "ShdPnd:") | status_mask(text, "SigPnd:");
    *pending = (pend & status_mask(text, "SigCgt:") & wide) != 0;
    return 1;
}

/* f(pid, its record, arg) for each other process of this node with a file in ending/;
 * the OR of what f returned (stop_at: once it has these bits). */
static int each_peer(int (*f)(pid_t, const ending_rec *, void *), void *arg, int stop_at)
{
    char dir[4400], path[4400];
    if (ending_path(dir, sizeof dir, 0) != 0)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    size_t hlen = strlen(pw_hostname);
    pid_t me = getpid();
    int any = 0;
    char buf[8192];
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            const struct dirent64 *e = (const struct dirent64 *)(buf + off);
            off += e->d_reclen;
            /* HOST.PID: this host's (a host name may have dots), a number after its dot */
            if (strncmp(e->d_name, pw_hostname, hlen) != 0 || e->d_name[hlen] != '.')
                continue;
            long pid = 0;
            const char *c = e->d_name + hlen + 1;
            for (; *c >= '0' && *c <= '9' && pid < 1L << 40; c++)
                pid = pid * 10 + (*c - '0');
            if (*c || pid <= 0 || pid == me)
                continue;
            ending_rec r = {PHASE_RUNNING, 0};
            if (ending_path(path, sizeof path, (pid_t)pid) == 0) {
                int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd >= 0) {
                    if (pread(fd, &r, sizeof r, 0) != (ssize_t)sizeof r)
                        r.phase = PHASE_RUNNING;
                    close(fd);
                }
            }
            any |= f((pid_t)pid, &r, arg);
            if ((any & stop_at) == stop_at)
                break;
        }
        if ((any & stop_at) == stop_at)
            break;
    }
    close(dfd);
    return any;
}

/* A live peer (PEER_SEEN): to be waited for (PEER_AWAITED: it saves, or has our kind of
 * signal pending, or may yet get it), or saved and waiting to end (PEER_SAVED) */
static int peer_state(pid_t pid, const ending_rec *r, void *grace_end)
{
    int pending = 0;
    if (!alive(pid, &pending))
        return 0;
    if (r->phase == PHASE_SAVED)
        return PEER_SEEN | PEER_SAVED;
    if (r->phase == PHASE_SAVING ||
        (r->phase == PHASE_RUNNING && (pending || pw_now() < *(int64_t *)grace_end)))
        return PEER_SEEN | PEER_AWAITED;
    return PEER_SEEN;
}

/* EXP/ending/HOST.at: the moment (CLOCK_MONOTONIC ns, 8 bytes) the processes of the node
 * end at; 0 when none is agreed for this signal (none, or an earlier one's) */
static int64_t agreed(char *path, size_t cap)
{
    int64_t t = 0;
    if (pw_experiment_path(path, cap, "ending/", pw_hostname, ".at") != 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (pread(fd, &t, sizeof t, 0) != (ssize_t)sizeof t)
            t = 0;
        close(fd);
    }
    if (t && t <= signalled) { /* an earlier signal's, which every one of us took later */
        unlink(path);
        t = 0;
    }
    /* one agreed is at most PW_ENDING_DELAY_NS ahead: a later one is not ours (nor kept
     * for the others), whatever the file holds */
    return t <= pw_now() + PW_ENDING_DELAY_NS ? t : 0;
}

/* t as the moment, unless another's is there first (written whole, then linked) */
static int64_t agree(int64_t t)
{
    char path[4400], tmp[4400], num[24];
    int64_t theirs = agreed(path, sizeof path);
    if (theirs)
        return theirs;
    pw_fmt_int(num, getpid());
    if (pw_experiment_path(tmp, sizeof tmp, "ending/", pw_hostname, ".at.", num) != 0)
        return t;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && pw_write_all(fd, &t, sizeof t) == 0;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (ok && link(tmp, path) != 0)
        t = agreed(path, sizeof path);
    unlink(tmp);
    return t ? t : pw_now();
}

void pw_ending_together(int sig)
{
    if (!pw_ending_job_wide(sig) || !joined)
        return;
    pw_wrap_depth++;
    /* the default action is back (the caller): from now on a kill() of sig ends us. The
     * same signal sent again meanwhile (to each process of a group) is taken first: it
     * would end us before the others have saved */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    struct timespec zero = {0, 0};
    for (int i = 0; i < 64 && syscall(SYS_rt_sigtimedwait, &s, NULL, &zero, _NSIG / 8) == sig; i++)
        ;
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &s, NULL, _NSIG / 8);
    put_phase(PHASE_SAVED, sig);
    /* While another saves, or may: asleep. Then, once nobody has for PW_ENDING_QUIET_NS
     * (one may be between taking the signal and saying so), the first agrees a moment
     * PW_ENDING_DELAY_NS ahead, and each arms a timer for it: the kernel sends each its
     * signal then, whatever the scheduler does with us. (One sending the others their
     * signals, then raising its own, was not enough: descheduled in between, under load,
     * it was the one the launcher killed, once it saw another die.) With no other process
     * on the node, or none that waits to end, there is nobody to agree with: now. */
    char path[4400];
    int64_t deadline = pw_now() + PW_ENDING_WAIT_NS, quiet = 0, at = 0;
    int64_t grace_end = signalled + PW_ENDING_GRACE_NS;
    while (pw_now() < deadline && !(at = agreed(path, sizeof path))) {
        int peers = each_peer(peer_state, &grace_end, PEER_SEEN | PEER_SAVED | PEER_AWAITED);
        if (!(peers & PEER_SEEN))
            break;
        if (peers & PEER_AWAITED)
            quiet = 0;
        else if (!quiet)
            quiet = pw_now();
        else if (pw_now() - quiet >= PW_ENDING_QUIET_NS) {
            if (peers & PEER_SAVED)
                at = agree(pw_now() + PW_ENDING_DELAY_NS);
            break;
        }
        nap(quiet ? PW_ENDING_QUIET_NS / 4 : 1000000);
    }
    pw_ending_leave();
    if (!at)
        at = pw_now();
    if (at > pw_now()) {
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_SIGNAL;
        ev.sigev_signo = sig;
        int timer = -1;
        struct itimerspec when = {{0, 0}, {at / 1000000000LL, at % 1000000000LL}};
        if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer) == 0 &&
            syscall(SYS_timer_settime, timer, TIMER_ABSTIME, &when, NULL) == 0)
            while (pw_now() < at + 1000000000LL) /* then the caller's raise */
                nap(10000000);
    }
    pw_wrap_depth--;
}

/* perfweave-wait: what `perfweave run` becomes once the launched command has started.
 *
 * The command line interface (python/perfweave/cli/run.py) sets the run up, starts the
 * command and then execs this program in its own process, so no Python interpreter waits
 * through the run or runs after it. This program waits for the command, forwards the
 * termination requests perfweave receives (SIGTERM, SIGHUP; the terminal's SIGINT reaches
 * the command through the process group), watches perfweave's start-up in the ranks
 * (docs/launching.md, "Ranks without perfweave's runtime"), and once the command has
 * ended:
 *
 * - every rank recorded data (the profile is there) and nothing is marked unwritten:
 *   it ends experiment.json, prints the last line and ends as the command did;
 * - otherwise the run needs a verdict, which Python gives: it execs
 *   `PYTHON -c ... PKGDIR EXP META_FD STATUS END` (perfweave.cli.run.finish).
 *
 * perfweave-wait PID EXP META_FD STARTED STARTUP_WAIT PYTHON PKGDIR [--quiet] [-- PERFWEAVE_ARGV...]
 *   PID           the launched command, a child of this process
 *   EXP           the experiment directory (absolute)
 *   META_FD       a descriptor holding experiment.json as written at the start, its
 *                 last member "state": "running"
 *   STARTED       the run's start, seconds since the epoch
 *   STARTUP_WAIT  seconds a rank may wait in perfweave's start-up before it is said;
 *                 0: no watch (no activity pages, --node-interval 0)
 *   PYTHON, PKGDIR  the interpreter and the directory holding the perfweave package
 *   --quiet       perfweave --quiet run: no last line when all went well (errors and
 *                 what the verdict finds wrong are said all the same)
 *   PERFWEAVE_ARGV  perfweave's own command line, for ps to show (not read)
 *
 * SIGTERM, SIGHUP and SIGINT come blocked from the caller, so none is lost between its
 * start of the command and the handlers here. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfweave/format.h"

/* readers/experiment.py: a process's activity page starts with this magic, its pid, and
 * its rank, -3 while it is in perfweave's start-up */
#define ACT_MAGIC 0x7077616374763100LL
#define ACT_STARTING (-3)
/* StartupWatch's schedule: the start-up is at the start */
#define WATCH_STOP_AFTER 900.0
#define WATCH_MAX_STEP 30.0

static pid_t child;

static void forward(int sig) { kill(child, sig); }

static void nothing(int sig) { (void)sig; }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void say(const char *line)
{
    size_t n = strlen(line);
    while (n) { /* stderr on a full disk or closed: the run goes on */
        ssize_t k = write(2, line, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        line += k;
        n -= (size_t)k;
    }
}

/* ---- the start-up watch (perfweave/launch's StartupWatch did this in Python) ---- */

struct seen {
    char name[256];
    double since;
};

struct watch {
    const char *exp;
    double wait, step, begun, next;
    struct seen *seen;
    size_t nseen;
    int told;
};

static int starting(const char *dir, const char *name)
{
    char path[4352];
    unsigned char head[24];
    int64_t magic;
    int32_t rank;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, head, sizeof head, 0);
    close(fd);
    if (n != (ssize_t)sizeof head)
        return 0;
    memcpy(&magic, head, sizeof magic);
    memcpy(&rank, head + 16, sizeof rank);
    return magic == ACT_MAGIC && rank == ACT_STARTING;
}

static void watch_poll(struct watch *w)
{
    double step = w->step * 2, most = w->wait / 4 > 0.25 ? w->wait / 4 : 0.25;
    w->step = step < WATCH_MAX_STEP ? (step < most ? step : most) : WATCH_MAX_STEP;
    double t = now();
    w->next = t + w->step;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/timeline", w->exp);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct seen *fresh = NULL;
    size_t n = 0, cap = 0;
    int waiting = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= sizeof fresh->name || strcmp(e->d_name + len - 4, ".act") != 0 ||
            !starting(dir, e->d_name))
            continue;
        if (n == cap) {
            struct seen *more = realloc(fresh, (cap = cap ? 2 * cap : 16) * sizeof *fresh);
            if (!more)
                break;
            fresh = more;
        }
        strcpy(fresh[n].name, e->d_name);
        fresh[n].since = t;
        for (size_t i = 0; i < w->nseen; i++)
            if (strcmp(w->seen[i].name, e->d_name) == 0)
                fresh[n].since = w->seen[i].since;
        waiting += t - fresh[n].since >= w->wait;
        n++;
    }
    closedir(d);
    free(w->seen);
    w->seen = fresh;
    w->nseen = n;
    if (waiting) {
        char line[600];
        int one = waiting == 1;
        snprintf(line, sizeof line,
                 "perfweave: %d rank%s %s waited %g s in perfweave's start-up for ranks "
                 "without its runtime (statically linked, or LD_PRELOAD reset by a wrapper); "
                 "the run cannot go on: stop it, and launch every rank under perfweave "
                 "(docs/launching.md)\n",
                 waiting, one ? "" : "s", one ? "has" : "have", w->wait);
        say(line);
        w->told = 1;
    }
}

/* ---- waiting ---- */

/* The command's wait status. SIGCHLD is blocked and taken with sigtimedwait, so the
 * handlers of the forwarded signals run in between (EINTR) and the watch has its
 * timeouts. */
static int wait_command(struct watch *w)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        int st;
        pid_t r = waitpid(child, &st, WNOHANG);
        if (r == child)
            return st;
        if (r < 0 && errno == ECHILD)
            return 0; /* reaped by the system (SIGCHLD ignored by whoever started us) */
        struct timespec ts, *timeout = NULL;
        if (w && !w->told && now() - w->begun <= WATCH_STOP_AFTER) {
            double left = w->next - now();
            if (left <= 0) {
                watch_poll(w);
                continue;
            }
            ts.tv_sec = (time_t)left;
            ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
            timeout = &ts;
        }
        sigtimedwait(&chld, NULL, timeout);
    }
}

/* ---- the end of a run that needs no verdict ---- */

static char *read_all(int fd, size_t *len)
{
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap + 1);
    for (ssize_t k; buf; n += (size_t)k) {
        if (n == cap) {
            char *more = realloc(buf, (cap *= 2) + 1);
            if (!more)
                break;
            buf = more;
        }
        k = pread(fd, buf + n, cap - n, (off_t)n);
        if (k < 0 && errno == EINTR) {
            k = 0;
            continue;
        }
        if (k <= 0) {
            buf[n] = 0;
            *len = n;
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* Whether every rank recorded data (profile.pwprof, written once every rank reached
 * MPI_Finalize) and no file is marked unwritten: readers/experiment.py recorded() and
 * writing.py read_unwritten() on such a run find nothing to say. */
static int needs_no_verdict(const char *exp)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/profile.pwprof", exp);
    if (stat(path, &sb) != 0)
        return 0;
    DIR *d = opendir(exp);
    if (!d)
        return 0;
    int marked = 0;
    for (struct dirent *e; !marked && (e = readdir(d));)
        marked = strncmp(e->d_name, "unwritten.", 10) == 0;
    closedir(d);
    return !marked;
}

/* The events of a rank's trace file: the heads among the committed records of version 5's
 * blocks (docs/format.md, "Traces"); -1 for another layout, which only the reader knows. */
static long long trace_events(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long long n = 0;
    struct pw_cevent_rec r[4096];
    off_t pos = 0; /* in records */
    for (;;) {
        ssize_t k = pread(fd, r, 2 * sizeof r[0], pos * (off_t)sizeof r[0]);
        if (k < (ssize_t)(2 * sizeof r[0]) || r[0].kind != PW_EV_BLOCK ||
            r[1].kind != PW_CK_THREAD) {
            if (pos == 0 && k > 0)
                n = -1; /* not blocks */
            break;
        }
        off_t next = pos + 1 + (off_t)r[0].b;
        for (off_t at = pos + 2, end = pos + 1 + (off_t)r[0].a; at < end;) {
            size_t want = (size_t)(end - at) < 4096 ? (size_t)(end - at) : 4096;
            k = pread(fd, r, want * sizeof r[0], at * (off_t)sizeof r[0]);
            if (k <= 0)
                break;
            for (ssize_t i = 0; i < k / (ssize_t)sizeof r[0]; i++)
                n += r[i].kind < PW_CK_EXT; /* EXT, BASE, SITE, THREAD: no event */
            at += k / (ssize_t)sizeof r[0];
        }
        pos = next;
    }
    close(fd);
    return n;
}

/* What a traced run's last line adds: the ranks and events traced, and what to run next
 * (empty for a run without traces). */
static void traced(const char *exp, char *out, size_t size)
{
    char dir[4200], path[4500];
    snprintf(dir, sizeof dir, "%s/traces", exp);
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    long long ranks = 0, events = 0;
    int known = 1;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "rank-", 5) != 0 || len < 7 ||
            strcmp(e->d_name + len - 7, ".events") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        long long n = trace_events(path);
        ranks++;
        if (n < 0)
            known = 0;
        else
            events += n;
    }
    closedir(d);
    if (!ranks)
        return;
    char count[64] = "";
    if (known && events >= 1000000)
        snprintf(count, sizeof count, ", %.1f M events", events / 1e6);
    else if (known)
        snprintf(count, sizeof count, ", %lld event%s", events, events == 1 ? "" : "s");
    snprintf(out, size, "; traced %lld rank%s%s \xe2\x86\x92 run `perfweave analyze %s`", ranks,
             ranks == 1 ? "" : "s", count, exp);
}

/* EXP/ending, the runtime's folder for ending together on a signal (runtime/core/ending.c),
 * of no use once the command has ended (launch/run.py remove_ending) */
static void remove_ending(const char *exp)
{
    char dir[4200], path[4500];
    snprintf(dir, sizeof dir, "%s/ending", exp);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

/* datetime.fromtimestamp(t).astimezone().isoformat() */
static void iso_time(char *out, size_t size, double t)
{
    time_t s = (time_t)t;
    long us = (long)((t - (double)s) * 1e6 + 0.5);
    if (us >= 1000000) {
        s++;
        us -= 1000000;
    }
    struct tm tm;
    localtime_r(&s, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    if (us)
        n += (size_t)snprintf(out + n, size - n, ".%06ld", us);
    long off = tm.tm_gmtoff, a = off < 0 ? -off : off;
    n += (size_t)snprintf(out + n, size - n, "%c%02ld:%02ld", off < 0 ? '-' : '+', a / 3600,
                          a / 60 % 60);
    if (a % 60)
        snprintf(out + n, size - n, ":%02ld", a % 60);
}

/* experiment.json of a finished run: the start's text with its last member, "state":
 * "running", replaced by the end's members, written as writing.py write_atomic does.
 * Returns 0 when written. */
static int write_end(const char *exp, const char *meta, size_t len, double started, double ended,
                     int status)
{
    static const char running[] = "\"state\": \"running\"\n}";
    size_t tail = sizeof running - 1;
    while (len && (meta[len - 1] == '\n' || meta[len - 1] == ' '))
        len--;
    if (len < tail || memcmp(meta + len - tail, running, tail) != 0)
        return -1;
    char when[64], end[512];
    iso_time(when, sizeof when, ended);
    int n = snprintf(end, sizeof end,
                     "\"state\": \"finished\",\n \"end_epoch\": %.6f,\n \"wall_seconds\": %.6f,\n"
                     " \"end_time\": \"%s\",\n \"exit_status\": {\n  \"%s\": %d\n }\n}\n",
                     ended, ended - started, when, WIFSIGNALED(status) ? "signal" : "code",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    char path[4200], tmp[4240];
    snprintf(path, sizeof path, "%s/experiment.json", exp);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    struct {
        const char *p;
        size_t n;
    } part[2] = {{meta, len - tail}, {end, (size_t)n}};
    int bad = n <= 0 || (size_t)n >= sizeof end;
    for (int i = 0; i < 2 && !bad; i++)
        for (size_t done = 0; done < part[i].n && !bad;) {
            ssize_t k = write(fd, part[i].p + done, part[i].n - done);
            if (k < 0 && errno == EINTR)
                continue;
            bad = k <= 0;
            done += k > 0 ? (size_t)k : 0;
        }
    bad |= close(fd) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* End as the command ended: with its code, or of the same signal */
static void end_as(int status)
{
    if (!WIFSIGNALED(status))
        exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    signal(sig, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    exit(128 + sig);
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        say("perfweave-wait: started by perfweave run only (docs/launching.md)\n");
        return 127;
    }
    /* still `perfweave` in ps, top and pgrep, as the process was before the exec */
    prctl(PR_SET_NAME, "perfweave", 0, 0, 0);
    child = (pid_t)atol(argv[1]);
    const char *exp = argv[2];
    int meta_fd = atoi(argv[3]);
    double started = atof(argv[4]), wait = atof(argv[5]);
    int quiet = argc > 8 && strcmp(argv[8], "--quiet") == 0;

    /* what the caller left of its own: SIGCHLD taken here, the rest as a shell leaves it */
    signal(SIGCHLD, SIG_DFL);
    sigset_t chld, ours;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = nothing;
    sigaction(SIGINT, &sa, NULL);
    sigemptyset(&ours);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGHUP);
    sigaddset(&ours, SIGINT);
    sigprocmask(SIG_UNBLOCK, &ours, NULL);

    struct watch w = {.exp = exp, .wait = wait < 0.1 ? 0.1 : wait, .begun = now()};
    w.step = w.wait / 4 < 1.0 ? w.wait / 4 : 1.0;
    w.next = w.begun + w.step;
    int status = wait_command(wait > 0 ? &w : NULL);
    double ended;
    {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        ended = (double)t.tv_sec + t.tv_nsec / 1e9;
    }
    free(w.seen);
    remove_ending(exp);
    /* a request now is for perfweave itself, as after Python's wait */
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGINT, SIG_DFL);

    size_t len = 0;
    char *meta = read_all(meta_fd, &len);
    if (meta && needs_no_verdict(exp) && write_end(exp, meta, len, started, ended, status) == 0) {
        if (!quiet) {
            char line[13000], next[4400];
            traced(exp, next, sizeof next);
            snprintf(line, sizeof line,
                     "perfweave: experiment written to %s (perfweave report %s)%s\n", exp, exp,
                     next);
            say(line);
        }
        end_as(status);
    }
    free(meta);

    char code[32], end[64];
    snprintf(code, sizeof code, "%d",
             WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status));
    snprintf(end, sizeof end, "%.6f", ended);
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
    execl(argv[6], argv[6], "-c",
          "import sys; sys.path[0] = sys.argv[1]; from perfweave.cli.run import finish; "
          "finish(sys.argv[2:])",
          argv[7], exp, argv[3], code, end, quiet ? "--quiet" : (char *)NULL, (char *)NULL);
    char line[600];
    snprintf(line, sizeof line,
             "perfweave: cannot run %s to read the experiment (%s): perfweave report %s\n", argv[6],
             strerror(errno), exp);
    say(line);
    end_as(status);
    return 127;
}

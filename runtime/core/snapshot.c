/*
 * Live snapshots (docs/snapshots.md): every measured process writes its data so far into
 * EXP/snapshots/N/ when asked, and runs on.
 *
 * The request is a file, EXP/snapshots/request (the number N of the snapshot wanted, as
 * text), which `perfweave snapshot` writes. Each process polls it every --snapshot-poll
 * milliseconds from a thread of its own: a file on the experiment's (shared) file system
 * reaches every rank on every node, where a signal from the login node reaches none. The
 * thread blocks every signal, so no signal handler of the program or of the runtime ever
 * runs on it, and it calls no MPI.
 *
 * Consistency: the call-site tables are written by their own threads without locks; the
 * snapshot reads them as the end-of-run dump does (pw_local_build: sites counted, then
 * copied, bounded by the count). Each counter is an aligned 64-bit word read whole, so a
 * value is one the thread wrote; a call that ends while the snapshot is read may be in a
 * site's count and not yet in its time (at most one call per thread). A process idle
 * outside MPI (as in the tests) is read exactly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pw.h"
#include "wrap.h"

static int started;
static int64_t taken; /* the last snapshot number this process wrote */

int64_t pw_experiment_number(const char *name)
{
    char path[4400], text[32];
    if (pw_experiment_path(path, sizeof path, name) != 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    int64_t v = 0;
    for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9'; i++)
        v = v * 10 + (text[i] - '0');
    return v;
}

static void take(int64_t n)
{
    char dir[48], num[24];
    pw_fmt_int(num, n);
    strcpy(dir, "snapshots/");
    strcat(dir, num);
    strcat(dir, "/");
    pw_wrap_depth++; /* the runtime's own files: not the program's I/O */
    if (pw_modules_snapshot(dir) < 0)
        pw_debug("snapshot %s not written: the process is ending", num);
    pw_wrap_depth--;
}

static void *poll_loop(void *arg)
{
    (void)arg;
    int64_t ms = pw_opt.snapshot_poll;
    for (;;) {
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
        int64_t n = pw_experiment_number("snapshots/request");
        if (n > taken) {
            taken = n;
            take(n);
        }
    }
    return NULL;
}

int pw_runtime_thread(void *(*fn)(void *), const char *name)
{
    pthread_t t;
    sigset_t all, mask;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &mask);
    int failed = pthread_create(&t, NULL, fn, NULL) != 0;
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (failed)
        return -1;
    pthread_setname_np(t, name);
    pthread_detach(t);
    return 0;
}

void pw_snapshot_start(void)
{
    if (pw_opt.snapshot_poll <= 0 || started)
        return;
    /* a process that starts after a request answers the next one */
    taken = pw_experiment_number("snapshots/request");
    if (pw_runtime_thread(poll_loop, "perfweave-snap") != 0) {
        pw_log("snapshots disabled: cannot start their thread");
        return;
    }
    started = 1;
}

/* A forked child has no such thread (fork copies the calling thread alone) */
void pw_snapshot_forget(void) { started = 0; }

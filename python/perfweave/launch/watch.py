"""The start-up watch: once the command has started, `perfweave run` execs
perfweave-wait (runtime/launch/wait.c) in its own process, which waits for the command,
forwards SIGTERM and SIGHUP, watches the ranks' start-up (ranks that have the runtime wait
there for ever for one that has not) and ends the run; wait() is the wait here, for a
caller that cannot exec it."""

import os
import sys

from perfweave import progress, writing
from perfweave.launch import WAITER, _libdir, signals


def startup_wait(environ=None):
    """Seconds a rank may wait in perfweave's start-up before perfweave run says so
    (PERFWEAVE_STARTUP_WAIT, default 60, at least 0.1): ranks that have the runtime wait
    there for ever for one that has not (docs/launching.md)."""
    environ = os.environ if environ is None else environ
    try:
        wait = float(environ.get("PERFWEAVE_STARTUP_WAIT", "60"))
    except ValueError:
        wait = 60.0
    return max(wait, 0.1)


# what perfweave run forwards to the command: the termination requests sent to perfweave
# itself (the terminal's SIGINT reaches the launcher through the process group)
_FORWARDED = (signals.SIGTERM, signals.SIGHUP)
_HELD = {*_FORWARDED, signals.SIGINT}


def hand_over(started, values):
    """Exec perfweave-wait in this process, to wait for the command and end the run
    (runtime/launch/wait.c): the interpreter neither waits through the run nor runs
    after it unless the run needs a verdict. Returns only when the exec failed, with
    SIGTERM, SIGHUP and SIGINT blocked: wait() takes them then."""
    # none is lost before perfweave-wait's handlers are there: it unblocks them
    signals.pthread_sigmask(signals.SIG_BLOCK, _HELD)
    text = writing.json_text(started.meta)
    try:
        fd = os.memfd_create("perfweave-experiment.json", 0)
    except (AttributeError, OSError):
        return
    try:
        data = text.encode()
        while data:
            data = data[os.write(fd, data) :]
        os.lseek(fd, 0, os.SEEK_SET)
        sys.stdout.flush()
        sys.stderr.flush()
        waiter = os.path.join(_libdir(), WAITER)
        wait = startup_wait() if values.get("node_interval", 1) > 0 else 0
        os.execv(
            waiter,
            [
                waiter,
                str(started.pid),
                started.exp,
                str(fd),
                repr(started.started),
                repr(wait),
                sys.executable,
                os.path.dirname(os.path.dirname(os.path.dirname(__file__))),  # perfweave's parent
                *(["--quiet"] if progress.quiet() else []),
                "--",
                *sys.argv,  # for ps: the command line it showed
            ],
        )
    except OSError:
        os.close(fd)


def wait(started):
    """The command's exit status (as subprocess gives it), waited for here, forwarding
    what perfweave-wait forwards; for callers that cannot exec it (run)."""

    def forward(sig, frame):
        try:
            os.kill(started.pid, sig)
        except OSError:
            pass

    previous = {s: signals.signal(s, forward) for s in _FORWARDED}
    previous[signals.SIGINT] = signals.signal(signals.SIGINT, lambda s, f: None)
    signals.pthread_sigmask(signals.SIG_UNBLOCK, _HELD)  # as hand_over left them
    try:
        return os.waitstatus_to_exitcode(os.waitpid(started.pid, 0)[1])
    finally:
        for s, h in previous.items():
            signals.signal(s, h)

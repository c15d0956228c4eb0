"""The run itself: the experiment's directory (named from the command unless -o names
it) and experiment.json, the command started under the runtime (fork and exec, as
subprocess starts it), and the run's end: experiment.json's last members and the
verdict (verdict.py). Paths are strings and times come from the time module: the launch
path's rule (perfweave/launch/__init__.py)."""

import errno
import os
import sys
import time

from perfweave import __version__, options, progress, task_env, writing
from perfweave.errors import PerfweaveError
from perfweave.launch import WAITER, _libdir, built_flavors, signals
from perfweave.launch.command import (
    FROM_COMMAND,
    check_mpmd,
    find_program,
    launch_command,
    program_index,
    rank_count,
)
from perfweave.launch.watch import wait


def check_flavor(requested, available):
    """--mpi: `auto` and `none` always; a build's name only when that build exists.
    Which build records a process's MPI calls is chosen inside the process, at its
    first MPI call, from the MPI library it really loaded (runtime/modules/mpi_loader.c):
    the command line, a wrapper script or `ldd` of a program cannot tell."""
    if requested not in ("auto", "none") and requested not in available:
        raise PerfweaveError(
            f"no perfweave runtime built for MPI '{requested}' "
            f"(built: {', '.join(available) or 'none'})"
        )
    return None if requested in ("auto", "none") else requested


def default_experiment_name(command, program, now=None, ranks=FROM_COMMAND):
    """perfweave-<program>-<ranks>p-<date>-<time>[-N]; ranks: the command's rank_count;
    now: a datetime (the present by default)."""
    n = rank_count(command) if ranks is FROM_COMMAND else ranks
    name = os.path.basename(program or command[0]) or "run"
    return writing.experiment_name(name, *([f"{n}p"] if n else []), now=now)


def iso_time(t):
    """datetime.fromtimestamp(t).astimezone().isoformat() of t (seconds since the epoch):
    local time to the microsecond (rounded half to even, omitted when zero) and the
    offset from UTC; datetime's import is not for the launch path."""
    whole = int(t // 1)
    us = round((t - whole) * 1e6)
    if us == 1000000:
        whole, us = whole + 1, 0
    tm = time.localtime(whole)
    off = tm.tm_gmtoff
    sign, off = ("-", -off) if off < 0 else ("+", off)
    zone = f"{sign}{off // 3600:02d}:{off // 60 % 60:02d}" + (
        f":{off % 60:02d}" if off % 60 else ""
    )
    return time.strftime("%Y-%m-%dT%H:%M:%S", tm) + (f".{us:06d}" if us else "") + zone


def _save_meta(exp, meta):
    """Write experiment.json; a failure (full disk...) is marked and returned as its
    errno, never raised: the program's run and exit status do not depend on
    perfweave's files."""
    try:
        writing.write_atomic(os.path.join(exp, "experiment.json"), writing.json_text(meta))
    except OSError as e:
        writing.mark_unwritten(exp, "experiment.json", e.errno)
        return e.errno or errno.EIO
    writing.unmark(exp, "experiment.json")
    return 0


def say(line, stderr):
    try:
        print(line, file=stderr, flush=True)
    except OSError:  # stderr on a full disk: the run goes on
        pass


class Started:
    """A command started under the runtime (start): its experiment (the directory's
    absolute path), experiment.json as written at the start (meta, its last member
    "state": "running"), the launcher's process id (pid) and the start, in seconds since
    the epoch."""

    def __init__(self, exp, meta, pid, started):
        self.exp, self.meta, self.pid, self.started = exp, meta, pid, started


# reset in the command as subprocess.Popen resets them (restore_signals): Python ignores
# SIGPIPE and SIGXFSZ, which the program must not inherit
_DEFAULTED = (signals.SIGPIPE, signals.SIGXFSZ)


def _spawn(argv, env):
    """Start argv (found on PATH) with environment env as subprocess.Popen(argv, env=env)
    starts it: descriptors above 2 closed, SIGPIPE and SIGXFSZ to their default action;
    returns its pid, or raises OSError (not found, not executable).

    By fork and exec, not os.posix_spawnp: glibc's posix_spawn (2.36) sets its internal
    signals (32 and 33) to SIG_IGN in the child, which exec keeps, and Python refuses
    them in setsigdef; the program must inherit what it inherits without perfweave.

    The places to try are found here, as os.execvpe finds them (env's PATH), and the
    child execs each in turn: os.execvpe in the child costs it 1.2 ms more (its import of
    warnings, in a copy of this interpreter), before the command can start."""
    if os.path.dirname(argv[0]):
        places = [argv[0]]
    else:
        path = env.get("PATH", os.defpath)
        places = [os.path.join(d, argv[0]) for d in path.split(os.pathsep)]
    r, w = os.pipe2(os.O_CLOEXEC)  # the child's exec error, if any; closed by its exec
    pid = os.fork()
    if pid == 0:  # the child: exec, or say why not and _exit
        try:
            for s in _DEFAULTED:
                signals.signal(s, signals.SIG_DFL)
            os.closerange(3, w)
            os.closerange(w + 1, os.sysconf("SC_OPEN_MAX"))
            # os.execvpe's error: the first that is not "not there", else the last
            first = last = None
            for place in places:
                try:
                    os.execve(place, argv, env)
                except (FileNotFoundError, NotADirectoryError) as e:
                    last = e
                except OSError as e:
                    last = e
                    first = first or e
            raise first or last
        except OSError as e:
            os.write(w, str(e.errno or errno.ENOEXEC).encode())
        finally:
            os._exit(127)
    os.close(w)
    try:
        failed = os.read(r, 32)
    finally:
        os.close(r)
    if failed:
        os.waitpid(pid, 0)
        number = int(failed)
        raise OSError(number, os.strerror(number), argv[0])
    return pid


def start(command, values, stderr=sys.stderr, meta=None):
    """Set up the experiment of `command` and start it under the runtime; returns a
    Started. meta: more for experiment.json."""
    if not command:
        raise PerfweaveError("no command to run (usage: perfweave run [options] -- COMMAND...)")
    if task_env.which(command[0]) is None and not (
        os.path.isfile(command[0]) and os.access(command[0], os.X_OK)
    ):
        raise PerfweaveError(f"{command[0]}: program not found")
    problem = options.validate(values)
    if problem:
        raise PerfweaveError(problem)
    if values.get("filter"):  # the runtime reads the rules normalised (options.filter_rules)
        values = {**values, "filter": options.filter_rules(values["filter"])}
    libdir = _libdir()
    core = os.path.join(libdir, "libperfweave.so")
    for part, what in ((core, "runtime library"), (os.path.join(libdir, WAITER), WAITER)):
        if not os.path.isfile(part):
            raise PerfweaveError(f"perfweave's {what} is missing ({part}); reinstall perfweave")
    flavor = check_flavor(values.get("mpi", "auto"), built_flavors(libdir))
    lib = core
    at = program_index(command)
    launcher, program = find_program(command, at)
    ranks = rank_count(command, at=at)
    check_mpmd(command, at)
    if values.get("place"):  # --place: its rules and tier checked, --heap implied
        from perfweave.launch import placement

        values, tier = placement.prepare(values, program)
        meta = {**(meta or {}), "place_tier": tier}

    exp = values.get("output") or default_experiment_name(command, program, ranks=ranks)
    exp = os.fspath(exp)
    if os.listdir(exp) if os.path.isdir(exp) else os.path.exists(exp):
        raise PerfweaveError(f"{_shown(exp)}: already exists; choose another -o")
    try:
        os.makedirs(exp, exist_ok=True)
    except OSError as e:
        raise PerfweaveError(f"{_shown(exp)}: cannot create: {e.strerror}") from None
    exp = os.path.realpath(exp)

    argv, env = launch_command(command, at, lib, values, exp)

    started = time.time()
    meta = {
        "format": "perfweave-experiment",
        "version": 1,
        "perfweave_version": __version__,
        "command": list(command),
        "launched": argv,
        "cwd": os.getcwd(),
        "host": os.uname().nodename,
        "program": program,
        "launcher": launcher,
        "mpi_flavor": flavor,
        "runtime_library": str(lib),
        "options": {k: v for k, v in values.items()},
        "start_time": iso_time(started),
        "start_epoch": started,
        **(meta or {}),
        # last: perfweave-wait replaces it with the end's members
        "state": "running",
    }
    _save_meta(exp, meta)
    if not progress.quiet():
        say(f"perfweave: experiment {exp}", stderr)

    try:
        pid = _spawn(argv, env)
    except OSError as e:
        meta.update(state="failed", error=str(e))
        _save_meta(exp, meta)
        raise PerfweaveError(f"{command[0]}: cannot run: {e.strerror}") from None
    return Started(exp, meta, pid, started)


def _shown(path):
    """path as the messages name it, as pathlib writes it (for an error only: pathlib is
    not for the launch path)."""
    from pathlib import Path

    return Path(path)


def remove_ending(exp):
    """Remove EXP/ending, the runtime's folder for ending together on a signal
    (runtime/core/ending.c), of no use once the run has ended (as perfweave-wait does)"""
    folder = os.path.join(exp, "ending")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def finish(exp, meta, status, ended):
    """End the run of experiment exp (its directory) once its command ended with status (as
    subprocess gives it) at `ended` (seconds since the epoch): experiment.json from meta
    (as written at the start) and the verdict. Returns (unwritten, found): the files of the
    experiment that could not be written (writing.read_unwritten) and the Verdict on a run
    that recorded fewer ranks than it started (else None)."""
    command, values, program = meta["command"], meta["options"], meta.get("program")
    remove_ending(exp)
    meta.update(
        state="finished",
        end_epoch=ended,
        wall_seconds=ended - meta["start_epoch"],
        end_time=iso_time(ended),
        exit_status={"signal": -status} if status < 0 else {"code": status},
    )
    # what the runtime could not write, marked by each process, recorded once here
    unwritten = writing.read_unwritten(exp)
    if unwritten:
        meta["unwritten"] = [{"file": u["file"], "error": u["error"]} for u in unwritten]
    from perfweave.launch.verdict import verdict  # the run's end only: not the launch path

    found = verdict(exp, command, status, values, program)
    if found:
        meta.update(state=found.state, reason=found.reason, ranks=found.ranks)
        if found.state == "empty":
            meta["kept"] = found.kept
    err = _save_meta(exp, meta)
    if err:
        # the disk is full: what the runtime could not write is not known, and the
        # processes said it in their own lines (the runtime's) already
        found = None
        # known here even when not even its mark could be made
        unwritten = writing.read_unwritten(
            exp, {"unwritten": [{"file": "experiment.json", "error": writing.error_name(err)}]}
        )
    return unwritten, found


def run(command, values, stderr=sys.stderr, meta=None):
    """Run `command` under the runtime, waiting here (no start-up watch: that is
    perfweave-wait's); returns the experiment path, the exit status (as returned by
    subprocess: negative for a signal), the files of the experiment that could not be
    written and the Verdict on a run that recorded fewer ranks than it started (else
    None). meta: more for experiment.json."""
    from pathlib import Path

    started = start(command, values, stderr, meta)
    status = wait(started)
    unwritten, found = finish(started.exp, started.meta, status, time.time())
    return Path(started.exp), status, unwritten, found

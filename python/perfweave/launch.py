"""Launching a program under the runtime: experiment directory, MPI flavour,
environment, signal forwarding, and the program's exit status passed through.

`perfweave run` imports this module and nothing heavier before the program starts
(tests/python/test_launch_path.py checks it): the run's fixed cost is this set-up, the
launcher's own, and perfweave-wait's end of the run (runtime/launch/wait.c). So paths
are strings here, times come from the time module, and the command starts through
fork and exec: pathlib, datetime and subprocess, with what they import, cost each
interpreter of a run (this one and the verdict's, cli/run.py finish) about as much as
the rest of its set-up; json, re, enum (which signal's module imports) and collections
about as much again (docs/performance.md, "The launch path").
"""

import errno
import os
import sys
import time

try:  # the signal module's functions and numbers, without its enums
    import _signal as signals
except ImportError:  # an interpreter without CPython's module
    import signal as signals

from perfweave import __version__, options, task_env, writing
from perfweave.errors import PerfweaveError

# Launchers whose first argument is not the program (the names task_env.py knows how
# to pass perfweave's variables through).
LAUNCHERS = task_env.LAUNCHERS
# Options that give the number of nodes and of tasks per node (their product: the ranks).
_NODES_OPTS = {"-N", "--nodes"}
_PER_NODE_OPTS = {"--ntasks-per-node", "-npernode", "--npernode", "-ppn"}


def _libdir():
    """The directory of the runtime's libraries and programs."""
    return os.environ.get("PERFWEAVE_LIBDIR") or os.path.join(os.path.dirname(__file__), "lib")


def library_dir():
    """The directory of the runtime's libraries and programs, a Path."""
    from pathlib import Path

    return Path(_libdir())


def built_flavors(libdir=None):
    prefix = "libperfweave-mpi-"
    try:
        names = os.listdir(libdir or _libdir())
    except OSError:
        return []
    return sorted(n[len(prefix) : -3] for n in names if n.startswith(prefix) and n.endswith(".so"))


def _which(word):
    if "/" in word:
        ok = os.path.isfile(word) and os.access(word, os.X_OK)
        return os.path.realpath(word) if ok else None
    return task_env.which(word)


def program_index(command):
    """Index of the program in a command line: 0 when command[0] is not a launcher, the
    first executable word after the launcher's options (for sbatch: the first file, the
    batch script), None when there is none."""
    base = os.path.basename(command[0])
    if base not in LAUNCHERS:
        return 0
    for i, word in task_env.operands(command):
        path = _which(word)
        if path and not os.path.isdir(path) or base == "sbatch" and os.path.isfile(word):
            return i
    return None


# the default of an argument that run() finds once and passes on: found from the command
# line itself when left out
FROM_COMMAND = object()


def find_program(command, at):
    """(launcher or None, program path or None) of a command line; at: its
    program_index."""
    first = _which(command[0])
    if at == 0:
        return None, first
    return first, _which(command[at]) if at else None


def _option_number(command, options):
    """The number given to one of `options` (`-n 4`, `-n4`, `--ntasks=4`), or None."""
    for i, word in enumerate(command):
        if word in options and i + 1 < len(command) and command[i + 1].isdigit():
            return int(command[i + 1])
        name, joined, number = word.partition("=")
        if not joined and word[:2] in ("-n", "-N"):
            name, number = word[:2], word[2:]
        if name in options and number.isascii() and number.isdigit():
            return int(number)
    return None


def rank_count(command, environ=None, at=FROM_COMMAND):
    """Ranks a launch command starts: from its options (-n, -np, --ntasks, or nodes
    times tasks per node), else, for a launcher inside a Slurm allocation, the
    allocation's SLURM_NTASKS; None when not known. at: the command's program_index."""
    if os.path.basename(command[0]) not in LAUNCHERS:
        return None
    if at is FROM_COMMAND:
        at = program_index(command)
    options = command[:at] if at else command
    n = _option_number(options, task_env.RANK_OPTIONS)
    if n is None:
        nodes, per_node = (
            _option_number(options, _NODES_OPTS),
            _option_number(options, _PER_NODE_OPTS),
        )
        n = nodes * per_node if nodes and per_node else None
    environ = os.environ if environ is None else environ
    if n is None and environ.get("SLURM_NTASKS", "").isdigit():
        n = int(environ["SLURM_NTASKS"])
    return n or None


def _links_mpi(path):
    """Whether the program links an MPI library (ldd): a hint for the verdict on a run
    that recorded no rank, never the choice of wrappers (made in each process)."""
    import subprocess

    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(part in out for part in ("libmpi.so", "libmpich.so", "/openmpi/"))


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
    stamp = now.strftime("%Y%m%d-%H%M%S") if now else time.strftime("%Y%m%d-%H%M%S")
    name = os.path.basename(program or command[0]) or "run"
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_.+-") else "_" for c in name)
    n = rank_count(command) if ranks is FROM_COMMAND else ranks
    parts = ["perfweave", name] + ([f"{n}p"] if n else []) + [stamp]
    base = "-".join(parts)
    candidate, k = base, 1
    while os.path.exists(candidate):
        candidate = f"{base}-{k}"
        k += 1
    return candidate


def launch_command(command, at, lib, values, exp, environ=None):
    """(argv, environment) that run `command` (its program at index `at`:
    program_index) with the runtime library `lib` preloaded and perfweave's variables in
    every task, whatever the launcher's environment policy (task_env.py)."""
    environ = dict(os.environ if environ is None else environ)
    runtime_env = options.runtime_env(values)
    runtime_env["PERFWEAVE_EXPERIMENT"] = str(exp)
    runtime_env["LD_PRELOAD"] = str(lib) + (
        ":" + environ["LD_PRELOAD"] if environ.get("LD_PRELOAD") else ""
    )
    helper = os.path.join(os.path.dirname(lib), task_env.EXEC_HELPER)
    return task_env.for_tasks(command, at, runtime_env, environ, helper)


def _static_program(path):
    """True when path is an ELF executable without a program interpreter: statically
    linked, so the dynamic loader, and LD_PRELOAD with it, never runs in it."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2):
                return False
            order = "little" if head[5] == 1 else "big"
            wide = head[4] == 2  # ELFCLASS64
            phoff = int.from_bytes(head[32:40] if wide else head[28:32], order)
            entsize = int.from_bytes(head[54:56] if wide else head[42:44], order)
            count = int.from_bytes(head[56:58] if wide else head[44:46], order)
            f.seek(phoff)
            table = f.read(entsize * count)
    except OSError:
        return False
    types = {
        int.from_bytes(table[i : i + 4], order) for i in range(0, len(table) - 3, entsize or 1)
    }
    return count > 0 and 3 not in types  # 3: PT_INTERP


def mpmd_programs(command, at=FROM_COMMAND):
    """The programs of every part of a launch command: the program after the
    launcher's options, then that of each part after a ':' (mpirun, mpiexec: several
    programs in one job), or each line of srun's --multi-prog file; paths as found,
    absent where a part names none."""
    if os.path.basename(command[0]) not in LAUNCHERS:
        return []
    if "--multi-prog" in command:
        # the first word after the options: the file (not executable, so not found as
        # the program)
        conf = next((word for _, word in task_env.operands(command)), None)
        return _multi_prog(conf) if conf else []
    if at is FROM_COMMAND:
        at = program_index(command)
    if not at:
        return []
    first = _which(command[at])
    found = [first] if first else []
    rest = command[at + 1 :]
    while ":" in rest:
        rest = rest[rest.index(":") + 1 :]
        i = program_index([command[0]] + rest)
        if i:
            path = _which(rest[i - 1])
            if path:
                found.append(path)
    return found


def _multi_prog(conf):
    """The programs of an srun --multi-prog file (lines 'RANKS PROGRAM ARGS...')."""
    out = []
    try:
        with open(conf, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            path = _which(words[1])
            if path and path not in out:
                out.append(path)
    return out


def check_mpmd(command, at=FROM_COMMAND):
    """Refuse a launch of several programs of which some are statically linked: their
    ranks cannot load the runtime, and the others would wait for them for ever in
    perfweave's start-up (a collective of every rank)."""
    programs = mpmd_programs(command, at)
    static = [p for p in programs if _static_program(p)]
    if static and len(static) < len(set(programs)):
        raise PerfweaveError(
            f"{static[0]} is statically linked: its ranks cannot load perfweave's runtime "
            "(LD_PRELOAD), and the ranks of the other programs would wait for them at "
            "start-up; link it dynamically, or measure the programs in separate jobs"
        )


# A run that recorded fewer ranks than it started (perfweave run's last line and
# experiment.json's state, reason and ranks; docs/format.md). state: "empty" (no data at
# all) or "partial" (some ranks' data missing); reason: one line, the count and the likely
# causes; ranks: {"expected": N (absent when unknown), "recorded": k, "missing": "1,3-5"}.
class Verdict:
    def __init__(self, state, reason, ranks):
        self.state, self.reason, self.ranks = state, reason, ranks

    def __repr__(self):
        return f"Verdict({self.state!r}, {self.reason!r}, {self.ranks!r})"


# likely causes a Verdict names
_KILLED = "killed before saving (SIGKILL, as launchers send when a rank fails)"
_NO_ENV = (
    "its environment (LD_PRELOAD, PERFWEAVE_EXPERIMENT) did not reach the tasks "
    "(a launcher's or batch system's policy such as srun --export=NONE)"
)
_DROPPED = (
    "the runtime was taken out before the MPI program started (a wrapper or "
    "launcher option resetting LD_PRELOAD)"
)
_STATIC = "the program is statically linked"
_INIT_FAILED = (
    "the MPI start-up failed (the launcher's PMI or PMIx wire-up, e.g. srun "
    "--mpi=pmi2 for an MPI not built for it; see the launcher's messages above)"
)


def verdict(exp, command, status, values, program, ranks=FROM_COMMAND):
    """The Verdict on experiment exp once the launched command ended with status (as
    subprocess gives it), or None when every rank it started recorded data, or the
    program runs without MPI and its processes did. ranks: the command's rank_count."""
    from perfweave.readers.recorded import rank_ranges, recorded

    rec = recorded(exp)
    if rec.complete:
        return None
    if ranks is FROM_COMMAND:
        ranks = rank_count(command)
    expected = max(ranks or 0, rec.world_size)
    name = os.path.basename(command[0])
    ended = (
        f"{name} was killed by signal {-status}"
        if status < 0
        else f"{name} exited with code {status}"
        if status
        else ""
    )
    if rec.ranks:
        if len(rec.ranks) >= expected:
            return None
        missing = rank_ranges([r for r in range(expected) if r not in rec.ranks])
        one = expected - len(rec.ranks) == 1
        causes = [
            f"{'it was' if one else 'they were'} {_KILLED}",
            f"perfweave's runtime did not reach {'its task' if one else 'their tasks'} "
            f"(environment not passed to {'it' if one else 'them'})",
        ]
        if rec.starting:
            # the others waited for them where every rank with the runtime comes
            waited = rec.starting
            causes = [
                f"perfweave's runtime did not reach {'its task' if one else 'their tasks'}"
                f", for which {waited} rank{'' if waited == 1 else 's'} waited in "
                "perfweave's start-up (statically linked, or LD_PRELOAD reset by a "
                "wrapper)"
            ]
        return Verdict(
            "partial",
            f"only {len(rec.ranks)} of {expected} ranks recorded data "
            f"(none from rank{'' if one else 's'} {missing}): "
            + ", or ".join(causes)
            + (f"; {ended}" if ended else ""),
            {"expected": expected, "recorded": len(rec.ranks), "missing": missing},
        )
    mpi_program = values.get("mpi", "auto") != "none" and program and _links_mpi(program)
    if rec.processes and not mpi_program:
        return None  # a program without MPI: its processes' profiles are its data
    if rec.in_init and status:
        # processes called MPI (the core loaded the MPI module in them) and none got
        # through MPI_Init: the MPI start-up failed, nothing was killed or left out
        n = rec.in_init
        return Verdict(
            "empty",
            (f"0 of {expected} ranks recorded data" if expected else "no rank recorded data")
            + f": {n} process{'es' if n > 1 else ''} of the program called MPI_Init "
            f"and none got through it: {_INIT_FAILED} ({ended})",
            _none_recorded(expected),
        )
    count = f"0 of {expected} ranks recorded data" if expected else "no process recorded data"
    if rec.starting:
        n = rec.starting
        return Verdict(
            "empty",
            count + f": {n} process{'es' if n > 1 else ''} got through "
            "MPI_Init and waited in perfweave's start-up for ranks without its "
            "runtime (statically linked, or LD_PRELOAD reset by a wrapper)"
            + (f" ({ended})" if ended else ""),
            _none_recorded(expected),
        )
    # processes that loaded the runtime: HOST.pids, kept by the node timeline only
    started = rec.started if values.get("node_interval", 1) > 0 else None
    # a dynamic program that links MPI is not static; another may be a wrapper of one
    static = [] if mpi_program else [_STATIC]
    if program and _static_program(program):
        count += (
            f": {program} is statically linked, so perfweave's runtime (loaded "
            "through LD_PRELOAD) cannot enter it"
        )
        causes = []
    elif started:
        count += (
            f" though {started} process{'es' if started > 1 else ''} loaded perfweave's runtime"
        )
        causes = (
            ([f"{'it was' if started == 1 else 'they were'} {_KILLED}"] if status else [])
            + [_DROPPED]
            + static
        )
    elif status:
        if started == 0:
            count += " and no process loaded perfweave's runtime"
        causes = ["the launch failed before the program started"] + (
            [f"the ranks were {_KILLED}"] if started is None else []
        )
    else:
        if started == 0:
            count += " and no process loaded perfweave's runtime"
        causes = [_NO_ENV] + static
    reason = (
        count + (": " + ", or ".join(causes) if causes else "") + (f" ({ended})" if ended else "")
    )
    return Verdict("empty", reason, _none_recorded(expected))


def _none_recorded(expected):
    """Verdict.ranks of a run whose ranks recorded nothing (expected: 0 when unknown)."""
    from perfweave.readers.recorded import rank_ranges

    if not expected:
        return {"recorded": 0}
    return {"recorded": 0, "expected": expected, "missing": rank_ranges(range(expected))}


# The program `perfweave run` becomes once the command has started (runtime/launch/wait.c),
# installed beside the runtime library.
WAITER = "perfweave-wait"


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
                os.path.dirname(os.path.dirname(__file__)),
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
    found = verdict(exp, command, status, values, program)
    if found:
        meta.update(state=found.state, reason=found.reason, ranks=found.ranks)
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

"""The runs of `perfweave overhead` (cli/overhead.py; the figures: analysis/overhead.py).

A command runs bare, under `perfweave run` in each mode (its own temporary experiment)
and after each other tool's prefix, interleaved (bare, A, B, bare, A, B, ...), so that a
drift of the machine's load touches every variant alike. Each run's wall time, its
processes' peak resident set and the node's lowest MemAvailable are measured here; the
experiment is handed to a caller's function before it is deleted. The calibration loops
(calibration/calibrate.c, built once per module) time one cheap wrapped call bare and
under each variant in the same invocation.
"""

import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from perfweave import progress
from perfweave.errors import PerfweaveError
from perfweave.options import spec

_BASE = ["--node-interval", "0", "--no-sample", "--no-mathlib"]
_QUIET = _BASE + ["--no-io"]
# mode -> (perfweave run's options, the module whose wrapped call it calibrates). Every
# mode but samples, timeline and default turns the node sampler and call-stack sampling
# off, so that each measures its own module's cost on top of the MPI profile; every mode
# but io and default turns the I/O profile (on by default) off.
MODES = {
    "profile": (_QUIET, "mpi"),
    "samples": (["--node-interval", "0", "--sample", "--no-mathlib", "--no-io"], "mpi"),
    "trace": (_QUIET + ["--trace"], "mpi"),
    "counters": (_QUIET + ["--counters", "perf::TASK-CLOCK"], "mpi"),
    "io": (_BASE + ["--io"], "io"),
    "mathlib": (["--node-interval", "0", "--no-sample", "--mathlib", "--no-io"], "math"),
    "timeline": (["--no-sample", "--no-mathlib", "--no-io"], "mpi"),
    "default": ([], "mpi"),
}
# calibrated module -> (compiler: its environment variable and default, -D, libraries)
CALIBRATIONS = {
    "mpi": ("MPICC", "mpicc", "CALIBRATE_MPI", []),
    "io": ("CC", "cc", "CALIBRATE_IO", []),
    "math": ("CC", "cc", "CALIBRATE_MATH", ["-lblas"]),
}
# processes that are perfweave's or a launcher's, not the measured program's: their
# memory is not the program's peak resident set
_NOT_PROGRAM = {"perfweave-wait", "perfweave", "python", "python3", "sh", "bash", "env"}


@dataclass
class Variant:
    """One way of running the command: bare (no prefix, no options), a perfweave mode
    (options of perfweave run) or another tool (a prefix put before the command)."""

    name: str
    kind: str  # "bare", "mode" or "tool"
    words: list = field(default_factory=list)  # run options or the tool's prefix
    calibrates: list = field(default_factory=list)  # modules of its calibration loops
    # a co-runner: a command started before each run, which says "ready" on its standard
    # output when it is, and ended by SIGTERM after it (perfweave boundness's stressor)
    corunner: list = field(default_factory=list)


@dataclass
class Run:
    """One run: wall seconds, the largest peak resident set (KiB) of the program's
    processes, and the node's lowest MemAvailable (KiB) while it ran; facts: what the
    caller's function found in the experiment (modes only)."""

    variant: str
    round: int
    wall_s: float
    peak_rss_kib: int
    min_available_kib: int
    facts: dict = field(default_factory=dict)
    experiment: str = ""  # the mode's experiment, where the Runner keeps them (keep)
    cpu_s: float = 0.0  # user + system seconds of its processes (getrusage, waited children)


def split_words(text, what):
    try:
        return shlex.split(text)
    except ValueError as e:
        raise PerfweaveError(f"{what} {text!r}: {e}") from None


def variants(modes, tools, calibrate, run_options=""):
    """bare, each mode, each tool (a prefix command line): Variants. calibrate: the
    modules to calibrate ("auto": each mode's own; tools: every module a mode names);
    run_options: perfweave run options added to every mode's."""
    out = [Variant("bare", "bare")]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise PerfweaveError(f"unknown mode {unknown[0]!r} (modes: {', '.join(MODES)})")
    if not modes and not tools:
        raise PerfweaveError("nothing to compare: give --modes or --compare")
    if calibrate == "auto":
        wanted = sorted({MODES[m][1] for m in modes} or {"io"})
    else:
        wanted = [c for c in calibrate.split(",") if c and c != "none"]
        bad = [c for c in wanted if c not in CALIBRATIONS]
        if bad:
            raise PerfweaveError(
                f"unknown calibration {bad[0]!r} (choose from {', '.join(CALIBRATIONS)}, none)"
            )
    for m in modes:
        own = [MODES[m][1]] if MODES[m][1] in wanted else []
        out.append(
            Variant(m, "mode", list(MODES[m][0]) + split_words(run_options, "--run-options"), own)
        )
    for t in tools:
        words = split_words(t, "--compare")
        if not words:
            raise PerfweaveError("--compare: an empty command")
        out.append(Variant(t, "tool", words, list(wanted)))
    return out


def _perfweave():
    """This perfweave's command: the script beside the interpreter, else the module."""
    script = os.path.join(os.path.dirname(sys.executable), "perfweave")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "perfweave"]


def _environment():
    """The caller's environment without perfweave's run options: a PERFWEAVE_TRACE=1 set
    by the user would otherwise turn every mode into a traced one."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PERFWEAVE_")}


def _children(pids):
    """pids and their descendants, from /proc's parent links."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            # the name in parentheses may hold spaces: the fields after its last ')'
            parent[int(name)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    found, grew = set(pids), True
    while grew:
        new = {p for p, pp in parent.items() if pp in found and p not in found}
        found |= new
        grew = bool(new)
    return found


def _status(pid):
    """(name, VmHWM in KiB) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    name, hwm = "", 0
    for line in text.splitlines():
        if line.startswith("Name:"):
            name = line.split(None, 1)[1] if len(line.split()) > 1 else ""
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return name, hwm


def _available_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


class _Memory(threading.Thread):
    """Samples, every interval, the node's MemAvailable and the high-water mark of the
    resident set (VmHWM) of every process below the command's. A process's VmHWM only
    grows, so its last sample is its peak up to then; what it grows in its last interval
    before it exits is missed (docs/overhead.md)."""

    def __init__(self, pid, interval_s, skip):
        super().__init__(daemon=True)
        self.pid, self.interval_s, self.skip = pid, interval_s, skip
        self.peak = {}  # pid -> (name, VmHWM KiB)
        self.min_available = _available_kib()
        self.done = threading.Event()

    def sample(self):
        self.min_available = min(self.min_available, _available_kib())
        for pid in _children({self.pid}):
            st = _status(pid)
            if st and st[1] >= self.peak.get(pid, ("", 0))[1]:
                self.peak[pid] = st

    def run(self):
        # the first samples come sooner: a short run's processes would otherwise exit
        # before the first one, and their peak go unseen
        waits = [w for w in (0.002, 0.005, 0.01) if w < self.interval_s]
        while not self.done.wait(waits.pop(0) if waits else self.interval_s):
            self.sample()

    def program_peak(self):
        """The largest VmHWM of the program's processes (not perfweave's, a launcher's
        or a shell's), KiB."""
        sizes = [hwm for name, hwm in self.peak.values() if name not in self.skip]
        return max(sizes, default=0)


def _skipped():
    """Process names that are not the program: perfweave run's --skip-exe default (the
    launchers and their daemons) and perfweave's own; the kernel keeps 15 characters."""
    skip_exe = next(o for o in spec() if o["name"] == "skip_exe")["default"]
    return {n[:15] for n in skip_exe.split(",")} | _NOT_PROGRAM


def _last_line(text):
    """The last line of an error output that says something (Open MPI frames its
    messages with lines of dashes)."""
    lines = [ln for ln in (text or "").splitlines() if any(c.isalnum() for c in ln)]
    return lines[-1].strip() if lines else "no output"


def _stop(proc):
    """End a run: SIGTERM first, which launchers and perfweave run forward to the ranks,
    then SIGKILL."""
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


class Runner:
    """Runs a command under Variants in a temporary directory; measure(experiment) ->
    dict is called on each mode's experiment before it is deleted, or kept as
    keep/VARIANT-ROUND (rounds from 1; the warm-up's are deleted) where keep names a
    directory (Run.experiment: its path)."""

    def __init__(self, command, measure=None, interval_ms=20, timeout=None, keep=None):
        if not command:
            raise PerfweaveError("no command to measure (perfweave overhead ... -- COMMAND)")
        self.command = list(command)
        self.measure = measure
        self.interval_s = interval_ms / 1000
        self.timeout = timeout
        self.env = _environment()
        self.perfweave = _perfweave()
        self.skip = _skipped()
        self.tmp = tempfile.mkdtemp(prefix="perfweave-overhead-")
        self.keep = keep
        self.count = 0

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def line(self, variant, command, exp=None):
        if variant.kind == "mode":
            return [*self.perfweave, "run", "-o", exp, *variant.words, "--", *command]
        if variant.kind == "tool":
            return [*variant.words, *command]
        return list(command)

    def _start(self, cmd):
        try:
            return subprocess.Popen(
                cmd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError as e:
            raise PerfweaveError(f"cannot start {cmd[0]}: {e.strerror or e}") from None

    def run(self, variant, round_=0):
        """One run of the command under variant: a Run. Raises PerfweaveError when it
        fails (the bare command: the user's command fails by itself)."""
        self.count += 1
        kept = self.keep is not None and variant.kind == "mode" and round_ >= 0
        exp = os.path.join(self.keep, f"{variant.name}-{round_ + 1}") if kept else None
        exp = exp or os.path.join(self.tmp, f"exp{self.count}")
        cmd = self.line(variant, self.command, exp)
        corunner = self._corunner(variant) if variant.corunner else None
        t0 = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            proc = self._start(cmd)
        except BaseException:
            self._end_corunner(corunner)
            raise
        memory = _Memory(proc.pid, self.interval_s, self.skip)
        memory.start()
        try:
            _, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise PerfweaveError(
                f"{variant.name}: the command ran past --timeout ({self.timeout} s)"
            ) from None
        except BaseException:  # interrupted: the command's launcher ends its ranks
            _stop(proc)
            raise
        finally:
            memory.done.set()
            memory.join()
            wall = time.perf_counter() - t0
            # the runs are one at a time: what the waited children used since is this
            # run's (its launcher's, perfweave's and the program's processes, each waited
            # for; the co-runner, waited for next, not)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            said = self._end_corunner(corunner)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            what = "the command failed bare" if variant.kind == "bare" else variant.name
            raise PerfweaveError(f"{what} (exit status {proc.returncode}): {_last_line(err)}")
        facts = {"corunner": said} if corunner else {}
        if variant.kind == "mode":
            if self.measure:
                facts.update(self.measure(exp))
            if not kept:
                shutil.rmtree(exp, ignore_errors=True)
        return Run(
            variant.name,
            round_,
            wall,
            memory.program_peak(),
            memory.min_available,
            facts,
            exp if kept else "",
            cpu,
        )

    def _corunner(self, variant):
        """Start variant's co-runner and wait for its "ready": the process."""
        cmd = variant.corunner
        try:
            proc = subprocess.Popen(
                cmd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        except OSError as e:
            raise PerfweaveError(f"cannot start {cmd[0]}: {e.strerror or e}") from None
        if proc.stdout.readline().strip() != "ready":
            _, err = proc.communicate()
            raise PerfweaveError(
                f"{variant.name}: the co-runner {os.path.basename(cmd[0])} failed "
                f"(exit status {proc.returncode}): {_last_line(err)}"
            )
        return proc

    @staticmethod
    def _end_corunner(proc):
        """End a co-runner (SIGTERM, then SIGKILL): the last line it printed."""
        if proc is None:
            return ""
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return _last_line(out) if out.strip() else ""

    def rounds(self, variants, n, warmup=True, what="overhead"):
        """n rounds, each running every variant once in turn: a list of Runs. A first,
        discarded round warms the file cache for each variant, and its bare run tells a
        failing command at once. what: the progress bar's name."""
        runs = []
        with progress.task(what, len(variants) * (n + bool(warmup)), "run") as bar:
            for r in range(-1 if warmup else 0, n):
                for v in variants:
                    bar.step(0, f"{v.name}, " + (f"round {r + 1} of {n}" if r >= 0 else "warm-up"))
                    run = self.run(v, r)
                    if r >= 0:
                        runs.append(run)
                    bar.step()
        return runs

    def build(self, module):
        """The calibration loop of module, compiled here: its path."""
        var, default, define, libs = CALIBRATIONS[module]
        cc = os.environ.get(var) or default
        src = os.path.join(os.path.dirname(__file__), "calibration", "calibrate.c")
        exe = os.path.join(self.tmp, f"calibrate-{module}")
        cmd = [*shlex.split(cc), "-O2", f"-D{define}", "-o", exe, src, *libs]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        except OSError as e:
            raise PerfweaveError(
                f"calibration {module}: cannot run {cmd[0]} ({e.strerror or e}; set {var} "
                "or --calibrate none)"
            ) from None
        if res.returncode != 0:
            raise PerfweaveError(
                f"calibration {module}: {' '.join(cmd)} failed: {_last_line(res.stderr)}"
            )
        return exe

    def calibrate(self, variants, n, calls):
        """{(variant, module): [ns per call, one per round]} for bare and every variant
        that calibrates module, interleaved in each of n rounds."""
        out = {}
        modules = sorted({m for v in variants for m in v.calibrates})
        for module in modules:
            exe = self.build(module)
            users = [v for v in variants if v.kind == "bare" or module in v.calibrates]
            for _ in range(n):
                for v in users:
                    out.setdefault((v.name, module), []).append(self._per_call(v, exe, calls))
        return out

    def _per_call(self, variant, exe, calls):
        self.count += 1
        exp = os.path.join(self.tmp, f"exp{self.count}")
        cmd = self.line(variant, [exe, str(calls)], exp)
        res = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        shutil.rmtree(exp, ignore_errors=True)
        for line in res.stdout.splitlines():
            if line.startswith("ns_per_call "):
                return float(line.split()[1])
        raise PerfweaveError(
            f"calibration under {variant.name} (exit status {res.returncode}): "
            f"{_last_line(res.stderr)}"
        )

"""Helpers and fixtures of the runtime tests: build small MPI programs with each MPI, run them
under `perfweave run`, and read the experiment back.

Tests of measurements read the experiment through the Python API (`Run.open()`:
perfweave.open, docs/python-api.md), its tables and models, with the look-ups below
(`by_name`, `inclusive_pct`, `callsites`, `place`, `site_objects`, `tree_nodes`,
`activity_pct`, `activity_per_rank_pct`). `Run.report()` (`perfweave report --json`) is
for tests whose subject is the report itself, and for what only the report holds (advice,
the time split, the activity timeline): each such test says why it reads the report.

What a test checks is kept apart from how a program is built and launched: every
test takes the `mpi` fixture and so runs once per MPI library (Open MPI and
MPICH). Both are installed by `make test` (scripts/install-deps.sh); a missing
one is a failure, not a skip.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

import perfweave

PROGRAMS = Path(__file__).parent / "programs"
BIN = Path(sys.executable).parent
PERFWEAVE = str(BIN / "perfweave")

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


@dataclass
class Mpi:
    name: str
    cc: str
    cxx: str
    fc: str
    run: str

    def launch(self, nranks):
        if self.name == "openmpi":
            return [self.run, "--oversubscribe", "-n", str(nranks)]
        return [self.run, "-n", str(nranks)]


FLAVORS = {
    "openmpi": Mpi(
        "openmpi", "mpicc.openmpi", "mpicxx.openmpi", "mpifort.openmpi", "mpirun.openmpi"
    ),
    "mpich": Mpi("mpich", "mpicc.mpich", "mpicxx.mpich", "mpifort.mpich", "mpirun.mpich"),
}


@pytest.fixture(params=sorted(FLAVORS), scope="session")
def mpi(request):
    m = FLAVORS[request.param]
    for tool in (m.cc, m.cxx, m.fc, m.run):
        assert shutil.which(tool), f"{tool} is not installed (make test installs it)"
    return m


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(scope="session")
def build(build_dir):
    """build(mpi, "name.c") -> path of the executable, compiled once per MPI."""
    cache = {}

    def _build(m, source, extra=()):
        key = (m.name if m else "serial", source, tuple(extra))
        if key in cache:
            return cache[key]
        src = PROGRAMS / source
        flags = "-".join(extra).replace("/", "_")  # a flag may name a directory
        out = build_dir / f"{src.stem}-{key[0]}{'-' + flags if extra else ''}"
        if m is None:
            compiler = "gcc"
        else:
            compiler = {".f90": m.fc, ".f": m.fc, ".F90": m.fc, ".cpp": m.cxx}.get(src.suffix, m.cc)
        # Fortran modules are written to the current directory: one per MPI
        workdir = build_dir / f"mod-{key[0]}"
        workdir.mkdir(exist_ok=True)
        cmd = [compiler, "-g", "-O0", "-o", str(out), str(src), *extra]
        if src.suffix == ".c":
            cmd.append("-lm")
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stderr}"
        cache[key] = out
        return out

    return _build


def site_lines(source):
    """Marker comments on call lines: `// @site NAME` or `! @site NAME` -> line number."""
    lines = {}
    for n, line in enumerate((PROGRAMS / source).read_text().splitlines(), 1):
        m = re.search(r"@site (\w+)", line)
        if m:
            lines[m.group(1)] = n
    return lines


@dataclass
class Run:
    exp: Path
    proc: subprocess.CompletedProcess

    def open(self):
        """The experiment through the Python API (perfweave.open): its tables and models."""
        return perfweave.open(self.exp)

    def report(self, *extra):
        res = subprocess.run(
            [PERFWEAVE, "report", "--json", "--top", "1000", *extra, str(self.exp)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def text_report(self, *extra):
        """The text report; --full (every row, names whole) unless extra says otherwise:
        tests look for content, test_report_terminal.py for the default's fit."""
        res = subprocess.run(
            [PERFWEAVE, "report", *(extra or ("--full",)), str(self.exp)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        return res.stdout


def run_with_stdin_open(cmd, **kwargs):
    """subprocess.run, output captured, with stdin an empty pipe kept open until the command
    ends. MPICH's mpiexec (hydra 4.0) forwards the end of its stdin to rank 0's proxy and,
    not ignoring SIGPIPE, dies of it (exit status 141) when that proxy has already ended:
    a race its program can win by ending within milliseconds of its start, on a busy
    machine, with or without perfweave. A stdin at its end from the start (/dev/null, as
    pytest gives) opens that race in every run; this one, never at its end, does not."""
    r, w = os.pipe()
    try:
        return subprocess.run(cmd, stdin=r, capture_output=True, text=True, **kwargs)
    finally:
        os.close(r)
        os.close(w)


@pytest.fixture
def run_pw(tmp_path):
    counter = [0]

    def _run(command, options=(), timeout=180, check=True):
        counter[0] += 1
        exp = tmp_path / f"exp{counter[0]}"
        cmd = [PERFWEAVE, "run", "-o", str(exp), *options, "--", *map(str, command)]
        proc = run_with_stdin_open(cmd, timeout=timeout)
        if check:
            assert proc.returncode == 0, f"{cmd}:\n{proc.stdout}\n{proc.stderr}"
        return Run(exp, proc)

    return _run


def bare(command, timeout=180):
    return run_with_stdin_open(list(map(str, command)), timeout=timeout)


def by_name(table):
    """{name: row (a dict)} of a table of the Python API with a `name` column:
    exp.mpi_functions() (an MPI function's calls, time_s, bytes_sent, bytes_recv, ...
    summed over ranks), exp.functions(), exp.functions(inclusive=True), exp.lines()."""
    return {r["name"]: r for r in table.to_dict("records")}


def inclusive_pct(exp):
    """{function: % of the sampled time with it on the stack} (exp.functions(inclusive=True))."""
    table = exp.functions(inclusive=True)
    return dict(zip(table["name"].tolist(), table["pct"].tolist()))


def callsites(exp, function):
    """The rows (dicts, by time) of exp.mpi_callsites() of one MPI function."""
    table = exp.mpi_callsites()
    return table[table["function"] == function].to_dict("records")


_WHERE = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def place(where):
    """(function, file name, line) of a place as the API's tables name it (`where` of
    mpi_callsites(), each frame of its `stack`: 'solve (solver.c:120)')."""
    m = _WHERE.match(where)
    assert m, f"no source line in {where!r}"
    return m["function"], m["file"], int(m["line"])


def site_objects(exp, function):
    """The paths of the loaded objects that called one MPI function, from the profile's
    rows (exp.profile: one row per call site, rank and thread)."""
    p = exp.profile
    rows = p.sites[p.sites["fn"] == p.functions.index(function)]
    return {p.objects[o] for o in rows["object"].tolist()}


def tree_nodes(exp):
    """{path of function names from the root (a tuple): row} of exp.call_tree()."""
    rows = exp.call_tree().to_dict("records")
    path = {}
    for n in rows:
        up = () if pd.isna(n["parent"]) else path[n["parent"]]
        path[n["id"]] = up + (n["name"],)
    return {path[n["id"]]: n for n in rows}


def activity_pct(exp):
    """{activity: % of the sampled wall time}, every activity of the experiment's list:
    the samples' seconds (exp.samples(), each the wall time it stands for) by activity."""
    s = exp.samples()
    by = s.groupby("activity", observed=False)["seconds"].sum()
    return {str(a): float(100 * v / s["seconds"].sum()) for a, v in by.items()}


def activity_per_rank_pct(exp, activity):
    """{rank: % of that rank's sampled wall time in activity}, from exp.samples()."""
    s = exp.samples()
    mine = s["seconds"].where(s["activity"] == activity, 0.0)
    by = mine.groupby(s["rank"]).sum() / s.groupby("rank")["seconds"].sum()
    return {int(r): float(100 * v) for r, v in by.items()}


def reported(proc, *names):
    """Values a test program measured of its own run and printed on stderr as
    `NAME VALUE` pairs (its ground truth on a machine as busy as it is), by name."""
    found = {}
    for line in proc.stderr.splitlines():
        words = line.split()
        for k in range(len(words) - 1):
            if words[k] in names:
                found[words[k]] = float(words[k + 1])
    assert set(found) == set(names), proc.stderr
    return [found[n] for n in names]


def share_bound(share, samples, margin=2.0):
    """Points by which a sampled share (percent) may differ from a program's own measure
    of it: 3 binomial standard deviations for that many samples, plus a margin (points)
    for the interval before each sample, which goes to the function sampled at its end."""
    p = min(max(share / 100, 0.0), 1.0)  # a share computed as a ratio can pass 100 % by an ulp
    return 300 * (p * (1 - p) / max(samples, 1)) ** 0.5 + margin


def reported_by_rank(proc, name):
    """{rank: value} of the `rank R NAME VALUE [NAME VALUE ...]` lines an MPI test
    program printed on stderr: what each rank measured of its own run."""
    out = {}
    for line in proc.stderr.splitlines():
        w = line.split()
        if len(w) >= 4 and w[0] == "rank":
            for k in range(2, len(w) - 1, 2):
                if w[k] == name:
                    out[int(w[1])] = float(w[k + 1])
    return out


def rank_counts(stdout):
    """{rank: {key: value}} of the `rank R KEY VALUE` lines an MPI test program printed on
    stdout: what each rank did by construction (integers)."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "rank":
            out.setdefault(int(parts[1]), {})[parts[2]] = int(parts[3])
    return out


def sampled_life(exp, rank=None):
    """(seconds from the sampler's start to its end, samples) of one rank's process, or
    (rank None) of the experiment's only process."""
    if rank is None:
        [path] = (Path(exp) / "samples").glob("*.json")
    else:
        path = Path(exp) / "samples" / f"rank-{rank}.json"
    meta = json.loads(path.read_text())
    return (meta["t_end"] - meta["t_start"]) / 1e9, meta["samples"]


def outside_share(exp, measured_s, rank=None):
    """The share (percent) of a process's sampled life that its program's own clock did
    not cover: its start-up before main, the loader, printing its results and its exit
    (what a real program does besides the phases it measured, measured_s seconds in
    all). What the samples may give to anything but those phases."""
    life, _ = sampled_life(exp, rank)
    return max(0.0, 100 * (life - measured_s) / life)

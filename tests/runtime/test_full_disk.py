"""A full disk under the experiment: the program's output and exit status stay its own,
perfweave says in one line what it could not write, no file of the experiment is
half-written under its final name, what was written is readable and the rest is
marked (docs/format.md, "Writing files").

Each case runs on its own small tmpfs: full before the run; room for experiment.json
but not the profile; for the profile but not the samples; 64 KiB with everything on;
256 KiB that the program fills itself; no inode left. The sizes that make the profile,
or only the samples, not fit are taken from a reference run of the same program on a
roomy one (tmpfs counts whole 4 KiB pages). The program (programs/disk_full.c) prints one line
per process and exits with the code it is given; in `fill` mode it writes into its
working directory, on the same tmpfs, until a write fails.
"""

import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness import PERFWEAVE
from perfweave import writing
from perfweave.readers.compact import read_compact
from perfweave.readers.io import read_io
from perfweave.readers.profile import read_profile
from perfweave.readers.samples import SAMPLE_DTYPE, read_samples
from perfweave.readers.table_description import table_descriptions
from perfweave.readers.tables import read_tables
from perfweave.readers.timeline import read_node
from perfweave.readers.trace import list_ranks, read_rank

PAGE = 4096
EVENT_BYTES = 16  # format.h PW_CEVENT_FIELDS
VALUE_BYTES = 24  # format.h PW_SAMPLE_FIELDS
# files appended (whole records) or rewritten (an earlier, whole version) during the run:
# present under their name even when a later write failed and was marked
STREAMED = re.compile(
    r"^(experiment\.json|traces/rank-\d+\.events|"
    r"timeline/[^/]+\.(values|pids|json))$"
)
# the cases sized for the profile and samples alone: no node timeline, no I/O store (the
# I/O profile is in the case with everything on)
NO_TIMELINE = ("--node-interval", "0", "--no-io")
BIG_SAMPLES = ("--sample-interval-ms", "2")  # about 130 KB of samples per process in 0.6 s
HUGE_SAMPLES = ("--sample-interval-ms", "1")  # about 340 KB per process in 0.8 s
NRANKS = 2


@pytest.fixture
def tmpfs(tmp_path):
    """tmpfs(kib, name[, inodes]) -> a new tmpfs of that size, unmounted after the test."""
    mounted = []

    def _mount(kib, name, inodes=None):
        d = tmp_path / name
        d.mkdir()
        opts = f"size={kib}k" + (f",nr_inodes={inodes}" if inodes else "")
        res = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)], capture_output=True, text=True
        )
        assert res.returncode == 0, f"cannot mount a tmpfs (these tests run as root): {res.stderr}"
        mounted.append(d)
        return d

    yield _mount
    for d in reversed(mounted):
        if subprocess.run(["umount", str(d)]).returncode != 0:
            subprocess.run(["umount", "-l", str(d)])


class Program:
    """How to launch disk_full for one MPI library, or without MPI (mpi None)."""

    def __init__(self, mpi, build):
        self.mpi = mpi
        self.nprocs = NRANKS if mpi else 1
        if mpi:
            self.exe = build(mpi, "disk_full.c")
            self.launch = mpi.launch(NRANKS)
        else:
            self.exe = build(None, "disk_full.c", ("-DSERIAL",))
            self.launch = []

    def command(self, mode, seconds, code):
        return [*self.launch, str(self.exe), mode, str(seconds), str(code)]

    def trace(self):
        return ("--trace",) if self.mpi else ()

    def run(self, disk, mode, seconds, code, options=()):
        exp = disk / "exp"
        proc = subprocess.run(
            [PERFWEAVE, "run", "-o", str(exp), *options, "--", *self.command(mode, seconds, code)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=disk,
        )
        return exp, proc

    def bare(self, disk, mode, seconds, code):
        return subprocess.run(
            self.command(mode, seconds, code), capture_output=True, text=True, timeout=120, cwd=disk
        )


def pages(path):
    return math.ceil(path.stat().st_size / PAGE)


def program_lines(stdout, nprocs, fill=False):
    """The program's own lines, checked: one per process, rank 0..n-1 in some order."""
    pattern = r"rank (\d+): \d+ iterations" + (r"; wrote (\d+) bytes until (\S+)" if fill else "")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("rank ")]
    found = [re.fullmatch(pattern, ln) for ln in lines]
    assert all(found) and sorted(int(m.group(1)) for m in found) == list(range(nprocs)), stdout
    assert len(stdout.splitlines()) == nprocs, stdout
    return found


def check_files(exp, marks):
    """Every file under a final name is whole and parses; no temporary file is left; a
    marked file written at once does not exist under its name."""
    stores = 0
    for p in sorted(exp.rglob("*")):
        if p.is_dir():
            continue
        rel = p.relative_to(exp).as_posix()
        size = p.stat().st_size
        assert ".tmp." not in p.name, f"temporary file left behind: {rel}"
        if p.name.startswith(writing.MARK_PREFIX):
            assert size == 0, rel
        elif rel == "experiment.json":
            assert json.loads(p.read_text())["format"] == "perfweave-experiment"
        elif rel.endswith(".pwprof"):
            read_profile(p)  # size, end marker, arrays
        elif rel == "profile.pwcompact":
            read_compact(p)
        elif rel.startswith("samples/") and rel.endswith(".json"):
            meta = json.loads(p.read_text())
            assert (
                p.with_suffix(".samples").stat().st_size == meta["samples"] * SAMPLE_DTYPE.itemsize
            )
        elif rel.startswith("samples/") and rel.endswith(".samples"):
            assert size % SAMPLE_DTYPE.itemsize == 0, rel
        elif rel.startswith("timeline/") and rel.endswith(".json"):
            read_node(p)
        elif rel.endswith(".values"):
            assert size % VALUE_BYTES == 0, rel
        elif rel.endswith(".act"):
            assert size == PAGE, rel
        elif rel.endswith(".pids"):
            text = p.read_text()
            assert all(ln.isdigit() for ln in text.splitlines()) and text.endswith("\n"), rel
        elif rel.endswith(".lock"):
            assert size == 0, rel
        elif rel.startswith("traces/") and rel.endswith(".events"):
            assert size % EVENT_BYTES == 0, rel
        elif rel.startswith("traces/") and rel.endswith(".json"):
            assert json.loads(p.read_text())["format"] == "perfweave-trace"
        elif rel.startswith("tables/") and rel.endswith(".json"):
            # kept where the process's profile could not be written: its data
            assert any(u["file"].endswith(".pwprof") for u in marks), rel
            read_tables(p)
        elif rel.startswith("tables/") and rel.endswith(".pwtab"):
            assert p.with_suffix(".json").exists(), rel
        elif rel.startswith("io/") and rel.endswith((".pwio", ".segments")):
            stores += rel.endswith(".pwio")  # the I/O profile (on by default): read below
        elif not re.fullmatch(r"fill-\d+\.bin", rel):
            pytest.fail(f"unexpected file {rel}")
    # every I/O store is read, or left out with a note: never an error
    io = read_io(exp)
    assert len(io.processes) + len(io.notes) >= stores, io.notes
    for u in marks:
        assert u["error"] == "ENOSPC", u
        if not STREAMED.match(u["file"]):
            # a trace description rewritten at the end keeps its complete first version
            # (written at MPI_Init, state "running"); any other marked file is absent
            if u["file"].startswith("traces/") and (exp / u["file"]).exists():
                assert json.loads((exp / u["file"]).read_text())["state"] == "running"
                continue
            assert not (exp / u["file"]).exists(), f"{u['file']} is marked and present"
    # and the readers of a whole kind take what is there
    assert {p.name for p in read_samples(exp)} == {p.stem for p in (exp / "samples").glob("*.json")}
    if (exp / "traces").is_dir() and any((exp / "traces").iterdir()):
        for r in list_ranks(exp):
            read_rank(exp, r)


def check_failed_run(exp, proc, code, nprocs, fill=False):
    """The run of a program under perfweave on a full disk; returns the marks."""
    assert proc.returncode == code, proc.stderr
    found = program_lines(proc.stdout, nprocs, fill)
    assert "Traceback" not in proc.stderr, proc.stderr
    marks = writing.read_unwritten(exp)
    assert marks, "nothing was marked"
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("perfweave")]
    assert ours == [
        f"perfweave: experiment {exp}",
        f"perfweave: experiment {exp} is incomplete: could not write "
        f"{writing.describe(marks)} (perfweave report {exp})",
    ], proc.stderr
    assert "(No space left on device)" in ours[1]
    check_files(exp, marks)
    if not any(u["file"] == "experiment.json" for u in marks):
        meta = json.loads((exp / "experiment.json").read_text())
        assert meta["state"] == "finished" and meta["exit_status"] == {"code": code}
        assert meta["unwritten"] == [{"file": u["file"], "error": "ENOSPC"} for u in marks]
    elif (exp / "experiment.json").exists():  # the first version, complete
        assert json.loads((exp / "experiment.json").read_text())["state"] == "running"
    check_report(exp, marks)
    if (exp / "traces").is_dir():
        ana = subprocess.run(
            [PERFWEAVE, "analyze", "--no-save", str(exp)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in ana.stderr, ana.stderr
        assert ana.returncode == 0 or len(ana.stderr.splitlines()) == 1, ana.stderr
    return marks, found


def check_report(exp, marks):
    """With profile data: a report with the mark. Without: one line, exit status 2."""
    rep = subprocess.run(
        [PERFWEAVE, "report", str(exp)], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in rep.stderr, rep.stderr
    compact = (exp / "profile.pwcompact").exists()  # written first: read when pwprof is not
    if not list(exp.rglob("*.pwprof")) and not compact and not table_descriptions(exp):
        lost = [u for u in marks if u["file"].endswith(".pwprof")]
        assert lost
        assert rep.returncode == 2
        assert rep.stderr.splitlines() == [
            f"perfweave: error: {exp}: no profile data: perfweave "
            f"could not write {writing.describe(lost)}"
        ]
        return
    assert rep.returncode == 0, rep.stderr
    assert "(incomplete experiment: see the first note)" in rep.stdout
    flat = " ".join(rep.stdout.split())  # the note is wrapped at 100 columns
    assert (
        f"note incomplete: perfweave could not write {writing.describe(marks)}; "
        "this report shows the files that were written" in flat
    )
    js = subprocess.run(
        [PERFWEAVE, "report", "--json", str(exp)], capture_output=True, text=True, timeout=120
    )
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["unwritten"] == marks


def reference(prog, tmpfs):
    """A run with room to spare: nothing marked; the sizes of its profile and samples."""
    disk = tmpfs(4096, "roomy")
    exp, proc = prog.run(disk, "work", 0.6, 0, NO_TIMELINE + BIG_SAMPLES)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stderr.splitlines()[-1]
        == f"perfweave: experiment written to {exp} (perfweave report {exp})"
    )
    assert writing.read_unwritten(exp) == []
    check_files(exp, [])
    profile = next(exp.rglob("*.pwprof"))
    samples = sorted((exp / "samples").glob("*.samples"))
    assert len(samples) == prog.nprocs
    # an MPI run's compact profile, written just before profile.pwprof, counts as the
    # profile's: case 1's disk then holds it and not profile.pwprof
    compact = exp / "profile.pwcompact"
    held = pages(profile) + (pages(compact) if compact.exists() else 0)
    return pages(exp / "experiment.json"), held, min(pages(s) for s in samples)


# a process's tables description (tables/NAME.json): its functions and loaded objects,
# 16 KiB for a rank of Open MPI 4.1 or MPICH 4.0 here, at most 6 pages on tmpfs
DESCRIPTION_PAGES = 6


def tables_pages(exp):
    """Pages the call-site tables of experiment exp's processes held while they ran. Those
    kept (a process whose profile found no room: its data) are measured; for the others,
    from what their profile says they recorded: per process its tables file's head, one
    page for its table's block and one for its histograms', up to 2 pages per call site
    (a slot may straddle two) and per histogram row. Each description counts twice (it
    is rewritten under a temporary name)."""
    kept = sorted((exp / "tables").glob("*")) if (exp / "tables").is_dir() else []
    pages = sum(math.ceil(p.stat().st_blocks * 512 / PAGE) for p in kept)
    pages += DESCRIPTION_PAGES * len([p for p in kept if p.suffix == ".json"])
    for profile in exp.rglob("*.pwprof"):
        a = read_profile(profile).arrays
        for r in a["ranks"]["rank"]:
            sites = int((a["sites"]["rank"] == r).sum())
            rows = len(set(a["hist"]["fn"][a["hist"]["rank"] == r].tolist()))
            pages += 3 + 2 * (sites + rows) + 2 * DESCRIPTION_PAGES
    return pages


def full_disk_cases(prog, tmpfs):
    json_pages, profile_pages, sample_pages = reference(prog, tmpfs)
    assert json_pages <= 2  # the options and the launched command: about 4 KiB

    # 0. full before the run: not even experiment.json; the program runs all the same
    disk = tmpfs(4, "full")
    (disk / "filler").write_bytes(b"x" * PAGE)
    exp, proc = prog.run(disk, "work", 0.1, 3, ("--no-sample",) + NO_TIMELINE)
    marks, _ = check_failed_run(exp, proc, 3, prog.nprocs)
    assert not (exp / "experiment.json").exists()
    lost = {u["file"] for u in marks}
    assert "experiment.json" in lost and any(f.endswith(".pwprof") for f in lost)

    # 1. experiment.json fits, the profile does not (nothing else is written): after the
    # first experiment.json, profile_pages - 1 pages are free, enough for the last one
    # when that is at least json_pages (MPI); else (serial) that fails too.
    disk = tmpfs(PAGE // 1024 * (json_pages - 1 + profile_pages), "no-profile")
    exp, proc = prog.run(disk, "work", 0.1, 3, ("--no-sample",) + NO_TIMELINE)
    marks, _ = check_failed_run(exp, proc, 3, prog.nprocs)
    profile = "profile.pwprof" if prog.mpi else f"procs/{os.uname().nodename}."
    assert [u["file"] for u in marks if u["file"].endswith(".pwprof")][0].startswith(profile)
    assert any(u["file"] == "experiment.json" for u in marks) == (profile_pages - 1 < json_pages)

    # 2. the profile fits, the samples do not (each process's take more than the 2 pages
    # left): the last experiment.json still fits
    assert sample_pages > 2
    disk = tmpfs(PAGE // 1024 * (json_pages + profile_pages + 2), "no-samples")
    exp, proc = prog.run(disk, "work", 0.6, 0, NO_TIMELINE + BIG_SAMPLES)
    marks, _ = check_failed_run(exp, proc, 0, prog.nprocs)
    (profile,) = exp.rglob("*.pwprof")
    if prog.mpi:
        expected = [f"samples/rank-{r}.samples" for r in range(prog.nprocs)]
    else:
        pid = read_profile(profile).arrays["ranks"]["pid"][0]
        expected = [f"samples/{os.uname().nodename}.{pid}.samples"]
    assert [u["file"] for u in marks] == expected
    assert not list((exp / "samples").glob("*.json"))

    # 3. 64 KiB and everything on (samples, node timeline, event trace, I/O profile): whatever does
    # not fit (at least 100 samples, 11 pages, per process) is marked
    disk = tmpfs(64, "small")
    exp, proc = prog.run(disk, "work", 0.8, 3, HUGE_SAMPLES + prog.trace() + ("--io",))
    check_failed_run(exp, proc, 3, prog.nprocs)

    # 4. the program fills the disk itself, then ends normally: it sees what it sees
    # without perfweave (ENOSPC, its exit status, its output), with less room by the
    # pages perfweave's files held when it filled the disk: up to 16 pages of its trace
    # and timeline, each process's call-site tables (tables/, removed once its profile
    # is saved; tables_pages) and its I/O store and segment trace
    disk = tmpfs(256, "filled")
    exp, proc = prog.run(disk, "fill", 0.2, 0, prog.trace())
    _, found = check_failed_run(exp, proc, 0, prog.nprocs, fill=True)
    ref_disk = tmpfs(256, "filled-bare")
    ref = prog.bare(ref_disk, "fill", 0.2, 0)
    assert ref.returncode == 0, ref.stderr
    ref_found = program_lines(ref.stdout, prog.nprocs, fill=True)
    assert {m.group(3) for m in found} == {m.group(3) for m in ref_found} == {"ENOSPC"}
    wrote = sum(int(m.group(2)) for m in found)
    ref_wrote = sum(int(m.group(2)) for m in ref_found)
    held = tables_pages(exp) + prog.nprocs  # + its ending/HOST.PID (8 bytes) per process
    # + the I/O profile's stores and segment traces (with --io): their disk blocks
    held += sum(math.ceil(p.stat().st_blocks * 512 / PAGE) for p in exp.glob("io/*"))
    assert 0 < ref_wrote - wrote <= (16 + held) * PAGE, (wrote, ref_wrote, held)

    # 5. no inode left after experiment.json (tmpfs counts the root directory, the
    # experiment's and experiment.json): the runtime cannot even mark what it could
    # not write, so each process says it in one line, and perfweave run in its own
    disk = tmpfs(256, "no-inodes", inodes=3)
    exp, proc = prog.run(disk, "work", 0.1, 3, NO_TIMELINE)
    assert proc.returncode == 3, proc.stderr
    program_lines(proc.stdout, prog.nprocs)
    assert "Traceback" not in proc.stderr, proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("perfweave")]
    runtime = ours[1:-1]
    assert ours[0] == f"perfweave: experiment {exp}" and ours[-1] == (
        f"perfweave: experiment {exp} is incomplete: could not write experiment.json (No "
        f"space left on device) (perfweave report {exp})"
    ), proc.stderr
    assert 1 <= len(runtime) <= prog.nprocs, proc.stderr
    assert all(
        re.fullmatch(
            rf"perfweave: cannot write {exp}/\S+ \(No space left on device\); "
            "the experiment is incomplete",
            ln,
        )
        for ln in runtime
    ), runtime
    assert [p.name for p in exp.iterdir()] == ["experiment.json"]
    check_files(exp, [])


def test_full_disk_mpi(mpi, build, tmpfs):
    full_disk_cases(Program(mpi, build), tmpfs)


def test_full_disk_serial(build, tmpfs):
    full_disk_cases(Program(None, build), tmpfs)


def test_outputs_on_a_full_disk(build, tmpfs, tmp_path):
    """perfweave report and import writing to a full disk: one line and status 2,
    nothing half-written."""
    prog = Program(None, build)
    exp, proc = prog.run(tmp_path, "work", 0.1, 0, NO_TIMELINE)
    assert proc.returncode == 0, proc.stderr
    disk = tmpfs(4, "full")
    (disk / "filler").write_bytes(b"x" * PAGE)
    with open(disk / "report.json", "w") as out:
        rep = subprocess.run(
            [PERFWEAVE, "report", "--json", str(exp)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert rep.returncode == 2
    assert rep.stderr.splitlines() == ["perfweave: error: the output: No space left on device"]
    html = disk / "report.html"
    rep = subprocess.run(
        [PERFWEAVE, "report", "--html", str(html), str(exp)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rep.returncode == 2
    assert rep.stderr.splitlines() == [f"perfweave: error: --html {html}: No space left on device"]
    archive = Path(__file__).parents[1] / "data" / "otf2" / "pipit-ping-pong" / "traces.otf2"
    imp = subprocess.run(
        [PERFWEAVE, "import", str(archive), "-o", str(disk / "imported")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imp.returncode == 2
    assert imp.stderr.splitlines() == [
        f"perfweave: error: {disk / 'imported'}: cannot write: No space left on device"
    ]
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "report.json"]


@pytest.mark.parametrize("fmt", ["chrome", "otf2"])
def test_export_to_a_full_disk(tmpfs, tmp_path, fmt):
    """An export that fills the disk half-way (the Chrome file is written by a thread of
    its own while the next chunk is made): one line, status 2, nothing left behind."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import tracegen

    exp = tmp_path / "exp"
    tracegen.write(exp, 2, 40_000)
    disk = tmpfs(256, "small")
    out = disk / ("t.json" if fmt == "chrome" else "t.otf2")
    res = subprocess.run(
        [PERFWEAVE, "export", str(exp), "--format", fmt, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
    assert list(disk.iterdir()) == []
    # the same export where there is room writes far more than the disk holds
    big = tmp_path / ("t.json" if fmt == "chrome" else "t.otf2")
    res = subprocess.run(
        [PERFWEAVE, "export", str(exp), "--format", fmt, "-o", str(big)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    size = (
        big.stat().st_size
        if fmt == "chrome"
        else sum(p.stat().st_size for p in big.parent.rglob("*") if p.is_file() and p != exp)
    )
    assert size > 4 * 256 * 1024

"""The launch path's fixed cost (docs/performance.md, "The launch path"): what `perfweave
run` imports before the program starts and after it ends, how perfweave-wait
(runtime/launch/wait.c) ends a run that needs no verdict without starting Python again,
and that what the launch path does without (datetime, subprocess) changes nothing it
writes or does. The figure is bench/launch_overhead.py's."""

import datetime
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfweave import writing
from perfweave.launch import run

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
# what the data layers and their libraries cost to import: none before the program, nor
# in the verdict's interpreter after it
HEAVY = ("numpy", "pandas", "perfweave.readers.experiment", "perfweave.model")
HEAVY += ("perfweave.analysis", "perfweave.report", "perfweave.interop", "perfweave.api")
HEAVY += ("dataclasses", "typing", "inspect")
# what the launch path does without: each costs an interpreter of the run about as much as
# the rest of its set-up (pathlib with urllib.parse and ipaddress, subprocess with
# threading and selectors, shutil with bz2, lzma and zlib: argparse's terminal width)
UNNEEDED = ("pathlib", "urllib", "datetime", "subprocess", "threading", "shutil", "bz2", "lzma")
# nor these, before the program: json, re and enum (which signal's module, argparse, json and
# re import) and argparse (options.run_line parses a plain line) cost about as much again
# (gettext and locale: argparse's; collections, functools, contextlib: namedtuple,
# lru_cache and contextmanager)
STANDARD = ("json", "re", "enum", "signal", "argparse", "gettext", "locale", "collections")
STANDARD += ("functools", "contextlib")


def named(modules, names):
    """The modules of `modules` that are one of `names` or inside one of them."""
    return [m for m in modules if m in names or m.split(".")[0] in names]


def imports(lines):
    """The modules PYTHONPROFILEIMPORTTIME's lines name."""
    return [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]


def traced_run(tmp_path, *options):
    """perfweave run of a program without MPI that says when it starts, under
    PYTHONPROFILEIMPORTTIME: (what was imported before the program, after it). The
    program ends in true's exit(), which saves its profile (dash's own end is _exit)."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    res = subprocess.run(
        [PERFWEAVE, "run", *options, "-o", tmp_path / "x", "--"]
        + ["sh", "-c", "echo program-starts >&2; exec true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[-1].startswith("perfweave: experiment written to ")
    at = lines.index("program-starts")
    return imports(lines[:at]), imports(lines[at:])


def test_run_imports_nothing_heavy_before_the_program(tmp_path):
    before, _ = traced_run(tmp_path, "--mpi", "none")
    # the interpreter did say what it imported: the launch's parts the run needs, not the
    # verdict's (perfweave/launch/__init__.py)
    launch = {f"perfweave.launch{part}" for part in ("", ".command", ".run", ".watch")}
    assert launch <= set(before)
    assert "perfweave.launch.verdict" not in before
    assert [m for m in before if m.startswith(HEAVY + UNNEEDED)] == []
    assert named(before, STANDARD) == []
    # nor another verb's module (cli/__init__.py imports the verb that runs alone)
    assert [m for m in before if m.startswith("perfweave.cli.")] == ["perfweave.cli.run"]


def test_the_verdict_after_the_run_imports_nothing_heavy(tmp_path):
    """A program without MPI leaves procs/ alone, and whether it is an MPI program takes
    Python's verdict (ldd): its interpreter reads the experiment without numpy."""
    _, after = traced_run(tmp_path)
    assert "perfweave.readers.recorded" in after  # the verdict was Python's
    # subprocess: the verdict's ldd of the program
    assert [m for m in after if m.startswith(HEAVY + UNNEEDED[:3] + ("argparse",))] == []


@pytest.mark.parametrize("zone", ["UTC0", "XYZ-1:02:03", "ABC+5:30"])
def test_times_are_written_as_datetime_writes_them(monkeypatch, zone):
    """experiment.json's start_time and end_time (launch/run.py iso_time): datetime's isoformat
    of the local time, to the microsecond rounded half to even."""
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        now = time.time()
        for t in [now, float(int(now)), 1795920676.602784, 1795920676.9999996]:
            for dt in (0, 0.5e-6, 1.5e-6, 1e-7, 0.25, 3599.9999999):
                want = datetime.datetime.fromtimestamp(t + dt).astimezone().isoformat()
                assert run.iso_time(t + dt) == want
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_command_starts_as_subprocess_started_it(tmp_path):
    """The command perfweave run starts inherits none of perfweave's descriptors above 2
    and has SIGPIPE, which Python ignores, at its default, as subprocess.Popen's
    close_fds and restore_signals made it; it ignores exactly the signals it ignores
    without perfweave (os.posix_spawnp left glibc's internal 32 and 33 ignored)."""
    fd = 57
    r, w = os.pipe()
    os.dup2(w, fd)
    os.close(w)
    script = (
        f"[ -e /proc/$$/fd/{fd} ] && echo fd-open || echo fd-closed; grep SigIgn /proc/$$/status"
    )
    try:
        res = subprocess.run(
            [PERFWEAVE, "run", "--mpi", "none", "-o", tmp_path / "x", "--", "sh", "-c", script],
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            timeout=60,
        )
        bare = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        os.close(fd)
        os.close(r)
    assert res.returncode == 0, res.stderr
    opened, ignored = res.stdout.split()[0], int(res.stdout.split()[-1], 16)
    assert opened == "fd-closed"
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))
    assert ignored == int(bare.stdout.split()[-1], 16), (res.stdout, bare.stdout)


def ended_run(tmp_path, script):
    """perfweave run of a shell script that leaves the complete profile's file, as a run
    whose every rank recorded data does: the run perfweave-wait ends by itself."""
    exp = tmp_path / "x"
    script = f'touch "$PERFWEAVE_EXPERIMENT/profile.pwprof"; {script}'
    res = subprocess.run(
        [PERFWEAVE, "run", "--mpi", "none", "-o", exp, "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return res, exp, json.loads((exp / "experiment.json").read_text())


@pytest.mark.parametrize(
    "script, returncode, status",
    [
        ("exit 0", 0, {"code": 0}),
        ("exit 7", 7, {"code": 7}),
        ("kill -TERM $$", -signal.SIGTERM, {"signal": signal.SIGTERM}),
        ("kill -KILL $$", -signal.SIGKILL, {"signal": signal.SIGKILL}),
    ],
)
def test_a_run_without_a_verdict_is_ended_as_python_did(tmp_path, script, returncode, status):
    res, exp, meta = ended_run(tmp_path, script)
    assert res.returncode == returncode
    assert res.stderr.splitlines() == [
        f"perfweave: experiment {exp}",
        f"perfweave: experiment written to {exp} (perfweave report {exp})",
    ]
    assert meta["state"] == "finished" and meta["exit_status"] == status
    # the members launch/run.py finish writes, with the same meaning
    assert list(meta)[-5:] == ["state", "end_epoch", "wall_seconds", "end_time", "exit_status"]
    assert 0 <= meta["end_epoch"] - meta["start_epoch"] < 60
    assert abs(meta["wall_seconds"] - (meta["end_epoch"] - meta["start_epoch"])) < 1e-5
    end = datetime.datetime.fromtimestamp(meta["end_epoch"]).astimezone()
    assert abs(datetime.datetime.fromisoformat(meta["end_time"]) - end).total_seconds() < 1e-5
    assert meta["end_time"][:19] == end.isoformat()[:19]
    assert meta["end_time"][-6:] == end.isoformat()[-6:]  # the offset, as Python writes it
    assert meta["command"][-1].endswith(script)


def test_a_mark_hands_the_end_to_python(tmp_path):
    """A file the runtime could not write (its mark) needs Python's last line."""
    res, exp, meta = ended_run(tmp_path, 'touch "$PERFWEAVE_EXPERIMENT/unwritten.x.ENOSPC"')
    assert res.returncode == 0
    assert res.stderr.splitlines()[-1] == (
        f"perfweave: experiment {exp} is incomplete: could not write x "
        f"(No space left on device) (perfweave report {exp})"
    )
    assert meta["state"] == "finished" and meta["unwritten"] == [{"file": "x", "error": "ENOSPC"}]


def test_experiment_json_is_written_as_json_writes_it(tmp_path):
    """writing.json_text, experiment.json's writer on the launch path, writes what
    json.dumps(indent=1) writes: a real experiment.json's document, and the values of
    every kind such a document can hold (perfweave-wait and every reader read it)."""
    subprocess.run(
        [PERFWEAVE, "run", "--mpi", "none", "-o", tmp_path / "x", "--", "true", 'é\x01"\\'],
        capture_output=True,
        timeout=60,
    )
    text = (tmp_path / "x" / "experiment.json").read_text()
    meta = json.loads(text)
    assert meta["command"] == ["true", 'é\x01"\\']
    assert writing.json_text(meta) == json.dumps(meta, indent=1) + "\n"
    odd = '"\\/\b\f\n\r\t\x00\x1f\x7f é\u2028\ud800\U0001f600'
    values = [0, -1, 1 << 70, 0.1, -0.0, 1e300, 5e-324, math.inf, -math.inf, math.nan]
    values += [True, False, None, "", odd, [], {}, [[]], [{}], (1, "a")]
    doc = {"values": values, odd: {"nested": {"deeper": values}}, "": [values, {}]}
    doc.update({7: "int key", 2.5: "float key", False: "bool key", None: "null key"})
    assert writing.json_text(doc) == json.dumps(doc, indent=1) + "\n"
    for value in values + [doc]:
        assert writing.json_text(value) == json.dumps(value, indent=1) + "\n"

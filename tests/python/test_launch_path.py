"""The launch path's fixed cost (docs/performance.md, "The launch path"): what `perfweave
run` imports before the program starts, and how perfweave-wait (runtime/launch/wait.c)
ends a run that needs no verdict without starting Python again. The figure is
bench/launch_overhead.py's."""

import datetime
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
# what the data layers and their libraries cost to import: none before the program
HEAVY = ("numpy", "pandas", "perfweave.readers", "perfweave.model", "perfweave.analysis")
HEAVY += ("perfweave.report", "perfweave.interop", "perfweave.api", "dataclasses")


def test_run_imports_nothing_heavy_before_the_program(tmp_path):
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    res = subprocess.run(
        [PERFWEAVE, "run", "--mpi", "none", "-o", tmp_path / "x", "--"]
        + ["sh", "-c", "echo program-starts >&2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    before = lines[: lines.index("program-starts")]
    imported = [line.split("|")[-1].strip() for line in before if line.startswith("import time:")]
    assert "perfweave.launch" in imported  # the interpreter did say what it imported
    assert [m for m in imported if m.startswith(HEAVY)] == []


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
    # the members launch.finish writes, with the same meaning
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

"""perfweave run's verdict on a run that recorded fewer ranks than it started
(launch/verdict.py verdict, readers.recorded.recorded) and how the readers repeat it, on
experiment directories built by hand."""

import json
import shutil
import struct

import pytest

from perfweave.launch.command import _static_program
from perfweave.launch.verdict import verdict
from perfweave.errors import PerfweaveError
from perfweave.readers import trace as rt
from perfweave.readers.experiment import open_experiment
from perfweave.readers.recorded import recorded
from perfweave.readers.table_description import KIND as TABLES

FUNCS = {"functions": ["MPI_Init", "MPI_Send"], "families": ["other", "p2p"]}
KILLED = "killed before saving (SIGKILL, as launchers send when a rank fails)"
VALUES = {"mpi": "auto", "node_interval": 100}
MPIRUN4 = ["mpirun", "-n", "4", "./app"]


def rank_file(pwprof, exp, rank, world_size):
    pwprof(
        exp / "partial" / f"rank-{rank}.pwprof",
        dict(FUNCS, world_size=world_size, partial=True),
        ranks=[dict(rank=rank, pid=100 + rank, state=3, app_ns=10)],
    )


def tables_description(exp, rank, pid, world_size):
    """tables/node.PID.json: a process that ended without saving (its tables are its
    data, readers/tables.py)."""
    doc = dict(
        FUNCS,
        format=TABLES.magic,
        version=TABLES.version,
        rank=rank,
        pid=pid,
        host="node",
        world_size=world_size,
        hist_buckets=34,
        max_callsites=64,
        modules=[],
        counters=[],
        objects=[],
    )
    (exp / "tables").mkdir(exist_ok=True)
    (exp / "tables" / f"node.{pid}.json").write_text(json.dumps(doc))


def pids(exp, *values):
    (exp / "timeline").mkdir(exist_ok=True)
    (exp / "timeline" / "node.pids").write_text("".join(f"{v}\n" for v in values))


def test_recorded_counts_every_file_of_a_rank(experiment_dir, pwprof):
    exp = experiment_dir()
    rank_file(pwprof, exp, 0, 6)
    (exp / "traces").mkdir()
    (exp / "traces" / "rank-2.json").write_text('{"rank": 2, "world_size": 6, "state": "running"}')
    (exp / "samples").mkdir()
    (exp / "samples" / "rank-3.samples").write_bytes(b"")
    (exp / "samples" / "node.77.samples").write_bytes(b"")  # a process without MPI
    (exp / "unwritten.partial%2Frank-4.pwprof.ENOSPC").write_bytes(b"")
    pwprof(
        exp / "procs" / "node.77.pwprof",
        dict(world_size=1, partial=True),
        ranks=[dict(rank=-1, pid=77)],
    )
    pids(exp, 100, 102, 102, 77)  # a wrapper's pid is its program's after exec
    rec = recorded(exp)
    assert (rec.complete, sorted(rec.ranks), rec.world_size, rec.processes, rec.started) == (
        False,
        [0, 2, 3, 4],
        6,
        1,
        3,
    )
    v = verdict(exp, ["mpirun", "-n", "2", "./app"], 0, VALUES, None)
    assert (v.state, v.ranks) == ("partial", {"expected": 6, "recorded": 4, "missing": "1,5"})
    assert v.reason == (
        f"only 4 of 6 ranks recorded data (none from ranks 1,5): they were {KILLED}, or "
        "perfweave's runtime did not reach their tasks (environment not passed to them)"
    )
    # ranks killed before they saved left their tables: recorded, as is a process
    # without a rank; a damaged description is no data
    tables_description(exp, 5, 105, 7)
    tables_description(exp, -1, 78, 1)
    (exp / "tables" / "node.106.json").write_text("{")
    rec = recorded(exp)
    assert (sorted(rec.ranks), rec.world_size, rec.processes) == ([0, 2, 3, 4, 5], 7, 2)
    v = verdict(exp, ["mpirun", "-n", "2", "./app"], 0, VALUES, None)
    assert v.ranks == {"expected": 7, "recorded": 5, "missing": "1,6"}


def test_complete_and_all_ranks_have_no_verdict(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(exp / "profile.pwprof", dict(FUNCS, world_size=1), ranks=[dict(rank=0)])
    assert verdict(exp, MPIRUN4, 0, VALUES, None) is None
    exp = experiment_dir("all")
    for r in range(4):
        rank_file(pwprof, exp, r, 4)
    assert verdict(exp, MPIRUN4, 1, VALUES, None) is None


def test_partial_names_the_launcher_status(experiment_dir, pwprof):
    exp = experiment_dir()
    for r in (0, 1, 3):
        rank_file(pwprof, exp, r, 4)
    for status, ended in ((3, "mpirun exited with code 3"), (-9, "mpirun was killed by signal 9")):
        v = verdict(exp, MPIRUN4, status, VALUES, None)
        assert v.reason == (
            f"only 3 of 4 ranks recorded data (none from rank 2): it was {KILLED}, or "
            "perfweave's runtime did not reach its task (environment not passed to it); "
            f"{ended}"
        )


@pytest.mark.parametrize(
    "status,started,reason",
    [
        (
            1,
            0,
            "0 of 4 ranks recorded data and no process loaded perfweave's runtime: the "
            "launch failed before the program started (mpirun exited with code 1)",
        ),
        (
            0,
            0,
            "0 of 4 ranks recorded data and no process loaded perfweave's runtime: its "
            "environment (LD_PRELOAD, PERFWEAVE_EXPERIMENT) did not reach the tasks (a "
            "launcher's or batch system's policy such as srun --export=NONE), or the "
            "program is statically linked",
        ),
        (
            0,
            2,
            "0 of 4 ranks recorded data though 2 processes loaded perfweave's runtime: the "
            "runtime was taken out before the MPI program started (a wrapper or launcher "
            "option resetting LD_PRELOAD), or the program is statically linked",
        ),
        (
            137,
            1,
            "0 of 4 ranks recorded data though 1 process loaded perfweave's runtime: "
            f"it was {KILLED}, or the runtime was taken out before the MPI program "
            "started (a wrapper or launcher option resetting LD_PRELOAD), or the program "
            "is statically linked (mpirun exited with code 137)",
        ),
        (
            1,
            None,
            "0 of 4 ranks recorded data: the launch failed before the program started, "
            f"or the ranks were {KILLED} (mpirun exited with code 1)",
        ),
    ],
)
def test_empty(experiment_dir, status, started, reason):
    exp = experiment_dir()
    if started:
        pids(exp, *range(1000, 1000 + started))
    values = dict(VALUES, node_interval=0 if started is None else 100)
    v = verdict(exp, MPIRUN4, status, values, None)
    assert (v.state, v.reason) == ("empty", reason)
    assert v.ranks == {"recorded": 0, "expected": 4, "missing": "0-3"}


def test_empty_plain_program_without_count(experiment_dir):
    v = verdict(experiment_dir(), ["./app"], 0, VALUES, None)
    assert v.ranks == {"recorded": 0}
    assert v.reason.startswith("no process recorded data and no process loaded ")


def test_processes_without_mpi_are_data(experiment_dir, pwprof, tmp_path):
    exp = experiment_dir()
    pwprof(
        exp / "procs" / "node.77.pwprof",
        dict(world_size=1, partial=True),
        ranks=[dict(rank=-1, pid=77)],
    )
    serial = shutil.which("true")
    assert verdict(exp, ["mpirun", "-n", "2", serial], 0, VALUES, serial) is None


def elf(interp, wide=True):
    """A minimal ELF executable header with one program header: PT_INTERP or PT_LOAD."""
    ptype = 3 if interp else 1
    if wide:
        head = (
            b"\x7fELF\x02\x01\x01"
            + bytes(9)
            + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
        )
        return head + struct.pack("<IIQQQQQQ", ptype, 0, 0, 0, 0, 0, 0, 0)
    head = (
        b"\x7fELF\x01\x01\x01"
        + bytes(9)
        + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0, 52, 0, 0, 52, 32, 1, 40, 0, 0)
    )
    return head + struct.pack("<IIIIIIII", ptype, 0, 0, 0, 0, 0, 0, 0)


def test_static_program(tmp_path, experiment_dir):
    for wide in (True, False):
        static, dynamic = tmp_path / f"static{wide}", tmp_path / f"dynamic{wide}"
        static.write_bytes(elf(False, wide))
        dynamic.write_bytes(elf(True, wide))
        assert _static_program(static) is True
        assert _static_program(dynamic) is False
    script = tmp_path / "wrap.sh"
    script.write_text('#!/bin/sh\nexec "$@"\n')
    assert _static_program(script) is False
    assert _static_program(tmp_path / "absent") is False
    v = verdict(experiment_dir(), ["./static"], 5, VALUES, str(tmp_path / "staticTrue"))
    assert v.reason == (
        f"no process recorded data: {tmp_path / 'staticTrue'} is statically "
        "linked, so perfweave's runtime (loaded through LD_PRELOAD) cannot "
        "enter it (static exited with code 5)"
    )


REASON = "0 of 2 ranks recorded data and no process loaded perfweave's runtime: because"


def test_readers_repeat_the_recorded_reason(experiment_dir, pwprof):
    exp = experiment_dir(
        state="empty", reason=REASON, ranks={"recorded": 0, "expected": 2, "missing": "0-1"}
    )
    with pytest.raises(PerfweaveError) as err:
        open_experiment(exp)
    assert str(err.value) == f"{exp}: no profile data: {REASON}"
    with pytest.raises(PerfweaveError) as err:
        rt.list_ranks(exp)
    assert str(err.value) == f"{exp}: no traces: {REASON}"
    # the profiles of a launch's helpers (processes without MPI) are not the run's
    pwprof(
        exp / "procs" / "node.77.pwprof",
        dict(world_size=1, partial=True),
        ranks=[dict(rank=-1, pid=77)],
    )
    with pytest.raises(PerfweaveError) as err:
        open_experiment(exp)
    assert str(err.value) == f"{exp}: no profile data: {REASON}"
    # a finished run without data, as older perfweave left it: the guess stays
    exp = experiment_dir("old")
    with pytest.raises(PerfweaveError, match="was it killed with SIGKILL"):
        open_experiment(exp)
    with pytest.raises(PerfweaveError, match=r"run with perfweave run --trace\)$"):
        rt.list_ranks(exp)


def test_partial_reason_is_the_note(experiment_dir, pwprof):
    reason = "only 1 of 2 ranks recorded data (none from rank 1): why"
    exp = experiment_dir(
        state="partial", reason=reason, ranks={"recorded": 1, "expected": 2, "missing": "1"}
    )
    rank_file(pwprof, exp, 0, 2)
    e = open_experiment(exp)
    assert e.state == "partial"
    assert e.profile.notes[-1] == reason
    assert not any(n.startswith("no data from") for n in e.profile.notes)


def activity_page(exp, pid, rank):
    """timeline/HOST.PID.act as the runtime writes it (runtime/core/pw.h pw_activity)."""
    (exp / "timeline").mkdir(exist_ok=True)
    page = struct.pack("<qqii", 0x7077616374763100, pid, rank, 1) + bytes(4096 - 24)
    (exp / "timeline" / f"node.{pid}.act").write_bytes(page)


def test_processes_that_never_got_through_mpi_init(experiment_dir):
    """Every task loaded the runtime and called MPI_Init, which failed (a PMI the MPI
    was not built for): the MPI start-up failed, no rank was killed or left out."""
    exp = experiment_dir()
    for pid in (100, 101, 102, 103):
        activity_page(exp, pid, -2)
    activity_page(exp, 104, -1)  # a helper that never called MPI
    pids(exp, 100, 101, 102, 103, 104)
    rec = recorded(exp)
    assert (rec.started, rec.in_init, rec.processes) == (5, 4, 0)
    v = verdict(exp, ["srun", "--mpi=pmi2", "-n", "4", "./app"], 1, VALUES, None)
    assert (v.state, v.ranks) == ("empty", {"expected": 4, "recorded": 0, "missing": "0-3"})
    assert v.reason.startswith(
        "0 of 4 ranks recorded data: 4 processes of the program "
        "called MPI_Init and none got through it: the MPI start-up "
        "failed"
    )
    assert v.reason.endswith("(srun exited with code 1)") and "SIGKILL" not in v.reason
    # the same processes with the launcher's status 0 are not a failed start-up
    assert "MPI_Init" not in verdict(exp, ["srun", "-n", "4", "./app"], 0, VALUES, None).reason

"""The trace's application window starts where the MPI_Init wrapper returns (as the
profile's t_init_leave), after perfweave's own set-up in it (the clock exchanges,
made long here with --clock-sync-rounds), in the description a rank leaves when it ends
and in the one it leaves when killed outright: programs/init_window.c reads its clock
right after MPI_Init returns and right before its first MPI call."""

import re

import numpy as np
from harness import PERFWEAVE  # noqa: F401  (the harness sets up the MPI environment)

from perfweave.clock import app_window, to_ns
from perfweave.dtypes import EVENT_TYPES
from perfweave.readers import trace as rt
from perfweave.readers.profile import read_profile
from perfweave.readers.table_description import table_descriptions
from perfweave.readers.tables import read_tables

LINE = re.compile(r"rank (\d+) first_ns (\d+)")
# perfweave's work in the wrapper after the window's start (the counters' baseline) and
# in the first call's wrapper before its enter time: 6-20 us seen; 2 ms allows a
# preemption. A killed rank's window also holds the writing of what it leaves (its
# tables' record, the trace's description, the tables file's renaming: 0.4 ms, seen
# 4.3 ms under load): 10 ms. The clock exchanges neither may hold took 50 ms with
# ROUNDS rounds (the window starting before them: 73 ms for the program's 20 ms).
AROUND_NS = 2_000_000
KILLED_AROUND_NS = 10_000_000
ROUNDS = 400


def first_bursts(exp, ranks):
    """{rank: ns from the trace's window start to the enter of its first call}."""
    out = {}
    for k in ranks:
        rd = rt.read_rank(exp, k)
        ev = rd.records[rd.records["type"] == EVENT_TYPES["CALL"]]
        enter = to_ns(rd.meta, ev["t0"].astype(np.int64))
        begin, _ = app_window(rd.meta, (int(enter.min()), int(enter.max())))
        out[k] = int(enter.min()) - begin
    return out


def run(mpi, build, run_pw, *args):
    prog = build(mpi, "init_window.c")
    r = run_pw(
        mpi.launch(2) + [prog, 20, *args],
        options=["--trace", "--clock-sync-rounds", str(ROUNDS)],
        check=not args,
    )
    own = {int(m[1]): int(m[2]) for m in LINE.finditer(r.proc.stdout)}
    assert sorted(own) == [0, 1], r.proc.stdout
    return r, own


def test_window_starts_after_perfweave_setup(mpi, build, run_pw):
    r, own = run(mpi, build, run_pw)
    ranks = read_profile(r.exp / "profile.pwprof").arrays["ranks"]
    for k, burst in first_bursts(r.exp, (0, 1)).items():
        assert own[k] <= burst <= own[k] + AROUND_NS, (k, own[k], burst)
        meta, _ = rt.read_meta(r.exp, k)
        assert meta["clock"]["t_init_ns"] == int(ranks[ranks["rank"] == k]["t_init_leave"][0])


def test_killed_rank_window(mpi, build, run_pw):
    """Ranks killed after their first call leave the description written at MPI_Init:
    its window starts at the t_init_leave of their call-site tables' record, the same
    burst before the first call."""
    r, own = run(mpi, build, run_pw, "kill")
    leave = {}
    for path in table_descriptions(r.exp):
        rank = read_tables(path).arrays["ranks"][0]
        leave[int(rank["rank"])] = int(rank["t_init_leave"])
    assert sorted(leave) == [0, 1]
    for k, burst in first_bursts(r.exp, (0, 1)).items():
        meta, _ = rt.read_meta(r.exp, k)
        assert meta["state"] == "killed"  # (the reader names a description left running so)
        assert meta["clock"]["t_init_ns"] == leave[k]
        assert own[k] <= burst <= own[k] + KILLED_AROUND_NS, (k, own[k], burst)

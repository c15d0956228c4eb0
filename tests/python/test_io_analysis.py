"""The I/O profile's analysis on literal models (analysis/io.py): read and write bytes
over time summed over processes on the node timeline's slices (or from the processes'
start), and the small-writes advice with the wait states' waits for a late rank."""

from types import SimpleNamespace

import numpy as np
import pytest

from perfweave.analysis.io import LATE_RANK_WAITS, analyze, over_time
from perfweave.analysis.timeline import summarize
from perfweave.model.io import IoProfile
from perfweave.model.timeline import NodeTimeline
from perfweave.model.waitstates import WaitStatesResult
from perfweave.report.sections.io import SECTION
from perfweave.report.section import View

BINS = 256


def bins(width, read=(), write=()):
    r, w = np.zeros(BINS, np.int64), np.zeros(BINS, np.int64)
    r[: len(read)], w[: len(write)] = read, write
    return (width, r, w)


def test_over_time_from_the_processes_start_sums_per_slice_exactly():
    # 8 slices of 0.125 s over [0, 1 s): process 1 started 0.25 s after process 0 (same
    # host, same clock), its bin 0 is slice 2; widths are binary fractions: exact sums
    io = IoProfile.from_literal(
        [
            {"rank": 0, "wall_s": 1.0, "host": "h", "t_start_ns": 5_000_000_000},
            {"rank": 1, "wall_s": 0.75, "host": "h", "t_start_ns": 5_250_000_000},
        ],
        [],
        [],
        bins=[
            bins(0.125, read=[0, 0, 0, 50], write=[100, 200]),
            bins(0.125, read=[0, 0, 0, 0, 0, 30], write=[7, 0, 0, 0, 0, 1]),
        ],
    )
    (g,) = over_time(io)
    assert (g["host"], g["clock"], g["processes"]) == (None, "process start", 2)
    sl = g["slices"]
    assert [x["t0_s"] for x in sl] == [k / 8 for k in range(8)]
    assert [x["write_bytes"] for x in sl] == [100, 200, 7, 0, 0, 0, 0, 1]
    assert [x["read_bytes"] for x in sl] == [0, 0, 0, 50, 0, 0, 0, 30]
    assert [x["write_mbs"] for x in sl] == [b * 8 / 1e6 for b in [100, 200, 7, 0, 0, 0, 0, 1]]
    assert [x["read_mbs"] for x in sl] == [b * 8 / 1e6 for b in [0, 0, 0, 50, 0, 0, 0, 30]]
    # and in the section's data (perfweave report --json) and text
    exp = SimpleNamespace(io=io, waitstates=None, timelines=[])
    d = SECTION.collect(exp, None, 10)
    assert d["io"]["over_time"] == [g]
    text = SECTION.text(d, View(max_rows=None))  # the default report: one line (no time)
    assert any("read and write over time" in line for line in text)
    assert all(len(line) <= 100 for line in text)


def node(host, t0_ns, step_ns, n):
    series = [{"source": "node", "name": "disk_write_bytes", "unit": "B", "kind": "counter"}]
    ticks = [(t0_ns + k * step_ns, [float(1000 * k)]) for k in range(n + 1)]
    return NodeTimeline.from_literal(series, ticks, host=host, interval_ms=step_ns / 1e6)


def test_over_time_on_the_node_timelines_slices():
    # the timeline of n1: 8 intervals of 0.25 s from t = 1 s; a process of n1 started at
    # 1.5 s (slice 2); a process on n2 (no timeline) goes to the "process start" group;
    # bytes before the first slice count in it, after the last in the last
    tl = node("n1", 1_000_000_000, 250_000_000, 8)
    io = IoProfile.from_literal(
        [
            {"rank": 0, "wall_s": 1.5, "host": "n1", "t_start_ns": 1_500_000_000},
            {"rank": 1, "wall_s": 0.5, "host": "n1", "t_start_ns": 500_000_000},
            {"rank": 2, "wall_s": 1.0, "host": "n2", "t_start_ns": 9},
        ],
        [],
        [],
        bins=[
            bins(0.25, write=[10, 20, 0, 5] + [0] * 4 + [64]),  # bin 8: at 2.5 s, past the end
            bins(0.25, read=[3, 4]),  # 0.5 s and 0.75 s before the first tick
            bins(0.5, write=[11]),
        ],
    )
    g1, g2 = over_time(io, [tl])
    want_edges = [x["t0_s"] for x in summarize([tl]).nodes[0].over_time["slices"]]
    assert [x["t0_s"] for x in g1["slices"]] == want_edges == [k / 4 for k in range(8)]
    assert (g1["host"], g1["clock"], g1["processes"]) == ("n1", "node timeline", 2)
    assert [x["write_bytes"] for x in g1["slices"]] == [0, 0, 10, 20, 0, 5, 0, 64]
    assert [x["read_bytes"] for x in g1["slices"]] == [7, 0, 0, 0, 0, 0, 0, 0]
    assert [x["write_mbs"] for x in g1["slices"]] == [
        b * 4 / 1e6 for b in [0, 0, 10, 20, 0, 5, 0, 64]
    ]
    assert (g2["host"], g2["clock"], g2["processes"]) == (None, "process start", 1)
    assert [x["write_bytes"] for x in g2["slices"]] == [11 / 4] * 4 + [0] * 4


def small_writes(waitstates=None):
    """Rank 0 writes 2000 small records to out.txt in 3 s, rank 1 10 in 0.01 s; 10 s of
    wall time each: 3.01 s = 15.05 % of the summed wall time, imbalance 3 / 1.505."""
    io = IoProfile.from_literal(
        [{"rank": 0, "wall_s": 10.0, "busy_s": 3.0}, {"rank": 1, "wall_s": 10.0, "busy_s": 0.01}],
        [("out.txt", 0xEF53, False)],
        [
            {
                "process": 0,
                "file": 0,
                "layer": "posix",
                "writes": 2000,
                "bytes_written": 200_000,
                "time_ns": {"write": 3e9},
            },
            {
                "process": 1,
                "file": 0,
                "layer": "posix",
                "writes": 10,
                "bytes_written": 1000,
                "time_ns": {"write": 1e7},
            },
        ],
    )
    (a,) = [x for x in analyze(io, waitstates=waitstates).advice if x["rule"] == "io_small_writes"]
    return a


def test_small_writes_advice_with_the_wait_states_waits():
    metrics = [
        {"id": m, "name": m, "total": 0.0, "pct": 0.0}
        for m in ("mpi_barrier_wait", "mpi_wait_nxn", "mpi_latesender")
    ]
    paths = [
        {"id": 1, "name": "main > MPI_Barrier @ a.c:10"},
        {"id": 2, "name": "main > MPI_Allreduce @ a.c:20"},
    ]
    values = [
        ("mpi_barrier_wait", 1, 1, 2.0),
        ("mpi_wait_nxn", 2, 1, 0.5),
        ("mpi_barrier_wait", 1, 0, 0.25),  # the slow writer's own: not the others' wait
        ("mpi_latesender", 2, 1, 5.0),  # not a collective's wait for a late rank
    ]
    ws = WaitStatesResult.from_literal(metrics, paths, values)
    a = small_writes(ws)
    assert "waited 2.5 s in barriers and collectives" in a["text"]
    assert "most at main > MPI_Barrier @ a.c:10 (2 s)" in a["text"]
    assert a["evidence"]["wait_s"] == 2.5
    assert a["evidence"]["wait_metrics"] == ["mpi_barrier_wait", "mpi_wait_nxn"]
    assert a["severity"] == pytest.approx(15.05 + 100 * 2.5 / 20.0)
    assert {"mpi_barrier_wait", "mpi_wait_nxn"} <= set(LATE_RANK_WAITS)


def test_small_writes_advice_without_wait_states_says_how_to_get_them():
    a = small_writes()
    assert "--trace" in a["text"] and "perfweave analyze" in a["text"]
    assert a["severity"] == pytest.approx(15.05)
    assert "wait_s" not in a["evidence"]
    # wait states with none of those waits: said so, the severity as without
    ws = WaitStatesResult.from_literal(
        [{"id": "mpi_barrier_wait", "name": "b", "total": 0.0, "pct": 0.0}], [], []
    )
    b = small_writes(ws)
    assert "no waits for a late rank" in b["text"] and b["severity"] == pytest.approx(15.05)

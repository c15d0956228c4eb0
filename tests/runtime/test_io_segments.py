"""The I/O segment trace (--io --trace; runtime/modules/io.c, docs/io.md "Segment
trace"): programs whose calls are known by construction (programs/io_segments.c: 1 open,
3 writes of 10 bytes at 0, 10, 20, N pwrites of 100 * (i + 1) bytes at 4096 * (i + 1),
preads of 50 bytes at 0 and 100 at 4096, 1 stat, 1 close) against the segments read
through perfweave.open(...).io, the store's counts and the Chrome trace export."""

import json
import subprocess

import numpy as np
import pytest

import perfweave
from perfweave._format import IO_LAYERS, IO_OPS
from perfweave.readers.io import read_io
from harness import PERFWEAVE

OP = {name: i for i, name in enumerate(IO_OPS)}
POSIX = IO_LAYERS.index("posix")


def expected(n):
    """{op: [(bytes, offset), ...]} of one process of io_segments.c, in call order."""
    writes = [(10, 10 * i) for i in range(3)] + [(100 * (i + 1), 4096 * (i + 1)) for i in range(n)]
    return {
        "open": [(0, -1)],
        "write": writes,
        "read": [(50, 0), (100, 4096)],
        "stat": [(0, -1)],
        "close": [(0, -1)],
    }


def check_process(io, process, name, n, tid=None):
    """The segments of one process on file name are the program's calls, in the store's
    time base and within its life, and they sum to the store's time per operation; made
    by thread tid (default: the process's main thread)."""
    g = io.segments[io.segments["process"] == process]
    mine = g[g["file"] == io.files.index(name)]
    got = {
        op: list(zip(s["bytes"].tolist(), s["offset"].tolist()))
        for op in expected(n)
        for s in [mine[mine["op"] == OP[op]]]
    }
    assert got == expected(n)
    assert len(mine) == n + 8 and (mine["layer"] == POSIX).all()
    assert (mine["t0_ns"] <= mine["t1_ns"]).all()
    assert (np.diff(mine["t0_ns"]) >= 0).all()  # one thread: slots in call order
    p = io.processes[process]
    assert p["segments"] == len(g) and p["segments_dropped"] == 0
    # inside the process's life as the store saw it (its start to its end)
    end = p["t_start_ns"] + p["wall_s"] * 1e9
    assert p["t_start_ns"] <= mine["t0_ns"].min() and mine["t1_ns"].max() <= end + 1e3
    assert (mine["tid"] == (p["pid"] if tid is None else tid)).all()
    (rec,) = io.records[
        (io.records["process"] == process)
        & (io.records["file"] == io.files.index(name))
        & (io.records["layer"] == POSIX)
    ]
    for op in expected(n):
        s = mine[mine["op"] == OP[op]]
        # each segment's ends are rounded to the ns: 1 ns per segment
        assert (s["t1_ns"] - s["t0_ns"]).sum() == pytest.approx(
            rec["time_ns"][OP[op]], abs=len(s) + 1
        )


def test_io_segments_of_a_plain_process(build, run_pw, tmp_path):
    prog = build(None, "io_segments.c")
    n = 7
    r = run_pw([prog, tmp_path, n], ["--io", "--trace"])
    io = perfweave.open(r.exp).io
    assert len(list((r.exp / "io").glob("*.segments"))) == 1
    assert io.processes["rank"].tolist() == [-1]
    check_process(io, 0, f"{tmp_path}/seg.0", n)
    # every call the store counted is a segment (here: the file's and the printf's)
    assert len(io.segments) == int(io.records["calls"].sum())
    rep = r.report()["io"]["segments"]
    assert rep == {"processes": 1, "segments": len(io.segments), "dropped": 0, "forks_dropped": 0}


def test_io_segments_per_rank_and_in_the_chrome_trace(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "io_segments.c", ("-DWITH_MPI",))
    n, nranks = 5, 2
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, n], ["--io", "--trace"])
    io = perfweave.open(r.exp).io
    assert sorted(io.processes["rank"].tolist()) == list(range(nranks))
    for rank in range(nranks):
        (process,) = np.flatnonzero(io.processes["rank"] == rank)
        check_process(io, int(process), f"{tmp_path}/seg.{rank}", n)
    out = tmp_path / "trace.json"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "chrome", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    events = json.loads(out.read_text())["traceEvents"]
    for rank in range(nranks):
        mine = [e for e in events if e.get("pid") == rank and e.get("ph") == "X"]
        io_ev = [e for e in mine if e["cat"] == "io" and e["name"].endswith(f" seg.{rank}")]
        writes = [e for e in io_ev if e["name"] == f"write seg.{rank}"]
        reads = [e for e in io_ev if e["name"] == f"read seg.{rank}"]
        assert [(e["args"]["bytes"], e["args"]["offset"]) for e in writes] == expected(n)["write"]
        assert {e["args"]["layer"] for e in io_ev} == {"posix"} and len(io_ev) == n + 8
        assert {e["tid"] for e in io_ev} == {0}  # the rank's main thread, as its MPI calls
        # one time base with the MPI events: every write ends before the rank's barrier
        # begins, both reads begin after it ends (ts and dur: us with 3 decimals)
        (bar,) = [e for e in mine if e["name"] == "MPI_Barrier"]
        assert max(e["ts"] + e["dur"] for e in writes) <= bar["ts"] + 0.002
        assert min(e["ts"] for e in reads) >= bar["ts"] + bar["dur"] - 0.002


def test_io_segments_of_a_thread_share_its_mpi_calls_track(mpi, build, run_pw, tmp_path):
    """A thread other than the main one that makes MPI calls: its I/O segments are on the
    Chrome track of its MPI calls (the trace's thread whose BLOCK records carry its OS id),
    not on one of their own; a thread without MPI calls has its own track, named by its OS
    id. Both thread ids are the program's own (gettid)."""
    prog = build(mpi, "io_segments.c", ("-DWITH_MPI", "-pthread"))
    n, nranks = 3, 2
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, n, "thread"], ["--io", "--trace"])
    tids = {int(ln.split()[2]) for ln in r.proc.stdout.splitlines() if ln.startswith("tid ")}
    io = perfweave.open(r.exp).io
    out = tmp_path / "trace.json"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "chrome", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    events = json.loads(out.read_text())["traceEvents"]
    for rank in range(nranks):
        (process,) = np.flatnonzero(io.processes["rank"] == rank)
        g = io.segments[io.segments["process"] == process]
        worker = int(g["tid"][g["file"] == io.files.index(f"{tmp_path}/seg.{rank}")][0])
        helper = int(g["tid"][g["file"] == io.files.index(f"{tmp_path}/helper.{rank}")][0])
        assert {worker, helper} <= tids
        assert len({worker, helper, int(io.processes["pid"][process])}) == 3
        check_process(io, int(process), f"{tmp_path}/seg.{rank}", n, tid=worker)
        mine = [e for e in events if e.get("pid") == rank and e.get("ph") == "X"]
        # the worker's barrier, then the main thread's (on the trace's thread 0)
        bars = sorted((e for e in mine if e["name"] == "MPI_Barrier"), key=lambda e: e["ts"])
        assert len(bars) == 2 and bars[0]["tid"] != 0 and bars[1]["tid"] == 0
        seg = [e for e in mine if e["cat"] == "io" and e["name"].endswith(f" seg.{rank}")]
        assert len(seg) == n + 8
        # the worker's I/O on its MPI calls' track
        assert {e["tid"] for e in seg} == {bars[0]["tid"]}
        (h,) = [e for e in mine if e["cat"] == "io" and e["name"] == f"write helper.{rank}"]
        assert h["tid"] == helper
        names = {
            e["tid"]: e["args"]["name"]
            for e in events
            if e.get("pid") == rank and e.get("ph") == "M" and e["name"] == "thread_name"
        }
        assert names[helper] == f"I/O of thread {helper}" and worker not in names


def test_io_segments_bound_counts_drops(build, run_pw, tmp_path):
    prog = build(None, "io_segments.c")
    n, bound = 20, 5
    r = run_pw([prog, tmp_path, n], ["--io", "--trace", "--io-trace-max", str(bound)])
    io = perfweave.open(r.exp).io
    calls = int(io.records["calls"].sum())
    (p,) = io.processes
    assert (p["segments"], p["segments_dropped"]) == (bound, calls - bound)
    # the first calls are the ones kept: the open, then the first writes
    g = io.segments
    assert g["op"].tolist() == [OP["open"]] + [OP["write"]] * (bound - 1)
    rep = r.report()["io"]
    assert rep["segments"]["dropped"] == calls - bound
    assert any(f"{calls - bound:,} calls dropped" in note for note in rep["notes"])


def test_io_segments_of_a_killed_process_are_kept(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c")
    n = 777
    r = run_pw([prog, "kill", tmp_path, n], ["--io", "--trace"], check=False)
    assert r.proc.returncode != 0
    io = read_io(r.exp)
    assert io.processes["state"].tolist() == ["killed"]
    g = io.segments[io.segments["file"] == io.files.index(f"{tmp_path}/kill.dat")]
    w = g[g["op"] == OP["write"]]
    assert len(w) == n and (w["bytes"] == 10).all()
    assert w["offset"].tolist() == list(range(0, 10 * n, 10))
    assert (w["t0_ns"] <= w["t1_ns"]).all()


def test_io_segments_of_a_forked_child_are_its_own(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c")
    n = 50
    r = run_pw([prog, "fork", tmp_path, n], ["--io", "--trace"])
    io = perfweave.open(r.exp).io
    assert len(list((r.exp / "io").glob("*.segments"))) == 2
    by_pid = {int(p["pid"]): i for i, p in enumerate(io.processes)}
    child = int(r.proc.stdout.split("child ")[1].split()[0])
    for name, pid, writes in (("child", child, 2 * n), ("parent", None, n)):
        f = io.files.index(f"{tmp_path}/{name}.dat")
        g = io.segments[(io.segments["file"] == f) & (io.segments["op"] == OP["write"])]
        assert len(g) == writes and (g["bytes"] == 1).all()
        if pid is not None:
            assert set(g["process"].tolist()) == {by_pid[pid]}
    assert io.processes["segments_forks_dropped"].tolist() == [0, 0]


def test_io_segments_only_with_trace(build, run_pw, tmp_path):
    prog = build(None, "io_segments.c")
    r = run_pw([prog, tmp_path, 3], ["--io"])
    assert not list((r.exp / "io").glob("*.segments"))
    io = perfweave.open(r.exp).io
    assert len(io.segments) == 0 and io.processes["segments"].tolist() == [-1]
    assert r.report()["io"]["segments"] is None

"""Exchanging traces (perfweave export / import, docs/interop.md): a hand-written
experiment that uses every record type goes to OTF2 and back with every record intact,
OTF2's own reader sees what was written, Chrome trace JSON has one slice per call, bad
input is one line and exit status 2, and the public Score-P traces of tests/data are
imported and analysed with their known results."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import otf2
import pytest

from perfweave import open as perfweave_open
from perfweave.interop import otf2 as pw_otf2
from perfweave.interop.otf2 import calls as otf2_calls
from perfweave.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES
from perfweave.readers.experiment import NoImportedProfile

T, F = EVENT_TYPES, EVENT_FLAGS
TNAME = {v: k for k, v in T.items()}
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
SHARED = Path(__file__).resolve().parents[1] / "data"  # tests/data (README.md there)
NB, SYNC, PERS = F["NONBLOCKING"], F["SYNCHRONOUS"], F["PERSISTENT"]


def perfweave(*args, timeout=120):
    return subprocess.run(
        [PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def one_error_line(res):
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfweave: error:"), res.stderr
    return lines[0]


# ---------------------------------------------------------------- a literal experiment

WORLD = [0, 1, 2]
COMMS = {  # per rank: the communicators it uses, as the runtime lists them
    0: [
        {"id": 0, "name": "MPI_COMM_WORLD", "ranks": WORLD, "parent": -1, "seq": 0},
        {"id": 1, "ranks": WORLD, "parent": 0, "seq": 1},  # a dup of world
        {"id": 2, "ranks": [0, 2], "parent": 0, "seq": 0},
    ],
    1: [
        {"id": 0, "name": "MPI_COMM_WORLD", "ranks": WORLD, "parent": -1, "seq": 0},
        {"id": 1, "ranks": WORLD, "parent": 0, "seq": 1},
    ],
    2: [
        {"id": 0, "name": "MPI_COMM_WORLD", "ranks": WORLD, "parent": -1, "seq": 0},
        {"id": 1, "ranks": WORLD, "parent": 0, "seq": 1},
        {"id": 2, "ranks": [0, 2], "parent": 0, "seq": 0},
    ],
}
GROUPS = {0: [[1]], 1: [[0]], 2: []}


def call(fn, t0, t1, *subs, thread=0):
    return [(thread, dict(type="CALL", fn=fn, t0=t0, t1=t1))] + [(thread, dict(s)) for s in subs]


def ev(type, **kw):
    return dict(type=type, **kw)


# request posts carry their number (1, 2, ... per rank) and completions repeat it, as the
# runtime writes them


def rank0():
    r = [(0, ev("ENTER", region="main", t0=100, tag=0))]
    r += call("MPI_Send", 1000, 1100, ev("SEND", peer=1, tag=5, comm=0, bytes=40))
    r += call("MPI_Ssend", 1200, 1300, ev("SEND", flags=SYNC, peer=2, tag=6, comm=2, bytes=8))
    r += [(0, ev("ENTER", region="solve", t0=1400, tag=1))]
    r += call(
        "MPI_Irecv",
        1500,
        1600,  # MPI_ANY_SOURCE, MPI_ANY_TAG, bigger buffer
        ev("IRECV", t0=0x55, t1=1, flags=NB, peer=-2, tag=-1, comm=1, bytes=64),
    )
    r += call(
        "MPI_Isend",
        1700,
        1800,
        ev("SEND", t0=0x66, t1=2, flags=NB, peer=1, tag=3, comm=1, bytes=16),
    )
    r += call(
        "MPI_Waitall",
        1900,
        2500,
        ev("RECV", t0=0x55, t1=1, peer=1, tag=4, comm=1, bytes=32),
        ev("SEND_DONE", t0=0x66, t1=2, peer=1, tag=3, comm=1),
    )
    r += [(0, ev("LEAVE", region="solve", t0=2600, tag=1))]
    r += [(0, ev("FLUSH", t0=2700, t1=2800, bytes=4096))]
    r += call("MPI_Bcast", 3000, 3500, ev("COLL", comm=0, peer=0, bytes=40))
    r += call("MPI_Iallreduce", 3600, 3700, ev("COLL", flags=NB, comm=0, bytes=8, t1=8))
    r += call("MPI_Win_create", 4000, 4500, ev("WIN", tag=0, comm=0))
    r += call("MPI_Win_fence", 4600, 4700, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Put", 4800, 4900, ev("RMA", tag=0, comm=0, peer=1, bytes=4))
    r += call("MPI_Rget", 4950, 4990, ev("RMA", t0=0x77, flags=NB, tag=0, comm=0, peer=2, t1=8))
    r += call("MPI_Accumulate", 5000, 5050, ev("RMA", tag=0, comm=0))  # MPI_PROC_NULL
    r += call("MPI_Win_fence", 5100, 5200, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_start", 5300, 5400, ev("WSYNC", tag=0, comm=0, t1=0))
    r += call("MPI_Put", 5500, 5600, ev("RMA", tag=0, comm=0, peer=1, bytes=4))
    r += call("MPI_Win_complete", 5700, 5800, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call(
        "MPI_Win_lock", 5900, 6000, ev("WSYNC", flags=F["EXCLUSIVE"], tag=0, comm=0, peer=2, t1=-1)
    )
    r += call("MPI_Win_flush", 6050, 6060, ev("WSYNC", tag=0, comm=0, peer=2, t1=-1))
    r += call("MPI_Win_unlock", 6100, 6200, ev("WSYNC", tag=0, comm=0, peer=2, t1=-1))
    r += call("MPI_Win_free", 6300, 6400, ev("WIN", flags=F["FREE"], tag=0, comm=0))
    r += call("MPI_Comm_rank", 6500, 6510)
    r += call("MPI_Mrecv", 6600, 6700, ev("RECV", peer=2, tag=9, bytes=12))  # no comm
    r += call(
        "MPI_Start",
        6800,
        6850,  # a persistent MPI_Ssend_init request
        ev("SEND", t0=0x88, t1=3, flags=NB | PERS | SYNC, peer=1, tag=11, comm=0, bytes=8),
    )
    r += call("MPI_Wait", 6900, 7000, ev("SEND_DONE", t0=0x88, t1=3, peer=1, tag=11, comm=0))
    # a second thread; "main" stays open to the end
    r += call("MPI_Comm_size", 2000, 2100, thread=1)
    r += call("MPI_Send", 2150, 2300, ev("SEND", peer=2, tag=1, comm=0, bytes=4), thread=1)
    return r


def rank1():
    r = call("MPI_Recv", 900, 1150, ev("RECV", peer=0, tag=5, comm=0, bytes=40))
    r += call(
        "MPI_Isend",
        1650,
        1700,
        ev("SEND", t0=0x11, t1=1, flags=NB, peer=0, tag=4, comm=1, bytes=32),
    )
    r += call(
        "MPI_Irecv",
        1710,
        1720,
        ev("IRECV", t0=0x12, t1=2, flags=NB, peer=0, tag=3, comm=1, bytes=16),
    )
    r += call(
        "MPI_Waitall",
        1730,
        2000,
        ev("SEND_DONE", t0=0x11, t1=1, peer=0, tag=4, comm=1),
        ev("RECV", t0=0x12, t1=2, peer=0, tag=3, comm=1, bytes=16),
    )
    r += call("MPI_Bcast", 3100, 3600, ev("COLL", comm=0, peer=0, t1=40))
    r += call("MPI_Iallreduce", 3650, 3700, ev("COLL", flags=NB, comm=0, bytes=8, t1=8))
    r += call("MPI_Win_create", 4100, 4500, ev("WIN", tag=0, comm=0))
    r += call("MPI_Win_fence", 4600, 4700, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_fence", 5100, 5200, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_post", 5250, 5260, ev("WSYNC", tag=0, comm=0, t1=0))
    r += call("MPI_Win_test", 5300, 5310, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_test", 5900, 5910, ev("WSYNC", flags=F["DONE"], tag=0, comm=0, t1=-1))
    r += call("MPI_Win_free", 6300, 6400, ev("WIN", flags=F["FREE"], tag=0, comm=0))
    return r


def rank2():
    r = call("MPI_Recv", 1150, 1310, ev("RECV", peer=0, tag=6, comm=2, bytes=8))
    r += call("MPI_Recv", 2200, 2310, ev("RECV", peer=0, tag=1, comm=0, bytes=4))
    r += call("MPI_Bcast", 3100, 3550, ev("COLL", comm=0, peer=0, t1=40))
    r += call("MPI_Iallreduce", 3650, 3690, ev("COLL", flags=NB, comm=0, bytes=8, t1=8))
    r += call("MPI_Win_create", 4200, 4500, ev("WIN", tag=0, comm=0))
    r += call("MPI_Win_fence", 4600, 4700, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_fence", 5100, 5200, ev("WSYNC", tag=0, comm=0, t1=-1))
    r += call("MPI_Win_free", 6300, 6400, ev("WIN", flags=F["FREE"], tag=0, comm=0))
    return r


def write_experiment(
    exp, ranks, t_fini=8000, comms=COMMS, groups=GROUPS, windows=({"id": 0, "comm": 0, "seq": 0},)
):
    """An experiment directory written as perfweave run --trace writes it: per rank the
    records of each thread together, ticks = ns."""
    (exp / "traces").mkdir(parents=True)
    for r, items in ranks.items():
        items = sorted(items, key=lambda x: x[0])  # thread by thread, stable
        functions, regions = [], []
        rec = np.zeros(len(items), EVENT_DTYPE)
        rec["peer"], rec["comm"] = -1, -1
        for i, (thread, row) in enumerate(items):
            row = dict(row)
            rec[i]["type"] = T[row.pop("type")]
            if "fn" in row:
                fn = row.pop("fn")
                if fn not in functions:
                    functions.append(fn)
                rec[i]["fn"] = functions.index(fn)
            if "region" in row:
                name = row.pop("region")
                if name not in regions:
                    regions.append(name)
                rec[i]["comm"] = regions.index(name)
            for k, v in row.items():
                rec[i][k] = v
        threads = [t for t, _ in items]
        flushes = []
        for t in sorted(set(threads)):
            first = threads.index(t)
            flushes.append({"thread": t, "first": first, "count": threads.count(t)})
        rec.tofile(exp / "traces" / f"rank-{r}.events")
        meta = {
            "format": "perfweave-trace",
            "version": 1,
            "rank": r,
            "world_size": len(comms[r][0]["ranks"]),
            "host": "node01",
            "pid": 100 + r,
            "state": "complete",
            "functions": functions,
            "families": ["p2p"] * len(functions),
            "clock": {
                "ticks": [0, 10**9],
                "ns": [0, 10**9],
                "offset_init_ns": 0,
                "offset_init_err_ns": 0,
                "offset_fini_ns": 0,
                "offset_fini_err_ns": 0,
                "t_init_ns": 500,
                "t_fini_ns": t_fini,
            },
            "comms": comms[r],
            "windows": list(windows),
            "groups": [{"id": i, "ranks": g} for i, g in enumerate(groups[r])],
            "regions": [{"name": n} for n in regions],
            "objects": [],
            "flushes": flushes,
            "records": len(rec),
            "lost": 0,
        }
        (exp / "traces" / f"rank-{r}.json").write_text(json.dumps(meta))
    (exp / "experiment.json").write_text(
        json.dumps(
            {
                "format": "perfweave-experiment",
                "version": 1,
                "command": ["mpirun", "-n", "3", "./app", "-v"],
                "program": "/home/u/app",
                "state": "finished",
                "start_epoch": 1.7e9,
                "exit_status": {"code": 0},
            }
        )
    )
    return exp


def bench_tracegen():
    """bench/tracegen.py: synthetic experiments of a known number of records."""
    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import tracegen

    return tracegen


@pytest.fixture
def literal(tmp_path):
    return write_experiment(tmp_path / "lit", {0: rank0(), 1: rank1(), 2: rank2()})


def read(exp, r):
    rec = np.fromfile(exp / "traces" / f"rank-{r}.events", EVENT_DTYPE)
    meta = json.loads((exp / "traces" / f"rank-{r}.json").read_text())
    thread = np.zeros(len(rec), np.int64)
    for f in meta["flushes"]:
        thread[f["first"] : f["first"] + f["count"]] = f["thread"]
    return rec, meta, thread


def described(exp, r):
    """A rank's records as comparable tuples per type, in order, with communicators,
    windows, groups and regions named by what they are rather than by local ids."""
    rec, meta, thread = read(exp, r)
    comms = {c["id"]: (tuple(c["ranks"]), c["seq"]) for c in meta["comms"]}
    wins = {w["id"]: (comms[w["comm"]], w["seq"]) for w in meta["windows"]}
    groups = {g["id"]: tuple(g["ranks"]) for g in meta["groups"]}
    regions = [g["name"] for g in meta.get("regions", [])]
    out = {}
    for e, t in zip(rec, thread.tolist()):
        typ = TNAME[int(e["type"])]
        if typ == "CALL":
            row = (t, meta["functions"][e["fn"]], int(e["t0"]), int(e["t1"]))
        elif typ in ("ENTER", "LEAVE"):
            row = (t, regions[e["comm"]], int(e["t0"]), int(e["tag"]))
        elif typ == "FLUSH":
            row = (t, int(e["t0"]), int(e["t1"]), int(e["bytes"]))
        else:
            winish = typ in ("WIN", "RMA", "WSYNC")
            row = (
                t,
                int(e["flags"]),
                int(e["peer"]),
                wins.get(int(e["tag"])) if winish else int(e["tag"]),
                comms.get(int(e["comm"])),
                int(e["bytes"]),
                groups.get(int(e["t1"]), -1) if typ == "WSYNC" else int(e["t1"]),
                int(e["t0"]),
            )
        out.setdefault(typ, []).append(row)
    return out


def definitions(exp, r):
    _, meta, _ = read(exp, r)
    comms = sorted((tuple(c["ranks"]), tuple(c.get("remote", [])), c["seq"]) for c in meta["comms"])
    cid = {c["id"]: (tuple(c["ranks"]), c["seq"]) for c in meta["comms"]}
    wins = sorted((cid[w["comm"]], w["seq"]) for w in meta["windows"])
    return comms, wins, [tuple(g["ranks"]) for g in meta["groups"]]


# ---------------------------------------------------------------- OTF2 round trip


def canonical(value):
    """An event field as the otf2 reader gives it, comparable between two archives:
    definitions (regions, communicators, windows, attributes) by what they print."""
    if isinstance(value, dict):
        return tuple(sorted((canonical(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(getattr(value, "value", None), int):  # an enum (or bit set)
        return (type(value).__name__, value.value)
    return (type(value).__name__, str(value))


def event_stream(anchor):
    """Every event of an OTF2 archive in the reader's order: location, event type and
    every field with its attributes."""
    with otf2.reader.open(str(anchor)) as tr:
        return [
            (loc.group.name, loc.name, type(e).__name__, canonical(dict(vars(e))))
            for loc, e in tr.events
        ]


def streams_of_both_loops(exp, out):
    """The event streams of exp exported by the C loop and by one ctypes call per event
    (where libperfweave-otf2.so is not built), and the summaries."""
    assert otf2_calls.bulk_writer() is not None, "libperfweave-otf2.so is not installed"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(otf2_calls, "bulk_writer", lambda: None)
        each = pw_otf2.export(exp, Path(out) / "each" / "traces.otf2")
    bulk = pw_otf2.export(exp, Path(out) / "bulk" / "traces.otf2")
    # the event files are the same bytes too (the anchor and global definitions are
    # not: they differ in a few bytes between any two exports, by the same loop too)
    evt = sorted((Path(out) / "bulk" / "traces").glob("*.evt"))
    assert evt and [p.read_bytes() for p in evt] == [
        (Path(out) / "each" / "traces" / p.name).read_bytes() for p in evt
    ]
    return event_stream(each["anchor"]), event_stream(bulk["anchor"]), each, bulk


@pytest.fixture(params=["bulk", "direct", "wrappers"])
def writer_calls(request, monkeypatch, tmp_path):
    """The export writes each location's events through a loop in C (bulk); where that
    library is not built, it calls the OTF2 library's writer functions per event through
    prototypes of its own, read from the otf2 package's wrappers (direct); where they
    cannot be read it calls the wrappers. All must write the same archive."""
    if request.param != "bulk":
        # a runtime library directory without libperfweave-otf2.so
        monkeypatch.setenv("PERFWEAVE_LIBDIR", str(tmp_path / "no-lib"))
        otf2_calls.bulk_writer.cache_clear()
        assert otf2_calls.bulk_writer() is None
        request.addfinalizer(otf2_calls.bulk_writer.cache_clear)
    if request.param == "wrappers":
        import inspect

        def unreadable(obj):
            raise OSError("no source")

        monkeypatch.setattr(inspect, "getsource", unreadable)
    return request.param


def test_export_import_keeps_every_record(literal, tmp_path, writer_calls):
    s = pw_otf2.export(literal)
    assert Path(s["anchor"]) == literal / "export" / "traces.otf2"
    back = tmp_path / "back"
    t = pw_otf2.import_archive(s["anchor"], back)
    assert t["events"] == s["events"] and t["notes"] == []
    for r in WORLD:
        a, b = described(literal, r), described(back, r)
        assert {k: len(v) for k, v in a.items()} == {k: len(v) for k, v in b.items()}, r
        for typ in a:
            assert a[typ] == b[typ], (r, typ)
        assert definitions(literal, r) == definitions(back, r)
    meta = json.loads((back / "experiment.json").read_text())
    assert meta["state"] == "finished" and meta["imported_from"] == str(
        (literal / "export" / "traces.otf2").resolve()
    )
    # application time: MPI_Init done .. MPI_Finalize entered, through ProgramBegin/End
    _, m0, _ = read(back, 0)
    assert (m0["clock"]["t_init_ns"], m0["clock"]["t_fini_ns"]) == (500, 8000)
    assert m0["state"] == "complete"


@pytest.mark.parametrize("block", [otf2_calls.BULK, 1, 2, 7])
def test_c_loop_writes_the_events_of_one_call_per_event(literal, tmp_path, monkeypatch, block):
    """The C loop (runtime/interop/otf2_bulk.c) writes exactly the events, in the same
    order with the same fields and attribute lists, as one ctypes call per event, also
    where its blocks end at any event: ProgramBegin (written from Python), attribute
    lists, every event kind of the literal trace (23 of 25: the nonblocking collective
    pair is in test_import_of_scorep_nonblocking_collectives)."""
    monkeypatch.setattr(otf2_calls, "BULK", block)
    each, bulk, s_each, s_bulk = streams_of_both_loops(literal, tmp_path)
    assert len(each) == s_each["events"] == s_bulk["events"] > 100
    assert bulk == each
    kinds = Counter(e[2] for e in bulk)
    assert len(kinds) == 23 and kinds["ProgramBegin"] == 3, kinds
    assert sum(1 for e in bulk if dict(e[3]).get("attributes")) > 5


def test_export_writes_mpi_init_and_finalize_as_scorep_does(literal, tmp_path):
    """Every rank's master location has ProgramBegin, MPI_Init's Enter and Leave
    at the application window's start, and ends with MPI_Finalize's Enter and Leave and
    ProgramEnd at its end, as Score-P writes them (Scalasca's scout needs both calls on
    every rank, and MPI regions whose source file is "MPI"), through both loops; the
    import drops them again (test_export_import_keeps_every_record: the same records
    and the same application window)."""
    each, bulk, _, _ = streams_of_both_loops(literal, tmp_path)
    assert bulk == each
    with otf2.reader.open(str(tmp_path / "bulk" / "traces.otf2")) as tr:
        per = {}
        for loc, e in tr.events:
            if loc.name == "Master thread":
                region = getattr(e, "region", None)
                per.setdefault(loc.group.name, []).append(
                    (type(e).__name__, region.name if region else None, e.time)
                )
        mpi = {r.name: r for r in tr.definitions.regions if r.paradigm == otf2.Paradigm.MPI}
    assert sorted(per) == [f"MPI Rank {r}" for r in WORLD]
    for events in per.values():
        # a user region may begin before the window (the literal trace's main)
        at = [e[0] for e in events].index("ProgramBegin")
        head, tail = events[at : at + 3], events[-3:]
        assert [e[:2] for e in head] == [
            ("ProgramBegin", None),
            ("Enter", "MPI_Init"),
            ("Leave", "MPI_Init"),
        ]
        assert [e[:2] for e in tail] == [
            ("Enter", "MPI_Finalize"),
            ("Leave", "MPI_Finalize"),
            ("ProgramEnd", None),
        ]
        assert len({e[2] for e in head}) == 1 and len({e[2] for e in tail}) == 1
        assert all(e[2] <= tail[0][2] for e in events)
    assert {"MPI_Init", "MPI_Finalize"} <= set(mpi)
    assert {r.source_file for r in mpi.values()} == {"MPI"}
    back = pw_otf2.import_archive(tmp_path / "bulk" / "traces.otf2", tmp_path / "back")
    assert back["notes"] == []
    for r in WORLD:
        _, meta, _ = read(tmp_path / "back", r)
        assert not {"MPI_Init", "MPI_Finalize"} & set(meta["functions"]), meta["functions"]


def test_c_loop_on_a_generated_trace(tmp_path):
    """The same on bench/tracegen.py's halo exchange (3 ranks), across several blocks of
    the loop."""
    tracegen = bench_tracegen()
    exp = tmp_path / "gen"
    n = tracegen.write(exp, 3, 3 * 30_000)
    each, bulk, s_each, s_bulk = streams_of_both_loops(exp, tmp_path)
    assert s_bulk["records"] == n and len(bulk) == s_bulk["events"] > otf2_calls.BULK
    assert bulk == each


def test_otf2_reader_sees_events_and_definitions(literal):
    anchor = pw_otf2.export(literal, literal / "x" / "run.otf2")["anchor"]
    assert anchor.endswith("x/run.otf2")
    per_rank = Counter()
    with otf2.reader.open(anchor) as tr:
        d = tr.definitions
        assert d.clock_properties.timer_resolution == 10**9
        groups = sorted(lg.name for lg in d.location_groups)
        assert groups == ["MPI Rank 0", "MPI Rank 1", "MPI Rank 2"]
        assert sorted((lg.name, loc.name) for loc in d.locations for lg in [loc.group])[:2] == [
            ("MPI Rank 0", "Master thread"),
            ("MPI Rank 0", "Thread 1"),
        ]
        comms = {c.name: [m.group.name for m in c.group.members] for c in d.comms}
        assert comms["MPI_COMM_WORLD"] == ["MPI Rank 0", "MPI Rank 1", "MPI Rank 2"]
        assert sorted(len(m) for m in comms.values()) == [2, 3, 3]
        (win,) = list(d.rma_wins)
        assert win.comm.name == "MPI_COMM_WORLD"
        regions = {r.name: r for r in d.regions}
        assert regions["MPI_Send"].paradigm == otf2.Paradigm.MPI
        assert regions["MPI_Send"].region_role == otf2.RegionRole.POINT2POINT
        assert regions["MPI_Bcast"].region_role == otf2.RegionRole.COLL_ONE2ALL
        assert regions["MPI_Iallreduce"].region_role == otf2.RegionRole.COLL_ALL2ALL
        assert regions["TRACE BUFFER FLUSH"].region_role == otf2.RegionRole.ARTIFICIAL
        assert regions["main"].paradigm == otf2.Paradigm.USER
        sends, recvs = [], []
        for loc, e in tr.events:
            per_rank[(loc.group.name[-1], type(e).__name__)] += 1
            if isinstance(e, otf2.events.MpiSend):
                sends.append((loc.group.name, e.receiver, e.communicator.name, e.msg_tag))
            if isinstance(e, otf2.events.MpiRecv):
                recvs.append((loc.group.name, e.sender, e.msg_tag))
            if isinstance(e, otf2.events.MpiIrecvRequest) and e.request_id == 0x55:
                # what MPI_ANY_SOURCE and MPI_ANY_TAG asked for, on the dup of world
                at = {a.name: v for a, v in e.attributes.items()}
                dup = at.pop("perfweave:comm")
                assert at == {"perfweave:peer": -2, "perfweave:tag": -1, "perfweave:bytes": 64}
                assert dup.name != "MPI_COMM_WORLD" and len(dup.group.members) == 3
    for r in "012":
        rec, _, _ = read(literal, int(r))
        n = Counter(TNAME[int(x)] for x in rec["type"])
        # + MPI_Init and MPI_Finalize, which the records do not hold
        assert per_rank[(r, "Enter")] == n["CALL"] + n["FLUSH"] + n["ENTER"] + 2
        assert per_rank[(r, "Leave")] == n["CALL"] + n["FLUSH"] + n["LEAVE"] + 2
        assert per_rank[(r, "ProgramBegin")] == per_rank[(r, "ProgramEnd")] == 1
        assert per_rank[(r, "MpiCollectiveEnd")] == n["COLL"]
    # ranks in the communicator: rank 0's MPI_Ssend to world rank 2 on {0, 2} goes to 1
    pair = next(name for name, m in comms.items() if len(m) == 2)
    assert ("MPI Rank 0", 1, pair, 6) in sends
    assert ("MPI Rank 0", 1, "MPI_COMM_WORLD", 5) in sends
    assert ("MPI Rank 1", 0, 5) in recvs
    assert per_rank[("0", "RmaPut")] == 2 and per_rank[("0", "RmaGet")] == 1
    assert per_rank[("0", "RmaAtomic")] == 1 and per_rank[("0", "RmaWinCreate")] == 1
    assert per_rank[("0", "RmaWinDestroy")] == 1
    assert per_rank[("0", "RmaCollectiveEnd")] == 2  # two fences
    assert per_rank[("0", "RmaGroupSync")] == 2  # start, complete
    assert per_rank[("0", "RmaAcquireLock")] == per_rank[("0", "RmaReleaseLock")] == 1
    assert per_rank[("0", "RmaSync")] == 1


def test_round_trip_of_an_archive_written_twice(literal, tmp_path):
    """export -> import -> export: the second archive has the same events."""
    a = pw_otf2.export(literal)
    back = tmp_path / "back"
    pw_otf2.import_archive(a["anchor"], back)
    b = pw_otf2.export(back)
    assert b["events"] == a["events"]

    def kinds(anchor):
        with otf2.reader.open(anchor) as tr:
            return Counter((loc.group.name, type(e).__name__) for loc, e in tr.events)

    assert kinds(a["anchor"]) == kinds(b["anchor"])


def test_intercommunicator(tmp_path):
    """An intercommunicator is its local group on each side (the otf2 package writes no
    InterComm definitions); peers in the remote group travel as perfweave:peer."""
    world = [0, 1, 2, 3]

    def comms(local, remote):
        return [
            {"id": 0, "name": "MPI_COMM_WORLD", "ranks": world, "parent": -1, "seq": 0},
            {"id": 1, "ranks": local, "parent": 0, "seq": 0},
            {"id": 2, "ranks": local, "remote": remote, "parent": 1, "seq": 0},
        ]

    cl = {
        0: comms([0, 1], [2, 3]),
        1: comms([0, 1], [2, 3]),
        2: comms([2, 3], [0, 1]),
        3: comms([2, 3], [0, 1]),
    }
    ranks = {
        0: call("MPI_Send", 10, 20, ev("SEND", peer=2, tag=1, comm=2, bytes=4)),
        1: call("MPI_Comm_rank", 10, 20),
        2: call("MPI_Recv", 5, 25, ev("RECV", peer=0, tag=1, comm=2, bytes=4)),
        3: call("MPI_Comm_rank", 10, 20),
    }
    exp = write_experiment(tmp_path / "ic", ranks, 100, cl, {r: [] for r in world}, ())
    anchor = pw_otf2.export(exp)["anchor"]
    back = tmp_path / "back"
    pw_otf2.import_archive(anchor, back)
    (send,) = described(back, 0)["SEND"]
    (recv,) = described(back, 2)["RECV"]
    assert send[2] == 2 and recv[2] == 0 and send[3] == recv[3] == 1
    assert send[4] == ((0, 1), 1) and recv[4] == ((2, 3), 1)  # local group, 2nd
    with otf2.reader.open(anchor) as tr:
        for loc, e in tr.events:
            if isinstance(e, otf2.events.MpiSend):
                assert e.receiver == 0xFFFFFFFF
                assert {a.name: v for a, v in e.attributes.items()} == {"perfweave:peer": 2}


def test_rank_without_its_description(literal, tmp_path):
    """A rank killed before writing rank-R.json keeps its records: clock and function
    names come from another rank, as perfweave analyze takes them."""
    (literal / "traces" / "rank-1.json").unlink()
    s = pw_otf2.export(literal)
    assert any("rank 1" in n and "borrowed" in n for n in s["notes"])
    back = tmp_path / "back"
    pw_otf2.import_archive(s["anchor"], back)
    raw = np.fromfile(literal / "traces" / "rank-1.events", EVENT_DTYPE)
    a = Counter(TNAME[int(x)] for x in raw["type"])
    b = Counter(TNAME[int(x)] for x in read(back, 1)[0]["type"])
    assert a == b and a["CALL"] == 13


def test_existing_output_needs_force(literal):
    pw_otf2.export(literal)
    res = perfweave("export", literal, "--format", "otf2")
    assert "already exists" in one_error_line(res)
    res = perfweave("export", literal, "--format", "otf2", "--force")
    assert res.returncode == 0, res.stderr
    assert "wrote OTF2 archive" in res.stdout


# ---------------------------------------------------------------- Chrome trace JSON


def test_chrome_trace(literal):
    res = perfweave("export", literal, "--format", "chrome")
    assert res.returncode == 0, res.stderr
    doc = json.loads((literal / "export" / "trace.json").read_text())
    events = doc["traceEvents"]
    ncalls = sum(int((read(literal, r)[0]["type"] == T["CALL"]).sum()) for r in WORLD)
    calls = [e for e in events if e["ph"] == "X" and e["cat"] == "MPI"]
    assert len(calls) == ncalls
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert names == {(0, "rank 0"), (1, "rank 1"), (2, "rank 2")}
    send = next(e for e in calls if e["pid"] == 0 and e["name"] == "MPI_Send")
    # microseconds from the first event (rank 0 entering main at 100 ns)
    assert send["ts"] == pytest.approx(0.9) and send["dur"] == pytest.approx(0.1)
    assert send["args"]["events"] == [{"type": "SEND", "peer": 1, "tag": 5, "bytes": 40}]
    user = sorted((e["name"], e["dur"]) for e in events if e.get("cat") == "user")
    assert user == [("main", pytest.approx(7.9)), ("solve", pytest.approx(1.2))]
    assert [e["name"] for e in events if e.get("cat") == "perfweave"] == ["TRACE BUFFER FLUSH"]
    assert {(e["pid"], e["tid"]) for e in calls} == {(0, 0), (0, 1), (1, 0), (2, 0)}
    # matched messages: 0->1 (tag 5), 0->2 (tag 6, on {0, 2}), 0->2 (tag 1, thread 1),
    # 1->0 (tag 4) and 0->1 (tag 3) on the dup of world
    starts = [e for e in events if e["ph"] == "s"]
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == 5
    pairs = sorted((s["pid"], ends[s["id"]]["pid"]) for s in starts)
    assert pairs == [(0, 1), (0, 1), (0, 2), (0, 2), (1, 0)]
    assert all(ends[s["id"]]["bp"] == "e" for s in starts)


def chrome_reference(exp):
    """The MPI calls (with what they did) and trace buffer flushes of a Chrome export of
    exp, built one record at a time with plain Python from the records as the exporter
    reads them: the oracle for the column-at-a-time formatting of interop/chrome/."""
    from perfweave.interop import load

    X = load(exp)
    ranks = [X.rank(r) for r in X.ranks]
    origin = min(
        int(rt.t0[k])
        for rt in ranks
        for k in range(len(rt.rec))
        if TNAME[int(rt.rec["type"][k])] in ("CALL", "FLUSH", "ENTER")
    )
    sub_types = {"SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "COLL_DONE", "WIN", "RMA", "WSYNC"}
    out = []
    for rt in ranks:
        call = None
        for k, rec in enumerate(rt.rec.tolist()):
            rec = dict(zip(rt.rec.dtype.names, rec))
            kind, thread = TNAME[rec["type"]], int(rt.thread[k])
            if kind in ("CALL", "FLUSH"):
                t0, t1 = int(rt.t0[k]) - origin, int(rt.t1[k]) - origin
                e = {
                    "name": rt.functions[rec["fn"]] if kind == "CALL" else "TRACE BUFFER FLUSH",
                    "cat": "MPI" if kind == "CALL" else "perfweave",
                    "ph": "X",
                    "pid": rt.rank,
                    "tid": thread,
                    "ts": t0 / 1000,
                    "dur": max(t1 - t0, 0) / 1000,
                }
                if kind == "FLUSH":
                    e["args"] = {"bytes": rec["bytes"]}
                out.append(e)
                call = (e, thread) if kind == "CALL" else None
            elif kind in sub_types and call is not None and call[1] == thread:
                d = {"type": kind}
                if rec["peer"] >= 0:
                    d["peer"] = rec["peer"]
                if kind in ("SEND", "RECV", "IRECV"):
                    d["tag"] = rec["tag"]
                if rec["bytes"]:
                    d["bytes"] = rec["bytes"]
                if kind in ("COLL", "RMA") and rec["t1"]:
                    d["bytes_received"] = rec["t1"]
                if rec["flags"] & NB:
                    d["nonblocking"] = True
                call[0].setdefault("args", {"events": []})["events"].append(d)
            elif kind not in ("ENTER", "LEAVE"):
                call = None
    return out


def test_chrome_events_match_a_plain_reference(literal, tmp_path):
    """Every MPI call, everything it did and every flush, as a plain record-by-record
    reference writes them: numbers of every width and sign, absent fields, threads."""
    tracegen = bench_tracegen()
    gen = tmp_path / "gen"
    tracegen.write(gen, 3, 3 * 2000)
    for exp in (literal, gen):
        res = perfweave("export", exp, "--format", "chrome", "-o", tmp_path / "t.json", "--force")
        assert res.returncode == 0, res.stderr
        got = [
            e
            for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
            if e.get("cat") in ("MPI", "perfweave")
        ]
        want = chrome_reference(exp)
        key = lambda e: (e["pid"], e["tid"], e["ts"], e["name"])  # noqa: E731
        assert len(got) == len(want) > 10
        for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
            assert g == w


def threaded_ranks(seed=7, n=60):
    """Three ranks with threads whose messages interleave in time: ranks 0 (threads 0
    to 2) and 2 (threads 0, 1) send to rank 1 on two tags, blocking and not, at times
    of random steps; rank 1's thread 0 posts MPI_ANY_SOURCE receives in fours inside a
    user region and completes them in random order (their channel is known only
    then), with a blocking receive, collectives and RMA between; its thread 1 posts
    receives that thread 0 completes later, two never, and receives blocking."""
    rng = np.random.default_rng(seed)
    number = {0: 0, 1: 0, 2: 0}

    def post(r):
        number[r] += 1
        return number[r]

    ranks = {0: [], 1: [], 2: []}
    # senders: rank 0 threads 0-2 and rank 2 thread 0 and 1, to rank 1 on tags 1, 2
    for r, threads in ((0, (0, 1, 2)), (2, (0, 1))):
        for th in threads:
            t = 1000 + 7 * th
            for i in range(n):
                t += int(rng.integers(5, 40))
                tag = int(rng.integers(1, 3))
                if rng.random() < 0.5:
                    ranks[r] += call(
                        "MPI_Send",
                        t,
                        t + 3,
                        ev("SEND", peer=1, tag=tag, comm=0, bytes=8),
                        thread=th,
                    )
                else:
                    k = post(r)
                    ranks[r] += call(
                        "MPI_Isend",
                        t,
                        t + 2,
                        ev("SEND", t0=0x100 + k, t1=k, flags=NB, peer=1, tag=tag, comm=0, bytes=8),
                        thread=th,
                    )
                    t += 5
                    ranks[r] += call(
                        "MPI_Wait",
                        t,
                        t + 2,
                        ev("SEND_DONE", t0=0x100 + k, t1=k, peer=1, tag=tag, comm=0),
                        thread=th,
                    )
                if i % 17 == 0:
                    ranks[r] += [(th, ev("FLUSH", t0=t + 4, t1=t + 5, bytes=64))]
                    t += 6
    # receiver: rank 1, thread 0 posts MPI_ANY_SOURCE receives and completes them out of
    # order; thread 1 receives blocking and posts requests thread 0 completes
    r1 = [(0, ev("ENTER", region="main", t0=900, tag=0))]
    t = 950
    open_from_1 = []
    th1, t1 = [], 980
    for b in range(n // 3):
        t += int(rng.integers(3, 20))
        r1 += [(0, ev("ENTER", region="loop", t0=t, tag=1))]
        reqs = []
        for j in range(4):
            t += 3
            k = post(1)
            reqs.append(k)
            r1 += call(
                "MPI_Irecv",
                t,
                t + 1,
                ev("IRECV", t0=0x500 + k, t1=k, flags=NB, peer=-2, tag=-1, comm=0, bytes=8),
            )
        t1 += int(rng.integers(3, 30))
        k = post(1)
        th1 += call(
            "MPI_Irecv",
            t1,
            t1 + 1,
            ev("IRECV", t0=0x500 + k, t1=k, flags=NB, peer=2, tag=2, comm=0, bytes=8),
            thread=1,
        )
        open_from_1.append(k)
        t1 += 4
        th1 += call("MPI_Recv", t1, t1 + 5, ev("RECV", peer=2, tag=1, comm=0, bytes=8), thread=1)
        t += 5
        r1 += call("MPI_Recv", t, t + 5, ev("RECV", peer=0, tag=2, comm=0, bytes=8))
        if b % 4 == 1:
            t += 6
            r1 += call("MPI_Bcast", t, t + 9, ev("COLL", comm=0, peer=0, t1=8))
            t += 10
            r1 += call("MPI_Put", t, t + 2, ev("RMA", tag=0, comm=0, peer=0, bytes=4))
        rng.shuffle(reqs)
        for k in reqs:
            t += 4
            r1 += call(
                "MPI_Waitany",
                t,
                t + 3,
                ev(
                    "RECV",
                    t0=0x500 + k,
                    t1=k,
                    peer=int(rng.choice([0, 2])),
                    tag=int(rng.integers(1, 3)),
                    comm=0,
                    bytes=8,
                ),
            )
        if len(open_from_1) > 2:
            k = open_from_1.pop(0)
            t += 4
            r1 += call(
                "MPI_Wait", t, t + 3, ev("RECV", t0=0x500 + k, t1=k, peer=2, tag=2, comm=0, bytes=8)
            )
        t += 2
        r1 += [(0, ev("LEAVE", region="loop", t0=t, tag=1))]
    ranks[1] = r1 + th1
    return ranks


def chrome_flow_ids(exp):
    """{(ph, pid, id): count} of the flow events perfweave analyze's numbering of
    messages gives (model/trace.py prepare on each whole rank): the oracle for the
    numbering the Chrome export does chunk by chunk."""
    from perfweave.interop import load
    from perfweave.interop.chrome.messages import hash64
    from perfweave.model.trace import prepare

    X = load(exp)
    ids = {"s": Counter(), "f": Counter()}
    for r in X.ranks:
        rd = prepare(X.rank_records(r))
        for ph, cols, table in (
            ("s", rd.sends, rd.send_channels),
            ("f", rd.recvs, rd.recv_channels),
        ):
            ch = table[cols["chan"]] if len(cols["chan"]) else np.zeros((0, 3), np.int64)
            me = np.full(len(ch), r)
            src, dst = (me, ch[:, 0]) if ph == "s" else (ch[:, 0], me)
            chan = hash64(src, dst, rd.comm_keys[ch[:, 1]], ch[:, 2])
            for i in hash64(chan, cols["seq"]).tolist():
                ids[ph][(ph, r, "0x%016x" % i)] += 1
    both = {i for _, _, i in ids["s"]} & {i for _, _, i in ids["f"]}
    return Counter({k: n for c in ids.values() for k, n in c.items() if k[2] in both})


@pytest.mark.parametrize("which", ["literal", "threads", "generated"])
def test_chrome_export_in_chunks_writes_the_same_events(literal, tmp_path, monkeypatch, which):
    """A rank is exported chunk by chunk (RankExportStream, first_pass.RankFirstPass): with
    chunks of 7 or 64 records the file holds the same events, in the same order, as with a
    whole rank in one chunk, and its flow arrows have the ids of perfweave analyze's
    numbering of messages. The threaded experiment has what chunks must carry across:
    receives whose channel is known only at their completion, completed out of order,
    requests posted in one thread and completed in another (or never), messages of several
    threads numbered in the order of time, a user region open to the end."""
    if which == "literal":
        exp = literal
    elif which == "threads":
        comms = {r: [COMMS[r][0]] for r in WORLD}
        exp = write_experiment(
            tmp_path / "thr",
            threaded_ranks(),
            comms=comms,
            groups={r: [] for r in WORLD},
            t_fini=5000,
            windows=(),
        )
    else:
        tracegen = bench_tracegen()
        exp = tmp_path / "gen"
        tracegen.write(exp, 2, 13_600)
    import perfweave.interop as interop
    from perfweave.interop import chrome

    monkeypatch.setattr(interop, "CHUNK_RECORDS", 1 << 30)
    one = chrome.export(exp, tmp_path / "one.json")
    whole = json.loads((tmp_path / "one.json").read_text())
    flows = Counter((e["ph"], e["pid"], e["id"]) for e in whole["traceEvents"] if e["ph"] in "sf")
    assert flows == chrome_flow_ids(exp) and len(flows) > 8
    for size in (7, 64):
        monkeypatch.setattr(interop, "CHUNK_RECORDS", size)
        s = chrome.export(exp, tmp_path / f"c{size}.json")
        assert json.loads((tmp_path / f"c{size}.json").read_text()) == whole, size
        assert {k: s[k] for k in ("events", "calls", "flows", "records", "notes")} == {
            k: one[k] for k in ("events", "calls", "flows", "records", "notes")
        }


@pytest.fixture(params=["loop", "numpy"])
def chrome_formatter(request, monkeypatch):
    """The Chrome export's formatter: the loop of libperfweave-json.so, or the numpy
    rows that run where that library is not built."""
    from perfweave.interop.chrome import formatting

    if request.param == "loop":
        assert formatting.json_rows() is not None, "libperfweave-json.so is not installed"
    else:
        monkeypatch.setattr(formatting, "json_rows", lambda: None)
    return request.param


def test_chrome_number_formatting(chrome_formatter):
    """Numbers of every width and sign, times, hex ids, names and absent parts, as
    str() and json.dumps write them, in rows of two layouts interleaved."""
    from perfweave.interop.chrome.formatting import Rows, decimal, format_rows

    rng = np.random.default_rng(7)
    v = np.r_[
        0,
        9,
        10,
        99,
        100,
        -1,
        -10,
        -99,
        2**62,
        -(2**62),
        2**63 - 1,
        -(2**63) + 1,
        rng.integers(-(10**12), 10**12, 500),
    ]
    text = [bytes(row).decode().strip() for row in decimal(v)]
    assert text == [str(int(x)) for x in v]
    ns = np.r_[0, 1, 999, 1000, 123456789, -1, -1000, -1001, rng.integers(-(10**15), 10**15, 500)]
    names = ['"a"', '"MPI_Allreduce"', json.dumps('q"\\uote\u00e9')]
    which = rng.integers(0, len(names), len(ns))
    present = rng.random(len(ns)) < 0.5
    R = Rows(len(ns))
    R.us(ns)
    R.lit(",")
    R.hex(ns.astype(np.uint64))
    R.lit(",")
    R.name(names, which)
    R.lit(",x", present)
    R.int(v[: len(ns)] if len(v) >= len(ns) else np.resize(v, len(ns)), present)
    R.lit("\n")
    Q = Rows(3)
    Q.lit("q\n")
    layout = np.zeros(len(ns) + 3, np.int8)
    layout[[0, 7, len(layout) - 1]] = 1
    out = bytes(memoryview(format_rows([R, Q], layout)).cast("B")).decode().split("\n")[:-1]
    assert [x.strip() for x in out if x.strip() == "q"] == ["q"] * 3
    rows = [x for x in out if x.strip() != "q"]
    ints = np.resize(v, len(ns))
    for row, x, k, p, i in zip(rows, ns.tolist(), which.tolist(), present.tolist(), ints.tolist()):
        us, h, name, *rest = [f.replace(" ", "") for f in row.split(",")]
        assert us == ("-" if x < 0 else "") + f"{abs(x) // 1000}.{abs(x) % 1000:03d}"
        assert h == f"{x % 2**64:016x}"
        assert json.loads(name) == json.loads(names[k])
        assert rest == ([f"x{i}"] if p else [])


def test_chrome_formatters_write_the_same_events(literal, tmp_path, monkeypatch):
    """The C loop and the numpy rows write the same JSON values (the loop without the
    numpy rows' padding blanks), for a trace with every kind of event."""
    from perfweave.interop import chrome
    from perfweave.interop.chrome import formatting

    assert formatting.json_rows() is not None, "libperfweave-json.so is not installed"
    exp = write_experiment(
        tmp_path / "thr",
        threaded_ranks(),
        comms={r: [COMMS[r][0]] for r in WORLD},
        groups={r: [] for r in WORLD},
        t_fini=5000,
        windows=(),
    )
    for e in (literal, exp):
        chrome.export(e, tmp_path / "loop.json", force=True)
        with monkeypatch.context() as m:
            m.setattr(formatting, "json_rows", lambda: None)
            chrome.export(e, tmp_path / "numpy.json", force=True)
        loop = (tmp_path / "loop.json").read_bytes()
        padded = (tmp_path / "numpy.json").read_bytes()
        assert json.loads(loop) == json.loads(padded)
        assert len(json.loads(loop)["traceEvents"]) > 50
        assert b"  " not in loop and len(loop) < len(padded)


# ---------------------------------------------------------------- bad input


def test_bad_input_is_one_line(literal, tmp_path):
    assert "no such OTF2 archive" in one_error_line(
        perfweave("import", tmp_path / "none" / "traces.otf2", "-o", tmp_path / "e1")
    )
    text = tmp_path / "notes.txt"
    text.write_text("not a trace\n")
    assert "not an OTF2 anchor file" in one_error_line(
        perfweave("import", text, "-o", tmp_path / "e2")
    )
    fake = tmp_path / "fake.otf2"
    fake.write_text("not a trace either\n")
    assert "not a readable OTF2 archive" in one_error_line(
        perfweave("import", fake, "-o", tmp_path / "e3")
    )
    assert not (tmp_path / "e3").exists()
    # an archive that lost one of its event files
    anchor = Path(pw_otf2.export(literal)["anchor"])
    (anchor.parent / "traces" / "1.evt").unlink()
    assert "not a readable OTF2 archive" in one_error_line(
        perfweave("import", anchor, "-o", tmp_path / "e4")
    )
    # the output exists
    assert "already exists" in one_error_line(perfweave("import", anchor, "-o", literal))
    # corrupt and missing experiments
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "experiment.json").write_text("{")
    for fmt in ("otf2", "chrome"):
        assert "corrupt" in one_error_line(perfweave("export", bad, "--format", fmt))
        assert "no such experiment" in one_error_line(
            perfweave("export", tmp_path / "nothing", "--format", fmt)
        )
    notrace = tmp_path / "notrace"
    notrace.mkdir()
    (notrace / "experiment.json").write_text(
        json.dumps({"format": "perfweave-experiment", "version": 1, "state": "finished"})
    )
    assert "no traces" in one_error_line(perfweave("export", notrace, "--format", "otf2"))
    assert "invalid choice" in one_error_line(perfweave("export", literal, "--format", "x"))
    # unwritable output
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "cannot write" in one_error_line(
        perfweave("export", literal, "--format", "otf2", "-o", blocker / "t.otf2")
    )
    assert "cannot write" in one_error_line(
        perfweave("export", literal, "--format", "chrome", "-o", blocker / "t.json")
    )


def test_without_the_otf2_package(literal):
    code = (
        "import sys; sys.modules['otf2'] = None; sys.modules['_otf2'] = None; "
        "from perfweave.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    for args in (["export", literal, "--format", "otf2"], ["import", literal, "-o", "x"]):
        res = subprocess.run(
            [sys.executable, "-c", code, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "pip install otf2" in one_error_line(res)
    res = subprocess.run(
        [sys.executable, "-c", code, "export", str(literal), "--format", "chrome"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr


# ---------------------------------------------------------------- public Score-P traces


@pytest.fixture(scope="module")
def shared():
    assert SHARED.is_dir(), f"{SHARED} is missing: the public OTF2 traces of these tests"
    return SHARED / "otf2"


def analyze(exp):
    res = perfweave("analyze", "--json", "--no-save", exp)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def metric(result, mid, rank=None):
    m = next(x for x in result["metrics"] if x["id"] == mid)
    return sum(v for _, r, v in m["values"] if rank is None or r == rank)


def late_senders(anchor):
    """Late Sender of every receive on rank 0 straight from the OTF2 file (Scalasca's
    definition: the sender's MPI_Send enter minus the receiver's MPI_Recv enter, when
    positive and before the receive ends), independently of perfweave."""
    with otf2.reader.open(str(anchor)) as tr:
        res = tr.timer_resolution
        stack, sends, recvs = {}, {}, []
        for loc, e in tr.events:
            r = int(loc.group.name.split()[-1])
            if isinstance(e, otf2.events.Enter):
                stack[r] = (e.region.name, e.time)
            elif isinstance(e, otf2.events.MpiSend):
                sends.setdefault((r, e.receiver, e.msg_tag), []).append(stack[r][1])
            elif isinstance(e, otf2.events.MpiRecv):
                recvs.append([r, e.sender, e.msg_tag, stack[r][1], None])
            elif (
                isinstance(e, otf2.events.Leave)
                and recvs
                and recvs[-1][0] == r
                and recvs[-1][4] is None
                and e.region.name == "MPI_Recv"
            ):
                recvs[-1][4] = e.time
    out = []
    for r, src, tag, enter, leave in recvs:
        send = sends[(src, r, tag)].pop(0)
        out.append(max(0, min(send, leave) - enter) / res)
    return [x for x in out if x > 0]


def test_casita_late_sender(shared, tmp_path):
    anchor = shared / "casita-10-ranks-tags" / "traces.otf2"
    exp = tmp_path / "casita"
    res = perfweave("import", anchor, "-o", exp)
    assert res.returncode == 0, res.stderr
    result = analyze(exp)
    assert result["counts"]["messages"] == 18
    assert result["counts"]["unmatched_sends"] == result["counts"]["unmatched_receives"] == 0
    # rank 0 receives from ranks 1..9 in order, twice. Its first MPI_Recv waits for rank
    # 1, which sleeps: the Late Sender of about 0.199 s (0.1986 s from the MPI_Recv enter
    # to rank 1's MPI_Send enter). In the second round rank 4 is late too: its MPI_Send
    # enters 0.0327 s after rank 0 entered the MPI_Recv for it. Both are "wrong order":
    # rank 0 later receives messages sent before (ranks 2..9 sent earlier).
    expected = late_senders(anchor)
    assert len(expected) == 2
    assert abs(expected[0] - 0.199) < 0.002 and abs(expected[1] - 0.0327) < 0.002
    assert metric(result, "mpi_latesender_count", 0) == 2
    assert abs(metric(result, "mpi_latesender", 0) - sum(expected)) < 0.002
    assert metric(result, "mpi_latesender") == metric(result, "mpi_latesender", 0)
    assert abs(metric(result, "mpi_latesender_wo", 0) - sum(expected)) < 0.002
    meta = json.loads((exp / "experiment.json").read_text())
    assert meta["imported_from"] == str(anchor.resolve()) and meta["import_notes"] == []
    # Score-P's time stamps: MPI_Init left .. MPI_Finalize entered
    _, m0, _ = read(exp, 0)
    assert m0["state"] == "complete" and len(m0["comms"]) == 2  # world and self


def test_pipit_ping_pong(shared, tmp_path):
    exp = tmp_path / "pingpong"
    res = perfweave("import", shared / "pipit-ping-pong", "-o", exp)  # the directory
    assert res.returncode == 0, res.stderr
    result = analyze(exp)
    assert result["complete"] and result["notes"] == []
    assert result["counts"]["messages"] == 16
    assert result["counts"]["unmatched_sends"] == result["counts"]["unmatched_receives"] == 0
    assert metric(result, "bytes") == 2 * 2 * sum(16384 << k for k in range(8))
    rec, meta, _ = read(exp, 1)
    names = [meta["functions"][f] for f in rec["fn"][rec["type"] == T["CALL"]]]
    assert names.count("MPI_Send") == names.count("MPI_Recv") == 8
    assert meta["regions"] == [{"name": "int main(int, char**)"}]


# ---------------------------------------------------------------- hybrid Score-P-like traces

NS = 10**9
T_START = 10 * NS


def write_hybrid(anchor, nthreads=3, nstreams=2, worker_mpi=False):
    """An archive shaped like Score-P's trace of a 2-rank MPI+OpenMP+CUDA run: per rank a
    process location group with a master and nthreads - 1 OpenMP threads (CPU_THREAD), a
    metric location, and an accelerator location group (created by the rank's) holding
    nstreams CUDA streams. The master threads fork and join thread teams, all threads
    record PAPI metric events, the streams run kernels. Rank 1 enters MPI_Recv at
    T_START + 2 s, rank 0 its MPI_Send 0.2 s later: a Late Sender of 0.2 s on rank 1.
    With worker_mpi, thread 1 of each rank calls MPI_Barrier (MPI_THREAD_MULTIPLE).
    Returns the counts the import must find."""
    from otf2.enums import (
        Base,
        GroupType,
        LocationGroupType,
        LocationType,
        MetricMode,
        MetricOccurrence,
        MetricType,
        Paradigm,
        RecorderKind,
        RegionRole,
        Type,
    )

    E = otf2.events
    with otf2.writer.open(str(anchor.parent), archive_name=anchor.stem, timer_resolution=NS) as w:
        d = w.definitions
        machine = d.system_tree_node("machine", class_name="machine")
        node = d.system_tree_node("node0", class_name="node", parent=machine)
        role = {
            "MPI_Send": RegionRole.POINT2POINT,
            "MPI_Recv": RegionRole.POINT2POINT,
            "MPI_Barrier": RegionRole.BARRIER,
        }
        reg = {
            n: d.region(n, paradigm=Paradigm.MPI, region_role=role.get(n, RegionRole.FUNCTION))
            for n in ("MPI_Init_thread", "MPI_Send", "MPI_Recv", "MPI_Barrier", "MPI_Finalize")
        }
        par = d.region(
            "!$omp parallel @solver.c:10", paradigm=Paradigm.OPENMP, region_role=RegionRole.PARALLEL
        )
        kern = d.region("saxpy_kernel", paradigm=Paradigm.CUDA, region_role=RegionRole.FUNCTION)
        ins = d.metric_member(
            "PAPI_TOT_INS",
            "",
            MetricType.PAPI,
            MetricMode.ACCUMULATED_START,
            Type.UINT64,
            Base.DECIMAL,
            0,
            "#",
        )
        mc = d.metric_class([ins], MetricOccurrence.SYNCHRONOUS_STRICT, RecorderKind.CPU)
        threads, streams, metric_locs = {}, {}, {}
        for r in range(2):
            lg = d.location_group(
                f"MPI Rank {r}",
                location_group_type=LocationGroupType.PROCESS,
                system_tree_parent=node,
            )
            threads[r] = [
                d.location(
                    "Master thread" if t == 0 else f"OMP thread {t}",
                    type=LocationType.CPU_THREAD,
                    group=lg,
                )
                for t in range(nthreads)
            ]
            ag = d.location_group(
                f"CUDA context {r}",
                location_group_type=LocationGroupType.ACCELERATOR,
                system_tree_parent=node,
                creating_location_group=lg,
            )
            streams[r] = [
                d.location(f"CUDA stream {s}", type=LocationType.GPU, group=ag)
                for s in range(nstreams)
            ]
            metric_locs[r] = d.location(f"PAPI metrics {r}", type=LocationType.METRIC, group=lg)
        d.group(
            "MPI ranks",
            group_type=GroupType.COMM_LOCATIONS,
            paradigm=Paradigm.MPI,
            members=[threads[r][0] for r in range(2)],
        )
        world = d.comm(
            "MPI_COMM_WORLD",
            d.group(
                "world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[0, 1]
            ),
            None,
        )
        team = d.comm(
            "OpenMP team",
            d.group(
                "team",
                group_type=GroupType.COMM_LOCATIONS,
                paradigm=Paradigm.OPENMP,
                members=threads[0],
            ),
            None,
        )
        for r in range(2):
            m = w.event_writer_from_location(threads[r][0])
            t = T_START
            m(E.ProgramBegin(t, "solver", []))
            m(E.Enter(t, reg["MPI_Init_thread"]))
            m(E.Leave(t + 1000, reg["MPI_Init_thread"]))
            t = T_START + NS
            m(E.Metric(t, mc, [100 + r]))
            m(E.ThreadFork(t + 10, Paradigm.OPENMP, nthreads))
            m(E.OmpFork(t + 12, nthreads))
            m(E.MeasurementOnOff(t + 15, otf2.MeasurementMode.ON))
            m(E.ThreadTeamBegin(t + 20, team))
            m(E.Enter(t + 30, par))
            m(E.Leave(t + 40, par))
            m(E.ThreadTeamEnd(t + 50, team))
            m(E.OmpJoin(t + 55))
            m(E.ThreadJoin(t + 60, Paradigm.OPENMP))
            t = T_START + 2 * NS
            if r == 0:
                m(E.Enter(t + NS // 5, reg["MPI_Send"]))
                m(E.MpiSend(t + NS // 5 + 10, 1, world, 7, 64))
                m(E.Leave(t + NS // 5 + 1000, reg["MPI_Send"]))
            else:
                m(E.Enter(t, reg["MPI_Recv"]))
                m(E.MpiRecv(t + NS // 5 + 500, 0, world, 7, 64))
                m(E.Leave(t + NS // 5 + 600, reg["MPI_Recv"]))
            m(E.Metric(t + NS, mc, [200 + r]))
            t = T_START + 4 * NS
            m(E.Enter(t, reg["MPI_Finalize"]))
            m(E.Leave(t + 100, reg["MPI_Finalize"]))
            m(E.ProgramEnd(t + 200, 0))
            for k, loc in enumerate(threads[r][1:], 1):
                e = w.event_writer_from_location(loc)
                t = T_START + NS
                e(E.ThreadTeamBegin(t + 20, team))
                e(E.Enter(t + 30, par))
                e(E.Metric(t + 35, mc, [5]))
                e(E.Leave(t + 40, par))
                e(E.ThreadTeamEnd(t + 50, team))
                if worker_mpi and k == 1:
                    t = T_START + 3 * NS
                    e(E.Enter(t, reg["MPI_Barrier"]))
                    e(E.MpiCollectiveBegin(t + 10))
                    e(
                        E.MpiCollectiveEnd(
                            t + 90 + 1000 * r, otf2.CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0
                        )
                    )
                    e(E.Leave(t + 100 + 1000 * r, reg["MPI_Barrier"]))
            for loc in streams[r]:
                e = w.event_writer_from_location(loc)
                for i in range(3):
                    e(E.Enter(T_START + NS + i * 100, kern))
                    e(E.Leave(T_START + NS + i * 100 + 50, kern))
            e = w.event_writer_from_location(metric_locs[r])
            for i in range(4):
                e(E.Metric(T_START + i * NS, mc, [i]))
    workers = nthreads - 1
    return {
        "streams": 2 * nstreams,
        "stream_events": 6,
        "metric_locations": 2,
        "metric_location_events": 4,
        # on the imported threads: 2 per master, 1 per worker and rank
        "skipped_events": {
            "MeasurementOnOff": 2,
            "Metric": 2 * (2 + workers),
            "OmpFork": 2,
            "OmpJoin": 2,
            "ThreadFork": 2,
            "ThreadJoin": 2,
            "ThreadTeamBegin": 2 * nthreads,
            "ThreadTeamEnd": 2 * nthreads,
        },
    }


def test_import_of_threads_streams_and_metrics(tmp_path):
    """The importer used to crash (SIGSEGV) on the first event of a kind it only counts
    (Metric, ThreadFork, ...): the library called a callback that had been freed. The
    import runs in a subprocess, so a crash fails this test."""
    anchor = tmp_path / "hybrid" / "traces.otf2"
    want = write_hybrid(anchor)
    exp = tmp_path / "exp"
    res = perfweave("import", anchor, "-o", exp)
    assert res.returncode == 0, (res.returncode, res.stderr)
    # MPI and user-region records of the threads, per rank and thread
    for r, p2p in ((0, "SEND"), (1, "RECV")):
        rec, meta, thread = read(exp, r)
        got = Counter((int(t), TNAME[int(x)]) for t, x in zip(thread, rec["type"]))
        assert got == {
            (0, "CALL"): 3,
            (0, p2p): 1,
            (0, "ENTER"): 1,
            (0, "LEAVE"): 1,
            (1, "ENTER"): 1,
            (1, "LEAVE"): 1,
            (2, "ENTER"): 1,
            (2, "LEAVE"): 1,
        }
        calls = [meta["functions"][f] for f in rec["fn"][rec["type"] == T["CALL"]]]
        assert calls == ["MPI_Init_thread", "MPI_Send" if r == 0 else "MPI_Recv", "MPI_Finalize"]
        assert meta["regions"] == [{"name": "!$omp parallel @solver.c:10"}]
    # what has no place: listed with its counts, in the experiment and in the output
    imp = json.loads((exp / "experiment.json").read_text())["import"]
    streams = [s for s in imp["skipped_locations"] if s["kind"] == "accelerator stream"]
    metric_locs = [s for s in imp["skipped_locations"] if s["kind"] == "metric location"]
    assert len(imp["skipped_locations"]) == len(streams) + len(metric_locs)
    assert sorted((s["location"], s["rank"], s["events"]) for s in streams) == [
        (f"CUDA context {r}/CUDA stream {k}", r, want["stream_events"])
        for r in range(2)
        for k in range(2)
    ]
    assert sorted((s["location"], s["rank"], s["events"]) for s in metric_locs) == [
        (f"MPI Rank {r}/PAPI metrics {r}", r, want["metric_location_events"]) for r in range(2)
    ]
    assert imp["skipped_events"] == want["skipped_events"]
    skipped = 4 * 6 + 2 * 4 + sum(want["skipped_events"].values())
    assert imp["events"] == 30 + skipped
    assert f"imported 30 of {30 + skipped} events of 2 ranks" in res.stdout
    assert f"skipped 6 locations and {skipped} events" in res.stdout
    assert "4 accelerator streams with 24 events not imported" in res.stdout
    assert "2 metric locations with 8 events not imported" in res.stdout
    # the Late Sender built into the trace: 0.2 s on rank 1
    result = analyze(exp)
    assert result["complete"] and result["counts"]["messages"] == 1
    assert metric(result, "mpi_latesender_count", 1) == 1
    assert abs(metric(result, "mpi_latesender", 1) - 0.2) < 1e-6
    assert metric(result, "mpi_latesender", 0) == 0
    text = perfweave("report", exp)
    assert text.returncode == 0, text.stderr
    assert "; 6 locations not imported" in text.stdout and "SIGKILL" not in text.stdout


def test_import_of_mpi_calls_on_worker_threads(tmp_path):
    """MPI_THREAD_MULTIPLE: a worker thread's MPI calls are records of that thread."""
    anchor = tmp_path / "hybrid" / "traces.otf2"
    write_hybrid(anchor, nthreads=2, nstreams=1, worker_mpi=True)
    exp = tmp_path / "exp"
    res = perfweave("import", anchor, "-o", exp)
    assert res.returncode == 0, (res.returncode, res.stderr)
    for r in range(2):
        rec, meta, thread = read(exp, r)
        got = Counter(
            (int(t), TNAME[int(x)])
            for t, x in zip(thread, rec["type"])
            if TNAME[int(x)] not in ("ENTER", "LEAVE")
        )
        assert got == {
            (0, "CALL"): 3,
            (0, "SEND" if r == 0 else "RECV"): 1,
            (1, "CALL"): 1,
            (1, "COLL"): 1,
        }
        barrier = rec[(thread == 1) & (rec["type"] == T["CALL"])]
        assert meta["functions"][int(barrier["fn"][0])] == "MPI_Barrier"
        assert int(barrier["t1"][0] - barrier["t0"][0]) == 100 + 1000 * r


def mpi_calls_in_archive(anchor):
    """Calls of each MPI function, per rank, and bytes sent by MpiSend/MpiIsend, counted
    with the otf2 package alone (MPI_Init*, MPI_Finalize left out, as the profile does)."""
    calls, per_rank, sent = Counter(), Counter(), Counter()
    with otf2.reader.open(str(anchor)) as tr:
        inside = {}
        for loc, e in tr.events:
            r = int(loc.group.name.split()[-1])
            if isinstance(e, otf2.events.Enter) and e.region.name.startswith("MPI_"):
                inside[loc] = e.region.name
                if e.region.name not in ("MPI_Init", "MPI_Init_thread", "MPI_Finalize"):
                    calls[e.region.name] += 1
                    per_rank[r] += 1
            elif isinstance(e, (otf2.events.MpiSend, otf2.events.MpiIsend)):
                sent[inside[loc]] += e.msg_length
    return calls, per_rank, sent


@pytest.mark.parametrize("name", ["casita-10-ranks-tags", "pipit-ping-pong"])
def test_report_of_an_imported_trace(shared, tmp_path, name):
    """perfweave report on an imported Score-P trace: the MPI profile computed from the
    trace, its wait states, and where it came from; not "no profile data (SIGKILL?)"."""
    anchor = shared / name / "traces.otf2"
    exp = tmp_path / "exp"
    res = perfweave("import", anchor, "-o", exp)
    assert res.returncode == 0, res.stderr
    assert "wait states analysed" in res.stdout
    res = perfweave("report", "--json", exp)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    calls, per_rank, sent = mpi_calls_in_archive(anchor)
    prof = rep["mpi_profile"]
    assert {f["name"]: f["calls"] for f in prof["functions"]} == dict(calls)
    assert {p["rank"]: p["calls"] for p in prof["per_rank"]} == dict(per_rank)
    assert {f["name"]: f["bytes_sent"] for f in prof["functions"] if f["bytes_sent"]} == {
        k: v for k, v in sent.items() if v
    }
    assert all(p["state"] == "complete" and p["mpi_s"] > 0 for p in prof["per_rank"])
    assert rep["imported"]["from"] == str(anchor.resolve())
    assert rep["imported"]["creator"].startswith("Score-P")
    assert rep["state"] == "complete"
    text = perfweave("report", exp)
    assert text.returncode == 0, text.stderr
    assert "SIGKILL" not in text.stdout + text.stderr
    assert "\n  imported   " in text.stdout and "command" not in text.stdout
    full = perfweave("report", "--full", exp)  # names whole, lines unwrapped
    assert f"imported   {anchor.resolve()} (OTF2 trace, written by Score-P" in full.stdout
    ls = {p["id"]: p for p in rep["wait_states"]["patterns"]}.get("mpi_latesender")
    if name == "casita-10-ranks-tags":
        # rank 0's two Late Senders (0.199 s and 0.0327 s), computed from the file
        expected = late_senders(anchor)
        assert abs(expected[0] - 0.199) < 0.002
        assert ls["ranks"][0][0] == 0 and len(ls["ranks"]) == 1
        assert abs(ls["ranks"][0][1] - sum(expected)) < 0.002
        assert "Late Sender" in text.stdout
    else:
        assert prof["functions"][0]["name"] in ("MPI_Send", "MPI_Recv")


def mpi_ranks(d, n):
    """Definitions (d) of n ranks as Score-P writes them: a process location group with
    its master thread each, on one node, the MPI locations group and MPI_COMM_WORLD.
    Returns (the ranks' locations, the world communicator)."""
    from otf2.enums import GroupType, LocationGroupType, LocationType, Paradigm

    node = d.system_tree_node("node0", class_name="node")
    locs = [
        d.location(
            "Master thread",
            type=LocationType.CPU_THREAD,
            group=d.location_group(
                f"MPI Rank {r}",
                system_tree_parent=node,
                location_group_type=LocationGroupType.PROCESS,
            ),
        )
        for r in range(n)
    ]
    d.group("MPI ranks", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
    members = list(range(n))
    group = d.group(
        "world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=members
    )
    return locs, d.comm("MPI_COMM_WORLD", group, None)


def write_unfinished(anchor):
    """A 2-rank archive whose rank 1 never reaches MPI_Finalize (its trace stops after an
    MPI_Recv of 64 bytes from rank 0, 0.2 s late): an experiment imported from it is
    partial, as a run that ended so."""
    from otf2.enums import Paradigm, RegionRole

    E = otf2.events
    with otf2.writer.open(str(anchor.parent), archive_name=anchor.stem, timer_resolution=NS) as w:
        d = w.definitions
        reg = {
            n: d.region(n, paradigm=Paradigm.MPI, region_role=RegionRole.FUNCTION)
            for n in ("MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Finalize")
        }
        locs, world = mpi_ranks(d, 2)
        for r, loc in enumerate(locs):
            m = w.event_writer_from_location(loc)
            t = T_START
            m(E.ProgramBegin(t, "app", []))
            m(E.Enter(t, reg["MPI_Init"]))
            m(E.Leave(t + 1000, reg["MPI_Init"]))
            t += NS
            if r == 0:
                m(E.Enter(t + NS // 5, reg["MPI_Send"]))
                m(E.MpiSend(t + NS // 5 + 10, 1, world, 7, 64))
                m(E.Leave(t + NS // 5 + 1000, reg["MPI_Send"]))
                m(E.Enter(t + NS, reg["MPI_Finalize"]))
                m(E.Leave(t + NS + 100, reg["MPI_Finalize"]))
                m(E.ProgramEnd(t + NS + 200, 0))
            else:
                m(E.Enter(t, reg["MPI_Recv"]))
                m(E.MpiRecv(t + NS // 5 + 500, 0, world, 7, 64))
                m(E.Leave(t + NS // 5 + 600, reg["MPI_Recv"]))


def same_profile_as_derived(exp):
    """The profile read from exp's profile.pwprof (what perfweave report reads) against
    the one its traces give (analysis/imported_profile.py from_traces, what perfweave report
    computed when reading an imported experiment before the import wrote it): every
    array and list the same. Returns (read, derived)."""
    from perfweave.analysis.imported_profile import from_traces
    from perfweave.readers.experiment import open_experiment

    derived = from_traces(exp)
    read = open_experiment(exp).profile
    for name in ("ranks", "sites", "frames", "hist", "counts"):
        a, b = getattr(read, name), getattr(derived, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("functions", "families", "objects", "buildids", "hosts", "modules"):
        assert getattr(read, name) == getattr(derived, name), name
    for name in ("world_size", "hist_buckets", "counters", "partial"):
        assert getattr(read, name) == getattr(derived, name), name
    return read, derived


@pytest.mark.parametrize("name", ["casita-10-ranks-tags", "pipit-ping-pong"])
def test_import_writes_the_profile_of_its_traces(shared, tmp_path, name):
    """perfweave import writes profile.pwprof: the profile of the traces it wrote, read
    back as it was computed from them, with no note; reading it loads neither the exports
    nor the analyses (tests/python/test_layers.py checks the imports)."""
    exp = tmp_path / "exp"
    pw_otf2.import_archive(shared / name / "traces.otf2", exp)
    assert (exp / "profile.pwprof").is_file()
    read, derived = same_profile_as_derived(exp)
    calls, per_rank, _ = mpi_calls_in_archive(shared / name / "traces.otf2")
    assert dict(zip(read.ranks["rank"].tolist(), read.ranks["mpi_calls"].tolist())) == dict(
        per_rank
    )
    assert not read.partial and read.notes == derived.notes == []


def test_import_of_an_unfinished_run_writes_a_partial_profile(tmp_path):
    """A trace whose rank 1 never finalized: the profile written at import is partial and
    carries what reading the trace noted; the report says what it said when it computed
    the profile from the traces."""
    anchor = tmp_path / "unfinished" / "traces.otf2"
    write_unfinished(anchor)
    exp = tmp_path / "exp"
    pw_otf2.import_archive(anchor, exp)
    read, derived = same_profile_as_derived(exp)
    assert read.partial and read.ranks["state"].tolist() == [0, 1]
    stopped = (
        "rank 1: the run ended without MPI_Finalize on this rank (state no-finalize); its "
        "trace stops there"
    )
    assert derived.notes == [stopped]
    assert read.notes == [
        stopped,
        "partial: the run did not complete MPI_Finalize; each rank saved its own data "
        "(rank states: complete, no-finalize)",
    ]
    rep = perfweave("report", "--json", exp)
    assert rep.returncode == 0, rep.stderr
    rep = json.loads(rep.stdout)
    assert rep["state"] == "partial" and rep["notes"] == read.notes
    per_rank = {p["rank"]: (p["state"], p["calls"]) for p in rep["mpi_profile"]["per_rank"]}
    assert per_rank == {0: ("complete", 1), 1: ("no-finalize", 1)}


def test_profile_of_damaged_traces_keeps_their_notes(shared, tmp_path):
    """The profile file holds what reading damaged traces noted (records dropped): the
    import's writer on an imported experiment whose rank 1 lost a record afterwards."""
    from perfweave.analysis.imported_profile import from_traces
    from perfweave.interop import profile

    exp = tmp_path / "exp"
    pw_otf2.import_archive(shared / "pipit-ping-pong" / "traces.otf2", exp)
    events = exp / "traces" / "rank-1.events"
    rec = np.fromfile(events, EVENT_DTYPE)
    rec["type"][np.flatnonzero(rec["type"] == T["CALL"])[1]] = 250  # no record type
    rec.tofile(events)
    profile.write(exp / "profile.pwprof", from_traces(exp))
    read, derived = same_profile_as_derived(exp)
    dropped = "rank 1: 1 corrupt records dropped from rank-1.events"
    assert dropped in derived.notes and read.notes == derived.notes


def old_import(shared, tmp_path):
    """An experiment as an older perfweave imported it, with traces and no profile.pwprof
    (the import wrote its wait states already, analysis/waitstates.json), beside the
    fresh import it is made of (a copy without its profile.pwprof), and a function that
    checks perfweave report --json of an experiment against the fresh import's: (old,
    fresh, report_of(exp, *wrapper) -> stderr)."""
    fresh = tmp_path / "fresh"
    res = perfweave("import", shared / "pipit-ping-pong" / "traces.otf2", "-o", fresh)
    assert res.returncode == 0 and (fresh / "analysis" / "waitstates.json").is_file()
    expected = perfweave("report", "--json", fresh)
    assert expected.returncode == 0 and not expected.stderr, expected.stderr
    old = tmp_path / "old"
    shutil.copytree(fresh, old)
    (old / "profile.pwprof").unlink()

    def report_of(exp, *wrapper):
        res = subprocess.run(
            [*wrapper, PERFWEAVE, "report", "--json", str(exp)], capture_output=True, text=True
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.replace(str(exp), str(fresh)) == expected.stdout
        return res.stderr

    return old, fresh, report_of


def test_report_of_an_experiment_imported_without_a_profile(shared, tmp_path):
    """perfweave report on an older perfweave's import computes the profile the import
    writes today, saves it once (the same bytes) and reports as on the fresh import.
    perfweave.open computes that profile in memory and gives the fresh import's profile
    and tables, saving nothing; the readers alone say how to save it; perfweave analyze
    reads the traces either way."""
    from perfweave.readers.experiment import open_experiment

    old, fresh, report_of = old_import(shared, tmp_path)
    assert analyze(old)["counts"]["messages"] == 16
    with pytest.raises(NoImportedProfile) as e:
        open_experiment(old)
    assert str(e.value) == (
        f"{old}: no profile.pwprof (imported by an older perfweave, or removed): "
        f"perfweave report {old} computes it from its traces and saves it"
    )
    listing = sorted(p.name for p in old.iterdir())
    same_api_reading(perfweave_open(old), perfweave_open(fresh))
    assert sorted(p.name for p in old.iterdir()) == listing  # nothing saved
    assert report_of(old) == (
        f"perfweave: note: {old}: imported by an older perfweave: its profile, computed "
        f"from its traces as perfweave import does, is saved as {old}/profile.pwprof\n"
    )
    assert (old / "profile.pwprof").read_bytes() == (fresh / "profile.pwprof").read_bytes()
    assert sorted(p.name for p in old.iterdir()) == sorted(p.name for p in fresh.iterdir())
    assert report_of(old) == ""  # once
    assert (
        perfweave_open(old).profile.sites.tolist() == perfweave_open(fresh).profile.sites.tolist()
    )


def same_api_reading(old, fresh):
    """perfweave.open of an older import (old) reads as that of the fresh one: every
    array and list of the profile, the MPI tables and the report (but for its path)."""
    import pandas as pd

    for name in ("ranks", "sites", "frames", "hist", "counts"):
        a, b = getattr(old.profile, name), getattr(fresh.profile, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("functions", "families", "hosts", "modules", "world_size", "partial", "notes"):
        assert getattr(old.profile, name) == getattr(fresh.profile, name), name
    assert len(fresh.profile.sites) and fresh.profile.sites["count"].sum() > 0
    tables = ["mpi_ranks", "mpi_functions", "mpi_callsites", "message_sizes", "wait_states"]
    for name, kwargs in [(t, {}) for t in tables] + [("mpi_callsites", {"per_rank": True})]:
        theirs = getattr(fresh, name)(**kwargs)
        assert len(theirs), name
        pd.testing.assert_frame_equal(getattr(old, name)(**kwargs), theirs, obj=name)
    report = json.dumps(old.report()).replace(str(old.path), str(fresh.path))
    assert report == json.dumps(fresh.report())


def read_only(exp):
    """The command line that runs a command unable to write into directory exp, and
    the error it then meets: the directory's mode where that binds (not root); else a
    read-only bind mount of it in a mount namespace of the command's own (root, whom
    modes do not stop); else, where root may not mount (a container), files limited to
    0 bytes (RLIMIT_FSIZE: Python ignores SIGXFSZ, so a write fails with EFBIG)."""
    exp.chmod(0o555)
    if not os.access(exp, os.W_OK):
        return [], "Permission denied"
    mount = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1"'
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", mount, "sh", str(exp)], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return ["prlimit", "--fsize=0"], "File too large"
    wrapper = ["unshare", "-m", "sh", "-c", f'{mount} && shift && exec "$@"', "sh", str(exp)]
    return wrapper, "Read-only file system"


def test_report_of_an_older_import_that_cannot_be_written(shared, tmp_path):
    """Where an older perfweave's import cannot be written, perfweave report computes its
    profile for that read, says it could not save it and why, and reports as on the
    fresh import; the experiment is left as it was."""
    old, _, report_of = old_import(shared, tmp_path)
    try:
        wrapper, error = read_only(old)
        assert report_of(old, *wrapper) == (
            f"perfweave: note: {old}: imported by an older perfweave, without "
            "profile.pwprof: its profile is computed from its traces for this read and "
            f"not saved ({old}/profile.pwprof: cannot write: {error})\n"
        )
    finally:
        old.chmod(0o755)
    assert sorted(p.name for p in old.iterdir()) == ["analysis", "experiment.json", "traces"]


def test_import_of_scorep_nonblocking_collectives(tmp_path):
    """Score-P 8 (OTF2 3) writes an MPI_I... collective as NonBlockingCollectiveRequest
    in its call and NonBlockingCollectiveComplete (what the collective was) in the call
    that completes it. The import makes them a COLL with the nonblocking flag and its
    COLL_DONE, so perfweave analyze matches them instead of calling the trace
    incomplete: 3 ranks start an MPI_Ibarrier at 0.1 s (rank 2 at 0.4 s) and wait for it
    from 0.2 s; ranks 0 and 1 wait 0.2 s each for rank 2; then an MPI_Iallreduce that
    rank 1 completes with MPI_Test, 100 bytes each way."""
    from otf2.enums import Paradigm, RegionRole

    E = otf2.events
    anchor = tmp_path / "scorep" / "traces.otf2"
    with otf2.writer.open(str(anchor.parent), archive_name="traces", timer_resolution=NS) as w:
        d = w.definitions
        reg = {
            n: d.region(n, paradigm=Paradigm.MPI, region_role=role)
            for n, role in (
                ("MPI_Init", RegionRole.FUNCTION),
                ("MPI_Ibarrier", RegionRole.BARRIER),
                ("MPI_Iallreduce", RegionRole.COLL_ALL2ALL),
                ("MPI_Wait", RegionRole.FUNCTION),
                ("MPI_Test", RegionRole.FUNCTION),
                ("MPI_Finalize", RegionRole.FUNCTION),
            )
        }
        locs, world = mpi_ranks(d, 3)
        for r, loc in enumerate(locs):
            m = w.event_writer_from_location(loc)
            t = T_START
            m(E.ProgramBegin(t, "app", []))
            m(E.Enter(t, reg["MPI_Init"]))
            m(E.Leave(t + 1000, reg["MPI_Init"]))
            start = t + (4 if r == 2 else 1) * NS // 10
            m(E.Enter(start, reg["MPI_Ibarrier"]))
            m(E.NonBlockingCollectiveRequest(start + 100, 7))
            m(E.Leave(start + 200, reg["MPI_Ibarrier"]))
            wait = max(t + 2 * NS // 10, start + 300)
            m(E.Enter(wait, reg["MPI_Wait"]))
            m(
                E.NonBlockingCollectiveComplete(
                    t + 4 * NS // 10 + 1000, otf2.CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0, 7
                )
            )
            m(E.Leave(t + 4 * NS // 10 + 2000, reg["MPI_Wait"]))
            t += NS
            m(E.Enter(t, reg["MPI_Iallreduce"]))
            m(E.NonBlockingCollectiveRequest(t + 100, 8))
            m(E.Leave(t + 200, reg["MPI_Iallreduce"]))
            done = "MPI_Test" if r == 1 else "MPI_Wait"
            m(E.Enter(t + 1000, reg[done]))
            m(
                E.NonBlockingCollectiveComplete(
                    t + 1500, otf2.CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 100, 100, 8
                )
            )
            m(E.Leave(t + 2000, reg[done]))
            m(E.Enter(t + NS, reg["MPI_Finalize"]))
            m(E.Leave(t + NS + 100, reg["MPI_Finalize"]))
            m(E.ProgramEnd(t + NS + 200, 0))
    exp = tmp_path / "exp"
    res = perfweave("import", anchor, "-o", exp)
    assert res.returncode == 0, res.stderr
    assert json.loads((exp / "experiment.json").read_text())["import_notes"] == []
    for r in WORLD:
        rec = read(exp, r)[0]
        coll = rec[rec["type"] == T["COLL"]]
        done = rec[rec["type"] == T["COLL_DONE"]]
        assert len(coll) == len(done) == 2
        assert (coll["flags"] & NB).all() and list(coll["t0"]) == [7, 8]
        assert list(coll["bytes"]) == [0, 100] and list(coll["t1"]) == [0, 100]
        assert list(done["t0"]) == [7, 8] and list(done["t1"]) == list(coll["tag"])
        assert (coll["tag"] > 0).all() and (done["comm"] == coll["comm"]).all()
    result = analyze(exp)
    assert result["counts"]["incomplete_collectives"] == 0
    for r, want in ((0, 0.2), (1, 0.2), (2, 0.0)):
        assert metric(result, "mpi_barrier_wait", r) == pytest.approx(want, abs=1e-5)
    # exported again, by the C loop as by one call per event: 2 pairs on each rank
    each, bulk, _, _ = streams_of_both_loops(exp, tmp_path / "again")
    assert bulk == each
    kinds = Counter(e[2] for e in bulk)
    assert kinds["NonBlockingCollectiveRequest"] == kinds["NonBlockingCollectiveComplete"] == 6


# ---------------------------------------------------------------- exports in bounded memory


def export_peak_mib(fmt, exp, out, setup=""):
    """Peak resident memory (MiB) of a child process that exports exp (VmHWM of its own
    image: ru_maxrss would count the pages of this process at the fork), and the
    export's summary. setup: Python lines run first."""
    code = (
        setup + "import json, re, sys\n"
        f"from perfweave.interop.{fmt} import export\n"
        "s = export(sys.argv[1], sys.argv[2], force=True)\n"
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())\n"
        "print(json.dumps([int(hwm.group(1)) / 1024, s]))"
    )
    return child_json(code, exp, out)


def child_json(code, *args):
    """What a child Python running code with args printed, as JSON (a process of its
    own: its peak memory and CPU time are the export's alone)."""
    res = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_chrome_export_memory_does_not_grow_with_the_trace(tmp_path):
    """The Chrome export streams rank by rank: a trace 10 times larger (10 times the
    ranks, 50,000 records each) needs at most 32 MiB more (it used to hold every
    event as a Python dict: about 1 KiB per record, here +900 MiB)."""
    tracegen = bench_tracegen()
    peaks = {}
    for ranks in (2, 20):
        exp = tmp_path / f"exp{ranks}"
        n = tracegen.write(exp, ranks, ranks * 50_000)
        peak, s = export_peak_mib("chrome", exp, tmp_path / f"t{ranks}.json")
        assert s["records"] == n and s["ranks"] == ranks
        # every call is one complete event; every message one arrow
        doc = json.loads((tmp_path / f"t{ranks}.json").read_text())
        ev = doc["traceEvents"]
        ncalls = sum(1 for e in ev if e.get("cat") == "MPI")
        assert ncalls == s["calls"] == n // tracegen.PER_ITER * 7
        starts = {e["id"] for e in ev if e["ph"] == "s"}
        assert starts == {e["id"] for e in ev if e["ph"] == "f"}
        assert len(starts) == n // tracegen.PER_ITER * 2
        del doc, ev
        peaks[ranks] = peak
    # 900,000 records more may add 32 MiB (36 bytes a record: the OTF2 and numpy buffers
    # of 18 more ranks), against about 1 KiB a record when every event was a dict
    assert peaks[20] < peaks[2] + 32, peaks


def events_in_files(anchor):
    """{location: events its definition declares}, {location: events the OTF2 library
    reads from its event file}: read without callbacks, at the library's speed."""
    import _otf2

    with otf2.reader.open(str(anchor)) as tr:
        declared = {loc._ref: loc.number_of_events for loc in tr.definitions.locations}
    r = _otf2.Reader_Open(str(anchor))
    try:
        _otf2.Reader_SetSerialCollectiveCallbacks(r)
        for loc in declared:
            _otf2.Reader_SelectLocation(r, loc)
        _otf2.Reader_OpenEvtFiles(r)
        found = {
            loc: _otf2.Reader_ReadAllLocalEvents(r, _otf2.Reader_GetEvtReader(r, loc))
            for loc in declared
        }
        _otf2.Reader_CloseEvtFiles(r)
    finally:
        _otf2.Reader_Close(r)
    return declared, found


def test_otf2_export_memory_does_not_grow_with_the_trace(tmp_path):
    """The OTF2 export streams rank by rank too: 10 times the ranks (50,000 records
    each, 75,000 events) need at most a few MiB more. The library's chunks are flushed
    as they fill (library.Chunks), and each location's event writer is closed as soon as its
    events are written: an open event file keeps a write buffer of up to 4 MiB in the
    library (+1 MiB per rank measured before, +3.5 MiB per rank with 250,000 records).
    Every event reaches its location's file (closing early once left empty files: the
    otf2 package opened a new writer at the archive's close for a location whose writer
    it no longer had)."""
    tracegen = bench_tracegen()
    peaks = {}
    for ranks in (2, 20):
        exp = tmp_path / f"exp{ranks}"
        n = tracegen.write(exp, ranks, ranks * 50_000)
        anchor = tmp_path / f"t{ranks}" / "traces.otf2"
        peak, s = export_peak_mib("otf2", exp, anchor)
        assert s["records"] == n and s["ranks"] == ranks
        declared, found = events_in_files(anchor)
        assert len(found) == ranks and found == declared
        assert sum(found.values()) == s["events"] and min(found.values()) > n // ranks
        peaks[ranks] = peak
    assert peaks[20] < peaks[2] + 8, peaks


def archive_files(anchor):
    """{path: bytes} of an archive's files but its anchor file (which holds a random
    trace id)."""
    root = Path(anchor).parent
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p != Path(anchor)
    }


@pytest.mark.parametrize("which", ["literal", "generated"])
def test_otf2_export_in_chunks_writes_the_same_archive(literal, tmp_path, monkeypatch, which):
    """A rank is exported chunk by chunk (RankExportStream, stream.Location): with chunks of
    1, 2, 3, 5 or 8 records the archive is byte for byte the one written with a whole rank
    in one chunk. The literal experiment has what chunks must carry across: user regions
    open over many chunks (main stays open to the end), a second thread, nonblocking
    receives completed in a later call, a nonblocking collective, access and exposure
    epochs; the generated one has two ranks of 1,700 records (more only add time: each
    chunk size is a pass over every record)."""
    if which == "literal":
        exp = literal
    else:
        tracegen = bench_tracegen()
        exp = tmp_path / "gen"
        tracegen.write(exp, 2, 3_400)
        # a fixed launch time: the definitions then hold no time of the export itself
        meta = json.loads((exp / "experiment.json").read_text())
        (exp / "experiment.json").write_text(json.dumps(dict(meta, start_epoch=1.7e9)))
    import perfweave.interop as interop

    monkeypatch.setattr(interop, "CHUNK_RECORDS", 1 << 30)
    one = pw_otf2.export(exp, tmp_path / "one" / "traces.otf2")
    whole = archive_files(one["anchor"])
    assert len([k for k in whole if k.endswith(".evt")]) == (4 if which == "literal" else 2)
    for size in (1, 2, 3, 5, 8):
        monkeypatch.setattr(interop, "CHUNK_RECORDS", size)
        s = pw_otf2.export(exp, tmp_path / f"c{size}" / "traces.otf2")
        assert archive_files(s["anchor"]) == whole, size
        assert (s["events"], s["records"], s["notes"]) == (
            one["events"],
            one["records"],
            one["notes"],
        )


def test_otf2_export_memory_does_not_grow_with_the_records_of_a_rank(tmp_path):
    """Chunk by chunk, a rank of 10 times the records (1,000,000 instead of 100,000, one
    rank) needs at most a few MiB more: measured 103 MiB at 2 M and at 8 M records in
    one rank (924 MiB at 2 M when a rank was exported at once: about 0.45 KiB per
    record, +400 MiB here). The pages of the mapped events file are let go as chunks
    are copied (RankSource.release): read through, they counted too. Chunks of 8,192
    records here, so that the smaller rank is many chunks too (with the default of
    65,536, 100,000 records are two chunks of which the second is half full)."""
    tracegen = bench_tracegen()
    peaks = {}
    for n in (100_000, 1_000_000):
        exp = tmp_path / f"exp{n}"
        n = tracegen.write(exp, 1, n)
        anchor = tmp_path / f"t{n}" / "traces.otf2"
        peak, s = export_peak_mib(
            "otf2",
            exp,
            anchor,
            setup=("import perfweave.interop\nperfweave.interop.CHUNK_RECORDS = 8192\n"),
        )
        assert s["records"] == n and s["ranks"] == 1
        declared, found = events_in_files(anchor)
        assert found == declared and sum(found.values()) == s["events"]
        # per iteration of 17 records: 7 calls (Enter, Leave), 4 requests posted and
        # completed, 2 collectives (begin, end); ProgramBegin and ProgramEnd, MPI_Init's
        # and MPI_Finalize's Enter and Leave
        assert s["events"] == n // tracegen.PER_ITER * 26 + 6
        peaks[n] = peak
    small, large = sorted(peaks)
    assert peaks[large] < peaks[small] + 16, peaks


def test_otf2_c_loop_is_faster_than_one_call_per_event(tmp_path):
    """CPU time of the export of 400,000 records (about 600,000 OTF2 events) in the same
    process, by the C loop and by one ctypes call per event: measured 3 times faster
    (2.2 against 0.73 M events per CPU second, docs/performance.md); at least 1.8 here,
    on a loaded machine. CPU time, not wall time: other processes do not count."""
    tracegen = bench_tracegen()
    exp = tmp_path / "exp"
    tracegen.write(exp, 4, 400_000)
    code = (
        "import json, sys, time\n"
        "from perfweave.interop import otf2\n"
        "from perfweave.interop.otf2 import calls\n"
        "out = {}\n"
        "for way in ('warm', 'bulk', 'each', 'bulk2'):\n"
        "    if way == 'each':\n"
        "        bulk, calls.bulk_writer = calls.bulk_writer, lambda: None\n"
        "    c = time.process_time()\n"
        "    s = otf2.export(sys.argv[1], f'{sys.argv[2]}/{way}/t.otf2')\n"
        "    out[way] = (time.process_time() - c, s['events'])\n"
        "    if way == 'each':\n"
        "        calls.bulk_writer = bulk\n"
        "print(json.dumps(out))"
    )
    t = child_json(code, exp, tmp_path)
    assert t["bulk"][1] == t["each"][1] > 500_000
    bulk = min(t["bulk"][0], t["bulk2"][0])
    assert t["each"][0] > 1.8 * bulk, t

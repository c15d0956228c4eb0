"""perfweave run --trace: the records each rank writes (docs/format.md, "Traces"),
read with numpy and json alone, for programs whose events are known."""

import json
import re

import numpy as np
import pytest

from perfweave import _format
from perfweave.readers import trace as rt
from perfweave.readers import trace_compact as compact
from perfweave.dtypes import TRACE_VERSION

EVENT = np.dtype(
    [
        ("t0", "<i8"),
        ("t1", "<i8"),
        ("type", "u1"),
        ("flags", "u1"),
        ("fn", "<u2"),
        ("peer", "<i4"),
        ("tag", "<i4"),
        ("comm", "<i4"),
        ("bytes", "<i8"),
    ]
)
CALL, SEND, RECV, IRECV, SEND_DONE, COLL, FLUSH, LOST = range(1, 9)
BLOCK = 15
# version 5's 16-byte records as stored (docs/format.md "Compact records"): the same
# bytes with 32-bit slots, or with a 64-bit value
CEVENT = np.dtype(
    [("kind", "u1"), ("flags", "u1"), ("s", "<u2"), ("a", "<u4"), ("b", "<u4"), ("c", "<u4")]
)
CWIDE = np.dtype([("kind", "u1"), ("flags", "u1"), ("s", "<u2"), ("a", "<u4"), ("w", "<i8")])
THREAD = 0xF2
# compact records an event may take (trace.c PW_CREC_MAX): a block is switched when a
# reservation's worst case (its records and a FLUSH) does not fit
CREC_MAX = 10
# s: a trace's ticks -> CLOCK_MONOTONIC conversion is linear between two readings of
# both clocks at the run's ends; CLOCK_MONOTONIC may be slewed (NTP, ~10 ppm) meanwhile:
# 20 us over a 2 s run. Seen: the calls start 7-23 us after the program's reading
CLOCK_ERR = 20e-6


def load(exp, rank):
    """The rank's committed records (the file's blocks without their BLOCK headers, as
    perfweave's reader gives them) and its JSON."""
    ev = rt.read_rank(exp, rank).records
    assert ev.dtype == EVENT
    js = json.loads((exp / "traces" / f"rank-{rank}.json").read_text())
    return ev, js


def assert_encoder_reads_back(exp, rank):
    """perfweave's numpy encoder (readers/trace_compact.encode, bench/tracegen.py's) writes
    the events the runtime recorded, thread by thread in small blocks, so that the reader
    gives them back byte for byte, with their threads."""
    rf = rt.read_rank(exp, rank)
    threads = np.unique(rf.thread).tolist()
    data = np.concatenate(
        [
            compact.encode(rf.records[rf.thread == t], thread=t, slots=255, cut=False)
            for t in threads
        ]
    )
    rec, spans, notes = compact.decode(data.view(np.uint8), rank, "again")
    order = np.argsort(rf.thread, kind="stable")
    assert notes == [] and rec.tobytes() == rf.records[order].tobytes()
    thread = np.repeat([t for _, _, t in spans], [k for _, k, _ in spans])
    assert thread.tolist() == rf.thread[order].tolist()


def calls(ev, js):
    """(function name, [events of the call]) in order."""
    out = []
    for e in ev:
        if e["type"] == CALL:
            out.append((js["functions"][e["fn"]], e, []))
        elif e["type"] != FLUSH and out:
            out[-1][2].append(e)
    return out


def seconds(js, ticks):
    c = js["clock"]
    return (
        c["ns"][0]
        + (ticks - c["ticks"][0]) * (c["ns"][1] - c["ns"][0]) / (c["ticks"][1] - c["ticks"][0])
    ) / 1e9


def test_trace_records(mpi, build, run_pw):
    prog = build(mpi, "trace_basic.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--trace"])
    assert (r.exp / "profile.pwprof").exists()  # the profile is still written
    per_rank = {k: load(r.exp, k) for k in range(4)}
    for rank, (ev, js) in per_rank.items():
        assert js["format"] == "perfweave-trace" and js["version"] == TRACE_VERSION
        # the keys format.h declares, in its order (flushes: imported traces' only)
        assert list(js) == [k for k in _format.JSON["trace"] if k != "flushes"]
        assert js["regions"] == [] and js["filter"] == ""  # no region declared, no --filter
        assert js["rank"] == rank and js["world_size"] == 4 and js["state"] == "complete"
        assert js["records"] == len(ev) and js["lost"] == 0
        assert js["comms"][0]["ranks"] == [0, 1, 2, 3]
        half = [c for c in js["comms"] if c["ranks"] == [rank % 2, rank % 2 + 2]]
        assert len(half) == 1 and half[0]["parent"] == 0 and half[0]["seq"] == 0
        seq = calls(ev, js)
        names = [n for n, _, _ in seq]
        assert names[:2] == ["MPI_Comm_rank", "MPI_Comm_size"]
        core = [n for n in names[2:] if n != "MPI_Comm_rank"]
        p2p = {0: ["MPI_Send"], 1: ["MPI_Recv"]}.get(rank, [])
        assert core == p2p + [
            "MPI_Irecv",
            "MPI_Isend",
            "MPI_Waitall",
            "MPI_Comm_split",
            "MPI_Barrier",
            "MPI_Bcast",
            "MPI_Comm_free",
        ]
        by = {n: (e, sub) for n, e, sub in seq}
        # ring: Irecv from the left, Isend to the right, both completed by Waitall
        (irecv,) = by["MPI_Irecv"][1]
        (isend,) = by["MPI_Isend"][1]
        left, right = (rank + 3) % 4, (rank + 1) % 4
        assert (irecv["type"], irecv["peer"], irecv["tag"], irecv["bytes"]) == (IRECV, left, 1, 40)
        assert (isend["type"], isend["peer"], isend["tag"], isend["bytes"]) == (SEND, right, 1, 40)
        assert irecv["flags"] & 1 and isend["flags"] & 1
        done = by["MPI_Waitall"][1]
        assert sorted(e["type"] for e in done) == [RECV, SEND_DONE]
        got = next(e for e in done if e["type"] == RECV)
        assert (got["t0"], got["peer"], got["tag"], got["bytes"]) == (irecv["t0"], left, 1, 40)
        assert next(e for e in done if e["type"] == SEND_DONE)["t0"] == isend["t0"]
        # collectives on the half: the root is the half's rank 0, as a world rank
        (bar,) = by["MPI_Barrier"][1]
        (bc,) = by["MPI_Bcast"][1]
        hid = half[0]["id"]
        assert (bar["type"], bar["comm"], bar["peer"]) == (COLL, hid, -1)
        assert (bc["type"], bc["comm"], bc["peer"]) == (COLL, hid, rank % 2)
        assert (bc["bytes"], bc["t1"]) == ((40, 0) if rank < 2 else (0, 40))

    ev0, js0 = per_rank[0]
    ev1, js1 = per_rank[1]
    send = dict((n, (e, s)) for n, e, s in calls(ev0, js0))["MPI_Send"]
    recv = dict((n, (e, s)) for n, e, s in calls(ev1, js1))["MPI_Recv"]
    (m,) = send[1]
    assert (m["type"], m["peer"], m["tag"], m["bytes"], m["comm"]) == (SEND, 1, 5, 40, 0)
    (g,) = recv[1]  # MPI_ANY_SOURCE / MPI_ANY_TAG with MPI_STATUS_IGNORE: actual values
    assert (g["type"], g["peer"], g["tag"], g["bytes"], g["t0"]) == (RECV, 0, 5, 40, 0)
    # the calls' times against the program's own CLOCK_MONOTONIC readings around them
    # (the ranks leave MPI_Init at different times, by tens of ms under load, so the
    # receiver's wait is what the readings say, not the planned 0.2 s). The ticks
    # convert to CLOCK_MONOTONIC by the rank's two-point calibration; CLOCK_ERR bounds
    # that conversion and the clock reads' own granularity.
    clock = {
        int(k): (int(a) / 1e9, int(b) / 1e9)
        for k, a, b in re.findall(r"^clock (\d) (\d+) (\d+)$", r.proc.stdout, re.M)
    }
    assert set(clock) == {0, 1}, r.proc.stdout
    for (before, after), js, call in ((clock[0], js0, send[0]), (clock[1], js1, recv[0])):
        t0, t1 = seconds(js, call["t0"]), seconds(js, call["t1"])
        assert before - CLOCK_ERR <= t0 <= t1 <= after + CLOCK_ERR, (before, t0, t1, after)
    # the receiver waited for the sleeping sender (planned 0.2 s): in MPI_Recv until the
    # send began at least, and the send began ~0.2 s after the receive did
    assert clock[0][0] - clock[1][0] > 0.1, clock
    assert seconds(js1, recv[0]["t1"]) >= seconds(js0, send[0]["t0"]) - CLOCK_ERR
    # on the common clock (the offsets to rank 0, of bounded error) as on the readings
    t_send = seconds(js0, send[0]["t0"]) - js0["clock"]["offset_init_ns"] / 1e9
    t_recv = seconds(js1, recv[0]["t0"]) - js1["clock"]["offset_init_ns"] / 1e9
    err = (js0["clock"]["offset_init_err_ns"] + js1["clock"]["offset_init_err_ns"]) / 1e9
    assert (
        clock[0][0] - clock[1][1] - err - CLOCK_ERR
        <= t_send - t_recv
        <= clock[0][1] - clock[1][0] + err + CLOCK_ERR
    ), (t_send - t_recv, clock, err)
    # call sites: the CALL's return address lies in the program, at the marked line
    obj = next(o for o in js0["objects"] if o["path"] == str(prog))
    assert obj["start"] <= send[0]["bytes"] < obj["end"]


def test_trace_buffer_flushes_are_recorded(mpi, build, run_pw):
    """--trace-buffer 4096: blocks of 512 16-byte records (the smallest: 256 + 1 records
    rounded up to whole pages), so rank 0's 1501 MPI_Comm_rank calls and the rest (~1520
    events, one record each but for time bases and call-site definitions) fill 3 blocks
    or more; each switch to a new block is a FLUSH record, and no record is lost."""
    prog = build(mpi, "trace_basic.c")
    r = run_pw(mpi.launch(2) + [prog, 1500], options=["--trace", "--trace-buffer", "4096"])
    raw = np.fromfile(r.exp / "traces" / "rank-0.events", CEVENT)
    ev, js = load(r.exp, 0)
    slots = 511
    heads = raw[::512]
    # the last block ends the file: cut after its committed records when the rank ended
    assert len(raw) == 512 * (len(heads) - 1) + 1 + heads["a"][-1]
    assert (heads["kind"] == BLOCK).all() and (heads["b"] == slots).all()
    assert (heads["c"] == 0).all()
    # each block's first record names the thread's OS id and the block's number
    first = raw[1::512].view(CWIDE)
    assert (first["kind"] == THREAD).all() and (first["a"] > 0).all()
    assert list(first["w"]) == list(range(len(heads)))
    assert len(heads) >= 3 and len(ev) == js["records"]
    # the committed records hold every event, and little else (bases, sites)
    assert len(ev) <= heads["a"].sum() - len(heads) <= len(ev) * 1.05
    # a block is switched when the next call's records (3 at most here: MPI_Sendrecv),
    # and the FLUSH, may not fit
    assert (heads["a"][:-1] >= slots - (3 + 1) * CREC_MAX).all()
    flushes = ev[ev["type"] == FLUSH]
    # one per switch from a full block (the first block is mapped inside MPI_Init)
    assert len(flushes) == len(heads) - 1
    assert (flushes["t1"] >= flushes["t0"]).all()
    assert list(flushes["bytes"]) == list(heads["a"][:-1].astype(np.int64) * CEVENT.itemsize)
    names = [js["functions"][e["fn"]] for e in ev if e["type"] == CALL]
    assert names.count("MPI_Comm_rank") == 1501  # nothing lost across blocks
    assert js["lost"] == 0
    # a flush is recorded after the call whose records did not fit: records stay in
    # time order
    timed = ev[np.isin(ev["type"], [CALL, FLUSH])]
    assert (timed["t0"][1:] >= timed["t1"][:-1]).all()


def test_trace_of_an_aborted_run(mpi, build, run_pw):
    prog = build(mpi, "abort.c")
    r = run_pw(mpi.launch(3) + [prog], options=["--trace"], check=False)
    ev, js = load(r.exp, 1)
    assert js["state"] == "abort"
    names = [js["functions"][e["fn"]] for e in ev if e["type"] == CALL]
    assert names == ["MPI_Comm_rank", "MPI_Barrier", "MPI_Barrier"]


@pytest.mark.parametrize("source", ["fortran_mpif.f90", "fortran_f08.f90"])
def test_trace_of_fortran(mpi, build, run_pw, source):
    prog = build(mpi, source)
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    ev, js = load(r.exp, 1)
    recvs = ev[ev["type"] == RECV]
    assert len(recvs) == 3
    assert (recvs["peer"] == 0).all() and (recvs["bytes"] == 200).all()
    assert (recvs["tag"] == 0).all()
    ev0, js0 = load(r.exp, 0)
    sends = ev0[ev0["type"] == SEND]
    assert len(sends) == 3 and (sends["peer"] == 1).all() and (sends["bytes"] == 200).all()
    colls = ev0[ev0["type"] == COLL]
    assert len(colls) == 3  # 2 Allreduce + 1 Barrier (the Pcontrol(0) ones are not traced)


WIN, RMA, WSYNC, ENTER, LEAVE = 11, 12, 13, 9, 10


def test_trace_of_one_sided_communication(mpi, build, run_pw):
    """ws_rma.c: window creation and freeing, puts with their target, and every window
    synchronisation with the groups of post and start as world ranks."""
    prog = build(mpi, "ws_rma.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--trace"])
    ev0, js0 = load(r.exp, 0)
    assert js0["windows"] == [{"id": 0, "comm": 0, "seq": 0}]
    groups = {g["id"]: g["ranks"] for g in js0["groups"]}
    seq = calls(ev0, js0)
    wins = [(n, e) for n, _, sub in seq for e in sub if e["type"] == WIN]
    assert [(n, e["tag"], e["comm"], e["flags"] & 8) for n, e in wins] == [
        ("MPI_Win_create", 0, 0, 0),
        ("MPI_Win_free", 0, 0, 8),
    ]
    puts = [e for n, _, sub in seq for e in sub if e["type"] == RMA]
    # phases 1, 2: to rank 1; 3: to rank 1 (the next); 5: to rank 1
    assert [(e["peer"], e["bytes"], e["tag"]) for e in puts] == [(1, 4, 0)] * 4
    syncs = [(n, e) for n, _, sub in seq for e in sub if e["type"] == WSYNC]
    names = [n for n, _ in syncs]
    assert names == [
        "MPI_Win_start",
        "MPI_Win_complete",
        "MPI_Win_start",
        "MPI_Win_complete",
        "MPI_Win_fence",
        "MPI_Win_fence",
        "MPI_Win_fence",
        "MPI_Win_fence",
        "MPI_Win_start",
        "MPI_Win_complete",
    ]
    starts = [e for n, e in syncs if n == "MPI_Win_start"]
    assert [groups[e["t1"]] for e in starts] == [[1], [1], [1, 2, 3]]
    ev1, js1 = load(r.exp, 1)
    posts = [
        e
        for n, _, sub in calls(ev1, js1)
        for e in sub
        if n == "MPI_Win_post" and e["type"] == WSYNC
    ]
    g1 = {g["id"]: g["ranks"] for g in js1["groups"]}
    assert [g1[e["t1"]] for e in posts] == [[0], [0], [0]]


def test_trace_of_user_functions(mpi, build, run_pw):
    """-finstrument-functions: ENTER/LEAVE records nest, main's ENTER (from before
    MPI_Init) comes first, and the function addresses resolve to regions.c's code."""
    prog = build(mpi, "regions.c", extra=("-finstrument-functions",))
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    ev, js = load(r.exp, 0)
    reg = ev[np.isin(ev["type"], [ENTER, LEAVE])]
    assert reg[0]["type"] == ENTER and reg[0]["tag"] == 0
    depth = np.cumsum(np.where(reg["type"] == ENTER, 1, -1))
    assert depth.min() >= 0
    assert (reg["tag"][reg["type"] == ENTER] == depth[reg["type"] == ENTER] - 1).all()
    obj = next(o for o in js["objects"] if o["path"] == str(prog))
    assert all(obj["start"] <= a < obj["end"] for a in reg["bytes"])
    # main, solve, relax (and now(), called while spinning) are the regions entered
    assert len(np.unique(reg["bytes"])) == 4
    first_call = np.flatnonzero(ev["type"] == CALL)[0]
    assert ev[0]["type"] == ENTER and first_call > 0  # main before any MPI call
    assert_encoder_reads_back(r.exp, 0)


def test_trace_of_threads_in_their_own_blocks(mpi, build, run_pw):
    """threads.c (MPI_THREAD_MULTIPLE): the main thread and a pthread each make 50
    MPI_Comm_rank and 10 MPI_Allreduce calls on their own duplicate of MPI_COMM_WORLD.
    With 512-record blocks each thread writes its own blocks (the BLOCK record names the
    thread) and the reader gives each record its thread."""
    prog = build(mpi, "threads.c", extra=("-pthread",))
    r = run_pw(mpi.launch(2) + [prog], options=["--trace", "--trace-buffer", "4096"])
    for rank in range(2):
        raw = np.fromfile(r.exp / "traces" / f"rank-{rank}.events", CEVENT)
        heads = raw[::512]
        # thread 0's block, first, keeps its size (its unused pages freed), the second is
        # cut after its committed records
        assert len(raw) == 512 + 1 + heads["a"][-1]
        assert (heads["kind"] == BLOCK).all() and sorted(heads["c"].tolist()) == [0, 1]
        rf = rt.read_rank(r.exp, rank)
        assert rf.complete, rf.notes
        names = rf.meta["functions"]
        comm_of_thread = {}
        for t in (0, 1):
            mine = rf.records[rf.thread == t]
            fns = [names[f] for f in mine["fn"][mine["type"] == CALL]]
            assert fns.count("MPI_Comm_rank") == 50 and fns.count("MPI_Allreduce") == 10
            colls = mine[mine["type"] == COLL]
            assert len(colls) == 10 and len(set(colls["comm"].tolist())) == 1
            comm_of_thread[t] = int(colls["comm"][0])
        assert comm_of_thread[0] != comm_of_thread[1]
    assert_encoder_reads_back(r.exp, 1)


def test_fields_above_32_bits(mpi, build, run_pw):
    """trace_wide.c: rank 0's MPI_Barrier waits for rank 1's 2^32 + 2^28 TSC ticks, so its
    duration is stored whole in an extension record, and the call after it starts more
    than 2^32 ticks after the block's time base (a BASE record first); its MPI_Bcast of 5
    GiB keeps its bytes in an extension record. The reader gives them back whole: the
    barrier's duration as rank 0's own clock timed it, the bytes exactly."""
    prog = build(mpi, "trace_wide.c")
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    ev, js = load(r.exp, 0)
    barrier = [e for name, e, _ in calls(ev, js) if name == "MPI_Barrier"][-1]
    assert barrier["t1"] - barrier["t0"] > 1 << 32
    timed = float(re.search(r"^barrier ([\d.]+)$", r.proc.stdout, re.M).group(1))
    # the program's clock reads around the call: the call is inside its interval, less
    # the clock's conversion error
    took = seconds(js, int(barrier["t1"])) - seconds(js, int(barrier["t0"]))
    assert timed - CLOCK_ERR - 2e-3 <= took <= timed + CLOCK_ERR, (took, timed)
    bcast = [s for name, _, s in calls(ev, js) if name == "MPI_Bcast"]
    assert len(bcast) == 1 and bcast[0][0]["type"] == COLL
    assert int(bcast[0][0]["bytes"]) == 5 << 30
    raw = np.fromfile(r.exp / "traces" / "rank-0.events", CEVENT)
    kinds = raw["kind"][1 : 1 + raw["a"][0]]
    ext_t1, ext_bytes, base = 0x81, 0x86, 0xF0
    assert (kinds == ext_t1).sum() >= 1 and (kinds == ext_bytes).sum() >= 1
    assert (kinds == base).sum() >= 2  # the block's first, and one past 2^32 ticks

"""perfweave export / import on traces of real runs (docs/interop.md): each MPI's trace of
tests/runtime/programs/trace_basic.c and ws_rma.c, written as OTF2, read back by OTF2's
own reader event for event against the records, then imported again: perfweave analyze
must find the same metric totals as on the original experiment (to the nanosecond; the
traces are small enough that no trace buffer is flushed before the end).

Not test_interop.py: pytest imports the test modules of these package-less directories by
their base name, and tests/python/test_interop.py has that one."""

import json
import subprocess
import sys
from collections import Counter, defaultdict

import otf2

from harness import PERFWEAVE
from perfweave.analysis.metrics import ROOT_CAUSE
from perfweave.readers import trace as rt
from perfweave.dtypes import EVENT_FLAGS, EVENT_TYPES

# the trace's record types and flags, as the format declares them
T, NONBLOCKING = EVENT_TYPES, EVENT_FLAGS["NONBLOCKING"]
CALL, SEND, RECV, IRECV, SEND_DONE, COLL, FLUSH = (
    T[k] for k in ("CALL", "SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "FLUSH")
)
ENTER, WIN, RMA, WSYNC, COLL_DONE = (T[k] for k in ("ENTER", "WIN", "RMA", "WSYNC", "COLL_DONE"))


def perfweave(*args):
    res = subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{args}:\n{res.stdout}\n{res.stderr}"
    return res


def load(exp, rank):
    """The rank's records as perfweave's reader gives them (the file's blocks without
    their BLOCK headers) and its JSON."""
    ev = rt.read_rank(exp, rank).records
    js = json.loads((exp / "traces" / f"rank-{rank}.json").read_text())
    return ev, js


def rank_of(location):
    return int(location.group.name.split()[-1])


def read_archive(anchor):
    """Per world rank: Enter events of MPI regions, messages sent and received as (world
    peer, tag, bytes), and a count of every event type."""
    out = defaultdict(
        lambda: {"mpi_enter": [], "sent": [], "received": [], "kinds": Counter(), "regions": set()}
    )
    with otf2.reader.open(str(anchor)) as tr:
        names = sorted(lg.name for lg in tr.definitions.location_groups)
        for loc, e in tr.events:
            r = out[rank_of(loc)]
            r["kinds"][type(e).__name__] += 1
            if isinstance(e, otf2.events.Enter):
                r["regions"].add(e.region.name)
                if e.region.paradigm == otf2.Paradigm.MPI:
                    r["mpi_enter"].append(e.region.name)
            elif isinstance(e, (otf2.events.MpiSend, otf2.events.MpiIsend)):
                peer = rank_of(e.communicator.group.members[e.receiver])
                r["sent"].append((peer, e.msg_tag, e.msg_length))
            elif isinstance(e, (otf2.events.MpiRecv, otf2.events.MpiIrecv)):
                peer = rank_of(e.communicator.group.members[e.sender])
                r["received"].append((peer, e.msg_tag, e.msg_length))
    return names, out


def check_against_records(exp, anchor, nranks):
    names, ranks = read_archive(anchor)
    assert names == [f"MPI Rank {r}" for r in range(nranks)]  # every rank a group
    for r in range(nranks):
        ev, js = load(exp, r)
        got = ranks[r]
        calls = [js["functions"][f] for f in ev["fn"][ev["type"] == CALL]]
        # the records begin after MPI_Init: the export adds it and MPI_Finalize
        assert not {"MPI_Init", "MPI_Init_thread", "MPI_Finalize"} & set(calls)
        window = ["MPI_Init", "MPI_Finalize"]
        assert sorted(got["mpi_enter"]) == sorted(calls + window)
        # Enter: MPI calls, user functions and the runtime's block switches (a FLUSH
        # each; the first block's mapping is one)
        assert got["kinds"]["Enter"] == len(calls) + len(window) + int(
            (ev["type"] == ENTER).sum()
        ) + int((ev["type"] == FLUSH).sum())
        sends = ev[ev["type"] == SEND]
        recvs = ev[ev["type"] == RECV]
        assert got["sent"] == list(
            zip(sends["peer"].tolist(), sends["tag"].tolist(), sends["bytes"].tolist())
        )
        assert got["received"] == list(
            zip(recvs["peer"].tolist(), recvs["tag"].tolist(), recvs["bytes"].tolist())
        )
        k = got["kinds"]
        coll = ev["type"] == COLL
        nbc = coll & ((ev["flags"] & NONBLOCKING) != 0) & (ev["t0"] != 0)
        assert k["MpiCollectiveBegin"] == k["MpiCollectiveEnd"] == int((coll & ~nbc).sum())
        # nonblocking collectives as Score-P writes them: a request, then its completion
        assert k["NonBlockingCollectiveRequest"] == int(nbc.sum())
        assert k["NonBlockingCollectiveComplete"] == int((ev["type"] == COLL_DONE).sum())
        assert k["MpiIrecvRequest"] == int((ev["type"] == IRECV).sum())
        assert k["MpiIsendComplete"] == int((ev["type"] == SEND_DONE).sum())
        assert k["RmaPut"] + k["RmaGet"] + k["RmaAtomic"] == int((ev["type"] == RMA).sum())
        assert k["RmaWinCreate"] + k["RmaWinDestroy"] == int((ev["type"] == WIN).sum())
        syncs = (
            k["RmaCollectiveEnd"]
            + k["RmaGroupSync"]
            + k["RmaAcquireLock"]
            + k["RmaReleaseLock"]
            + k["RmaSync"]
        )
        assert syncs == int((ev["type"] == WSYNC).sum())
        assert k["ProgramBegin"] == k["ProgramEnd"] == 1
    return ranks


def totals(exp):
    res = perfweave("analyze", "--json", "--no-save", exp)
    data = json.loads(res.stdout)
    return {m["id"]: m["total"] for m in data["metrics"]}, data["counts"]


def same_events_per_call(exp, anchor, tmp_path):
    """The export's loop in C (libperfweave-otf2.so) wrote the event files, byte for byte,
    that one call of the OTF2 library per event writes (where that library is absent)."""
    each = tmp_path / f"{exp.name}-each" / "traces.otf2"
    code = (
        "import sys\nfrom perfweave.interop import otf2\nfrom perfweave.interop.otf2 import calls\n"
        "assert calls.bulk_writer() is not None\ncalls.bulk_writer = lambda: None\n"
        "otf2.export(sys.argv[1], sys.argv[2])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(exp), str(each)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    files = sorted(p.name for p in (anchor.parent / "traces").glob("*.evt"))
    assert files and files == sorted(p.name for p in (each.parent / "traces").glob("*.evt"))
    for f in files:
        assert (anchor.parent / "traces" / f).read_bytes() == (
            each.parent / "traces" / f
        ).read_bytes(), f


def round_trip(exp, tmp_path, only=None):
    """Export exp to OTF2, import it again; the analyses agree: every metric (only those
    of only, if given), every count."""
    anchor = exp / "export" / "traces.otf2"
    perfweave("export", exp, "--format", "otf2")
    same_events_per_call(exp, anchor, tmp_path)
    back = tmp_path / f"{exp.name}-back"
    res = perfweave("import", anchor, "-o", back)
    assert "imported" in res.stdout
    meta = json.loads((back / "experiment.json").read_text())
    assert meta["state"] == "finished" and meta["import_notes"] == []
    (a, ca), (b, cb) = totals(exp), totals(back)
    assert ca == cb
    for mid in only or a:
        if mid in ROOT_CAUSE and mid != "critical_path" and not only:
            # delays and the imbalance take positive parts per call path, which do not
            # add up over paths, and OTF2 keeps an MPI call's region, not its call site
            # (two MPI_Comm_rank sites come back as one path); the critical path, a
            # sum over the same calls, is checked
            continue
        assert abs(a[mid] - b[mid]) <= 1e-9, (mid, a[mid], b[mid])
    return anchor, back


def test_trace_basic_to_otf2_and_back(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "trace_basic.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--trace"])
    anchor, back = round_trip(r.exp, tmp_path)
    ranks = check_against_records(r.exp, anchor, 4)
    assert ranks[0]["sent"][0] == (1, 5, 40)  # the MPI_Send of rank 0 to rank 1
    assert ranks[1]["received"][0] == (0, 5, 40)
    assert all(ranks[k]["kinds"]["MpiCollectiveEnd"] == 2 for k in range(4))
    # the imported records are the original ones (ticks became ns on rank 0's clock)
    for k in range(4):
        ev, js = load(r.exp, k)
        ev2, js2 = load(back, k)
        for t in (SEND, RECV, IRECV, SEND_DONE, COLL):
            a, b = ev[ev["type"] == t], ev2[ev2["type"] == t]
            for f in ("flags", "peer", "tag", "bytes", "t1"):
                assert (a[f] == b[f]).all(), (k, t, f)


def test_ws_rma_to_otf2_and_back(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "ws_rma.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--trace"])
    anchor, back = round_trip(r.exp, tmp_path)
    ranks = check_against_records(r.exp, anchor, 4)
    k0 = ranks[0]["kinds"]
    assert k0["RmaWinCreate"] == k0["RmaWinDestroy"] == 1
    assert k0["RmaCollectiveEnd"] == 4  # fences
    assert k0["RmaPut"] >= 3 and k0["RmaGroupSync"] == 6  # 3 starts, 3 completes
    assert ranks[1]["kinds"]["RmaGroupSync"] == 6  # 3 posts, 3 waits
    # post/start groups and windows survive
    for k in range(4):
        _, js = load(r.exp, k)
        _, js2 = load(back, k)
        assert [g["ranks"] for g in js["groups"]] == [g["ranks"] for g in js2["groups"]]
        assert [w["seq"] for w in js["windows"]] == [w["seq"] for w in js2["windows"]]


def test_ws_icoll_to_otf2_and_back(mpi, build, run_pw, tmp_path):
    """Nonblocking collectives completed by Wait/Waitall/Test go to OTF2 as
    NonBlockingCollectiveRequest/Complete pairs and come back as the same COLL and
    COLL_DONE records: the imported trace has the same wait states (within 1e-9 s) and
    is as complete (tests/runtime/programs/ws_icoll.c). Only the wait states: the
    time of a completion call goes to the category of what it completed per call path,
    and OTF2 regions have no call sites, so the MPI_Wait calls of different lines,
    which complete barriers, reductions and messages, become one path."""
    prog = build(mpi, "ws_icoll.c")
    r = run_pw(mpi.launch(3) + [prog], options=["--trace"])
    waits = (
        "mpi_barrier_wait",
        "mpi_wait_nxn",
        "mpi_latebroadcast",
        "mpi_earlyreduce",
        "mpi_earlyscan",
        "mpi_latesender",
    )
    anchor, back = round_trip(r.exp, tmp_path, only=waits)
    ranks = check_against_records(r.exp, anchor, 3)
    assert all(ranks[k]["kinds"]["NonBlockingCollectiveComplete"] == 9 for k in range(3))
    a, ca = totals(r.exp)
    assert ca["incomplete_collectives"] == 0
    assert all(a[m] > 0.05 for m in waits), a  # each was built into the program
    for k in range(3):
        ev, _ = load(r.exp, k)
        ev2, _ = load(back, k)
        for t in (COLL, COLL_DONE):
            x, y = ev[ev["type"] == t], ev2[ev2["type"] == t]
            assert len(x) == len(y) > 0
            same = ("flags", "peer", "comm", "bytes", "t0") + (("t1",) if t == COLL else ())
            for f in same:
                assert (x[f] == y[f]).all(), (k, t, f)
        # a completion names its start by request key and post number (numbers are
        # given again in order of the posts)
        px = ev2[(ev2["type"] == COLL) & ((ev2["flags"] & NONBLOCKING) != 0)]
        dx = ev2[ev2["type"] == COLL_DONE]
        assert sorted(zip(px["t0"], px["tag"])) == sorted(zip(dx["t0"], dx["t1"]))


def test_user_functions_become_regions(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "trace_basic.c", extra=("-finstrument-functions",))
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    anchor, back = round_trip(r.exp, tmp_path)
    ranks = check_against_records(r.exp, anchor, 2)
    assert "main" in ranks[0]["regions"]  # symbolised from its address
    ev, _ = load(back, 0)
    _, js = load(back, 0)
    assert js["regions"] == [{"name": "main"}]
    assert (ev["type"] == ENTER).sum() >= 1


def test_threads_have_their_own_locations(mpi, build, run_pw, tmp_path):
    """MPI_THREAD_MULTIPLE (threads.c): the main thread and a pthread each make 50
    MPI_Comm_rank and 10 MPI_Allreduce calls. The OTF2 export has one CPU_THREAD
    location per thread in the rank's location group, the Chrome export one tid per
    thread, each with exactly its own thread's calls."""
    prog = build(mpi, "threads.c", extra=("-pthread",))
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    perfweave("export", r.exp, "--format", "otf2")
    per_loc = defaultdict(Counter)
    with otf2.reader.open(str(r.exp / "export" / "traces.otf2")) as tr:
        for lg in tr.definitions.location_groups:
            locs = [loc for loc in tr.definitions.locations if loc.group == lg]
            assert len(locs) == 2, lg.name
            assert all(loc.type == otf2.LocationType.CPU_THREAD for loc in locs)
        for loc, e in tr.events:
            if isinstance(e, otf2.events.Enter):
                per_loc[(rank_of(loc), loc.name)][e.region.name] += 1
    for rank in range(2):
        for name in ("Master thread", "Thread 1"):
            got = per_loc[(rank, name)]
            assert got["MPI_Comm_rank"] == 50 and got["MPI_Allreduce"] == 10, (rank, name)
        # the calls only the main thread makes
        assert per_loc[(rank, "Master thread")]["MPI_Comm_dup"] == 2
        assert per_loc[(rank, "Thread 1")]["MPI_Comm_dup"] == 0
    perfweave("export", r.exp, "--format", "chrome")
    doc = json.loads((r.exp / "export" / "trace.json").read_text())
    calls = Counter(
        (e["pid"], e["tid"], e["name"]) for e in doc["traceEvents"] if e.get("cat") == "MPI"
    )
    for rank in range(2):
        for tid in (0, 1):
            assert calls[(rank, tid, "MPI_Comm_rank")] == 50
            assert calls[(rank, tid, "MPI_Allreduce")] == 10
        assert {t for (p, t, _) in calls if p == rank} == {0, 1}
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["name"] == "thread_name"
    }
    assert names == {
        (p, t): ("master thread" if t == 0 else f"thread {t}") for p in range(2) for t in (0, 1)
    }


def test_chrome_arrows_join_the_requests_the_model_joins(mpi, build, run_pw):
    """Receive requests completed out of the order of their posts, from MPI_ANY_SOURCE
    (requests_out_of_order.c): the Chrome export's arrows join exactly the pairs the
    model joins (model/trace.py prepare, by which perfweave analyze matches messages:
    one rule links a completion to its post, one numbers a channel's messages), and
    those are the program's by construction: in each round, message j from rank 0's
    j-th MPI_Isend to the call of rank 1 that completed request j, (j + 1) * 4 bytes."""
    from perfweave.interop import load as load_traces
    from perfweave.model.trace import prepare

    prog = build(mpi, "requests_out_of_order.c")
    r = run_pw(mpi.launch(2) + [prog], options=["--trace"])
    perfweave("export", r.exp, "--format", "chrome")
    doc = json.loads((r.exp / "export" / "trace.json").read_text())
    origin = doc["otherData"]["origin_ns"]
    ns = lambda us: origin + round(us * 1000)  # noqa: E731
    calls = {0: [], 1: []}  # per rank: (t0, t1, name), in the order of time
    for e in doc["traceEvents"]:
        if e.get("cat") == "MPI":
            calls[e["pid"]].append((ns(e["ts"]), ns(e["ts"]) + round(e["dur"] * 1000), e["name"]))
    for c in calls.values():
        c.sort()

    def call(rank, t):
        """The call of rank that holds time t: (its name, its index among the rank's calls
        of that name)."""
        t0, _, name = [c for c in calls[rank] if c[0] <= t <= c[1]][-1]
        return name, sum(1 for c in calls[rank] if c[2] == name and c[0] < t0)

    starts = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    exported = {
        (call(0, ns(s["ts"])), call(1, ns(ends[i]["ts"])), ends[i]["args"]["bytes"])
        for i, s in starts.items()
    }
    # the model's pairs: a message is its channel (source, destination, communicator, tag)
    # and its number on it
    X = load_traces(r.exp)
    ends_of = {}
    for rank in X.ranks:
        rd = prepare(X.rank_records(rank))
        for side, rows, table in ((0, rd.sends, rd.send_channels), (1, rd.recvs, rd.recv_channels)):
            for k in range(len(rows["chan"])):
                peer, lc, tag = table[rows["chan"][k]].tolist()
                src, dst = (rank, peer) if side == 0 else (peer, rank)
                msg = (src, dst, int(rd.comm_keys[lc]), tag, int(rows["seq"][k]))
                at = rows["e"][k] if side == 0 else rows["cb"][k]
                ends_of.setdefault(msg, {})[side] = (call(rank, int(at)), rows)
    modelled = set()
    for msg, both in ends_of.items():
        assert both.keys() == {0, 1}, msg
        recvs = both[1][1]
        k = [i for i in range(len(recvs["seq"])) if int(recvs["seq"][i]) == msg[4]][0]
        modelled.add((both[0][0], both[1][0], int(recvs["bytes"][k])))
    # the program's pairs: per round, requests 3 and 1 by MPI_Wait, 0 by its last
    # MPI_Test, 2 by MPI_Wait
    tests = [c for c in calls[1] if c[2] == "MPI_Test"]
    waits = [c for c in calls[1] if c[2] == "MPI_Wait"]
    want = set()
    for rnd in range(3):
        last_test = max(i for i, c in enumerate(tests) if c[0] < waits[3 * rnd + 2][0])
        done_by = {3: ("MPI_Wait", 3 * rnd), 1: ("MPI_Wait", 3 * rnd + 1)}
        done_by |= {0: ("MPI_Test", last_test), 2: ("MPI_Wait", 3 * rnd + 2)}
        want |= {(("MPI_Isend", 4 * rnd + j), done_by[j], (j + 1) * 4) for j in range(4)}
    assert len(want) == 12
    assert exported == want
    assert modelled == want

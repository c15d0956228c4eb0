"""The wait-state formulas on traces written by hand (Trace.from_literal): every value
is exact to the nanosecond, so these tests pin down each definition
(docs/wait-states.md) apart from any MPI's timing. Times below are nanoseconds."""
import pytest

from perfweave.analysis.waitstates import WO_BUFFER, analyze_trace
from perfweave.model.trace import Trace


def analyze(ranks, **kw):
    return Result(analyze_trace(Trace.from_literal(ranks, **kw)))


class Result:
    def __init__(self, data):
        self.data = data
        self.m = {m["id"]: m for m in data["metrics"]}
        self.leaf = {cp["id"]: cp["labels"][-1] for cp in data["callpaths"]}

    def ns(self, metric, rank=None, fn=None):
        """A metric summed (in ns, or its count) over ranks / the calls of function fn."""
        m = self.m[metric]
        total = 0
        for p, r, v in m["values"]:
            if rank is not None and r != rank:
                continue
            if fn is not None and not self.leaf[p].startswith(f"M:{fn}@"):
                continue
            total += v
        return round(total * 1e9) if m["unit"] == "s" else total


def send(t0, t1, to, tag=0, nbytes=4, fn="MPI_Send", flags=()):
    return (fn, t0, t1, [dict(type="SEND", peer=to, tag=tag, comm=0, bytes=nbytes,
                              flags=list(flags))])


def recv(t0, t1, frm, tag=0, fn="MPI_Recv"):
    return (fn, t0, t1, [dict(type="RECV", peer=frm, tag=tag, comm=0, bytes=4)])


# ---- point-to-point ----

def test_late_sender_is_the_receivers_wait_for_the_send_to_start():
    r = analyze({0: [send(1000, 1010, 1)], 1: [recv(200, 1020, 0)]})
    assert r.ns("mpi_latesender", 1, "MPI_Recv") == 800
    assert r.ns("mpi_latesender_count") == 1
    assert r.data["counts"]["messages"] == 1
    # the send started first: nothing
    r = analyze({0: [send(100, 110, 1)], 1: [recv(200, 300, 0)]})
    assert r.ns("mpi_latesender") == 0


def test_late_sender_in_the_wait_of_an_irecv_not_in_a_test():
    def rank1(fn):
        return [("MPI_Irecv", 100, 110, [dict(type="IRECV", peer=0, tag=0, comm=0, key=7,
                                              flags=["NONBLOCKING"])]),
                (fn, 300, 1100, [dict(type="RECV", peer=0, tag=0, comm=0, key=7, bytes=4)])]
    r = analyze({0: [send(900, 910, 1)], 1: rank1("MPI_Wait")})
    assert r.ns("mpi_latesender", 1, "MPI_Wait") == 600
    r = analyze({0: [send(900, 910, 1)], 1: rank1("MPI_Test")})
    assert r.ns("mpi_latesender") == 0 and r.data["counts"]["messages"] == 1


def test_a_waitall_counts_its_latest_sender_once():
    irecv = [("MPI_Irecv", 10 + 10 * k, 15 + 10 * k,
              [dict(type="IRECV", peer=k, tag=0, comm=0, key=k + 1, flags=["NONBLOCKING"])])
             for k in (0, 1)]
    wait = ("MPI_Waitall", 100, 2000,
            [dict(type="RECV", peer=k, tag=0, comm=0, key=k + 1, bytes=4) for k in (0, 1)])
    r = analyze({0: [send(500, 510, 2)], 1: [send(1500, 1510, 2)], 2: irecv + [wait]})
    assert r.ns("mpi_latesender", 2, "MPI_Waitall") == 1400
    assert r.ns("mpi_latesender_count") == 1


def test_wrong_order_same_and_different_sources():
    # rank 1 receives tag 2 (sent at 1000) before tag 1 (sent at 100)
    r = analyze({0: [send(100, 110, 1, tag=1), send(1000, 1010, 1, tag=2)],
                 1: [recv(50, 1020, 0, tag=2), recv(1030, 1040, 0, tag=1)]})
    assert r.ns("mpi_latesender") == 950
    assert r.ns("mpi_latesender_wo") == r.ns("mpi_lswo_same") == 950
    assert r.ns("mpi_lswo_different") == 0
    # rank 2 receives from rank 1 (sent at 1000) before rank 0 (sent at 100)
    r = analyze({0: [send(100, 110, 2)], 1: [send(1000, 1010, 2)],
                 2: [recv(50, 1020, 1), recv(1030, 1040, 0)]})
    assert r.ns("mpi_lswo_different") == 950 and r.ns("mpi_lswo_same") == 0
    # in order: no wrong order
    r = analyze({0: [send(100, 110, 1, tag=1), send(1000, 1010, 1, tag=2)],
                 1: [recv(50, 120, 0, tag=1), recv(130, 1020, 0, tag=2)]})
    assert r.ns("mpi_latesender") == 50 + 870 and r.ns("mpi_latesender_wo") == 0


@pytest.mark.parametrize("later, wrong_order", [(WO_BUFFER - 1, True), (WO_BUFFER, False)])
def test_wrong_order_looks_back_over_the_last_100_late_senders(later, wrong_order):
    """The instance of message A (tag 1, sent at 100000, 50000 ns late) is wrong order when
    B (tag 0, sent first) is received while A is still among the receiver's last
    WO_BUFFER instances; the later instances (1000 ns each, also sent after B) are."""
    sends = [send(10, 11, 1, tag=0), send(100_000, 100_010, 1, tag=1)]
    recvs = [recv(50_000, 100_020, 0, tag=1)]
    t = 200_000
    for k in range(later):                 # later Late Sender instances, in order
        sends.append(send(t + 1000, t + 1010, 1, tag=2))
        recvs.append(recv(t, t + 1020, 0, tag=2))
        t += 2000
    recvs.append(recv(t, t + 10, 0, tag=0))
    r = analyze({0: sends, 1: recvs})
    assert r.ns("mpi_latesender_count") == later + 1
    assert r.ns("mpi_latesender_wo") == later * 1000 + (50_000 if wrong_order else 0)


def test_late_receiver_only_when_the_send_waits_for_the_receive():
    r = analyze({0: [send(100, 1000, 1, fn="MPI_Ssend", flags=["SYNCHRONOUS"])],
                 1: [recv(700, 1010, 0)]})
    assert r.ns("mpi_latereceiver", 0, "MPI_Ssend") == 600
    assert r.ns("mpi_latereceiver_count") == 1
    # an eager send that returned before the receive was posted
    r = analyze({0: [send(100, 110, 1)], 1: [recv(700, 710, 0)]})
    assert r.ns("mpi_latereceiver") == 0
    # MPI_Sendrecv waits for its own receive: not a Late Receiver
    sendrecv = ("MPI_Sendrecv", 100, 1000, [dict(type="SEND", peer=1, tag=0, comm=0, bytes=4),
                                            dict(type="RECV", peer=1, tag=1, comm=0, bytes=4)])
    r = analyze({0: [sendrecv], 1: [recv(700, 710, 0), send(990, 995, 0, tag=1)]})
    assert r.ns("mpi_latereceiver") == 0 and r.ns("mpi_latesender", 0) == 890


def test_unmatched_messages_are_counted():
    r = analyze({0: [send(100, 110, 1), send(200, 210, 1, tag=5)], 1: [recv(50, 120, 0)]})
    c = r.data["counts"]
    assert (c["messages"], c["unmatched_sends"], c["unmatched_receives"]) == (1, 1, 0)
    assert not r.data["complete"] and "no partner" in " ".join(r.data["notes"])


# ---- collectives ----

def coll(fn, b, e, root=-1, sent=8, received=8, flags=()):
    return (fn, b, e, [dict(type="COLL", comm=0, peer=root, bytes=sent, bytes2=received,
                            flags=list(flags))])


def test_barrier_wait_and_completion():
    r = analyze({0: [coll("MPI_Barrier", 100, 450, sent=0, received=0)],
                 1: [coll("MPI_Barrier", 400, 460, sent=0, received=0)],
                 2: [coll("MPI_Barrier", 200, 470, sent=0, received=0)]})
    assert [r.ns("mpi_barrier_wait", k) for k in range(3)] == [300, 0, 200]
    assert [r.ns("mpi_barrier_completion", k) for k in range(3)] == [0, 10, 20]


def test_wait_at_nxn_overlapping_and_not():
    r = analyze({0: [coll("MPI_Allreduce", 100, 500)], 1: [coll("MPI_Allreduce", 300, 510)]})
    assert [r.ns("mpi_wait_nxn", k) for k in range(2)] == [200, 0]
    assert [r.ns("mpi_nxn_completion", k) for k in range(2)] == [0, 10]
    # rank 0 left before rank 1 entered (no synchronisation): the wait is for the
    # latest sender, capped at the rank's own end
    r = analyze({0: [coll("MPI_Allgather", 100, 200)], 1: [coll("MPI_Allgather", 300, 400)]})
    assert [r.ns("mpi_wait_nxn", k) for k in range(2)] == [100, 0]
    # Alltoallv: not analysed (as Scalasca)
    r = analyze({0: [coll("MPI_Alltoallv", 100, 500)], 1: [coll("MPI_Alltoallv", 300, 510)]})
    assert r.ns("mpi_wait_nxn") == 0 and r.data["counts"]["collectives"] == 1


def test_late_broadcast_early_reduce_early_scan():
    r = analyze({0: [coll("MPI_Bcast", 500, 600, root=0, sent=8, received=0)],
                 1: [coll("MPI_Bcast", 100, 610, root=0, sent=0, received=8)],
                 2: [coll("MPI_Bcast", 700, 710, root=0, sent=0, received=8)]})
    assert [r.ns("mpi_latebroadcast", k) for k in range(3)] == [0, 400, 0]
    # a root that sends nothing: no Late Broadcast
    r = analyze({0: [coll("MPI_Bcast", 500, 600, root=0, sent=0, received=0)],
                 1: [coll("MPI_Bcast", 100, 610, root=0, sent=0, received=0)]})
    assert r.ns("mpi_latebroadcast") == 0
    r = analyze({0: [coll("MPI_Reduce", 100, 900, root=0)], 1: [coll("MPI_Reduce", 600, 610, root=0)],
                 2: [coll("MPI_Reduce", 800, 805, root=0)]})
    assert [r.ns("mpi_earlyreduce", k) for k in range(3)] == [700, 0, 0]
    # scan: rank k waits for the latest of ranks 0..k
    r = analyze({0: [coll("MPI_Scan", 500, 900)], 1: [coll("MPI_Scan", 100, 910)],
                 2: [coll("MPI_Scan", 200, 920)], 3: [coll("MPI_Scan", 700, 930)]})
    assert [r.ns("mpi_earlyscan", k) for k in range(4)] == [0, 400, 300, 0]


def test_collectives_missing_a_rank_or_nonblocking_are_not_analysed():
    r = analyze({0: [coll("MPI_Barrier", 100, 450)], 1: [coll("MPI_Barrier", 400, 460)]},
                world_size=3, comms=[[0, 1, 2]])
    assert r.ns("mpi_barrier_wait") == 0
    assert r.data["counts"]["incomplete_collectives"] == 1 and not r.data["complete"]
    r = analyze({0: [coll("MPI_Iallreduce", 100, 110, flags=["NONBLOCKING"])],
                 1: [coll("MPI_Iallreduce", 400, 410, flags=["NONBLOCKING"])]})
    assert r.ns("mpi_wait_nxn") == 0


def test_collectives_on_a_sub_communicator_use_its_ranks():
    half = [[0, 1, 2, 3], [1, 3]]                     # comm 1: ranks 1 and 3
    r = analyze({1: [("MPI_Barrier", 100, 500, [dict(type="COLL", comm=1)])],
                 3: [("MPI_Barrier", 400, 510, [dict(type="COLL", comm=1)])],
                 0: [], 2: []}, comms=half)
    assert r.ns("mpi_barrier_wait", 1) == 300 and r.data["counts"]["collectives"] == 1


# ---- one-sided ----

def wsync(fn, b, e, group=-1, target=-1, flags=()):
    d = dict(type="WSYNC", win=0, comm=0, peer=target, flags=list(flags))
    if group >= 0:
        d["group"] = group
    return (fn, b, e, [d])


def put(b, e, target, fn="MPI_Put"):
    return (fn, b, e, [dict(type="RMA", win=0, comm=0, peer=target, bytes=4)])


def test_wait_at_fence_and_early_fence():
    r = analyze({0: [wsync("MPI_Win_fence", 100, 110), wsync("MPI_Win_fence", 200, 900)],
                 1: [wsync("MPI_Win_fence", 105, 110), put(700, 800, 0),
                     wsync("MPI_Win_fence", 850, 905)]},
                windows=[0])
    # 5 at the opening fence, 650 at the closing one
    assert [r.ns("mpi_rma_wait_at_fence", k) for k in range(2)] == [655, 0]
    assert r.ns("mpi_rma_early_fence", 0) == 600          # until the put to rank 0 ended
    # pair-wise: 2 per fence and rank; unneeded: all but the closing fence on rank 0
    assert r.ns("mpi_rma_pairsync_count") == 8
    assert r.ns("mpi_rma_pairsync_unneeded_count") == 7
    # fences that did not overlap did not synchronise: no Wait at Fence
    r = analyze({0: [wsync("MPI_Win_fence", 100, 110)], 1: [wsync("MPI_Win_fence", 200, 210)]},
                windows=[0])
    assert r.ns("mpi_rma_wait_at_fence") == 0


def gats(origin_items, target_items):
    return analyze({0: origin_items, 1: target_items}, windows=[0], groups=[[1], [0]])


def test_late_post_in_complete_start_or_operation():
    target = [wsync("MPI_Win_post", 500, 510, group=1), wsync("MPI_Win_wait", 520, 2000)]
    # blocking complete
    r = gats([wsync("MPI_Win_start", 100, 110, group=0), put(120, 130, 1),
              wsync("MPI_Win_complete", 140, 900)], target)
    assert r.ns("mpi_rma_sync_late_post", 0, "MPI_Win_complete") == 360
    # blocking start
    r = gats([wsync("MPI_Win_start", 100, 600, group=0), put(620, 630, 1),
              wsync("MPI_Win_complete", 640, 700)], target)
    assert r.ns("mpi_rma_sync_late_post", 0, "MPI_Win_start") == 400
    # blocking put: Late Post in communication (Early Transfer)
    r = gats([wsync("MPI_Win_start", 100, 110, group=0), put(120, 600, 1),
              wsync("MPI_Win_complete", 640, 700)], target)
    assert r.ns("mpi_rma_comm_late_post", 0, "MPI_Put") == 380
    assert r.ns("mpi_rma_sync_late_post") == 0


def test_early_wait_and_late_complete_and_pairwise_counts():
    r = gats([wsync("MPI_Win_start", 100, 110, group=0), put(120, 130, 1),
              wsync("MPI_Win_complete", 900, 910)],
             [wsync("MPI_Win_post", 50, 60, group=1), wsync("MPI_Win_wait", 70, 920)])
    assert r.ns("mpi_rma_early_wait", 1, "MPI_Win_wait") == 830
    assert r.ns("mpi_rma_late_complete", 1) == 900 - 130
    assert r.ns("mpi_rma_pairsync_count") == 2 and r.ns("mpi_rma_pairsync_unneeded_count") == 0
    # no operation in the epoch: one unneeded synchronisation on each side
    r = gats([wsync("MPI_Win_start", 100, 110, group=0), wsync("MPI_Win_complete", 900, 910)],
             [wsync("MPI_Win_post", 50, 60, group=1), wsync("MPI_Win_wait", 70, 920)])
    assert r.ns("mpi_rma_pairsync_unneeded_count") == 2
    assert r.ns("mpi_rma_late_complete", 1) == 900 - 110    # from the start's end
    # an exposure epoch closed by a successful MPI_Win_test: counted, no Early Wait
    r = gats([wsync("MPI_Win_start", 100, 110, group=0), put(120, 130, 1),
              wsync("MPI_Win_complete", 900, 910)],
             [wsync("MPI_Win_post", 50, 60, group=1), wsync("MPI_Win_test", 70, 80),
              wsync("MPI_Win_test", 950, 960, flags=["DONE"])])
    assert r.ns("mpi_rma_early_wait") == 0 and r.ns("mpi_rma_pairsync_count", 1) == 1


def test_window_create_and_free_waits():
    def win(b, e, free=False):
        return ("MPI_Win_free" if free else "MPI_Win_create", b, e,
                [dict(type="WIN", win=0, comm=0, flags=["FREE"] if free else [])])
    r = analyze({0: [win(100, 500), win(600, 900, True)], 1: [win(400, 510), win(850, 910, True)]},
                windows=[0])
    assert r.ns("mpi_rma_wait_at_create", 0) == 300 and r.ns("mpi_rma_wait_at_free", 0) == 250


# ---- call paths and time ----

def test_time_is_split_over_user_functions_and_mpi_calls():
    r = analyze({0: [("ENTER", "main", 0), ("ENTER", "solve", 100), send(300, 350, 1),
                     ("LEAVE", "solve", 600), ("LEAVE", "main", 1000)],
                 1: [recv(0, 360, 0), ("MPI_Barrier", 900, 1000, [])]})
    paths = {tuple(cp["labels"]): cp["id"] for cp in r.data["callpaths"]}
    solve = paths[("program", "N:main", "N:solve")]
    main = paths[("program", "N:main")]
    comp = {(p, k): v for p, k, v in r.m["computation"]["values"]}
    assert round(comp[(solve, 0)] * 1e9) == 200 + 250
    assert round(comp[(main, 0)] * 1e9) == 100 + 400
    assert ("program", "N:main", "N:solve", "M:MPI_Send@") in paths
    assert r.ns("mpi_point2point", 0) == 50 and r.ns("mpi_point2point", 1) == 360
    assert r.ns("time", 0) == 1000 and r.ns("time") == 2000
    assert r.ns("execution") == r.ns("computation") + r.ns("mpi")
    assert r.ns("mpi_latesender", 1) == 300
    assert r.ns("visits") == 3


def test_every_wrapped_function_has_the_time_category_of_its_family():
    """classify() (which metric holds a call's time) against mpi.spec's families."""
    import re
    from pathlib import Path

    from perfweave.model.trace import classify

    spec = Path(__file__).resolve().parents[2] / "runtime" / "mpi" / "mpi.spec"
    allowed = {"p2p": {"p2p"}, "coll": {"coll", "sync_coll"},
               "rma": {"rma_comm", "mgmt_win"}, "sync": {"p2p", "rma_active", "rma_passive"},
               "io": {"io", "mgmt_file"}, "other": {"init", "mgmt_comm", "other"}}
    n = 0
    for line in spec.read_text().splitlines():
        m = re.match(r"^(\w+)\s+(\w+)\s+int\s+(MPI_\w+)\(", line)
        if not m:
            continue
        family, kind, name = m.groups()
        cat, role = classify(name)
        assert cat in allowed[family], (name, family, cat)
        if kind in ("send", "recv", "isend", "irecv", "sendrecv"):
            assert cat == "p2p" and role in ("p2p", "block_send"), name
        n += 1
    assert n > 150
    assert classify("MPI_Send") == ("p2p", "block_send")
    assert classify("MPI_Allreduce") == ("coll", "n2n")
    assert classify("MPI_Iallreduce") == ("coll", "coll")
    assert classify("MPI_Win_fence") == ("rma_active", "win_fence")

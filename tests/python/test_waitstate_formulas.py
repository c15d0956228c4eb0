"""The wait-state formulas on traces written by hand (Trace.from_literal): every value
is exact to the nanosecond, so these tests pin down each definition
(docs/wait-states.md) apart from any MPI's timing. Times below are nanoseconds."""

import pytest

from perfweave.analysis.waitstates import WO_BUFFER, analyze_trace
from perfweave.model.trace import Trace


def analyze(ranks, **kw):
    return Result(analyze_trace(Trace.from_literal(ranks, **kw)))


class Result:
    """A WaitStatesResult (res) with the look-ups these tests make."""

    def __init__(self, res):
        self.res = res
        self.leaf = dict(
            zip(res.callpaths["id"].tolist(), (lab[-1] for lab in res.callpaths["labels"]))
        )

    def values(self, metric):
        """[(callpath, rank, value)] of a metric."""
        v = self.res.values_of(metric)
        return list(zip(*(v[k].tolist() for k in ("callpath", "rank", "value"))))

    def ns(self, metric, rank=None, fn=None):
        """A metric summed (in ns, or its count) over ranks / the calls of function fn."""
        total = 0
        for p, r, v in self.values(metric):
            if rank is not None and r != rank:
                continue
            if fn is not None and not self.leaf[p].startswith(f"M:{fn}@"):
                continue
            total += v
        return round(total * 1e9) if self.res.metric(metric)["unit"] == "s" else round(total)


def send(t0, t1, to, tag=0, nbytes=4, fn="MPI_Send", flags=()):
    return (
        fn,
        t0,
        t1,
        [dict(type="SEND", peer=to, tag=tag, comm=0, bytes=nbytes, flags=list(flags))],
    )


def recv(t0, t1, frm, tag=0, fn="MPI_Recv"):
    return (fn, t0, t1, [dict(type="RECV", peer=frm, tag=tag, comm=0, bytes=4)])


# ---- point-to-point ----


def test_late_sender_is_the_receivers_wait_for_the_send_to_start():
    r = analyze({0: [send(1000, 1010, 1)], 1: [recv(200, 1020, 0)]})
    assert r.ns("mpi_latesender", 1, "MPI_Recv") == 800
    assert r.ns("mpi_latesender_count") == 1
    assert r.res.counts["messages"] == 1
    # the send started first: nothing
    r = analyze({0: [send(100, 110, 1)], 1: [recv(200, 300, 0)]})
    assert r.ns("mpi_latesender") == 0


def test_late_sender_in_the_wait_of_an_irecv_not_in_a_test():
    def rank1(fn):
        return [
            (
                "MPI_Irecv",
                100,
                110,
                [dict(type="IRECV", peer=0, tag=0, comm=0, key=7, flags=["NONBLOCKING"])],
            ),
            (fn, 300, 1100, [dict(type="RECV", peer=0, tag=0, comm=0, key=7, bytes=4)]),
        ]

    r = analyze({0: [send(900, 910, 1)], 1: rank1("MPI_Wait")})
    assert r.ns("mpi_latesender", 1, "MPI_Wait") == 600
    r = analyze({0: [send(900, 910, 1)], 1: rank1("MPI_Test")})
    assert r.ns("mpi_latesender") == 0 and r.res.counts["messages"] == 1


def test_a_waitall_counts_its_latest_sender_once():
    irecv = [
        (
            "MPI_Irecv",
            10 + 10 * k,
            15 + 10 * k,
            [dict(type="IRECV", peer=k, tag=0, comm=0, key=k + 1, flags=["NONBLOCKING"])],
        )
        for k in (0, 1)
    ]
    wait = (
        "MPI_Waitall",
        100,
        2000,
        [dict(type="RECV", peer=k, tag=0, comm=0, key=k + 1, bytes=4) for k in (0, 1)],
    )
    r = analyze({0: [send(500, 510, 2)], 1: [send(1500, 1510, 2)], 2: irecv + [wait]})
    assert r.ns("mpi_latesender", 2, "MPI_Waitall") == 1400
    assert r.ns("mpi_latesender_count") == 1


def test_wrong_order_same_and_different_sources():
    # rank 1 receives tag 2 (sent at 1000) before tag 1 (sent at 100)
    r = analyze(
        {
            0: [send(100, 110, 1, tag=1), send(1000, 1010, 1, tag=2)],
            1: [recv(50, 1020, 0, tag=2), recv(1030, 1040, 0, tag=1)],
        }
    )
    assert r.ns("mpi_latesender") == 950
    assert r.ns("mpi_latesender_wo") == r.ns("mpi_lswo_same") == 950
    assert r.ns("mpi_lswo_different") == 0
    # rank 2 receives from rank 1 (sent at 1000) before rank 0 (sent at 100)
    r = analyze(
        {
            0: [send(100, 110, 2)],
            1: [send(1000, 1010, 2)],
            2: [recv(50, 1020, 1), recv(1030, 1040, 0)],
        }
    )
    assert r.ns("mpi_lswo_different") == 950 and r.ns("mpi_lswo_same") == 0
    # in order: no wrong order
    r = analyze(
        {
            0: [send(100, 110, 1, tag=1), send(1000, 1010, 1, tag=2)],
            1: [recv(50, 120, 0, tag=1), recv(130, 1020, 0, tag=2)],
        }
    )
    assert r.ns("mpi_latesender") == 50 + 870 and r.ns("mpi_latesender_wo") == 0


def test_wrong_order_is_a_matter_of_one_thread():
    """Two threads of rank 0 each receive one message (MPI_THREAD_MULTIPLE): thread 0
    from rank 1, sent at 1000; thread 1 from rank 2, sent at 500. In the rank's record
    order thread 0's receive comes first, but each thread received in order: Late
    Sender on both, no Wrong Order (order is a property of a location, as in Scalasca).
    The same receives in one thread are in the wrong order."""

    def rank0(threads):
        return [recv(100, 1010, 1) + (threads[0],), recv(100, 510, 2) + (threads[1],)]

    senders = {1: [send(1000, 1005, 0)], 2: [send(500, 505, 0)]}
    r = analyze({0: rank0((0, 1)), **senders})
    assert r.ns("mpi_latesender", 0) == 900 + 400 and r.ns("mpi_latesender_count") == 2
    assert r.ns("mpi_latesender_wo") == 0
    r = analyze({0: rank0((0, 0)), **senders})
    assert r.ns("mpi_latesender_wo") == r.ns("mpi_lswo_different") == 900
    # each thread's own receives in the wrong order: found per thread
    r = analyze(
        {
            0: [
                recv(100, 1010, 1, tag=2) + (1,),
                recv(1020, 1030, 1, tag=1) + (1,),
                recv(100, 110, 2) + (0,),
            ],
            1: [send(50, 55, 0, tag=1), send(1000, 1005, 0, tag=2)],
            2: [send(60, 65, 0)],
        }
    )
    assert r.ns("mpi_latesender_wo", 0) == r.ns("mpi_lswo_same", 0) == 900


@pytest.mark.parametrize("later, wrong_order", [(WO_BUFFER - 1, True), (WO_BUFFER, False)])
def test_wrong_order_looks_back_over_the_last_100_late_senders(later, wrong_order):
    """The instance of message A (tag 1, sent at 100000, 50000 ns late) is wrong order when
    B (tag 0, sent first) is received while A is still among the receiver's last
    WO_BUFFER instances; the later instances (1000 ns each, also sent after B) are."""
    sends = [send(10, 11, 1, tag=0), send(100_000, 100_010, 1, tag=1)]
    recvs = [recv(50_000, 100_020, 0, tag=1)]
    t = 200_000
    for k in range(later):  # later Late Sender instances, in order
        sends.append(send(t + 1000, t + 1010, 1, tag=2))
        recvs.append(recv(t, t + 1020, 0, tag=2))
        t += 2000
    recvs.append(recv(t, t + 10, 0, tag=0))
    r = analyze({0: sends, 1: recvs})
    assert r.ns("mpi_latesender_count") == later + 1
    assert r.ns("mpi_latesender_wo") == later * 1000 + (50_000 if wrong_order else 0)


def test_late_receiver_only_when_the_send_waits_for_the_receive():
    r = analyze(
        {0: [send(100, 1000, 1, fn="MPI_Ssend", flags=["SYNCHRONOUS"])], 1: [recv(700, 1010, 0)]}
    )
    assert r.ns("mpi_latereceiver", 0, "MPI_Ssend") == 600
    assert r.ns("mpi_latereceiver_count") == 1
    # an eager send that returned before the receive was posted
    r = analyze({0: [send(100, 110, 1)], 1: [recv(700, 710, 0)]})
    assert r.ns("mpi_latereceiver") == 0
    # MPI_Sendrecv waits for its own receive: not a Late Receiver
    sendrecv = (
        "MPI_Sendrecv",
        100,
        1000,
        [
            dict(type="SEND", peer=1, tag=0, comm=0, bytes=4),
            dict(type="RECV", peer=1, tag=1, comm=0, bytes=4),
        ],
    )
    r = analyze({0: [sendrecv], 1: [recv(700, 710, 0), send(990, 995, 0, tag=1)]})
    assert r.ns("mpi_latereceiver") == 0 and r.ns("mpi_latesender", 0) == 890


def test_unmatched_messages_are_counted():
    r = analyze({0: [send(100, 110, 1), send(200, 210, 1, tag=5)], 1: [recv(50, 120, 0)]})
    c = r.res.counts
    assert (c["messages"], c["unmatched_sends"], c["unmatched_receives"]) == (1, 1, 0)
    assert not r.res.complete and "no partner" in " ".join(r.res.notes)


# ---- collectives ----


def coll(fn, b, e, root=-1, sent=8, received=8, flags=()):
    return (
        fn,
        b,
        e,
        [dict(type="COLL", comm=0, peer=root, bytes=sent, bytes2=received, flags=list(flags))],
    )


def test_barrier_wait_and_completion():
    r = analyze(
        {
            0: [coll("MPI_Barrier", 100, 450, sent=0, received=0)],
            1: [coll("MPI_Barrier", 400, 460, sent=0, received=0)],
            2: [coll("MPI_Barrier", 200, 470, sent=0, received=0)],
        }
    )
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
    assert r.ns("mpi_wait_nxn") == 0 and r.res.counts["collectives"] == 1


def test_late_broadcast_early_reduce_early_scan():
    r = analyze(
        {
            0: [coll("MPI_Bcast", 500, 600, root=0, sent=8, received=0)],
            1: [coll("MPI_Bcast", 100, 610, root=0, sent=0, received=8)],
            2: [coll("MPI_Bcast", 700, 710, root=0, sent=0, received=8)],
        }
    )
    assert [r.ns("mpi_latebroadcast", k) for k in range(3)] == [0, 400, 0]
    # a root that sends nothing: no Late Broadcast
    r = analyze(
        {
            0: [coll("MPI_Bcast", 500, 600, root=0, sent=0, received=0)],
            1: [coll("MPI_Bcast", 100, 610, root=0, sent=0, received=0)],
        }
    )
    assert r.ns("mpi_latebroadcast") == 0
    r = analyze(
        {
            0: [coll("MPI_Reduce", 100, 900, root=0)],
            1: [coll("MPI_Reduce", 600, 610, root=0)],
            2: [coll("MPI_Reduce", 800, 805, root=0)],
        }
    )
    assert [r.ns("mpi_earlyreduce", k) for k in range(3)] == [700, 0, 0]
    # scan: rank k waits for the latest of ranks 0..k
    r = analyze(
        {
            0: [coll("MPI_Scan", 500, 900)],
            1: [coll("MPI_Scan", 100, 910)],
            2: [coll("MPI_Scan", 200, 920)],
            3: [coll("MPI_Scan", 700, 930)],
        }
    )
    assert [r.ns("mpi_earlyscan", k) for k in range(4)] == [0, 400, 300, 0]


def test_collectives_missing_a_rank_or_never_completed_are_not_analysed():
    r = analyze(
        {0: [coll("MPI_Barrier", 100, 450)], 1: [coll("MPI_Barrier", 400, 460)]},
        world_size=3,
        comms=[[0, 1, 2]],
    )
    assert r.ns("mpi_barrier_wait") == 0
    assert r.res.counts["incomplete_collectives"] == 1 and not r.res.complete
    # nonblocking, without a completion (a request never waited for, or a version 1
    # trace, which did not record completions)
    r = analyze(
        {
            0: [coll("MPI_Iallreduce", 100, 110, flags=["NONBLOCKING"])],
            1: [coll("MPI_Iallreduce", 400, 410, flags=["NONBLOCKING"])],
        }
    )
    assert r.ns("mpi_wait_nxn") == 0
    assert r.res.counts["incomplete_collectives"] == 1 and not r.res.complete
    # one rank completed it, the other did not
    r = analyze(
        {
            0: [icoll("MPI_Iallreduce", 100, 110, 7), done("MPI_Wait", 120, 420, 7)],
            1: [icoll("MPI_Iallreduce", 400, 410, 7)],
        }
    )
    assert r.ns("mpi_wait_nxn") == 0 and r.res.counts["incomplete_collectives"] == 1
    assert "never completed" in " ".join(r.res.notes)


# ---- nonblocking collectives: the blocking twin's rule, waited for in the completion ----


def icoll(fn, b, e, key, root=-1, sent=8, received=8, comm=0, number=0):
    """An MPI_I... collective posting request key (number: its post number, 0 unknown)."""
    return (
        fn,
        b,
        e,
        [
            dict(
                type="COLL",
                comm=comm,
                peer=root,
                bytes=sent,
                bytes2=received,
                key=key,
                number=number,
                flags=["NONBLOCKING"],
            )
        ],
    )


def done(fn, b, e, *keys, numbers=None, subs=()):
    """A Wait/Test call completing the nonblocking collectives of keys (and subs)."""
    return (
        fn,
        b,
        e,
        [dict(type="COLL_DONE", key=k, number=(numbers or {}).get(k, 0)) for k in keys]
        + list(subs),
    )


def waited(fn, plan, key=1, **kw):
    """{rank: (start, wait enter, wait leave[, {icoll arguments}])}: ranks that start fn
    (for 10 ns) and complete it in an MPI_Wait."""
    return {
        k: [
            icoll(fn, p[0], p[0] + 10, key, **dict(kw, **(p[3] if len(p) > 3 else {}))),
            done("MPI_Wait", p[1], p[2], key),
        ]
        for k, p in plan.items()
    }


def test_ibarrier_waits_in_its_wait_for_the_latest_ibarrier():
    """The wait starts at the completion call's enter and lasts until the last rank
    started its MPI_Ibarrier (their completion calls do not matter): rank 1 waits 380 in
    MPI_Wait for rank 0's MPI_Ibarrier at 500; rank 2 computed until after it."""
    r = analyze(
        waited(
            "MPI_Ibarrier",
            {0: (500, 520, 530), 1: (100, 120, 600), 2: (200, 700, 710)},
            sent=0,
            received=0,
        )
    )
    assert [r.ns("mpi_barrier_wait", k, "MPI_Wait") for k in range(3)] == [0, 380, 0]
    assert r.ns("mpi_barrier_wait") == 380  # nothing at MPI_Ibarrier
    # completion: after the earliest end (530), within the completion call
    assert [r.ns("mpi_barrier_completion", k) for k in range(3)] == [0, 70, 10]
    assert r.res.complete and r.res.counts["collectives"] == 1
    # a Wait that completes collectives is collective time, holding its waits
    assert r.ns("mpi_sync_collective", 1) == 10 + 480
    assert r.ns("mpi_point2point") == 0


def test_iallreduce_ibcast_ireduce_iscan_follow_their_blocking_twins():
    # Iallreduce, completed by Waitall; linked by post number
    r = analyze(
        {
            0: [
                icoll("MPI_Iallreduce", 100, 110, 5, number=1),
                done("MPI_Waitall", 150, 900, 5, numbers={5: 1}),
            ],
            1: [
                icoll("MPI_Iallreduce", 800, 810, 5, number=3),
                done("MPI_Waitall", 820, 905, 5, numbers={5: 3}),
            ],
        }
    )
    assert [r.ns("mpi_wait_nxn", k, "MPI_Waitall") for k in range(2)] == [650, 0]
    # Ibcast with a late root: Late Broadcast on the others, in the Wait
    r = analyze(
        waited(
            "MPI_Ibcast",
            {
                0: (600, 620, 630, {"sent": 8, "received": 0}),
                1: (100, 300, 640),
                2: (100, 700, 710),
            },
            root=0,
            sent=0,
        )
    )
    assert [r.ns("mpi_latebroadcast", k, "MPI_Wait") for k in range(3)] == [0, 300, 0]
    # Ireduce with an early root: Early Reduce at the root's Wait
    r = analyze(waited("MPI_Ireduce", {0: (100, 200, 900), 1: (700, 720, 730)}, root=0))
    assert [r.ns("mpi_earlyreduce", k, "MPI_Wait") for k in range(2)] == [500, 0]
    # Iscan: rank 1 waits in its Wait for rank 0's start
    r = analyze(waited("MPI_Iscan", {0: (600, 620, 630), 1: (100, 400, 640)}))
    assert [r.ns("mpi_earlyscan", k, "MPI_Wait") for k in range(2)] == [0, 200]


def test_blocking_and_nonblocking_collectives_are_numbered_together():
    """The n-th collective on a communicator, blocking or not, in the order started: the
    barrier is the second on both ranks, whatever the order of completion."""
    r = analyze(
        {
            0: [
                icoll("MPI_Iallreduce", 100, 110, 4),
                coll("MPI_Barrier", 120, 600),
                done("MPI_Wait", 610, 620, 4),
            ],
            1: [
                icoll("MPI_Iallreduce", 500, 510, 4),
                coll("MPI_Barrier", 520, 605),
                done("MPI_Wait", 606, 625, 4),
            ],
        }
    )
    assert [r.ns("mpi_barrier_wait", k) for k in range(2)] == [400, 0]
    assert r.ns("mpi_wait_nxn") == 0  # rank 0 entered its Wait after rank 1 started
    assert r.res.complete and r.res.counts["collectives"] == 2
    # a blocking and a nonblocking operation do not match (MPI): not analysed
    r = analyze(
        {
            0: [coll("MPI_Barrier", 100, 600, sent=0, received=0)],
            1: [
                icoll("MPI_Ibarrier", 500, 510, 4, sent=0, received=0),
                done("MPI_Wait", 520, 605, 4),
            ],
        }
    )
    assert r.ns("mpi_barrier_wait") == 0 and r.res.counts["incomplete_collectives"] == 1


def test_overlapping_nonblocking_collectives_on_two_communicators():
    """Two outstanding operations, on COMM_WORLD and a duplicate, completed in the other
    order: each is matched on its communicator and waited for in its own Wait."""
    comms = [[0, 1], [0, 1]]

    def rank(t_world, t_dup, wait_dup, wait_world):
        return [
            icoll("MPI_Iallreduce", t_world, t_world + 10, 1, comm=0),
            icoll("MPI_Iallreduce", t_dup, t_dup + 10, 2, comm=1),
            done("MPI_Wait", *wait_dup, 2),
            done("MPI_Wait", *wait_world, 1),
        ]

    r = analyze(
        {0: rank(100, 120, (130, 700), (710, 720)), 1: rank(300, 600, (610, 620), (630, 640))},
        comms=comms,
    )
    # rank 0 waits in its first Wait (the duplicate's) for rank 1's start at 600, and not
    # in the second (rank 1 started on COMM_WORLD at 300)
    assert r.ns("mpi_wait_nxn", 0) == 470 and r.ns("mpi_wait_nxn", 1) == 0
    assert r.res.counts["collectives"] == 2 and r.res.complete


def test_a_test_completion_is_no_wait():
    """Completed in MPI_Test (after Tests that found it incomplete, which are not
    recorded as completions): analysed, the rank did not wait there (as Late Sender)."""
    r = analyze(
        {
            0: [
                icoll("MPI_Ibarrier", 500, 510, 3, sent=0, received=0),
                done("MPI_Wait", 520, 530, 3),
            ],
            1: [
                icoll("MPI_Ibarrier", 100, 110, 3, sent=0, received=0),
                ("MPI_Test", 200, 210, []),
                ("MPI_Test", 300, 310, []),
                done("MPI_Test", 515, 540, 3),
            ],
        }
    )
    assert r.ns("mpi_barrier_wait") == 0 and r.ns("mpi_barrier_completion") == 0
    assert r.res.complete and r.res.counts["collectives"] == 1


def test_a_multiwait_is_one_wait_for_its_longest_request():
    """MPI_Waitall completing an Irecv and an Ibarrier: charged once, to the request it
    waited for longest, never more than the call lasted."""

    def ranks(t_send, t_ibarrier):
        irecv = (
            "MPI_Irecv",
            10,
            20,
            [dict(type="IRECV", peer=0, tag=0, comm=0, key=8, flags=["NONBLOCKING"])],
        )
        waitall = done(
            "MPI_Waitall",
            100,
            1000,
            9,
            subs=[dict(type="RECV", peer=0, tag=0, comm=0, key=8, bytes=4)],
        )
        return {
            0: [
                icoll("MPI_Ibarrier", t_ibarrier, t_ibarrier + 5, 9, sent=0, received=0),
                send(t_send, t_send + 5, 1),
                done("MPI_Wait", 990, 995, 9),
            ],
            1: [irecv, icoll("MPI_Ibarrier", 30, 40, 9, sent=0, received=0), waitall],
        }

    # the message came last: Late Sender 800, no barrier wait
    r = analyze(ranks(900, 300))
    assert r.ns("mpi_latesender", 1, "MPI_Waitall") == 800 and r.ns("mpi_barrier_wait") == 0
    assert r.ns("mpi_latesender_count") == 1
    # the Ibarrier came last: barrier wait 800, no Late Sender
    r = analyze(ranks(300, 900))
    assert r.ns("mpi_barrier_wait", 1, "MPI_Waitall") == 800
    assert r.ns("mpi_latesender") == 0 and r.ns("mpi_latesender_count") == 0
    assert r.res.complete
    # it completes a message too: point-to-point time
    assert r.ns("mpi_point2point", 1, "MPI_Waitall") == 900
    # two collectives in one Waitall: the later one
    r = analyze(
        {
            0: [
                icoll("MPI_Ibarrier", 400, 405, 1, sent=0, received=0),
                icoll("MPI_Iallreduce", 600, 605, 2),
                done("MPI_Waitall", 610, 620, 1, 2),
            ],
            1: [
                icoll("MPI_Ibarrier", 10, 15, 1, sent=0, received=0),
                icoll("MPI_Iallreduce", 20, 25, 2),
                done("MPI_Waitall", 100, 700, 1, 2),
            ],
        }
    )
    assert r.ns("mpi_wait_nxn", 1) == 500 and r.ns("mpi_barrier_wait", 1) == 0


def test_collectives_on_a_sub_communicator_use_its_ranks():
    half = [[0, 1, 2, 3], [1, 3]]  # comm 1: ranks 1 and 3
    r = analyze(
        {
            1: [("MPI_Barrier", 100, 500, [dict(type="COLL", comm=1)])],
            3: [("MPI_Barrier", 400, 510, [dict(type="COLL", comm=1)])],
            0: [],
            2: [],
        },
        comms=half,
    )
    assert r.ns("mpi_barrier_wait", 1) == 300 and r.res.counts["collectives"] == 1


# ---- one-sided ----


def wsync(fn, b, e, group=-1, target=-1, flags=()):
    d = dict(type="WSYNC", win=0, comm=0, peer=target, flags=list(flags))
    if group >= 0:
        d["group"] = group
    return (fn, b, e, [d])


def put(b, e, target, fn="MPI_Put"):
    return (fn, b, e, [dict(type="RMA", win=0, comm=0, peer=target, bytes=4)])


def test_wait_at_fence_and_early_fence():
    r = analyze(
        {
            0: [wsync("MPI_Win_fence", 100, 110), wsync("MPI_Win_fence", 200, 900)],
            1: [
                wsync("MPI_Win_fence", 105, 110),
                put(700, 800, 0),
                wsync("MPI_Win_fence", 850, 905),
            ],
        },
        windows=[0],
    )
    # 5 at the opening fence, 650 at the closing one
    assert [r.ns("mpi_rma_wait_at_fence", k) for k in range(2)] == [655, 0]
    assert r.ns("mpi_rma_early_fence", 0) == 600  # until the put to rank 0 ended
    # pair-wise: 2 per fence and rank; unneeded: all but the closing fence on rank 0
    assert r.ns("mpi_rma_pairsync_count") == 8
    assert r.ns("mpi_rma_pairsync_unneeded_count") == 7
    # fences that did not overlap did not synchronise: no Wait at Fence
    r = analyze(
        {0: [wsync("MPI_Win_fence", 100, 110)], 1: [wsync("MPI_Win_fence", 200, 210)]}, windows=[0]
    )
    assert r.ns("mpi_rma_wait_at_fence") == 0


def gats(origin_items, target_items):
    return analyze({0: origin_items, 1: target_items}, windows=[0], groups=[[1], [0]])


def test_late_post_in_complete_start_or_operation():
    target = [wsync("MPI_Win_post", 500, 510, group=1), wsync("MPI_Win_wait", 520, 2000)]
    # blocking complete
    r = gats(
        [
            wsync("MPI_Win_start", 100, 110, group=0),
            put(120, 130, 1),
            wsync("MPI_Win_complete", 140, 900),
        ],
        target,
    )
    assert r.ns("mpi_rma_sync_late_post", 0, "MPI_Win_complete") == 360
    # blocking start
    r = gats(
        [
            wsync("MPI_Win_start", 100, 600, group=0),
            put(620, 630, 1),
            wsync("MPI_Win_complete", 640, 700),
        ],
        target,
    )
    assert r.ns("mpi_rma_sync_late_post", 0, "MPI_Win_start") == 400
    # blocking put: Late Post in communication (Early Transfer)
    r = gats(
        [
            wsync("MPI_Win_start", 100, 110, group=0),
            put(120, 600, 1),
            wsync("MPI_Win_complete", 640, 700),
        ],
        target,
    )
    assert r.ns("mpi_rma_comm_late_post", 0, "MPI_Put") == 380
    assert r.ns("mpi_rma_sync_late_post") == 0


def test_early_wait_and_late_complete_and_pairwise_counts():
    r = gats(
        [
            wsync("MPI_Win_start", 100, 110, group=0),
            put(120, 130, 1),
            wsync("MPI_Win_complete", 900, 910),
        ],
        [wsync("MPI_Win_post", 50, 60, group=1), wsync("MPI_Win_wait", 70, 920)],
    )
    assert r.ns("mpi_rma_early_wait", 1, "MPI_Win_wait") == 830
    assert r.ns("mpi_rma_late_complete", 1) == 900 - 130
    assert r.ns("mpi_rma_pairsync_count") == 2 and r.ns("mpi_rma_pairsync_unneeded_count") == 0
    # no operation in the epoch: one unneeded synchronisation on each side
    r = gats(
        [wsync("MPI_Win_start", 100, 110, group=0), wsync("MPI_Win_complete", 900, 910)],
        [wsync("MPI_Win_post", 50, 60, group=1), wsync("MPI_Win_wait", 70, 920)],
    )
    assert r.ns("mpi_rma_pairsync_unneeded_count") == 2
    assert r.ns("mpi_rma_late_complete", 1) == 900 - 110  # from the start's end
    # an exposure epoch closed by a successful MPI_Win_test: counted, no Early Wait
    r = gats(
        [
            wsync("MPI_Win_start", 100, 110, group=0),
            put(120, 130, 1),
            wsync("MPI_Win_complete", 900, 910),
        ],
        [
            wsync("MPI_Win_post", 50, 60, group=1),
            wsync("MPI_Win_test", 70, 80),
            wsync("MPI_Win_test", 950, 960, flags=["DONE"]),
        ],
    )
    assert r.ns("mpi_rma_early_wait") == 0 and r.ns("mpi_rma_pairsync_count", 1) == 1


def test_window_create_and_free_waits():
    def win(b, e, free=False):
        return (
            "MPI_Win_free" if free else "MPI_Win_create",
            b,
            e,
            [dict(type="WIN", win=0, comm=0, flags=["FREE"] if free else [])],
        )

    r = analyze(
        {0: [win(100, 500), win(600, 900, True)], 1: [win(400, 510), win(850, 910, True)]},
        windows=[0],
    )
    assert r.ns("mpi_rma_wait_at_create", 0) == 300 and r.ns("mpi_rma_wait_at_free", 0) == 250


# ---- call paths and time ----


def test_time_is_split_over_user_functions_and_mpi_calls():
    r = analyze(
        {
            0: [
                ("ENTER", "main", 0),
                ("ENTER", "solve", 100),
                send(300, 350, 1),
                ("LEAVE", "solve", 600),
                ("LEAVE", "main", 1000),
            ],
            1: [recv(0, 360, 0), ("MPI_Barrier", 900, 1000, [])],
        }
    )
    paths = dict(zip(r.res.callpaths["labels"], r.res.callpaths["id"].tolist()))
    solve = paths[("program", "N:main", "N:solve")]
    main = paths[("program", "N:main")]
    comp = {(p, k): v for p, k, v in r.values("computation")}
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
    allowed = {
        "p2p": {"p2p"},
        "coll": {"coll", "sync_coll"},
        "rma": {"rma_comm", "mgmt_win"},
        "sync": {"p2p", "rma_active", "rma_passive"},
        "file": {"file_data", "mgmt_file"},
        "other": {"init", "mgmt_comm", "other"},
    }
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
    assert classify("MPI_Iallreduce") == ("coll", "n2n")
    assert classify("MPI_Ibcast") == ("coll", "12n") and classify("MPI_Iscan") == ("coll", "scan")
    assert classify("MPI_Ialltoallv") == ("coll", "coll")
    assert classify("MPI_Win_fence") == ("rma_active", "win_fence")

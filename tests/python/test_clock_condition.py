"""The clock condition and its correction on traces written by hand (Trace.from_literal;
times in ns): violations counted per (kind, pair, call path), the controlled logical
clock's moves, and the wait states on corrected times against those of the same trace
without skew (docs/wait-states.md, "Clock condition")."""

import numpy as np
import pytest

from perfweave.analysis.exchange import Local
from perfweave.analysis.waitstates import analyze_trace, clockcheck
from perfweave.analysis.waitstates.load import _unify
from perfweave.errors import PerfweaveError
from perfweave.model.trace import Trace
from test_waitstate_formulas import coll, recv, send

MS = 1_000_000
SKEW = 5 * MS  # rank 1's clock is behind by this
LAT = 10_000  # every message arrives 10 us after its send started
N = 5


def skewed(skew):
    """N iterations: rank 0 computes 10 ms and sends; rank 1 waits in MPI_Recv from the
    start (Late Sender of 10 ms - 100 ns); then a barrier that rank 0 enters 2 ms before
    rank 1. Rank 1's times are skew early."""
    r0, r1 = [], []
    t = 0
    for i in range(N):
        r0.append(send(t + 10 * MS, t + 10 * MS + 1000, 1, tag=i))
        r1.append(recv(t + 100 - skew, t + 10 * MS + LAT - skew, 0, tag=i))
        r0.append(coll("MPI_Barrier", t + 10 * MS + 2000, t + 12 * MS + 20_000, 0, 0, 0))
        r1.append(coll("MPI_Barrier", t + 12 * MS - skew, t + 12 * MS + 20_000 - skew, 0, 0, 0))
        t += 13 * MS
    return {0: r0, 1: r1}


def leaf(res, p):
    return res.callpaths["labels"][res.callpaths["id"].tolist().index(p)][-1]


def test_violations_counted_per_pair_and_call_path():
    res = analyze_trace(Trace.from_literal(skewed(SKEW)))
    c = res.clock
    assert (c["p2p"], c["collective"], c["violations"]) == (N, N, 2 * N)
    assert res.counts["clock_violations"] == 2 * N
    pairs = {(p["kind"], p["from"], p["to"], leaf(res, p["callpath"])[:13]): p for p in c["pairs"]}
    assert set(pairs) == {("p2p", 0, 1, "M:MPI_Recv@"), ("collective", 0, 1, "M:MPI_Barrier")}
    # each receive ended SKEW - LAT before its send began; rank 1 leaves each barrier
    # 2 ms + 20 us - 2 us after rank 0 entered it: SKEW less that before, on its clock
    assert pairs["p2p", 0, 1, "M:MPI_Recv@"]["count"] == N
    assert pairs["p2p", 0, 1, "M:MPI_Recv@"]["largest_s"] == (SKEW - LAT) / 1e9
    bar = pairs["collective", 0, 1, "M:MPI_Barrier"]
    assert bar["count"] == N and bar["largest_s"] == (SKEW - (2 * MS + 20_000 - 2000)) / 1e9
    assert c["largest_s"] == (SKEW - LAT) / 1e9 and not c["corrected"]
    assert any("clock-condition violations" in n for n in res.notes)
    assert res.complete  # a fact about the clocks, not a damaged trace
    assert_found_alike(skewed(SKEW), res)
    # without skew: none, and no note
    res = analyze_trace(Trace.from_literal(skewed(0)))
    assert res.clock["violations"] == 0 and res.counts["clock_violations"] == 0
    assert res.notes == [] and res.clock["pairs"] == []
    # saved and read back
    doc = res.to_json()
    assert doc["clock_condition"]["checked"] is True


@pytest.mark.parametrize(
    "ranks, n",
    [
        # a non-root leaves a Bcast before the root entered: data flowed from the root
        ({0: [coll("MPI_Bcast", 500, 600, 0, 8, 0)], 1: [coll("MPI_Bcast", 100, 400, 0, 0, 8)]}, 1),
        # the root leaves before a non-root entered: nothing flows to the root
        ({0: [coll("MPI_Bcast", 100, 200, 0, 8, 0)], 1: [coll("MPI_Bcast", 300, 400, 0, 0, 8)]}, 0),
        # the root of a Reduce leaves before the last sender entered
        ({0: [coll("MPI_Reduce", 100, 200, 0)], 1: [coll("MPI_Reduce", 300, 310, 0)]}, 1),
        # a sender of a Reduce leaves before the root entered: allowed (eager)
        ({0: [coll("MPI_Reduce", 300, 400, 0)], 1: [coll("MPI_Reduce", 100, 110, 0)]}, 0),
        # N x N without overlap: the first rank left before the other's data existed
        ({0: [coll("MPI_Allgather", 100, 200)], 1: [coll("MPI_Allgather", 300, 400)]}, 1),
        # N x N where rank 1 sends nothing: rank 0 needs nothing from it
        (
            {
                0: [coll("MPI_Allgather", 100, 200, sent=8, received=0)],
                1: [coll("MPI_Allgather", 300, 400, sent=0, received=8)],
            },
            0,
        ),
    ],
)
def test_collective_violations_follow_the_data(ranks, n):
    res = analyze_trace(Trace.from_literal(ranks))
    assert (res.clock["collective"], res.clock["p2p"]) == (n, 0)
    assert_found_alike(ranks, res)


def assert_found_alike(ranks, res):
    """The patterns find the violations as they go (from their own summaries); the
    correction's check finds them on its own: the two agree."""
    L = _unify(Trace.from_literal(ranks), Local(len(ranks)), sorted(ranks))
    alone = clockcheck.violations(L, Local(len(ranks)))
    assert [
        (p["kind"], p["from"], p["to"], p["callpath"], p["count"], round(p["largest_s"] * 1e9))
        for p in res.clock["pairs"]
    ] == [tuple(p) for p in alone["pairs"]]


def test_correction_moves_by_the_least_the_clock_allows():
    res = analyze_trace(Trace.from_literal(skewed(SKEW)), correct_clocks=True)
    c = res.clock["correction"]
    assert c["violations_after"] == 0 and res.clock["corrected"]
    moved = {r["rank"]: r for r in c["ranks"]}
    # rank 0 is never moved (only later events move); rank 1 by the largest violation
    # (minimum latency 0): the smallest forward move that orders every message
    assert moved[0]["moved"] == 0 and moved[0]["max_s"] == 0
    assert moved[1]["max_s"] == (SKEW - LAT) / 1e9
    # with the true latency as minimum, by exactly the skew
    res = analyze_trace(Trace.from_literal(skewed(SKEW)), correct_clocks=True, min_latency_ns=LAT)
    assert {r["rank"]: r["max_s"] for r in res.clock["correction"]["ranks"]} == {
        0: 0,
        1: SKEW / 1e9,
    }


@pytest.mark.parametrize("mu", [0, LAT])
def test_wait_states_on_corrected_times(mu):
    """Stated bound: the forward pass leaves rank 1 r = LAT - mu early after its first
    receive (it moved it SKEW - r), which every wait measured between a rank-1 event and
    a rank-0 event carries once: Late Sender and the barrier waits, per instance. The
    first receive's enter is before any move; the backward ramp moves it by SKEW - r
    less SLOPE times the receive's length (10 ms)."""
    true = analyze_trace(Trace.from_literal(skewed(0)))
    fixed = analyze_trace(Trace.from_literal(skewed(SKEW)), correct_clocks=True, min_latency_ns=mu)
    r = LAT - mu
    ramp = clockcheck.SLOPE * (10 * MS + LAT - 100)
    ls = (fixed.per_rank("mpi_latesender")[1] - true.per_rank("mpi_latesender")[1]) * 1e9
    assert N * r <= round(ls) <= N * r + ramp
    bw = sum(fixed.per_rank("mpi_barrier_wait").values()) * 1e9
    assert abs(bw - sum(true.per_rank("mpi_barrier_wait").values()) * 1e9) <= N * r + 1
    # the skewed trace uncorrected is wrong by the whole skew
    raw = analyze_trace(Trace.from_literal(skewed(SKEW)))
    assert raw.per_rank("mpi_barrier_wait") != true.per_rank("mpi_barrier_wait")


def corrected_times(ranks, **kw):
    L = _unify(Trace.from_literal(ranks), Local(2), sorted(ranks))
    before = clockcheck._Events(L)
    res = clockcheck.correct(L, **kw)
    after = clockcheck._Events(L)
    return L, before, after, res


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_correction_keeps_each_ranks_order_and_only_moves_later(gamma):
    L, before, after, _ = corrected_times(skewed(SKEW), gamma=gamma)
    assert len(before.t) == len(after.t)  # no two events of a rank merged
    assert (after.t >= before.t).all()
    for r in (0, 1):
        assert (np.diff(after.t[after.rank == r]) > 0).all()
    assert clockcheck.violations(L, Local(2))["p2p"] == 0


def test_backward_amortisation_stops_at_a_send_its_receive_bounds():
    # rank 1 sends to rank 0 (fine), then receives a message that forces a 1 ms jump:
    # the ramp before the jump would move its send past the receive on rank 0
    ranks = {
        0: [recv(0, 2000, 1), send(3000, 3100, 1)],
        1: [send(1000, 1100, 0), recv(1200, 1300 - MS, 0)],
    }
    ranks[1][1] = recv(1200, 1300, 0)
    ranks[0][1] = send(3000 + MS, 3100 + MS, 1)
    L, before, after, _ = corrected_times(ranks)
    v = clockcheck.violations(L, Local(2))
    assert v["p2p"] == 0
    t = dict(zip(zip(after.rank.tolist(), before.t.tolist()), after.t.tolist()))
    assert t[1, 1000] <= t[0, 2000]  # the send stays before its receive ended
    assert t[1, 1300] == 3000 + MS  # the jump: the receive ends when the send begins


def test_a_parallel_analysis_does_not_correct():
    L = _unify(Trace.from_literal(skewed(SKEW)), Local(2), [0, 1])

    class Two(Local):
        nproc = 2

    with pytest.raises(PerfweaveError, match="serial"):
        clockcheck.Check(L, Two(0), correct_clocks=True)

"""The ideal-network replay (analysis/replay.py) and its longest-path kernel
(analysis/longest_path.py) on traces written by hand (Trace.from_literal): every ideal
time is arithmetic on the recorded computation, exact to the nanosecond."""

import sys
from pathlib import Path

import numpy as np
import pytest

from perfweave.analysis import eventgraph as eg
from perfweave.analysis import longest_path as lp
from perfweave.analysis.replay import deadlock_text, replay
from perfweave.model.trace import Trace


def init():
    return ("MPI_Init", 0, 10, [])


def fin(b):
    return ("MPI_Finalize", b, b + 10, [])


def send(b, e, peer, fn="MPI_Send", nbytes=8, flags=()):
    return (fn, b, e, [dict(type="SEND", peer=peer, comm=0, bytes=nbytes, flags=list(flags))])


def recv(b, e, peer, nbytes=8):
    return ("MPI_Recv", b, e, [dict(type="RECV", peer=peer, comm=0, bytes=nbytes)])


def coll(fn, b, e, sent=0, received=0):
    return (fn, b, e, [dict(type="COLL", comm=0, bytes=sent, bytes2=received)])


def graph(ranks, **kw):
    return eg.from_trace(Trace.from_literal(ranks, **kw))


def per_rank(res, values):
    """{rank: [values of its calls]}."""
    ranks = res.graph.calls["rank"]
    return {int(r): values[ranks == r].tolist() for r in np.unique(ranks)}


def test_ping_pong_ideal_times_exact():
    g = graph(
        {
            0: [
                init(),
                send(100, 110, 1),
                recv(300, 400, 1),
                coll("MPI_Barrier", 500, 600),
                fin(700),
            ],
            1: [
                init(),
                recv(50, 120, 0),
                send(250, 260, 0, fn="MPI_Ssend", flags=["SYNCHRONOUS"]),
                coll("MPI_Barrier", 550, 600),
                fin(700),
            ],
        }
    )
    res = replay(g)
    # rank 0 computes 90, sends (eager: leaves at once), computes 190, receives rank 1's
    # synchronous send, which waited for that receive (280); the barrier waits for
    # rank 1's 290 of computation after it
    assert per_rank(res, res.enter_ns) == {0: [0, 90, 280, 380, 670], 1: [0, 40, 220, 570, 670]}
    assert per_rank(res, res.leave_ns) == {0: [0, 90, 280, 570, 670], 1: [0, 90, 280, 570, 670]}
    # the region: MPI_Init left .. the last record (a literal trace's MPI_Finalize end)
    assert round(res.t_ideal_s * 1e9) == 670
    assert round(res.t_recorded_s * 1e9) == 710
    cp = res.critical_path()
    assert cp["fn"] == [
        "MPI_Init",
        "MPI_Send",
        "MPI_Recv",
        "MPI_Ssend",
        "MPI_Barrier",
        "MPI_Barrier",
        "MPI_Finalize",
    ]
    assert cp["rank"].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert cp["via"] == [
        "start",
        "computation",
        "computation",
        "message",
        "computation",
        "collective",
        "computation",
    ]


def test_rendezvous_waits_for_the_receive_eager_does_not():
    # rank 0 sends 1000 bytes at once then computes 500; rank 1 computes 300 first
    g = graph(
        {
            0: [init(), send(10, 20, 1, nbytes=1000), fin(520)],
            1: [init(), recv(310, 320, 0, nbytes=1000), fin(330)],
        }
    )
    eager = replay(g)
    assert per_rank(eager, eager.leave_ns)[0] == [0, 0, 500]
    for limit in (None, 1000, 4096):  # eager up to the limit
        assert replay(g, eager_limit=limit).t_ideal_s == eager.t_ideal_s
    rdv = replay(g, eager_limit=999)
    # the send leaves when the receive is posted, 300 later: its computation moves
    assert per_rank(rdv, rdv.leave_ns)[0] == [0, 300, 800]
    assert round((rdv.t_ideal_s - eager.t_ideal_s) * 1e9) == 300


def pipeline(n_msgs, nbytes):
    """Two ranks passing a message back and forth n_msgs times, 90 ns of computation
    before every call."""
    ranks = {0: [init()], 1: [init()]}
    t = 100
    for i in range(n_msgs):
        s = i % 2
        ranks[s].append(send(t, t + 10, 1 - s, nbytes=nbytes))
        ranks[1 - s].append(recv(t, t + 10, s, nbytes=nbytes))
        t += 100
    for k in ranks:
        ranks[k].append(fin(t))
    return graph(ranks)


def test_latency_and_bandwidth_add_up_along_a_pipeline():
    g = pipeline(10, 1000)
    base = replay(g)
    # 10 messages of 1000 bytes at 1e9 bytes/s: 10 * 1000 ns; plus 10 latencies of 1 us
    bw = replay(g, bandwidth_Bps=1e9)
    assert round((bw.t_ideal_s - base.t_ideal_s) * 1e9) == 10 * 1000
    both = replay(g, bandwidth_Bps=1e9, latency_s=1e-6)
    assert round((both.t_ideal_s - base.t_ideal_s) * 1e9) == 10 * 1000 + 10 * 1000
    assert both.critical_path()["via"].count("message") == 10


def test_crossing_sends_deadlock_under_rendezvous():
    g = graph(
        {
            0: [init(), send(100, 110, 1), recv(120, 130, 1), fin(200)],
            1: [init(), send(100, 110, 0), recv(120, 130, 0), fin(200)],
        }
    )
    assert replay(g).deadlock is None
    res = replay(g, eager_limit=0)
    assert res.t_ideal_s == float("inf")
    assert [(d["rank"], d["function"]) for d in res.deadlock] == [(0, "MPI_Send"), (1, "MPI_Send")]
    assert "rank 0 in MPI_Send, rank 1 in MPI_Send" in deadlock_text(res)
    assert len(res.critical_path()["call"]) == 0
    # and the numpy fallback finds the same cycle
    assert replay(g, eager_limit=0, use_c=False).deadlock == res.deadlock


def icoll(fn, b, e, number, sent=8, received=8):
    sub = dict(type="COLL", comm=0, bytes=sent, bytes2=received, key=number, number=number)
    return (fn, b, e, [dict(sub, flags=["NONBLOCKING"])])


def coll_done(b, e, number):
    return ("MPI_Wait", b, e, [dict(type="COLL_DONE", key=number, number=number)])


def test_nonblocking_collective_completes_at_the_last_start():
    g = graph(
        {
            0: [init(), icoll("MPI_Iallreduce", 10, 20, 1), coll_done(100, 200, 1), fin(210)],
            1: [init(), icoll("MPI_Iallreduce", 50, 60, 1), coll_done(350, 360, 1), fin(370)],
        }
    )
    res = replay(g)
    # rank 0 waits for rank 1's start (40) only until its own wait (80): no wait
    assert per_rank(res, res.enter_ns) == {0: [0, 0, 80, 90], 1: [0, 40, 330, 340]}
    assert per_rank(res, res.leave_ns) == {0: [0, 0, 80, 90], 1: [0, 40, 330, 340]}
    # a late start makes the other wait: rank 1 starts after rank 0 waits
    g = graph(
        {
            0: [init(), icoll("MPI_Iallreduce", 10, 20, 1), coll_done(30, 500, 1), fin(510)],
            1: [init(), icoll("MPI_Iallreduce", 400, 410, 1), coll_done(420, 430, 1), fin(440)],
        }
    )
    res = replay(g)
    assert per_rank(res, res.leave_ns)[0] == [0, 0, 390, 400]
    # 2 members: one latency step; 16 bytes (8 sent + 8 received) at 1 byte/ns
    slow = replay(g, latency_s=1e-6, bandwidth_Bps=1e9)
    assert per_rank(slow, slow.leave_ns)[0] == [0, 0, 390 + 1000 + 16, 400 + 1000 + 16]


def wsync(fn, b, e, group=-1):
    d = dict(type="WSYNC", win=0, comm=0)
    if group >= 0:
        d["group"] = group
    return (fn, b, e, [d])


def put(b, e, target):
    return ("MPI_Put", b, e, [dict(type="RMA", win=0, comm=0, peer=target, bytes=4)])


def test_fence_epoch_leaves_at_the_last_fence():
    g = graph(
        {
            0: [
                init(),
                wsync("MPI_Win_fence", 10, 20),
                put(30, 40, 1),
                wsync("MPI_Win_fence", 50, 60),
                fin(70),
            ],
            1: [
                init(),
                wsync("MPI_Win_fence", 100, 110),
                wsync("MPI_Win_fence", 300, 310),
                fin(320),
            ],
        },
        windows=[0],
    )
    res = replay(g)
    assert per_rank(res, res.leave_ns) == {0: [0, 90, 100, 280, 290], 1: [0, 90, 280, 290]}


def test_active_target_epoch_follows_post_and_complete():
    g = graph(
        {
            0: [
                init(),
                wsync("MPI_Win_start", 10, 20, group=0),
                put(30, 40, 1),
                wsync("MPI_Win_complete", 50, 900),
                fin(910),
            ],
            1: [
                init(),
                wsync("MPI_Win_post", 500, 510, group=1),
                wsync("MPI_Win_wait", 520, 2000),
                fin(2010),
            ],
        },
        windows=[0],
        groups=[[1], [0]],
    )
    res = replay(g)
    # the complete waits for the post's enter (490); the wait for the complete's (20)
    assert per_rank(res, res.leave_ns) == {0: [0, 0, 10, 490, 500], 1: [0, 490, 500, 510]}


def test_useful_time_override_is_a_what_if():
    g = pipeline(4, 8)
    base = replay(g)
    # both ranks compute 90 before each call, side by side: 5 bursts (4 calls and
    # MPI_Finalize) make the run
    assert round(base.t_ideal_s * 1e9) == 5 * 90
    useful = g.calls["useful"].copy()
    useful[(g.calls["rank"] == 1) & (useful > 0)] += 50  # rank 1 computes 50 more each time
    res = replay(g, useful=useful)
    # rank 1's 5 bursts of 140 are the run now; rank 0 waits for each of its messages
    assert round(res.t_ideal_s * 1e9) == 5 * 140
    assert set(res.critical_path()["rank"].tolist()[1:]) == {1}
    with pytest.raises(ValueError):
        replay(g, useful=useful[:-1])


def test_region_bounds_the_runtime():
    g = pipeline(4, 8)
    # rank 0 from its first send's enter (100) to its last call's leave: the region's
    # ideal start is 90, its end 4 * 90 + 90 later
    t_end = int(g.calls["t1"][g.calls["rank"] == 0][-2])
    res = replay(g, region={0: (100, t_end)})
    assert res.in_region.tolist() == [True, False]
    assert round(res.t_recorded_s * 1e9) == t_end - 100
    assert round(res.t_ideal_s * 1e9) == 4 * 90 - 90


def test_threads_are_locations_of_their_own():
    g = graph(
        {
            0: [
                init(),
                ("MPI_Send", 100, 110, [dict(type="SEND", peer=1, comm=0, bytes=8)], 1),
                fin(200),
            ],
            1: [init(), recv(20, 30, 0), fin(200)],
        }
    )
    assert g.locations["thread"].tolist() == [0, 1, 0]
    res = replay(g)
    # thread 1 of rank 0 computed 100 since MPI_Init before its send; rank 1 waits for it
    assert per_rank(res, res.leave_ns)[1] == [0, 100, 270]


def random_graph(rng, n, acyclic):
    chain = rng.integers(0, 5, n)
    chain[rng.random(n) < 0.3] = lp.NONE
    m = int(rng.integers(0, 3 * n))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    if acyclic:
        a, b = np.minimum(a, b), np.maximum(a, b)
        a, b = a[a < b], b[a < b]
    w = rng.integers(0, 4, len(a))
    init = np.where(rng.random(n) < 0.3, rng.integers(0, 10, n), lp.NONE)
    return n, a, b, w, chain, init


def same(p, q):
    return (
        (p.time == q.time).all()
        and (p.pred == q.pred).all()
        and (p.pred_edge == q.pred_edge).all()
        and p.left == q.left
    )


@pytest.mark.skipif(lp.kernel() is None, reason="libperfweave-replay.so is not built")
def test_kernel_and_numpy_fallback_agree_on_random_graphs():
    rng = np.random.default_rng(7)
    cyclic = 0
    for k in range(200):
        args = random_graph(rng, int(rng.integers(1, 80)), acyclic=k % 3 > 0)
        c, p = lp.longest_path(*args), lp.longest_path_numpy(*args)
        assert same(c, p), k
        cyclic += c.left > 0
    assert cyclic > 10  # the cyclic graphs did have cycles


def test_kernel_is_built():
    # make install builds it (CMakeLists.txt): without it the replay falls back to numpy
    assert lp.kernel() is not None


def test_kernel_and_fallback_agree_on_a_generated_trace(tmp_path):
    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import tracegen

    tracegen.write(tmp_path / "gen", 4, 4 * 3000)
    g = eg.load_graph(tmp_path / "gen")
    for kw in ({}, {"eager_limit": 0, "latency_s": 2e-6, "bandwidth_Bps": 1e8}):
        c, p = replay(g, **kw), replay(g, use_c=False, **kw)
        assert same(c._paths, p._paths)
        assert c.deadlock is None and c.t_ideal_s == p.t_ideal_s <= c.t_recorded_s

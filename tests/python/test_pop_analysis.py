"""The POP metrics (analysis/pop.py) of traces written by hand: useful time, region,
critical path of useful computation and every factor are known by construction
(times in ms; each rank's run is [0, its last call's leave])."""

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfweave.analysis import eventgraph as eg
from perfweave.analysis import pop
from perfweave.analysis.longest_path import kernel
from perfweave.model.trace import Trace

MS = 1_000_000
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")


def send(b, e, peer, fn="MPI_Send", flags=()):
    return (fn, b * MS, e * MS, [dict(type="SEND", peer=peer, comm=0, bytes=8, flags=list(flags))])


def recv(b, e, peer):
    return ("MPI_Recv", b * MS, e * MS, [dict(type="RECV", peer=peer, comm=0, bytes=8)])


def barrier(b, e):
    return ("MPI_Barrier", b * MS, e * MS, [dict(type="COLL", comm=0)])


def bcast(b, e, root):
    return ("MPI_Bcast", b * MS, e * MS, [dict(type="COLL", comm=0, peer=root, bytes=8)])


def result(ranks, replay_ideal=None, **what_if):
    """PopResult of ranks' items, each rank's run starting at 0 (MPI_Init done: a
    literal trace's rank begins at its first record); replayed on the ideal network
    unless replay_ideal is given."""
    ranks = {k: [("MPI_Init", 0, 0, [])] + v for k, v in ranks.items()}
    g = eg.from_trace(Trace.from_literal(ranks))
    if replay_ideal is not None:
        return pop.analyze(g, "literal", replay_ideal=replay_ideal)
    return pop.analyze(g, "literal", what_if=what_if)


def mul(res, key, ideal="critical_path"):
    return res.mul.get(key, res.ideal[ideal]["multiplicative"].get(key))


def add(res, key, ideal="critical_path"):
    return res.add.get(key, res.ideal[ideal]["additive"].get(key))


def sendrecv_trace(iterations=10):
    """Rank 0 computes 100 and sends, rank 1 computes 20 and receives (waiting 80 for
    the message), then both meet in a barrier; calls take no time."""
    r0, r1 = [], []
    for i in range(iterations):
        t = 100 * i
        r0 += [send(t + 100, t + 100, 1), barrier(t + 100, t + 100)]
        r1 += [recv(t + 20, t + 100, 0), barrier(t + 100, t + 100)]
    return {0: r0, 1: r1}


def test_late_sender_pair_load_balance_and_ideal_path():
    res = result(sendrecv_trace())
    assert res.region.runtime_ns == 1000 * MS and not res.region.marked
    assert res.useful_ns.tolist() == [1000 * MS, 200 * MS]
    assert mul(res, "load_balance") == pytest.approx(0.6)
    assert mul(res, "communication_efficiency") == pytest.approx(1.0)
    assert mul(res, "parallel_efficiency") == pytest.approx(0.6)
    # the critical path is rank 0's computation: nothing serialises, nothing is moved
    assert res.ideal["critical_path"]["t_ideal_ns"] == 1000 * MS
    assert mul(res, "serialisation_efficiency") == pytest.approx(1.0)
    assert mul(res, "transfer_efficiency") == pytest.approx(1.0)
    # additive: LB loses (max - mean) / runtime = 0.4, the parents are sums of losses
    assert add(res, "load_balance") == pytest.approx(0.6)
    assert add(res, "parallel_efficiency") == pytest.approx(0.6)


def test_pipeline_serialises_every_rank():
    """Rank k receives from k-1 at 10k, computes 10, sends to k+1; all leave a barrier
    at 40 (4 ranks): each rank's useful time is 10, the critical path 40."""
    ranks = {}
    for k in range(4):
        items = [recv(0, 10 * k, k - 1)] if k else []
        if k < 3:
            items.append(send(10 * k + 10, 10 * k + 10, k + 1))
        items.append(barrier(10 * k + 10, 40))
        ranks[k] = items
    res = result(ranks)
    assert res.useful_ns.tolist() == [10 * MS] * 4
    assert res.ideal["critical_path"]["t_ideal_ns"] == 40 * MS
    assert mul(res, "serialisation_efficiency") == pytest.approx(0.25)
    assert mul(res, "transfer_efficiency") == pytest.approx(1.0)
    assert mul(res, "load_balance") == pytest.approx(1.0)
    # additive: serialisation loses (40 - 10) / 40 of the runtime
    assert add(res, "serialisation_efficiency") == pytest.approx(0.25)
    assert add(res, "communication_efficiency") == pytest.approx(0.25)


def test_broadcast_root_before_others_after():
    """The root computes 10 then broadcasts; the others broadcast (waiting for the
    root) then compute 10; a barrier at 20. 3 iterations: serialisation 0.5."""
    ranks = {k: [] for k in range(3)}
    for i in range(3):
        t = 20 * i
        ranks[0] += [bcast(t + 10, t + 10, 0), barrier(t + 10, t + 20)]
        for k in (1, 2):
            ranks[k] += [bcast(t, t + 10, 0), barrier(t + 20, t + 20)]
    res = result(ranks)
    assert res.useful_ns.tolist() == [30 * MS] * 3
    assert res.ideal["critical_path"]["t_ideal_ns"] == 60 * MS
    assert mul(res, "serialisation_efficiency") == pytest.approx(0.5)
    assert mul(res, "transfer_efficiency") == pytest.approx(1.0)


def test_a_one_to_all_collective_does_not_wait_for_late_receivers():
    """Rank 1 computes 30 before a broadcast rooted at rank 0 which computed 10: the
    root leaves at once (eager), so rank 1's 30 and the root's 10 + 20 after are not
    chained: the critical path is 30, not 10 + 30 + 20."""
    ranks = {0: [bcast(10, 10, 0), barrier(30, 30)], 1: [bcast(30, 30, 0), barrier(30, 30)]}
    res = result(ranks)
    assert res.ideal["critical_path"]["t_ideal_ns"] == 30 * MS


def pcontrol_trace(P, T=10):
    """Two iterations: outside the region rank k computes (2P-1-2k)T (the run is
    balanced), inside MPI_Pcontrol(1) .. (0) it computes (1+2k)T, then a barrier."""
    ranks = {k: [] for k in range(P)}
    t = 0
    for i in range(2):
        out_end = t + (2 * P - 1) * T
        in_end = out_end + (2 * P - 1) * T
        for k in range(P):
            ranks[k] += [
                barrier(t + (2 * P - 1 - 2 * k) * T, out_end),
                ("PCONTROL", 1, out_end * MS),
                barrier(out_end + (1 + 2 * k) * T, in_end),
                ("PCONTROL", 0, in_end * MS),
            ]
        t = in_end
    return ranks


@pytest.mark.parametrize("P", [2, 4])
def test_pcontrol_region_load_balance(P):
    res = result(pcontrol_trace(P))
    assert res.region.marked
    assert res.region.runtime_ns == 2 * (2 * P - 1) * 10 * MS
    assert [len(iv) for iv in res.region.intervals.values()] == [2] * P
    assert res.useful_ns.tolist() == [2 * (1 + 2 * k) * 10 * MS for k in range(P)]
    assert mul(res, "load_balance") == pytest.approx(P / (2 * P - 1))


def test_whole_run_without_pcontrol_is_balanced():
    """The same program without its Pcontrol calls: every rank computes (2P-1)T twice
    per iteration: balanced."""
    ranks = {k: [x for x in v if x[0] != "PCONTROL"] for k, v in pcontrol_trace(4).items()}
    res = result(ranks)
    assert not res.region.marked
    assert mul(res, "load_balance") == pytest.approx(1.0)


def test_region_intervals_from_levels():
    iv = pop.rank_intervals(np.array([[5, 0], [7, 2], [9, 1], [12, 0], [15, 3]]), 0, 20)
    assert iv.tolist() == [[7, 12], [15, 20]]  # a first Pcontrol(0) ends nothing
    assert pop.union_length(np.array([[0, 5], [3, 8], [10, 12]])) == 10
    assert pop.measure_before(
        np.array([[0, 5], [7, 12]]), np.array([-1, 3, 6, 9, 30])
    ).tolist() == [0, 3, 5, 7, 10]


def test_replay_ideal_runtime_gives_its_own_factors():
    res = result(sendrecv_trace(), replay_ideal=800 * MS)
    assert mul(res, "serialisation_efficiency", "replay") == pytest.approx(1.25)
    assert mul(res, "transfer_efficiency", "replay") == pytest.approx(0.8)
    assert add(res, "transfer_efficiency", "replay") == pytest.approx(0.8)


def test_additive_parents_are_sums_of_losses():
    ranks = pcontrol_trace(3)
    res = result(ranks)
    a = {
        k: add(res, k)
        for k in (
            "parallel_efficiency",
            "load_balance",
            "communication_efficiency",
            "serialisation_efficiency",
            "transfer_efficiency",
        )
    }
    assert a["parallel_efficiency"] == pytest.approx(
        a["load_balance"] + a["communication_efficiency"] - 1
    )
    assert a["communication_efficiency"] == pytest.approx(
        a["serialisation_efficiency"] + a["transfer_efficiency"] - 1
    )
    m = {k: mul(res, k) for k in a}
    assert m["parallel_efficiency"] == pytest.approx(
        m["load_balance"] * m["communication_efficiency"]
    )
    assert m["communication_efficiency"] == pytest.approx(
        m["serialisation_efficiency"] * m["transfer_efficiency"]
    )


def chain_trace(seed=7, P=4, steps=6):
    """Random chains of messages through every rank between barriers: (ranks, the
    critical path in ms: the sum of each chain's computations)."""
    rng = random.Random(seed)
    ranks = {k: [] for k in range(P)}
    t = 0
    expect = 0
    for step in range(steps):
        # a random chain through the ranks: each computes, receives from the previous,
        # sends to the next; the clock of the chain is the sum of the computations
        order = rng.sample(range(P), P)
        work = [rng.randint(1, 9) for _ in range(P)]
        arrive, ends = t, {}
        for j, k in enumerate(order):
            if j:
                ranks[k].append(recv(t, arrive, order[j - 1]))
            arrive = ends[k] = arrive + work[j]
            if j < P - 1:
                ranks[k].append(send(arrive, arrive, order[j + 1]))
        for k in range(P):
            ranks[k].append(barrier(ends[k], arrive))
        t = arrive
        expect += sum(work)
    return ranks, expect


def test_critical_path_through_random_chains():
    """The path is the sum of each chain's computations, through every rank."""
    ranks, expect = chain_trace()
    res = result(ranks)
    assert res.ideal["critical_path"]["t_ideal_ns"] == expect * MS
    assert "rounds" not in res.ideal["critical_path"]


def test_scaling_strong_and_weak_and_no_pmu():
    base = result(sendrecv_trace())  # 2 ranks, 1.2 s of useful time
    same = result(sendrecv_trace())
    pop.add_references(same, [base])
    assert same.scaling["computation_scaling"] == pytest.approx(1.0)
    assert same.scaling["mode"] == "strong"
    assert same.scaling["ipc_scaling"] == pop.NO_PMU
    assert same.scaling["global_efficiency"] == pytest.approx(0.6)
    bigger = result(pcontrol_trace(4))  # 4 ranks
    pop.add_references(bigger, [base], weak=True)
    total = int(bigger.useful_ns.sum())
    assert bigger.scaling["computation_scaling"] == pytest.approx(1200 * MS * 2 / total)
    assert bigger.scaling["ranks_ratio"] == 2


def test_json_has_stable_keys():
    doc = result(sendrecv_trace()).to_json()
    json.dumps(doc)
    assert doc["format"] == "perfweave-pop" and doc["version"] == 1
    assert set(doc) >= {"region", "useful", "multiplicative", "additive", "ideal", "scaling"}
    assert set(doc["ideal"]) == {"replay", "critical_path"}
    assert doc["ideal"]["replay"]["t_ideal_s"] == pytest.approx(1.0)
    assert doc["ideal"]["replay"]["params"]["bandwidth_Bps"] is None  # infinite
    assert doc["ideal"]["critical_path"]["t_ideal_s"] == pytest.approx(1.0)


def test_cli_errors_are_one_line(tmp_path):
    for args in (["pop", str(tmp_path / "nothing")], ["pop", str(tmp_path)]):
        p = subprocess.run([PERFWEAVE, *args], capture_output=True, text=True)
        assert p.returncode != 0
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize(
    "ranks", [sendrecv_trace(), pcontrol_trace(3)], ids=["sendrecv", "pcontrol"]
)
def test_replay_and_critical_path_agree_on_an_ideal_network(ranks):
    """Without latency and bandwidth, the replay's ideal runtime of the region is the
    critical path of useful computation: two independent computations, one answer
    (over two Pcontrol intervals too: the gap between them takes no time)."""
    res = result(ranks)
    assert res.ideal["replay"]["t_ideal_ns"] == res.ideal["critical_path"]["t_ideal_ns"]


def test_replay_what_if_latency_on_the_pair():
    """10 messages on the critical path (rank 0 -> 1, then a barrier of 2: one step of
    latency each): 2 latencies per iteration added to the ideal runtime."""
    base = result(sendrecv_trace())
    slow = result(sendrecv_trace(), latency_s=1e-3)
    # rank 0's clock is the path; each iteration its barrier waits for rank 1, which got
    # the message 1 ms late, and the barrier adds 1 ms: 2 ms per iteration
    assert slow.ideal["replay"]["t_ideal_ns"] - base.ideal["replay"]["t_ideal_ns"] == 20 * MS
    assert slow.ideal["critical_path"]["t_ideal_ns"] == base.ideal["critical_path"]["t_ideal_ns"]


def test_pmu_scaling_from_useful_counters():
    """Same work, same time, half the cycles: instruction scaling 1, IPC scaling 2, so
    the frequency scaling is 1/2 (their product is the computation scaling, 1)."""
    base, run = result(sendrecv_trace()), result(sendrecv_trace())
    base.experiment, run.experiment = "base", "run"
    counters = {
        "base": {"instructions": 1000, "cycles": 2000},
        "run": {"instructions": 1000, "cycles": 1000},
    }
    pop.add_references(run, [base], counters=counters)
    sc = run.scaling
    assert sc["instruction_scaling"] == pytest.approx(1.0)
    assert sc["ipc_scaling"] == pytest.approx(2.0)
    assert sc["frequency_scaling"] == pytest.approx(0.5)
    assert sc["computation_scaling"] == pytest.approx(
        sc["instruction_scaling"] * sc["ipc_scaling"] * sc["frequency_scaling"]
    )


def test_useful_counters_of_a_profile_without_them():
    class P:
        header = {"counters": ["PAPI_TOT_INS"]}
        arrays = {"counts": np.zeros(1, [("event", "<i4"), ("before", "<i8")])}

    assert pop.useful_counters(None) is None
    assert pop.useful_counters(P()) is None  # no cycles: no PMU factors
    P.header = {"counters": ["PAPI_TOT_INS", "PAPI_TOT_CYC"]}
    P.arrays = {
        "counts": np.array([(0, 10), (1, 30), (0, 5)], [("event", "<i4"), ("before", "<i8")])
    }
    assert pop.useful_counters(P()) == {"instructions": 15, "cycles": 30}


def graph_of(ranks, **kw):
    return eg.from_trace(
        Trace.from_literal({k: [("MPI_Init", 0, 0, [])] + v for k, v in ranks.items()}, **kw)
    )


def critical_path(g, use_c=True):
    region = pop.region_of(g.loaded.trace, g.locations)
    u, tail = pop.useful_bursts(g, region)
    return pop.critical_path(g, u, tail, use_c=use_c)


@pytest.mark.parametrize("case", ["sendrecv", "pcontrol", "chains", "bcast", "ssend"])
def test_numpy_fallback_gives_the_same_path(case):
    """Where libperfweave-replay.so is not built, the kernel's numpy fallback finds the
    same clocks. ssend: rank 1's MPI_Ssend waits for rank 0's receive, posted after 30 of
    computation, then rank 1 computes 5."""
    chains, chains_ms = chain_trace(seed=3, P=5, steps=9)
    ranks, expect = {
        "sendrecv": (sendrecv_trace(), 1000),
        "pcontrol": (pcontrol_trace(3), 100),
        "chains": (chains, chains_ms),
        "bcast": (
            {0: [bcast(10, 10, 0), barrier(30, 30)], 1: [bcast(30, 30, 0), barrier(30, 30)]},
            30,
        ),
        "ssend": (
            {
                0: [recv(30, 30, 1), barrier(30, 35)],
                1: [send(5, 30, 0, "MPI_Ssend", ["SYNCHRONOUS"]), barrier(35, 35)],
            },
            35,
        ),
    }[case]
    assert kernel() is not None, "libperfweave-replay.so is not built (make install)"
    g = graph_of(ranks)
    c, n = critical_path(g), critical_path(g, use_c=False)
    assert c[0] == n[0] == expect * MS
    assert c[1].tolist() == n[1].tolist() and c[2] is None


def test_active_target_epoch_in_the_critical_path():
    """Rank 0 computes 10, starts an access epoch, computes 10, puts, computes 10 and
    completes; rank 1 computes 500, posts, computes 10 and waits. The complete waits for
    the post's clock (500), the wait for the complete's (30): the path is 510, with
    either kernel."""

    def wsync(fn, b, e, group=-1):
        d = dict(type="WSYNC", win=0, comm=0) | ({"group": group} if group >= 0 else {})
        return (fn, b * MS, e * MS, [d])

    put = ("MPI_Put", 30 * MS, 40 * MS, [dict(type="RMA", win=0, comm=0, peer=1, bytes=4)])
    ranks = {
        0: [wsync("MPI_Win_start", 10, 20, 0), put, wsync("MPI_Win_complete", 50, 900)],
        1: [wsync("MPI_Win_post", 500, 510, 1), wsync("MPI_Win_wait", 520, 2000)],
    }
    g = graph_of(ranks, windows=[0], groups=[[1], [0]])
    assert len(g.rma_sync["a"]) == 2
    c, n = critical_path(g), critical_path(g, use_c=False)
    assert c[0] == n[0] == 510 * MS and c[1].tolist() == n[1].tolist() == [500 * MS, 510 * MS]


def test_long_ping_pong_in_one_pass():
    """20 000 round trips between 2 ranks: rank 0 computes 3 us and sends, rank 1
    receives, computes 5 us and answers. The path changes rank at every message
    (40 000 times), which the max-plus rounds paid one round each (1.2 s on this machine,
    docs/performance.md); the kernel orders the graph once. Literal times in ns."""
    n, a, b = 20_000, 3_000, 5_000
    r0, r1 = [], []
    t = 0
    for i in range(n):
        s0 = ("MPI_Send", t + a, t + a, [dict(type="SEND", peer=1, comm=0, bytes=8)])
        r1.append(("MPI_Recv", t, t + a, [dict(type="RECV", peer=0, comm=0, bytes=8)]))
        r1.append(("MPI_Send", t + a + b, t + a + b, [dict(type="SEND", peer=0, comm=0, bytes=8)]))
        r0 += [s0, ("MPI_Recv", t + a, t + a + b, [dict(type="RECV", peer=1, comm=0, bytes=8)])]
        t += a + b
    assert kernel() is not None, "libperfweave-replay.so is not built (make install)"
    g = graph_of({0: r0, 1: r1})
    length, end, why = critical_path(g)
    assert why is None and length == n * (a + b)
    assert end.tolist() == [n * (a + b), n * (a + b)]
    res = pop.analyze(g, "literal", what_if={})
    assert res.ideal["replay"]["t_ideal_ns"] == res.ideal["critical_path"]["t_ideal_ns"]


def test_a_cycle_of_dependencies_is_said_not_looped():
    """Rank 0 leaves an MPI_Scan and then sends to rank 1, which receives it before its
    own MPI_Scan: it ran (rank 0's prefix needs no other rank) but the critical path
    reads a collective as all waiting for all, so rank 0's scan waits for rank 1's
    entry, which waits for rank 0's send after the scan: no ideal runtime, a note."""
    scan = lambda b, e: ("MPI_Scan", b * MS, e * MS, [dict(type="COLL", comm=0, bytes=8)])
    ranks = {0: [scan(10, 10), send(10, 10, 1)], 1: [recv(0, 10, 0), scan(10, 10)]}
    res = result(ranks)
    cp = res.ideal["critical_path"]
    assert cp["t_ideal_ns"] is None and "cycle" in cp["note"]
    assert "serialisation_efficiency" not in cp["multiplicative"]

"""The critical path and the delay analysis (analysis/rootcause.py) on traces written by
hand (Trace.from_literal): every figure below is arithmetic on the literal times (ns), so
these tests pin the definitions of docs/wait-states.md ("Root causes")."""

import pytest

from perfweave.analysis import eventgraph, rootcause
from perfweave.analysis.waitstates import analyze_trace
from perfweave.model.trace import Trace


def send(t0, t1, to, tag=0):
    return ("MPI_Send", t0, t1, [dict(type="SEND", peer=to, tag=tag, comm=0, bytes=4)])


def recv(t0, t1, frm, tag=0):
    return ("MPI_Recv", t0, t1, [dict(type="RECV", peer=frm, tag=tag, comm=0, bytes=4)])


def barrier(t0, t1):
    return ("MPI_Barrier", t0, t1, [dict(type="COLL", comm=0, peer=-1, bytes=0, bytes2=0)])


def init():
    return ("MPI_Init", 0, 10)


def fin(t):
    return ("MPI_Finalize", t, t + 5)


def analyze(ranks):
    trace = Trace.from_literal(ranks)
    g = eventgraph.from_trace(trace)
    return g, rootcause.analyze_graph(g), analyze_trace(Trace.from_literal(ranks))


def costs_by_rank(res, kind=None, term=None):
    out = {}
    for (k, t), per in res.costs.items():
        if (kind and k != kind) or (term and t != term):
            continue
        for (_, r), v in per.items():
            out[r] = out.get(r, 0.0) + v
    return out


def metric_ns(ws, mid, rank=None):
    v = ws.values_of(mid)
    return round(
        sum(x for r, x in zip(v["rank"].tolist(), v["value"].tolist()) if rank in (None, r)) * 1e9
    )


def two_ranks(n=10, slow=100_000, fast=20_000):
    """Rank 0 computes slow ns and sends, rank 1 computes fast ns and receives, then a
    barrier (both enter it together): n iterations."""
    r0, r1 = [init()], [init()]
    t = 10
    for _ in range(n):
        r0 += [send(t + slow, t + slow + 5, 1), barrier(t + slow + 10, t + slow + 20)]
        r1 += [recv(t + fast, t + slow + 6, 0), barrier(t + slow + 10, t + slow + 20)]
        t += slow + 20
    return {0: r0 + [fin(t)], 1: r1 + [fin(t)]}


def test_the_delay_cost_of_the_slow_ranks_compute_is_the_late_sender_it_caused():
    g, res, ws = analyze(two_ranks())
    late_sender = metric_ns(ws, "mpi_latesender", 1)
    assert late_sender == 10 * 80_000
    # all of it is short-term, on rank 0's computation (the program's root path)
    assert costs_by_rank(res) == {0: pytest.approx(late_sender)}
    per = res.costs[("latesender", "short")]
    assert set(per) == {(0, 0)} and g.paths[0] == ("program",)
    # the metric tree holds the same, on the causing rank
    assert metric_ns(ws, "delay_latesender", 0) == late_sender
    assert metric_ns(ws, "delay") == late_sender
    # nothing propagated: every wait is direct and terminal
    assert metric_ns(ws, "mpi_wait_direct_latesender") == late_sender
    assert metric_ns(ws, "mpi_wait_terminal_ls") == late_sender
    assert metric_ns(ws, "mpi_wait_indirect_latesender") == 0


def chain(extra=50):
    """Rank 3 computes 100 + extra, then sends to 2; rank 2 receives it and sends on to
    1; rank 1 receives; rank 0 computes; a barrier ends the iteration."""
    end = 110 + extra
    return {
        0: [init(), barrier(110, end + 10), fin(end + 20)],
        1: [init(), recv(110, end, 2), barrier(end, end + 10), fin(end + 20)],
        2: [init(), recv(110, end, 3), send(end, end, 1), barrier(end, end + 10), fin(end + 20)],
        3: [init(), send(end, end, 2), barrier(end, end + 10), fin(end + 20)],
    }


def test_a_delay_that_propagates_is_charged_to_its_root_cause_not_to_the_ranks_between():
    g, res, ws = analyze(chain(extra=50))
    # rank 2 waits 50 for rank 3, rank 1 waits 50 for rank 2 (which was late by its wait)
    assert metric_ns(ws, "mpi_latesender", 2) == 50
    assert metric_ns(ws, "mpi_latesender", 1) == 50
    ls = costs_by_rank(res, "latesender")
    assert ls == {3: pytest.approx(100)}
    assert costs_by_rank(res, "latesender", "short") == {3: pytest.approx(50)}
    assert costs_by_rank(res, "latesender", "long") == {3: pytest.approx(50)}
    # rank 1's wait is indirect (rank 2 passed it on), rank 2's propagating
    assert metric_ns(ws, "mpi_wait_indirect_latesender", 1) == 50
    assert metric_ns(ws, "mpi_wait_direct_latesender", 2) == 50
    assert metric_ns(ws, "mpi_wait_propagating_ls", 2) == 50
    assert metric_ns(ws, "mpi_wait_terminal_ls", 1) == 50
    # and the barrier: rank 0 waited for rank 3's computation too
    assert costs_by_rank(res, "barrier") == {3: pytest.approx(50)}
    assert res.causes()[0][:2] == (3, 0)


def test_the_share_of_a_wait_that_is_delay_and_the_share_passed_on():
    # rank 1 is late to its send to 0 by 30 of its own work and 20 of waiting for rank 2
    ranks = {
        0: [init(), recv(110, 160, 1), fin(200)],
        1: [init(), recv(110, 130, 2), send(160, 160, 0), fin(200)],
        2: [init(), send(130, 130, 1), fin(200)],
    }
    g, res, ws = analyze(ranks)
    assert metric_ns(ws, "mpi_latesender", 0) == 50
    # rank 0's interval: rank 1 spent 100 + 30 computing against rank 0's 100, and
    # waited 20: scale = 50 / (30 + 20) = 1
    assert costs_by_rank(res, "latesender", "short") == {1: pytest.approx(30), 2: pytest.approx(20)}
    assert costs_by_rank(res, "latesender", "long") == {2: pytest.approx(20)}
    assert metric_ns(ws, "mpi_wait_indirect_latesender", 0) == 20
    assert metric_ns(ws, "mpi_wait_direct_latesender", 0) == 30


def pipeline(k=4, work=100):
    """Rank j waits for rank j-1's message, computes work, passes it on, and enters
    MPI_Finalize, which all leave after the last rank entered it."""
    ranks = {}
    end = 10 + k * work
    for j in range(k):
        items = [init()]
        t = 10
        if j:
            t_arrive = 10 + j * work
            items.append(recv(t, t_arrive, j - 1))
            t = t_arrive
        t += work
        if j < k - 1:
            items.append(send(t, t, j + 1))
        items.append(("MPI_Finalize", t, end + 5))
        ranks[j] = items
    return ranks


def test_the_critical_path_of_a_pipeline_runs_through_every_rank():
    g, res, ws = analyze(pipeline())
    ranks_on_path = [int(g.locations["rank"][loc]) for loc, a, b in res.segments if b > a]
    # from rank 0's MPI_Init to rank 3's work, then the end of MPI_Finalize
    assert ranks_on_path[:4] == [0, 1, 2, 3]
    # each rank's 100 of work is on it, and the path is as long as the run
    prof = {}
    for (p, r), v in res.cp_profile.items():
        if g.paths[p] == ("program",):
            prof[r] = prof.get(r, 0) + v
    assert prof == {0: 100, 1: 100, 2: 100, 3: 100}
    assert res.cp_length == 10 + 4 * 100 + 5
    # the imbalance: 400 of computation on the path against a mean of 100 per rank
    assert res.cp_imbalance[0] == pytest.approx(400 - 100)
    assert metric_ns(ws, "critical_path") == res.cp_length


def test_the_critical_path_leaves_a_wait_for_its_cause():
    ranks = two_ranks(n=2)
    name, t, _ = ranks[1][-1]
    ranks[1][-1] = (name, t, t + 10)  # rank 1 ends last
    g, res, _ = analyze(ranks)
    # back from rank 1's end to its last Late Sender, which hands the path to rank 0 at
    # its send's enter (10 + 100_020 + 100_000); rank 0 has no wait before it
    seg = [(int(g.locations["rank"][loc]), a, b) for loc, a, b in res.segments]
    assert seg == [(0, 0, 200_030), (1, 200_030, 200_060)]
    assert res.cp_length == 200_060


def test_removing_the_cause_saves_its_delay_on_the_ideal_replay():
    g, res, ws = analyze(two_ranks())
    saved = rootcause.what_if(res)
    # rank 0's computation, shortened to rank 1's in every iteration: the ideal run
    # is 10 x 80_000 ns shorter
    assert [(r, g.paths[p]) for r, p, _ in saved] == [(0, ("program",))]
    assert saved[0][2] == pytest.approx(10 * 80_000 / 1e9, abs=1e-9)
    assert metric_ns(ws, "delay_savings", 0) == 10 * 80_000


def test_the_advice_names_the_cause_instead_of_the_waits_it_caused():
    from perfweave.analysis.advice import rule_root_causes, rule_wait_states

    ws = {
        "patterns": [
            {
                "id": "mpi_latesender",
                "name": "Late Sender",
                "pct": 30.0,
                "time_s": 0.8,
                "callpath": "main > MPI_Recv",
            }
        ],
        "root_causes": {
            "cost_s": 0.8,
            "pct": 30.0,
            "causes": [
                {
                    "rank": 3,
                    "callpath": "main > work",
                    "cost_s": 0.6,
                    "short_s": 0.4,
                    "long_s": 0.2,
                    "saves_s": 0.3,
                },
                {
                    "rank": 1,
                    "callpath": "main > work",
                    "cost_s": 0.2,
                    "short_s": 0.2,
                    "long_s": 0.0,
                    "saves_s": None,
                },
            ],
        },
    }
    (a,) = rule_root_causes({"wait_states": ws})
    assert a["text"].startswith("Ranks 3, 1 at main > work caused 0.8 s of waiting")
    assert "0.6 s directly, 0.2 s through waits it propagated" in a["text"]
    assert "0.3 s shorter on an ideal network" in a["text"]
    # the Late Sender it explains is not advised on beside it
    assert rule_wait_states({"wait_states": ws}) == []
    del ws["root_causes"]
    assert [x["rule"] for x in rule_wait_states({"wait_states": ws})] == ["wait_state"]


def test_the_html_report_shows_the_root_causes_as_the_full_text_does():
    from perfweave.report.section import View
    from perfweave.report.sections.wait_states import SECTION, root_cause_lines

    rc = {
        "cost_s": 0.8,
        "pct": 30.0,
        "causes": [
            {
                "rank": 3,
                "callpath": "main > work<T>",
                "cost_s": 0.6,
                "short_s": 0.4,
                "long_s": 0.2,
                "saves_s": 0.3,
            }
        ],
        "critical_path_s": 2.0,
        "critical_path": [{"rank": 3, "callpath": "main > work<T>", "time_s": 1.5}],
    }
    pattern = {"name": "Late Sender", "time_s": 0.8, "pct": 30.0, "callpath": "main > MPI_Recv"}
    data = {"wait_states": {"patterns": [pattern], "root_causes": rc}}
    page = "\n".join(SECTION.html(data, None))
    text = root_cause_lines(rc, View(max_rows=None, width=None))
    assert "<h3>Who caused the waiting" in page and "Who caused the waiting" in text[1]
    # the same cells, escaped
    assert "<td>rank 3</td><td>main &gt; work&lt;T&gt;</td>" in page
    assert text[-1].strip() in page.replace("&gt;", ">").replace("&lt;", "<")
    # an analysis without root causes shows the patterns alone
    assert "Who caused" not in "".join(SECTION.html({"wait_states": {"patterns": [pattern]}}, None))


def bcast(t0, t1, root):
    return ("MPI_Bcast", t0, t1, [dict(type="COLL", comm=0, peer=root, bytes=8, bytes2=8)])


def test_a_broadcast_orders_each_rank_against_its_root_not_two_others():
    """Rank 1 enters the broadcast of root 0 at 20 and leaves it at 110; rank 2 enters
    at 200, after both have left. Then rank 1 computes 1 000 ns, rank 2 2 000 ns and
    a barrier: rank 1 waits 2205 - 1110 = 1095 ns for rank 2. The broadcast did not
    synchronise ranks 1 and 2, so their interval starts at MPI_Init: rank 2's
    computation there is 190 + 2000 against rank 1's 10 + 1000 (d = 1180, scale
    1095 / 1180), and all of the wait is charged to rank 2's computation. With the
    broadcast as their synchronisation point, 90 ns of it would be charged to nobody
    (rank 2's late arrival at the broadcast fell before the interval)."""
    ranks = {
        0: [init(), bcast(100, 105, 0), barrier(2205, 2210), fin(2300)],
        1: [init(), bcast(20, 110, 0), barrier(1110, 2210), fin(2300)],
        2: [init(), bcast(200, 205, 0), barrier(2205, 2210), fin(2300)],
    }
    g, res, ws = analyze(ranks)
    assert metric_ns(ws, "mpi_barrier_wait", 1) == 1095
    assert metric_ns(ws, "mpi_latebroadcast", 1) == 80
    per = res.costs[("barrier", "short")]
    assert {r for _, r in per} == {2}
    assert sum(per.values()) == pytest.approx(1095)


@pytest.mark.parametrize("mu", [10_000, 0])
def test_root_causes_on_corrected_times_are_those_of_the_unskewed_trace(mu):
    """test_clock_condition's skewed trace (rank 1's clock 5 ms behind): with
    --correct-clocks the root causes are computed on the corrected times. With the true
    latency as minimum (10 us) the correction restores every time the root causes use,
    so they equal the unskewed trace's to the ns; with 0 it leaves rank 1 10 us early
    after each receive, which each wait between the two ranks carries once per
    iteration (test_wait_states_on_corrected_times): N x 10 us per metric and rank at
    most. Uncorrected, rank 0 seems to enter each barrier last and the critical path
    never leaves it."""
    from test_clock_condition import LAT, N, SKEW, skewed

    metrics = ("delay_latesender", "delay_barrier", "critical_path", "delay_savings")

    def per_rank(res):
        return {m: {r: round(v * 1e9) for r, v in res.per_rank(m).items()} for m in metrics}

    true = per_rank(analyze_trace(Trace.from_literal(skewed(0))))
    assert set(true["delay_barrier"]) == {1} and set(true["critical_path"]) == {0, 1}
    fixed = per_rank(
        analyze_trace(Trace.from_literal(skewed(SKEW)), correct_clocks=True, min_latency_ns=mu)
    )
    bound = N * (LAT - mu)
    for m in metrics:
        assert set(fixed[m]) == set(true[m]), m
        for r, v in true[m].items():
            assert abs(fixed[m][r] - v) <= bound, (m, r)
    raw = per_rank(analyze_trace(Trace.from_literal(skewed(SKEW))))
    assert set(raw["delay_barrier"]) == {0} and set(raw["critical_path"]) == {0}


def random_run(seed, nranks=5, steps=60):
    """A trace of random computation, messages between random pairs (received in
    order, leaving after the send began), barriers and broadcasts from random roots
    (leaving after the last arrival, or the root's), with its times consistent."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = {r: 10 for r in range(nranks)}
    ranks = {r: [init()] for r in range(nranks)}
    for i in range(steps):
        for r in t:
            t[r] += int(rng.integers(0, 500))
        kind = rng.choice(["p2p", "p2p", "p2p", "barrier", "bcast"])
        if kind == "p2p":
            a, b = (int(x) for x in rng.choice(nranks, 2, replace=False))
            ranks[a].append(send(t[a], t[a] + 5, b, tag=i))
            leave = max(t[b], t[a]) + 7
            ranks[b].append(recv(t[b], leave, a, tag=i))
            t[a], t[b] = t[a] + 5, leave
            continue
        root = int(rng.integers(nranks))
        last = max(t.values()) if kind == "barrier" else t[root]
        for r in t:
            leave = max(t[r], last) + 3
            ranks[r].append(barrier(t[r], leave) if kind == "barrier" else bcast(t[r], leave, root))
            t[r] = leave
    end = max(t.values()) + 5
    return {r: items + [("MPI_Finalize", t[r], end)] for r, items in ranks.items()}


def same(a, b):
    import numpy as np

    assert a.costs.keys() == b.costs.keys()
    for k in a.costs:
        assert a.costs[k].keys() == b.costs[k].keys()
        for key, v in a.costs[k].items():
            assert v == pytest.approx(b.costs[k][key], rel=1e-12, abs=1e-6)
    for f in ("direct", "indirect", "propagating"):
        assert np.allclose(getattr(a, f), getattr(b, f), rtol=1e-12, atol=1e-6), f
    for f in ("row", "path", "ns", "lo"):
        assert (getattr(a.delays, f) == getattr(b.delays, f)).all(), f
    assert a.segments == b.segments and a.cp_profile == b.cp_profile
    assert a.activity == b.activity and a.cp_imbalance == pytest.approx(b.cp_imbalance)
    sa, sb = rootcause.what_if(a), rootcause.what_if(b)
    assert [x[:2] for x in sa] == [x[:2] for x in sb]
    assert [x[2] for x in sa] == pytest.approx([x[2] for x in sb], abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_the_bulk_steps_give_the_same_result_whatever_their_chunks_and_kernel(seed, monkeypatch):
    """On random runs: the backward pass in C and with numpy alone, and the delays and
    the critical path in chunks of one wait state (and a dense table of one) against
    one chunk, agree; and every wait state splits into direct and indirect waiting,
    with a propagating part no larger than itself."""
    import numpy as np

    g = eventgraph.from_trace(Trace.from_literal(random_run(seed)))
    ref = rootcause.analyze_graph(g)
    W = ref.waits
    sel = W.kind != rootcause.K["finalize"]
    assert sel.sum() > 10 and ref.costs
    assert np.allclose((ref.direct + ref.indirect)[sel], W.omega[sel])
    assert (ref.propagating <= W.omega + 1e-6).all() and (ref.indirect >= 0).all()
    assert rootcause._kernel() is not None  # built by make install
    monkeypatch.setattr(rootcause, "_kernel", lambda: None)
    same(rootcause.analyze_graph(g), ref)
    monkeypatch.setattr(rootcause, "ROWS", 1)
    monkeypatch.setattr(rootcause, "DENSE", 1)
    same(rootcause.analyze_graph(g), ref)


@pytest.mark.parametrize("seed", range(4))
def test_previous_synchronisation_points_found_in_bulk_are_the_definitions(seed):
    """On random runs (messages between random pairs, in both directions; barriers;
    broadcasts from random roots), the previous synchronisation point of each wait
    state, found for all at once, is the one of the definition (docs/wait-states.md):
    the latest message between the two before both calls, unless a later collective
    both completed (a rooted one only where one of the two is its root)."""
    import numpy as np

    g = eventgraph.from_trace(Trace.from_literal(random_run(seed, steps=80)))
    W = rootcause.wait_states(g)
    loc = g.calls["loc"].astype(np.int64)
    m = g.messages
    pairs = list(zip(m["scall"].tolist(), m["rdone"].tolist()))
    pairs += [(b, a) for a, b in pairs]
    parts = g.coll_parts
    done = {}  # (location, instance) -> completing call
    for i, e in zip(parts["inst"].tolist(), parts["ecall"].tolist()):
        done[(int(loc[e]), i)] = e
    init = [k for k in range(len(loc)) if g.call_name(k) == "MPI_Init"]
    for k in init:
        done[(int(loc[k]), -1)] = k
    root = {
        i: int(loc[b])
        for i, b, r in zip(parts["inst"].tolist(), parts["bcall"].tolist(), parts["root"])
        if r
    }
    sp = rootcause._SyncPoints(g)
    first = g.locations["first"].astype(np.int64)
    sel = W.kind != rootcause.K["finalize"]
    w, d = W.waiter[sel], W.causer[sel]
    pd, pw = sp.previous(loc[d], d, loc[w], w, first)
    looked = 0
    for k, (wk, dk) in enumerate(zip(w.tolist(), d.tolist())):
        ld, lw = int(loc[dk]), int(loc[wk])
        best = max(
            [(x, y) for x, y in pairs if loc[x] == ld and loc[y] == lw and x < dk and y < wk],
            default=(-1, -1),
        )
        for (lx, i), x in sorted(done.items(), key=lambda kv: kv[1]):
            y = done.get((lw, i))
            if lx != ld or not best[0] < x < dk or y is None or not y < wk:
                continue
            if i in root and root[i] not in (ld, lw):
                continue
            best = (x, y)
        assert (pd[k], pw[k]) == best, k
        looked += best[0] >= 0
    assert looked > 20


def test_analyze_computes_root_causes_by_default_up_to_its_bound(tmp_path, monkeypatch):
    """perfweave analyze's default: root causes for traces of up to ROOT_CAUSE_CALLS MPI
    calls (bench/tracegen.py's ring exchange, 4 ranks: 4 * 3000 events, ~4900 calls),
    not above unless asked."""
    from perfweave.analysis import waitstates
    from test_replay import bench_tracegen

    bench_tracegen().write(tmp_path / "gen", 4, 4 * 3000)

    def cp(**kw):
        ws = waitstates.analyze(tmp_path / "gen", **kw)
        return sum(ws.per_rank("critical_path").values())

    assert cp() > 0
    monkeypatch.setattr(waitstates, "ROOT_CAUSE_CALLS", 1000)
    assert cp() == 0
    assert cp(root_causes=True) > 0

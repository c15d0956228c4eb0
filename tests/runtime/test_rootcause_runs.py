"""The delay analysis and the critical path (analysis/rootcause.py) on MPI programs with
one root cause built in (programs/rootcause.c, whose header gives the scenarios), traced
under each MPI and analysed by `perfweave analyze`.

The ground truth is the run's own: each rank writes the computation it measured
(CLOCK_MONOTONIC around spin()), and the waits a delay caused are the Late Sender times
of the same analysis. A delay's cost equals the waits it caused up to the ranks' skew
leaving the synchronisation point before (the barrier, the previous message): a few
hundred microseconds per iteration here, well under the bound max(2 %, 2 ms) for 10
iterations; the plan is checked loosely (on_plan) to know the scenario ran as designed."""

import re

import numpy as np
import pytest

from perfweave.analysis import eventgraph

from perfweave.model.table import records
from test_waitstates import analyze


def close(measured, expected, rel=0.02, floor=0.002):
    return abs(measured - expected) <= max(rel * expected, floor)


def on_plan(measured, planned):
    return planned / 2 < measured < planned * 2


def by_rank(ws, metric):
    v = ws.values_of(metric)
    out = {}
    for r, x in zip(v["rank"].tolist(), v["value"].tolist()):
        out[r] = out.get(r, 0.0) + x
    return out


def delay_costs(ws):
    """{rank: short- and long-term delay costs of every kind} (s)."""
    out = {}
    for mid in ws.metrics["id"].tolist():
        if (
            mid.startswith("delay_")
            and not mid.endswith("aggregate")
            and mid not in ("delay_mpi", "delay_p2p", "delay_collective", "delay_savings")
        ):
            for r, x in by_rank(ws, mid).items():
                out[r] = out.get(r, 0.0) + x
    return out


@pytest.fixture
def scenario(mpi, build, run_pw, tmp_path, monkeypatch):
    def _run(mode, nranks):
        prog = build(mpi, "rootcause.c")
        to = tmp_path / f"rc-{mode}"
        monkeypatch.setenv("RC_OUT", str(to))
        # Open MPI's waiting ranks yield the CPU instead of spinning on it, so that the
        # rank whose turn it is runs sooner on 2 shared cores (less lateness, below)
        monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
        r = run_pw(mpi.launch(nranks) + [prog, mode], options=["--trace"])
        compute = {}
        for k in range(nranks):
            text = to.with_name(f"{to.name}.{k}").read_text()
            compute[k] = [float(x) for x in re.findall(r"^compute \d+ ([\d.]+)$", text, re.M)]
        ws = analyze(r.exp)
        assert ws.complete, ws.notes
        return ws, compute

    return _run


def lateness(exp, compute, planned):
    """What, besides the planned computation, can make a rank late (s), from the trace
    and the program's own clock: each message's completion after its sender entered
    (the receiver waiting for a CPU), each collective's spread of leave times, and each
    computation's overrun of its plan."""
    g = eventgraph.load_graph(exp)
    c, m = g.calls, g.messages
    t0, t1 = c["t0"], c["t1"]
    lag = np.maximum(t1[m["rdone"]] - np.maximum(t0[m["scall"]], t0[m["rdone"]]), 0).sum()
    parts = g.coll_parts
    skew = 0
    for i in np.unique(parts["inst"]).tolist():
        e = t1[parts["ecall"][parts["inst"] == i]]
        skew += int(e.max() - e.min())
    over = sum(max(x - planned[k], 0.0) for k, xs in compute.items() for x in xs)
    return (lag + skew) / 1e9 + over


def test_the_delay_cost_of_a_slow_ranks_compute_is_the_wait_it_caused(scenario):
    ws, compute = scenario("two", 2)
    ls = by_rank(ws, "mpi_latesender")
    excess = sum(compute[0]) - sum(compute[1])
    assert on_plan(ls[1], 10 * 0.040) and on_plan(excess, 10 * 0.040), (ls, excess)
    # the waits rank 0's computation caused: rank 1's Late Sender, all of it short-term
    # and on rank 0
    costs = delay_costs(ws)
    assert close(by_rank(ws, "delay_latesender").get(0, 0.0), ls[1]), (costs, ls)
    # rank 1 delays rank 0 only at the barrier, when its MPI_Recv returns late (waiting
    # for a CPU under load): its costs are rank 0's Wait at Barrier
    assert by_rank(ws, "delay_latesender").get(1, 0.0) == 0.0
    assert costs.get(1, 0.0) <= by_rank(ws, "mpi_barrier_wait").get(0, 0.0) + 1e-6
    # on rank 0's computation (the program's root path: no user functions recorded),
    # but for what else made rank 0 late: leaving the barrier late, waiting for a CPU
    # (bounded by the lateness the trace and the program's clock show)
    n = lateness(ws.experiment, compute, {0: 0.050, 1: 0.010})
    assert n < ls[1], n  # else the lateness hides the planned delay: the run says little
    root = [cp["id"] for cp in records(ws.callpaths) if list(cp["labels"]) == ["program"]]
    v = ws.values_of("delay_latesender")
    on_compute = sum(x for p, x in zip(v["callpath"].tolist(), v["value"].tolist()) if p in root)
    assert ls[1] - n <= on_compute <= ls[1] + 1e-6, (on_compute, ls[1], n)
    # nothing propagated: rank 1's waits are direct and terminal
    assert close(by_rank(ws, "mpi_wait_direct_latesender").get(1, 0.0), ls[1])
    assert close(by_rank(ws, "mpi_wait_terminal_ls").get(1, 0.0), ls[1])


def test_a_wait_passed_down_a_chain_is_charged_to_its_root_cause(scenario):
    ws, compute = scenario("chain", 4)
    ls = by_rank(ws, "mpi_latesender")
    extra = sum(compute[3]) - sum(compute[2])
    # rank 3's 200 ms a step: four ranks on 2 cores beside two busy loops (load 11) made
    # rank 2's 5 x 20 ms last 0.67 s, and the lateness (N, below) 0.86 s against 0.6 s of
    # waits planned at 80 ms a step
    assert on_plan(extra, 5 * 0.200) and on_plan(ls[2], 5 * 0.200) and on_plan(ls[1], 5 * 0.200)
    costs = delay_costs(ws)
    # Four ranks that busy-poll in MPI share 2 cores here: a rank may leave a call or get
    # back to its computation late, and that is delay too, on whichever rank it struck.
    # All of it is bounded by the lateness the trace and the program's clock show (N).
    n = lateness(ws.experiment, compute, {0: 0.020, 1: 0.020, 2: 0.020, 3: 0.220})
    assert n < ls[1] + ls[2], n  # else the lateness hides the planned delay
    # a rank late by x makes each of the 3 others wait x at most (at the barrier)
    assert costs.get(1, 0.0) + costs.get(2, 0.0) <= 3 * n, (costs, n)
    assert costs.get(3, 0.0) > costs.get(1, 0.0) + costs.get(2, 0.0), costs
    # rank 3 is the root cause of rank 1's waiting, not rank 2 that passed it on: its
    # long-term costs cover rank 1's wait, which was indirect and rank 2's propagating
    assert by_rank(ws, "delay_latesender_longterm").get(3, 0.0) >= ls[1] - n, (costs, ls, n)
    assert by_rank(ws, "delay_latesender").get(3, 0.0) >= ls[2] - n, (costs, ls, n)
    assert by_rank(ws, "mpi_wait_indirect_latesender").get(1, 0.0) >= ls[1] - n
    assert by_rank(ws, "mpi_wait_propagating_ls").get(2, 0.0) >= ls[1] - n


def test_the_critical_path_of_a_pipeline_runs_through_every_rank(scenario):
    ws, compute = scenario("pipeline", 4)
    root = [cp["id"] for cp in records(ws.callpaths) if list(cp["labels"]) == ["program"]]
    v = ws.values_of("critical_path")
    on_path = {}
    for p, r, x in zip(v["callpath"].tolist(), v["rank"].tolist(), v["value"].tolist()):
        if p in root:
            on_path[r] = on_path.get(r, 0.0) + x
    # every rank's measured 30 ms of computation lies on the path
    for k in range(4):
        assert on_plan(compute[k][0], 0.030)
        assert on_path.get(k, 0.0) >= compute[k][0] - 0.002, (k, on_path, compute)

#!/usr/bin/env python3
"""Benchmark: how fast perfweave pop finds the critical path of useful computation
(figures, not a test), against the ideal-network replay of the same trace in the same
invocation (the baseline: both are longest paths through the same event graph, and on
an ideal network they give the same ideal runtime, which this checks).

Two traces: a synthetic experiment (bench/tracegen.py) of --events events over --ranks
ranks, generated unless it exists, and a ping-pong of --pingpong round trips between 2
ranks built in memory (its path changes rank at every message). Loads each one's event
graph once, then times each computation --repeat times and prints events per second
(best and median) and the ratio. It runs on older perfweaves too (whose critical path
returned its rounds), to measure them against their own replay:

    .venv/bin/python bench/pop_throughput.py [--events 2000000] [--ranks 16]
        [--pingpong 20000] [--dir /tmp/perfweave-bench-pop] [--repeat 3]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tracegen  # noqa: E402

from perfweave.analysis import eventgraph, pop  # noqa: E402
from perfweave.model.trace import Trace  # noqa: E402


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def pingpong(n, a=3_000, b=5_000):
    """The event graph of n round trips: rank 0 computes a ns and sends, rank 1 receives,
    computes b ns and answers; its critical path is n (a + b)."""

    def call(fn, t0, t1, typ, peer):
        return (fn, t0, t1, [dict(type=typ, peer=peer, comm=0, bytes=8)])

    r0, r1 = [("MPI_Init", 0, 0, [])], [("MPI_Init", 0, 0, [])]
    for i in range(n):
        t = i * (a + b)
        r0 += [call("MPI_Send", t + a, t + a, "SEND", 1)]
        r0 += [call("MPI_Recv", t + a, t + a + b, "RECV", 1)]
        r1 += [call("MPI_Recv", t, t + a, "RECV", 0)]
        r1 += [call("MPI_Send", t + a + b, t + a + b, "SEND", 0)]
    return eventgraph.from_trace(Trace.from_literal({0: r0, 1: r1}))


def measure(name, graph, repeat):
    """Times the critical path and the replay of graph; whether they agree."""
    region = pop.region_of(graph.loaded.trace, graph.locations)
    u, tail = pop.useful_bursts(graph, region)
    n = graph.nevents
    cp_best, cp_med, out = timed(lambda: pop.critical_path(graph, u, tail), repeat)
    cp = out[0]
    # an older perfweave's third value: the max-plus rounds it took
    how = f" ({out[2]} rounds)" if isinstance(out[2], int) else ""
    rp_best, rp_med, (ideal, _, _) = timed(lambda: pop.ideal_replay(graph, region, u, tail), repeat)
    print(f"{name}: {n} events, {len(graph.calls['t0'])} calls")
    print(
        f"  critical path of useful computation: {n / cp_best / 1e6:.2f} M events/s best "
        f"({cp_best:.4f} s), {n / cp_med / 1e6:.2f} median{how}"
    )
    print(
        f"  ideal-network replay (baseline): {n / rp_best / 1e6:.2f} M events/s best "
        f"({rp_best:.4f} s), {n / rp_med / 1e6:.2f} median"
    )
    print(f"  critical path / replay time: {cp_best / rp_best:.2f} (best runs)")
    print(
        f"  ideal runtime: critical path {cp} ns, replay {ideal} ns: "
        + ("equal" if cp == ideal else "DIFFERENT")
    )
    return cp == ideal


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--pingpong", type=int, default=20_000)
    ap.add_argument("--dir", default="/tmp/perfweave-bench-pop")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    exp = Path(a.dir)
    if not (exp / "traces").is_dir():
        tracegen.write(exp, a.ranks, a.events)
    ok = measure(f"ring exchange, {a.ranks} ranks", eventgraph.load_graph(exp), a.repeat)
    ok &= measure(f"ping-pong, {a.pingpong} round trips", pingpong(a.pingpong), a.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

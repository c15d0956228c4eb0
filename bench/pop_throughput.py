#!/usr/bin/env python3
"""Benchmark: how fast perfweave pop finds the critical path of useful computation
(figures, not a test), against the ideal-network replay of the same trace in the same
invocation (the baseline: both are longest paths through the same event graph, and on
an ideal network they give the same ideal runtime, which this checks).

Generates a synthetic experiment (bench/tracegen.py) of --events events over --ranks
ranks, unless it exists, loads its event graph once, then times each computation
--repeat times and prints events per second (best and median) and the ratio.

    .venv/bin/python bench/pop_throughput.py [--events 2000000] [--ranks 16]
        [--dir /tmp/perfweave-bench-pop] [--repeat 3]
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


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--dir", default="/tmp/perfweave-bench-pop")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    exp = Path(a.dir)
    if not (exp / "traces").is_dir():
        tracegen.write(exp, a.ranks, a.events)
    graph = eventgraph.load_graph(exp)
    region = pop.region_of(graph.loaded.trace, graph.locations)
    u, tail = pop.useful_bursts(graph, region)
    n = graph.nevents
    cp_best, cp_med, (cp, _, rounds) = timed(lambda: pop.critical_path(graph, u, tail), a.repeat)
    rp_best, rp_med, (ideal, _, _) = timed(
        lambda: pop.ideal_replay(graph, region, u, tail), a.repeat
    )
    print(f"{n} events, {len(graph.calls['t0'])} calls, {a.ranks} ranks")
    print(
        f"critical path of useful computation: {n / cp_best / 1e6:.2f} M events/s best, "
        f"{n / cp_med / 1e6:.2f} median ({rounds} rounds)"
    )
    print(
        f"ideal-network replay (baseline): {n / rp_best / 1e6:.2f} M events/s best, "
        f"{n / rp_med / 1e6:.2f} median"
    )
    print(f"critical path / replay time: {cp_best / rp_best:.2f} (best runs)")
    print(
        f"ideal runtime: critical path {cp} ns, replay {ideal} ns: "
        + ("equal" if cp == ideal else "DIFFERENT")
    )
    return 0 if cp == ideal else 1


if __name__ == "__main__":
    sys.exit(main())

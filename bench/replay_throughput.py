#!/usr/bin/env python3
"""Benchmark: how fast the ideal-network replay runs (figures, not a test).

Generates a synthetic experiment (bench/tracegen.py: a ring halo exchange with
Allreduce and Barrier, imbalanced at random; 17 records per rank and iteration) of
--events events over --ranks ranks, unless it exists, then in this one process, --repeat
times each: reads it as the replay does (load, detail=True), builds the event graph
(analysis/eventgraph.py) and replays it (analysis/replay.py: edges, the longest-path
kernel, the region); and reads it as `perfweave analyze` does and finds its wait states.
Both run as `perfweave analyze` runs (cli/analyze.py keep_freed_memory: freed memory
kept in the process, no huge pages for numpy). Prints seconds and events per second per
core (events / CPU seconds of the process, which a shared machine's other work does not
inflate) for the replay (graph + kernel), and for the wait-state patterns and the whole
analysis against which it is measured; the best run (least disturbed) and the median.
--numpy also times the numpy fallback of the kernel once (its rounds are as many as the
longest path has edges between locations: for small traces only).

    .venv/bin/python bench/replay_throughput.py [--events 20000000] [--ranks 256]
        [--dir /tmp/perfweave-bench-replay] [--repeat 5] [--numpy]
"""

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from analysis_throughput import generated  # noqa: E402

from perfweave.analysis import eventgraph  # noqa: E402
from perfweave.cli.analyze import keep_freed_memory  # noqa: E402
from perfweave.analysis.exchange import Local  # noqa: E402
from perfweave.analysis.longest_path import kernel  # noqa: E402
from perfweave.analysis.replay import replay  # noqa: E402
from perfweave.analysis.waitstates import _patterns  # noqa: E402
from perfweave.analysis.waitstates.load import load  # noqa: E402


def timed(fn, *args, **kw):
    """(result, wall s, CPU s of this process)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - w, time.process_time() - c


def main():
    keep_freed_memory()  # as perfweave analyze does: both analyses run so
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--dir", default="/tmp/perfweave-bench-replay")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--numpy", action="store_true", help="time the numpy kernel once too")
    a = ap.parse_args()
    exp = Path(a.dir)
    size = generated(exp, a.ranks, a.events)
    print(f"trace: {size / 2**20:.0f} MiB on disk; C kernel: {'built' if kernel() else 'absent'}")
    rows = {}

    def note(label, ev, wall, cpu):
        rows.setdefault(label, []).append((cpu, wall))
        print(f"{label:34} {wall:8.3f} {cpu:8.3f} {ev / cpu / 1e6:12.2f}")

    print(f"{'step':34} {'wall s':>8} {'CPU s':>8} {'M events/CPU s':>14}")
    ev = 0
    for _ in range(a.repeat):
        L, w, c = timed(load, exp, Local(0), detail=True)
        ev = L.trace.nevents
        note("load (detail)", ev, w, c)
        g, wg, cg = timed(eventgraph.build, L)
        note("event graph", ev, wg, cg)
        res, wr, cr = timed(replay, g)
        note("replay (edges, C kernel, region)", ev, wr, cr)
        note("REPLAY: graph + kernel", ev, wg + wr, cg + cr)
        if a.numpy and not rows.get("replay with the numpy kernel"):
            _, wn, cn = timed(replay, g, use_c=False)
            note("replay with the numpy kernel", ev, wn, cn)
        del L, g
        L, wl, cl = timed(load, exp, Local(0))
        note("wait states: load", ev, wl, cl)
        _, wp, cp = timed(_patterns, L, Local(0), str(exp), wl)
        note("WAIT STATES: patterns", ev, wp, cp)
        note("wait states: load + patterns", ev, wl + wp, cl + cp)
        del L
        print()
    print(f"ideal runtime {res.t_ideal_s:.3f} s of {res.t_recorded_s:.3f} s recorded")
    for what, pick in (("best", lambda x: x[0]), ("median", lambda x: x[len(x) // 2])):
        line = []
        for label in (
            "REPLAY: graph + kernel",
            "WAIT STATES: patterns",
            "wait states: load + patterns",
        ):
            cpu, wall = pick(sorted(rows[label]))
            line.append(
                f"{label.lower()} {ev / cpu / 1e6:.2f} M events/CPU s ({ev / wall / 1e6:.2f} wall)"
            )
        print(f"{what}: " + "; ".join(line))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: what the clock-condition check adds to `perfweave analyze`, and what
`--correct-clocks` costs (figures, not a test).

On a synthetic experiment (bench/tracegen.py, made unless it exists) this loads the
traces once per run and times, alternating, in one process: the patterns without the
check (the baseline: clockcheck.Check replaced by one that looks at nothing), the patterns
with it (what every analyze does), and the patterns on corrected times
(--correct-clocks). Prints the median of --repeat runs of each and the ratios to the
baseline, and the rates in events per second.

    .venv/bin/python bench/clock_condition.py [--events 2000000] [--ranks 64]
        [--dir /tmp/perfweave-bench-clock] [--repeat 5]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tracegen  # noqa: E402

from perfweave.analysis import waitstates  # noqa: E402
from perfweave.analysis.exchange import Local  # noqa: E402
from perfweave.analysis.waitstates import clockcheck  # noqa: E402
from perfweave.analysis.waitstates.load import load  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--dir", default="/tmp/perfweave-bench-clock")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    exp = Path(a.dir)
    if not exp.exists():
        tracegen.write(exp, a.ranks, a.events)
    real = clockcheck.Check

    class none:
        found = None

        def __init__(self, *args):
            pass

        def result(self, L, ex):
            return 0, {}, []

    cases = {
        "patterns without the check": (none, False),
        "patterns with the check": (real, False),
        "patterns on corrected times": (real, True),
    }
    times = {k: [] for k in cases}
    nev = 0
    for _ in range(a.repeat):
        for name, (fn, correct) in cases.items():
            L = load(exp, Local(0))
            nev = L.trace.nevents
            clockcheck.Check = fn
            t0 = time.perf_counter()
            waitstates._patterns(L, Local(0), str(exp), 0.0, (correct, None))
            times[name].append(time.perf_counter() - t0)
            clockcheck.Check = real
    base = statistics.median(times["patterns without the check"])
    print(f"{nev:,} events, {a.ranks} ranks; median of {a.repeat} runs each, alternating")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:<30} {m:7.3f} s  {nev / m / 1e6:6.1f} M events/s  x{m / base:.2f}")


if __name__ == "__main__":
    main()

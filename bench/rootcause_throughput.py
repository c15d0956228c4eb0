#!/usr/bin/env python3
"""Benchmark: how fast the delay analysis and the critical path run (analysis/
rootcause.py; figures, not a test), against the implementation of another revision (the
baseline, by default main's: `git show REV:python/perfweave/analysis/rootcause.py`,
loaded from a temporary file beside this build's package) on the same event graphs in
the same invocation; and that both give the same results.

Generates synthetic experiments (bench/tracegen.py) of each --events count over --ranks
ranks unless they exist, loads each one's event graph once, then times
`analyze_graph` (wait states, delays, costs, critical path) of this build and of the
baseline, --repeat times each, alternating, and prints events per second per CPU
second (process time: the machine is shared) for the best run, and the ratio. Then
compares the two results (costs, direct / indirect / propagating waits, delays, the
critical path, its profile and imbalance, activity, the what-if savings; floats to 1e-9
relative) and stops
with an error if they differ. --no-baseline times this build only (the baseline takes
~17 s per million events).

    .venv/bin/python bench/rootcause_throughput.py [--events 200000,2000000]
        [--ranks 16,64] [--dir /tmp/perfweave-bench-rootcause] [--repeat 3]
        [--baseline main] [--no-baseline] [--exp EXP ...]
"""

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tracegen  # noqa: E402

from perfweave.analysis import eventgraph, rootcause  # noqa: E402
from perfweave.cli.analyze import keep_freed_memory  # noqa: E402


def baseline_module(rev):
    """rootcause.py of revision rev, imported as a module of its own."""
    src = subprocess.run(
        ["git", "-C", str(HERE.parent), "show", f"{rev}:python/perfweave/analysis/rootcause.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tmp = Path(tempfile.mkdtemp()) / "rootcause_baseline.py"
    tmp.write_text(src)
    spec = importlib.util.spec_from_file_location("rootcause_baseline", tmp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cpu_timed(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def delay_rows(res):
    """(row, path, ns) of either implementation's delays, sorted."""
    d = res.delays
    if isinstance(d, list):  # the earlier form: [(row, span, {path: ns})]
        rows = [(s, p, v) for s, _, per in d for p, v in per.items()]
    else:
        rows = list(zip(d.row.tolist(), d.path.tolist(), d.ns.tolist()))
    return sorted(rows)


def close_dicts(a, b, what):
    if set(a) != set(b):
        return f"{what}: keys differ ({len(set(a) ^ set(b))})"
    bad = [k for k in a if not np.isclose(a[k], b[k], rtol=1e-9, atol=1e-6)]
    return (
        f"{what}: {len(bad)} values differ, e.g. {bad[0]}: {a[bad[0]]} vs {b[bad[0]]}"
        if bad
        else None
    )


def differences(new, old):
    """What differs between two RootCauses, as lines."""
    out = []
    for k in set(new.costs) | set(old.costs):
        out.append(close_dicts(new.costs.get(k, {}), old.costs.get(k, {}), f"costs {k}"))
    for f in ("direct", "indirect", "propagating"):
        if not np.allclose(getattr(new, f), getattr(old, f), rtol=1e-9, atol=1e-6):
            out.append(f"{f} differs")
    for f in ("waiter", "causer", "kind", "omega"):
        if not np.array_equal(getattr(new.waits, f), getattr(old.waits, f)):
            out.append(f"wait states' {f} differ")
    if delay_rows(new) != delay_rows(old):
        out.append("delays differ")
    if [tuple(map(int, s)) for s in new.segments] != [tuple(map(int, s)) for s in old.segments]:
        out.append("critical path segments differ")
    out.append(close_dicts(new.cp_profile, old.cp_profile, "critical-path profile"))
    out.append(close_dicts(new.cp_imbalance, old.cp_imbalance, "critical-path imbalance"))
    out.append(close_dicts(new.activity, old.activity, "activity"))
    return [x for x in out if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="200000,2000000")
    ap.add_argument("--ranks", default="16,64")
    ap.add_argument("--dir", default="/tmp/perfweave-bench-rootcause")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", default="main", metavar="REV")
    ap.add_argument("--no-baseline", dest="baseline", action="store_const", const=None)
    ap.add_argument("--exp", nargs="*", default=[], help="experiments to add (--events '': only)")
    a = ap.parse_args()
    keep_freed_memory()  # as `perfweave analyze` runs
    exps = []
    for ev, nr in zip(filter(None, a.events.split(",")), a.ranks.split(",")):
        exp = Path(a.dir) / f"e{ev}-r{nr}"
        if not (exp / "traces").is_dir():
            tracegen.write(exp, int(nr), int(ev))
        exps.append(exp)
    exps += [Path(x) for x in a.exp]
    old = baseline_module(a.baseline) if a.baseline else None
    failed = False
    for exp in exps:
        g = eventgraph.load_graph(exp)
        n = g.nevents
        new_s, new = cpu_timed(lambda: rootcause.analyze_graph(g), a.repeat)
        calls, waits = len(g.calls["t0"]), len(new.waits)
        print(f"{exp.name}: {n:,} events, {calls:,} calls, {waits:,} wait states")
        print(f"  this build: {new_s:8.3f} s CPU, {n / new_s / 1e6:7.2f} M events/s")
        if old is None:
            continue
        old_s, ref = cpu_timed(lambda: old.analyze_graph(g), max(1, a.repeat // 2))
        print(f"  {a.baseline:10}: {old_s:8.3f} s CPU, {n / old_s / 1e6:7.2f} M events/s")
        print(f"  ratio: {old_s / new_s:.1f}x")
        diff = differences(new, ref)
        sn, so = rootcause.what_if(new), old.what_if(ref)
        if [x[:2] for x in sn] != [x[:2] for x in so] or not np.allclose(
            [x[2] for x in sn], [x[2] for x in so], rtol=1e-9, atol=1e-12
        ):
            diff.append(f"what-if savings differ: {sn} vs {so}")
        print("  results: " + ("the same" if not diff else "DIFFER: " + "; ".join(diff)))
        failed |= bool(diff)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

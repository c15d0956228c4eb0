#!/usr/bin/env python3
"""Benchmark: what the mathlib module adds to a math-library call (figures, not a test).

10^7 calls of ddot_(n=4) through the PLT (bench/programs/ml_ddot.c), timed inside the
program, bare and under `perfweave run` (mathlib on, sampler off), alternating in one
invocation, under each libblas.so.3 alternative found (the reference BLAS and OpenBLAS,
by LD_LIBRARY_PATH). Prints the medians of ns per call, the ns added per wrapped call
(measured - bare; the budget is 25 ns, docs/mathlib.md) and the ratio measured / bare.
With --baseline OTHER_PERFWEAVE (the perfweave command of another build, e.g. a second venv
of an older commit), instead: bare, the baseline build and this one alternating in each
repeat, for one call site of one size class (the previous call's slot hit) and for one of
two size classes alternating (every call looked up in the thread's table), so a change's
cost is measured against the build before it in one invocation.
Usage:
  .venv/bin/python bench/mathlib_overhead.py [--repeat 5] [--calls 10000000]
  .venv/bin/python bench/mathlib_overhead.py --baseline /path/to/old/.venv/bin/perfweave
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
LIB = "/usr/lib/x86_64-linux-gnu"
ALTERNATIVES = {"reference": f"{LIB}/blas", "openblas": f"{LIB}/openblas-pthread"}


def per_call(cmd, env):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return float(next(ln.split()[1] for ln in out.splitlines() if ln.startswith("ns_per_call")))


def compare(args, prog, tmp):
    """This build against args.baseline, under the default libblas.so.3."""
    builds = {"bare": None, "baseline": args.baseline, "this": PERFWEAVE}
    modes = {"one size class": [], "two alternating": ["alternate"]}
    runs = {(m, b): [] for m in modes for b in builds}
    for i in range(args.repeat):
        for mode, extra in modes.items():
            for b, pw in builds.items():
                cmd = [str(prog), str(args.calls), *extra]
                if pw is not None:
                    exp = Path(tmp) / f"exp-{b}-{len(runs[(mode, b)])}-{len(extra)}"
                    cmd = [pw, "run", "--no-sample", "--no-io", "-o", str(exp), "--", *cmd]
                runs[(mode, b)].append(per_call(cmd, dict(os.environ)))
    print(f"ddot_, {args.calls:,} calls, medians of {args.repeat} alternating runs")
    for mode in modes:
        bare, old, new = (statistics.median(runs[(mode, b)]) for b in builds)
        print(
            f"  {mode:16s} bare {bare:6.2f} ns/call   added: baseline {old - bare:6.2f} ns   "
            f"this {new - bare:6.2f} ns   this/baseline {(new - bare) / (old - bare):5.2f}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10_000_000)
    ap.add_argument("--baseline", metavar="PERFWEAVE", help="compare with this build")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "ml_ddot"
        subprocess.run(
            ["gcc", "-O2", "-o", str(prog), str(HERE / "programs" / "ml_ddot.c"), "-lblas"],
            check=True,
        )
        if args.baseline:
            compare(args, prog, tmp)
            return
        print(f"ddot_(n=4), {args.calls:,} calls, medians of {args.repeat} alternating runs")
        for name, path in ALTERNATIVES.items():
            if not os.path.isdir(path):
                print(f"  {name}: {path} missing, skipped")
                continue
            env = {**os.environ, "LD_LIBRARY_PATH": path}
            bare, measured = [], []
            for i in range(args.repeat):
                bare.append(per_call([str(prog), str(args.calls)], env))
                exp = Path(tmp) / f"exp-{name}-{i}"
                cmd = [PERFWEAVE, "run", "--no-sample", "--no-io", "-o", str(exp), "--"]
                measured.append(per_call(cmd + [str(prog), str(args.calls)], env))
            b, m = statistics.median(bare), statistics.median(measured)
            print(
                f"  {name:10s} bare {b:7.2f} ns/call  measured {m:7.2f} ns/call  "
                f"added {m - b:6.2f} ns/call  ratio {m / b:5.2f}"
            )


if __name__ == "__main__":
    main()

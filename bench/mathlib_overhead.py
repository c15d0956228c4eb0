#!/usr/bin/env python3
"""Benchmark: what the mathlib module adds to a math-library call (figures, not a test).

10^7 calls of ddot_(n=4) through the PLT (bench/programs/ml_ddot.c), timed inside the
program, bare and under `perfweave run` (mathlib on, sampler off), alternating in one
invocation, under each libblas.so.3 alternative found (the reference BLAS and OpenBLAS,
by LD_LIBRARY_PATH). Prints the medians of ns per call, the ns added per wrapped call
(measured - bare; the budget is 25 ns, docs/mathlib.md) and the ratio measured / bare.
Usage:
  .venv/bin/python bench/mathlib_overhead.py [--repeat 5] [--calls 10000000]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "ml_ddot"
        subprocess.run(
            ["gcc", "-O2", "-o", str(prog), str(HERE / "programs" / "ml_ddot.c"), "-lblas"],
            check=True,
        )
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
                cmd = [PERFWEAVE, "run", "--no-sample", "-o", str(exp), "--"]
                measured.append(per_call(cmd + [str(prog), str(args.calls)], env))
            b, m = statistics.median(bare), statistics.median(measured)
            print(
                f"  {name:10s} bare {b:7.2f} ns/call  measured {m:7.2f} ns/call  "
                f"added {m - b:6.2f} ns/call  ratio {m / b:5.2f}"
            )


if __name__ == "__main__":
    main()

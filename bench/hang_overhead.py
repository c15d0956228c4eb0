#!/usr/bin/env python3
"""Benchmark: what --hang and the snapshot thread cost per MPI call (figures, not a test).

For each MPI library, in one invocation, alternating within each repeat: the cheap calls
of bench/programs/cheap_calls.c and the app-like message-heavy program (bench/programs/
msg_heavy.c) bare, under the MPI profile with snapshots off (--snapshot-poll 0: the
baseline), with them on (the default, one poll a second), and with --hang 60 on top.
Prints the ns per call each adds over the baseline and the app-like program's ratio to it.
Usage:
  .venv/bin/python bench/hang_overhead.py [--repeat 5] [--mpi openmpi,mpich] [--calls N]
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mpi_overhead import CHEAP, FLAVORS, alternate, bench_args, build, median_of  # noqa: E402

VARIANTS = {
    "bare": None,
    "baseline": ("--no-sample", "--snapshot-poll", "0"),
    "snapshots": ("--no-sample",),
    "hang": ("--no-sample", "--hang", "60"),
}


def main():
    args = bench_args(__doc__, repeat=5, calls=1000000, steps=20000)
    print(f"perfweave --hang and snapshot thread overhead: {args.repeat} runs each, medians")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for flavor in args.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            progs = {
                "cheap": [str(build(cc, "cheap_calls", tmp)), str(args.calls)],
                "app": [str(build(cc, "msg_heavy", tmp)), "app", str(args.steps)],
            }
            runs = alternate(launch, progs, VARIANTS, args.repeat, tmp)
            print(f"\n[{flavor}] ns per call (median); added over the baseline (--snapshot-poll 0)")
            for key, label in CHEAP:
                base = median_of(runs[("cheap", "baseline")], key)
                line = f"  {label:28s} baseline {base:7.1f}"
                for v in ("snapshots", "hang"):
                    t = median_of(runs[("cheap", v)], key)
                    line += f"   {v} {t - base:+6.1f} (ratio {t / base:5.3f})"
                print(line)
            base = median_of(runs[("app", "baseline")], "elapsed_s")
            line = f"  message-heavy, app-like: baseline {base:.3f} s"
            for v in ("bare", "snapshots", "hang"):
                line += f"   {v} ratio {median_of(runs[('app', v)], 'elapsed_s') / base:.4f}"
            print(line)


if __name__ == "__main__":
    main()

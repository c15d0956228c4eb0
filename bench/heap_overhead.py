#!/usr/bin/env python3
"""Benchmark: what the heap module (--heap) adds to allocations (figures, not a test).

bench/programs/heap_pairs.c, timed inside the program by the thread's CPU time (others' work
on the machine does not count), bare, under `perfweave run --heap --no-sample
--node-interval 0`, under `--heap --heap-sample-bytes 524288`, and under heaptrack (when installed:
its LD_PRELOAD collector writing to a temporary file), alternating in one invocation,
--repeat rounds (and under `perfweave run` without --heap: the wrappers are in every
measured process, passing calls on): the ns a malloc(64)/free pair costs from one call site
(the budget: 50 ns added, with the site found by its cached call-path key), the same in
--threads threads allocating at once (each thread's CPU time per pair), the ns of the first
allocation from a new call-path key (one path from --depths stack addresses; the budget: 150
ns added, the path unwound once), and the peak RSS after holding --live MiB in 64 KiB blocks
(the budget: 5 % + 8 MiB added). Prints medians and each column's difference to the bare
run's median. --against PERFWEAVE adds `--heap` under another installation's perfweave
(e.g. main's, to measure a change of the module in the same invocation: a pair from one
call site also opens and closes its site's live interval every time).
Usage:
  .venv/bin/python bench/heap_overhead.py [--repeat 5] [--pairs 10000000] [--depths 2000]
      [--live 256] [--threads 2] [--against OTHER/.venv/bin/perfweave]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
KEYS = ("pair_ns", "thread_pair_ns", "unwind_ns", "maxrss_kib")


def values(cmd, cwd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=cwd).stdout
    got = dict(ln.split() for ln in out.splitlines() if ln.split()[:1] and ln.split()[0] in KEYS)
    return {k: float(got[k]) for k in KEYS}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=10_000_000)
    ap.add_argument("--depths", type=int, default=2000)
    ap.add_argument("--live", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--against", help="another installation's perfweave executable")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pw-heap-bench-"))
    prog = tmp / "heap_pairs"
    src = HERE / "programs" / "heap_pairs.c"
    subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", str(prog), str(src)], check=True)
    argv = [str(prog), str(args.pairs), str(args.depths), str(args.live), str(args.threads)]
    run = [PERFWEAVE, "run", "--no-sample", "--node-interval", "0", "-o"]
    sampled = ["--heap", "--heap-sample-bytes", "524288", "--", *argv]
    modes = {
        "bare": lambda i: argv,
        "perfweave run, no --heap": lambda i: [*run, str(tmp / f"o{i}"), "--", *argv],
        "--heap": lambda i: [*run, str(tmp / f"h{i}"), "--heap", "--", *argv],
        "--heap sampled 512K": lambda i: [*run, str(tmp / f"s{i}"), *sampled],
    }
    if args.against:
        other = [args.against, *run[1:]]
        modes["--heap, --against"] = lambda i: [*other, str(tmp / f"a{i}"), "--heap", "--", *argv]
    heaptrack = shutil.which("heaptrack")
    if heaptrack:
        modes["heaptrack"] = lambda i: [heaptrack, "-o", str(tmp / f"ht{i}"), *argv]
    else:
        print("heaptrack: not installed (apt-get install heaptrack): no column")
    got = {m: [] for m in modes}
    for i in range(args.repeat):
        for m, cmd in modes.items():
            got[m].append(values(cmd(i), tmp))
    base = {k: statistics.median(r[k] for r in got["bare"]) for k in KEYS}
    print(f"{'mode':26} {'pair ns':>9} {'added':>8} {'threads ns':>11} {'added':>8} "
          f"{'new path ns':>12} {'added':>8} {'peak RSS MiB':>13} {'added':>8}")  # fmt: skip
    for m, rows in got.items():
        med = {k: statistics.median(r[k] for r in rows) for k in KEYS}
        print(
            f"{m:26} {med['pair_ns']:9.1f} {med['pair_ns'] - base['pair_ns']:8.1f} "
            f"{med['thread_pair_ns']:11.1f} "
            f"{med['thread_pair_ns'] - base['thread_pair_ns']:8.1f} "
            f"{med['unwind_ns']:12.1f} {med['unwind_ns'] - base['unwind_ns']:8.1f} "
            f"{med['maxrss_kib'] / 1024:13.1f} "
            f"{(med['maxrss_kib'] - base['maxrss_kib']) / 1024:8.1f}"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    os.sync()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: what each of perfweave's modes costs, measured by `perfweave overhead`
(figures, not a test; docs/overhead.md says how they are measured).

For each MPI library, bench/programs/msg_heavy.c app-like (4 KiB halo exchanges, ~20 us
of computation per step) on 2 ranks, bare and under the --modes, interleaved, --repeat
rounds: the wall ratio to bare with its 95 % interval, the time and the peak resident set
added, the experiment's bytes (raw, compressed, per trace event) and ns added per
wrapped call; printed as one Markdown table per MPI (docs/performance.md's), and the
JSON documents and SVG figures written to --out when given. The trace mode runs with
--trace-buffer 1 MiB (--run-options) so that the bytes per event are those of filled
blocks rather than of one 8 MiB block's unused end.
Usage:
  .venv/bin/python bench/overhead_modes.py [--repeat 5] [--mpi openmpi,mpich]
      [--modes profile,samples,trace,io] [--steps 20000] [--out DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mpi_overhead import FLAVORS, PERFWEAVE, build  # noqa: E402


def table(doc):
    """The Markdown rows of one JSON document of perfweave overhead."""
    rows = [
        "| mode | wall ratio [95 % interval] | added | RSS added | data: raw, on disk (gzip) "
        "| B/event "
        "| ns/call added | TVD |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for v in doc["variants"]:
        lo, hi = v["ratio_interval"]
        b = v["bytes"] or {}
        cal = "; ".join(f"{m} {c['added_ns']:.1f}" for m, c in v["ns_per_call"].items())
        per_event = b.get("bytes_per_event")
        ratio = f"{v['ratio']:.3f}" if v["resolvable"] else f"n.r. ({v['ratio']:.3f})"
        rows.append(
            f"| {v['name']} | {ratio} [{lo:.3f}, {hi:.3f}] | {1e3 * v['added_s']:.0f} ms "
            f"| {v['peak_rss_added_mib']:+.1f} MiB | {b.get('raw', 0) / 1024:.0f} KiB, "
            f"{b.get('allocated', 0) / 1024:.0f} KiB ({b.get('compressed', 0) / 1024:.0f} KiB) "
            f"| {f'{per_event:.1f}' if per_event else '-'} | {cal or '-'} "
            f"| {v['tvd_to_reference']:.3f} |"
        )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mpi", default=",".join(FLAVORS))
    ap.add_argument("--modes", default="profile,samples,trace,io")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    print(f"perfweave overhead of each mode: {args.repeat} rounds, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        for flavor in args.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            heavy = build(cc, "msg_heavy", Path(tmp))
            plot = args.out / f"overhead-{flavor}.svg" if args.out else Path(tmp) / "o.svg"
            cmd = [PERFWEAVE, "overhead", "--json", "--modes", args.modes, "-n", str(args.repeat)]
            cmd += ["--run-options", "--trace-buffer 1048576", "--plot", str(plot)]
            cmd += ["--", *launch, str(heavy), "app", str(args.steps)]
            res = subprocess.run(
                cmd, capture_output=True, text=True, env={**env, "MPICC": cc}, check=True
            )
            doc = json.loads(res.stdout)
            if args.out:
                (args.out / f"overhead-{flavor}.json").write_text(res.stdout)
            bare = doc["bare"]
            print(
                f"\n[{flavor}] bare {bare['wall_s']:.3f} s (spread {100 * bare['spread']:.1f} %), "
                f"peak RSS {bare['peak_rss_mib']:.1f} MiB per process; perturbation "
                f"reference {doc['perturbation']['reference']}"
            )
            print("\n".join(table(doc)))


if __name__ == "__main__":
    main()

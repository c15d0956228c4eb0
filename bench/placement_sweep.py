#!/usr/bin/env python3
"""Benchmark: `perfweave placement sweep` on a program of a streaming kernel and a
TLB-bound random walk (figures, not a test).

tests/runtime/programs/placement_kernels.c (8 arrays of 3 MiB summed in streams, 4 arrays
of 16 MiB walked at random, dependent loads) swept --sweeps times under huge-page
emulation, each sweep -r rounds interleaved (all-slow, all-fast, each range, the top
site). The fast tier: perfweave's arenas on the hugetlb pages the sweep reserves (as
root, none reserved before), or with --thp on transparent huge pages (madvise; the bench
reserves one huge page for the sweeps' duration, so that the sweep finds too few and
reserves none). Prints each sweep's table, the kernel's compaction and THP counters over
it (/proc/vmstat, the whole machine's) and, over the sweeps, how often the walk's range
(16 MiB-32 MiB) ranked first of the ranges and was judged "helps", with the speedups'
medians: the ranking issue 36 asks for (docs/performance.md "Placement sweep").
Usage:
  .venv/bin/python bench/placement_sweep.py [--sweeps 5] [-r 3] [--time cpu|wall] [--thp]
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
WALK, STREAM = "16 MiB-32 MiB", "2 MiB-4 MiB"
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
VMSTAT = (
    "compact_stall",
    "compact_fail",
    "compact_success",
    "thp_fault_alloc",
    "thp_fault_fallback",
)


def vmstat():
    with open("/proc/vmstat") as f:
        pairs = (line.split() for line in f)
        return {k: int(v) for k, v in pairs if k in VMSTAT}


def set_huge_pages(n):
    with open(NR_HUGEPAGES, "w") as f:
        f.write(f"{n}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--time", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--thp", action="store_true", help="transparent huge pages, not hugetlb")
    args = ap.parse_args()
    import perfweave

    tmp = Path(tempfile.mkdtemp(prefix="pw-sweep-bench-"))
    if args.thp:
        set_huge_pages(1)
    try:
        prog = tmp / "placement_kernels"
        src = ROOT / "tests" / "runtime" / "programs" / "placement_kernels.c"
        subprocess.run(["gcc", "-O2", "-g", "-o", str(prog), str(src)], check=True)
        first, helps, walk_s, stream_s = 0, 0, [], []
        for k in range(args.sweeps):
            out = tmp / f"sweep{k}"
            cmd = [PERFWEAVE, "placement", "sweep", "-r", str(args.r), "--sites", "1"]
            cmd += ["--time", args.time, "--tier-emulate", "hugepage", "-o", str(out)]
            before = vmstat()
            res = subprocess.run(
                cmd + ["--", str(prog), str(tmp / "counts.txt")], capture_output=True, text=True
            )
            if res.returncode != 0:
                sys.exit(f"sweep {k + 1} failed: {res.stderr.strip()}")
            print(res.stdout)
            after = vmstat()
            print("  /proc/vmstat over the sweep:", {k: after[k] - before[k] for k in after})
            rows = perfweave.open(out).table("rows").set_index("label")
            ranges = rows[rows["kind"] == "range"].sort_values("rank")
            first += list(ranges.index)[0] == WALK
            helps += rows.loc[WALK, "verdict"] == "helps"
            walk_s.append(float(rows.loc[WALK, "speedup"]))
            stream_s.append(float(rows.loc[STREAM, "speedup"]))
        n = args.sweeps
        how = "transparent huge pages (madvise)" if args.thp else "hugetlb pages"
        print(
            f"over {n} sweeps ({args.r} rounds each, --time {args.time}, {how}): the walk's range "
            f"first in {first}, judged helps in {helps}; median speedup walk "
            f"{statistics.median(walk_s):.3f}, streaming {statistics.median(stream_s):.3f}"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if args.thp:
            set_huge_pages(0)


if __name__ == "__main__":
    main()

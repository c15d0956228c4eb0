#!/usr/bin/env python3
"""Benchmark: what PAPI counters at MPI call boundaries, the node sampler and call-stack
sampling cost (figures, not a test).

On 2 ranks, alternating the variants in each repeat (medians printed):
  bare                      the program alone
  profile                   perfweave run --node-interval 0 (the MPI profile only)
  profile + node sampler    perfweave run (default: node timeline every 100 ms)
  profile + counters        --node-interval 0 --counters perf::TASK-CLOCK,perf::PAGE-FAULTS
  profile + sampling        --node-interval 0 --sample (10 ms, the default interval)
for bench/programs/msg_heavy.c (app-like and worst case, overhead of the program's own
MPI_Init..MPI_Finalize time against bare) and cheap_calls.c (ns added per MPI_Comm_rank);
and the node sampler thread's CPU time as the timeline records it.
    .venv/bin/python bench/counters_overhead.py [--repeat 5] [--mpi openmpi]
"""

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mpi_overhead import FLAVORS, bench_args, build, median_of, run  # noqa: E402

COUNTERS = "perf::TASK-CLOCK,perf::PAGE-FAULTS"
VARIANTS = {
    "bare": None,
    "profile": ["--node-interval", "0", "--no-sample", "--no-io"],
    "profile + node sampler": ["--no-sample", "--no-io"],
    "profile + counters": [
        *("--node-interval", "0", "--no-sample", "--no-io", "--counters", COUNTERS)
    ],
    "profile + sampling": ["--node-interval", "0", "--sample"],
}


def sampler_cpu(exp):
    files = list((Path(exp) / "timeline").glob("*.json"))
    if not files:
        return None
    m = json.loads(files[0].read_text())
    dur = (m["t_last"] - m["t_first"]) / 1e9
    return m["sampler_cpu_ns"] / 1e9, dur, m["ticks"]


def main():
    a = bench_args(__doc__, mpi="openmpi", calls=300000)
    print(
        f"perfweave counters/node-sampler overhead: {a.repeat} runs each, medians; "
        f"{os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for flavor in a.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            cheap, heavy = build(cc, "cheap_calls", tmp), build(cc, "msg_heavy", tmp)
            progs = {
                "cheap": [str(cheap), str(a.calls)],
                "app": [str(heavy), "app", str(a.steps)],
                "tiny": [str(heavy), "tiny", str(a.tiny_steps)],
            }
            runs = {(p, v): [] for p in progs for v in VARIANTS}
            for _ in range(a.repeat):
                for p, args in progs.items():
                    for v, opts in VARIANTS.items():
                        runs[(p, v)].append(run(launch + args, opts is not None, tmp, opts or ()))
            print(f"\n[{flavor}]")
            b = median_of(runs[("cheap", "bare")], "comm_rank_ns")
            for v in list(VARIANTS)[1:]:
                x = median_of(runs[("cheap", v)], "comm_rank_ns")
                print(
                    f"  MPI_Comm_rank, {v:24s} {x:8.1f} ns/call (bare {b:.1f}): "
                    f"added {x - b:7.1f} ns/call"
                )
            for p, label in (
                ("app", "message-heavy, app-like"),
                ("tiny", "message-heavy, worst case"),
            ):
                b = median_of(runs[(p, "bare")], "elapsed_s")
                print(f"  {label}: bare {b:.3f} s")
                for v in list(VARIANTS)[1:]:
                    x = median_of(runs[(p, v)], "elapsed_s")
                    print(f"    {v:24s} {x:.3f} s  overhead {100 * (x / b - 1):+.2f} %")
            cpu = [sampler_cpu(r["exp"]) for r in runs[("app", "profile + node sampler")]]
            cpu = [c for c in cpu if c]
            if cpu:
                c, d, n = sorted(cpu)[len(cpu) // 2]
                print(
                    f"  node sampler thread: {c * 1e3:.1f} ms CPU over {d:.2f} s "
                    f"({n} samples, {c / max(n, 1) * 1e6:.0f} us each, "
                    f"{100 * c / d:.2f} % of one core)"
                )


if __name__ == "__main__":
    main()

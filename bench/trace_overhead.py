#!/usr/bin/env python3
"""Benchmark: what perfweave run --trace costs (figures, not a test).

For each MPI library, in one invocation and alternating bare, profiled and traced
runs of the message-heavy programs of bench/programs/msg_heavy.c on 2 ranks:
  - run-time overhead of --trace against the bare run (the program's own
    MPI_Init..MPI_Finalize time) and against the profile alone;
  - events written per rank and second, bytes per event (the events files, whose
    blocks' unused ends count, and with the rank's JSON definitions);
  - the time perfweave analyze takes on the trace, as a fraction of the traced run.
With --baseline PERFWEAVE (another build's perfweave command, e.g. /work/main/.venv/bin/
perfweave), its --trace runs alternate with the others, and the bytes per event of its
trace and this build's are printed side by side, with their ratio (this build's reader
reads both).
Medians over --repeat runs. Usage:
  .venv/bin/python bench/trace_overhead.py [--repeat 5] [--mpi openmpi,mpich]
      [--baseline PERFWEAVE]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mpi_overhead import FLAVORS, PERFWEAVE, bench_args, build, run  # noqa: E402

from perfweave.analysis.overhead import experiment_facts  # noqa: E402


def main():
    args = bench_args(__doc__, baseline=True)
    print(
        f"perfweave trace overhead benchmark: {args.repeat} runs each, medians; "
        f"{os.cpu_count()} cores"
    )
    modes = {
        "bare": (False, (), PERFWEAVE),
        "profile": (True, ("--no-sample", "--no-io"), PERFWEAVE),
        "trace": (True, ("--trace", "--no-sample", "--no-io"), PERFWEAVE),
    }
    if args.baseline:
        modes["baseline"] = (True, ("--trace", "--no-sample"), args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for flavor in args.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            heavy = build(cc, "msg_heavy", tmp)
            print(f"\n[{flavor}]")
            for prog, steps, label in (
                ("app", args.steps, "message-heavy, app-like"),
                ("tiny", args.tiny_steps, "message-heavy, worst case"),
            ):
                runs = {m: [] for m in modes}
                for _ in range(args.repeat):
                    for mode, (measured, opts, pw) in modes.items():
                        runs[mode].append(
                            run(launch + [str(heavy), prog, str(steps)], measured, tmp, opts, pw)
                        )
                t = {m: statistics.median(r["elapsed_s"] for r in runs[m]) for m in modes}
                exp = runs["trace"][-1]["exp"]
                # the events files hold whole blocks: the unused end of each thread's last
                # block counts in their size (it is allocated on disk)
                facts = experiment_facts(exp)
                records, ev_bytes = facts["trace_events"], facts["trace_bytes"]
                js_bytes = facts["by_entry"]["traces"] - ev_bytes
                per_rank = records / 2
                t0 = time.perf_counter()
                res = subprocess.run(
                    [PERFWEAVE, "analyze", "--json", "--no-save", exp],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                analyse_s = time.perf_counter() - t0
                found = {m["id"]: m["total"] for m in json.loads(res.stdout)["metrics"]}
                print(
                    f"  {label}: bare {t['bare']:.3f} s, profile {t['profile']:.3f} s "
                    f"({100 * (t['profile'] / t['bare'] - 1):+.2f} %), trace "
                    f"{t['trace']:.3f} s ({100 * (t['trace'] / t['bare'] - 1):+.2f} % vs bare, "
                    f"{100 * (t['trace'] / t['profile'] - 1):+.2f} % vs profile)"
                )
                print(
                    f"    {records:,} events ({per_rank / t['trace'] / 1e6:.2f} M events/s per "
                    f"rank); {ev_bytes / records:.1f} bytes/event in the events files, "
                    f"{(ev_bytes + js_bytes) / records:.1f} with the JSON definitions"
                )
                if args.baseline:
                    base = experiment_facts(runs["baseline"][-1]["exp"])
                    b_records, b_bytes = base["trace_events"], base["trace_bytes"]
                    print(
                        f"    baseline build: trace {t['baseline']:.3f} s "
                        f"({100 * (t['baseline'] / t['bare'] - 1):+.2f} % vs bare), "
                        f"{b_records:,} events, {b_bytes / b_records:.1f} bytes/event in "
                        f"the events files; this build / baseline: "
                        f"{ev_bytes / records / (b_bytes / b_records):.2f} bytes/event, "
                        f"{t['trace'] / t['baseline']:.3f} run time"
                    )
                print(
                    f"    perfweave analyze: {analyse_s:.2f} s "
                    f"({100 * analyse_s / t['trace']:.0f} % of the traced run; "
                    f"{records / analyse_s / 1e6:.2f} M events/s incl. start-up); "
                    f"Late Sender {found['mpi_latesender']:.3f} s, "
                    f"Wait at N x N {found['mpi_wait_nxn']:.3f} s"
                )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: what call-stack sampling (on by default) costs (figures, not a test).

On 2 ranks, alternating the variants in each repeat:
  bare          the program alone
  no-sample     perfweave run --no-sample (MPI profile, node timeline)
  sampled       perfweave run (the defaults: 10 ms jittered, 1000 per thread, libunwind
                when installed)
for bench/programs/msg_heavy.c app-like (4 KiB halos, ~20 us compute per step) and
worst case (64 B messages, almost no compute); time = the program's own
MPI_Init..MPI_Finalize (rank 0's MPI_Wtime). Prints best and median of the repeats and the
ratios sampled/bare and sampled/no-sample (of the medians, and of the bests).
Then the cost of one sample, less noisy: bench/programs/compute_chain.c (-O2
-fomit-frame-pointer) counts blocks of work for 2 s of wall time, sampled every 1 ms
(libunwind, and --no-sample-libunwind) against --no-sample: the blocks lost per second
give the microseconds each of the ~1000 samples took.
With --baseline OTHER_PERFWEAVE (the perfweave command of another build, e.g. a second
venv of an older commit), each sampled variant runs under that build too, alternating in
each repeat, so a change's cost is measured against the build before it in one invocation.
    .venv/bin/python bench/sampling_overhead.py [--repeat 7] [--mpi openmpi]
    .venv/bin/python bench/sampling_overhead.py --baseline /path/to/old/.venv/bin/perfweave
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mpi_overhead import FLAVORS, alternate, bench_args, build, median_of  # noqa: E402

VARIANTS = {"bare": None, "no-sample": ["--no-sample", "--no-io"], "sampled": ["--no-io"]}


def with_baseline(variants, baseline, sampled):
    """The variants, and with a baseline build the sampled ones also under it, as "NAME
    (baseline)" right before this build's; and {variant: perfweave command} of those."""
    out, builds = {}, {}
    for v, opts in variants.items():
        if baseline and v in sampled:
            out[f"{v} (baseline)"] = opts
            builds[f"{v} (baseline)"] = baseline
        out[v] = opts
    return out, builds


def main():
    a = bench_args(__doc__, repeat=7, mpi="openmpi", steps=40000, baseline=True)
    print(
        f"perfweave sampling overhead: {a.repeat} runs of each variant, alternating; "
        f"{os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for flavor in a.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            heavy = build(cc, "msg_heavy", tmp)
            progs = {
                "message-heavy, app-like": [str(heavy), "app", str(a.steps)],
                "message-heavy, worst case": [str(heavy), "tiny", str(a.tiny_steps)],
            }
            variants, builds = with_baseline(VARIANTS, a.baseline, ["sampled"])
            runs = alternate(launch, progs, variants, a.repeat, tmp, builds)
            print(f"\n[{flavor}]")
            for p in progs:
                if a.baseline:
                    old, new = (
                        median_of(runs[(p, v)], "elapsed_s")
                        for v in ("sampled (baseline)", "sampled")
                    )
                    print(f"  {p}: sampled, this build / baseline: median {new / old:.3f}")
                best = {v: min(r["elapsed_s"] for r in runs[(p, v)]) for v in VARIANTS}
                med = {v: median_of(runs[(p, v)], "elapsed_s") for v in VARIANTS}
                print(
                    f"  {p}: "
                    + ", ".join(f"{v} {med[v]:.3f} s (best {best[v]:.3f})" for v in VARIANTS)
                )
                for base in ("bare", "no-sample"):
                    print(
                        f"    sampled / {base:9s}: median {med['sampled'] / med[base]:.3f}"
                        f", best {best['sampled'] / best[base]:.3f}"
                    )

        per_sample(tmp, a.repeat, a.baseline)


def per_sample(tmp, repeat, baseline=None):
    exe = tmp / "compute_chain"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-fomit-frame-pointer",
            "-o",
            str(exe),
            str(HERE / "programs" / "compute_chain.c"),
        ],
        check=True,
    )
    fast = ["--node-interval", "0", "--sample-interval-ms", "1"]
    variants = {
        "no-sample": ["--no-sample"],
        "libunwind": fast,
        "frame pointers": fast + ["--no-sample-libunwind"],
    }
    variants, builds = with_baseline(variants, baseline, ("libunwind", "frame pointers"))
    runs = alternate([], {"chain": [str(exe), "2"]}, variants, repeat, tmp, builds)
    base = median_of(runs[("chain", "no-sample")], "blocks")
    print(f"\n[cost per sample, 1 ms sampling, 2 s of compute] no-sample {base:.0f} blocks")
    for v in (v for v in variants if v != "no-sample"):
        x = median_of(runs[("chain", v)], "blocks")
        lost = 1 - x / base  # of each second; ~1000 samples per second
        print(
            f"  {v:26s} {x:.0f} blocks: {100 * lost:+.2f} % = {1000 * lost:.1f} us per "
            f"sample (at the default 10 ms: {10 * lost:+.3f} %)"
        )


if __name__ == "__main__":
    main()

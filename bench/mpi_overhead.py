#!/usr/bin/env python3
"""Benchmark: what perfweave's MPI profile costs (figures, not a test).

For each MPI library, in one invocation and alternating bare and measured runs:
  1. ns added per wrapped call, for a cheap call (MPI_Comm_rank; from one call site,
     and from two in turn, which finds its site by hashing), a 0-byte MPI_Allreduce
     on 2 ranks and a 0-byte MPI_Sendrecv to the rank itself: per-call time measured
     inside the program, under perfweave minus bare;
  2. wall-time overhead on message-heavy programs on 2 ranks (bench/programs/
     msg_heavy.c): an application-like step (4 KiB halo exchanges, ~20 us of
     computation, an Allreduce every 10 steps) and the worst case (64-byte
     exchanges with next to no computation), as the ratio of the program's own
     MPI_Init..MPI_Finalize time, measured / bare, and of the whole launch.
Medians over --repeat runs. With --baseline OTHER_PERFWEAVE (the perfweave command of
another build, e.g. a second venv of an older commit), instead: the cheap calls and the
app-like program bare, under the baseline build and under this one, alternating in each
repeat, so a change's cost is measured against the build before it in one invocation.
Usage:
  .venv/bin/python bench/mpi_overhead.py [--repeat 5] [--mpi openmpi,mpich]
  .venv/bin/python bench/mpi_overhead.py --baseline /path/to/old/.venv/bin/perfweave
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
FLAVORS = {
    "openmpi": ("mpicc.openmpi", ["mpirun.openmpi", "--oversubscribe", "-n", "2"]),
    "mpich": ("mpicc.mpich", ["mpirun.mpich", "-n", "2"]),
}


# cheap_calls.c's figures: key, label
CHEAP = (
    ("comm_rank_ns", "MPI_Comm_rank"),
    ("comm_rank_2sites_ns", "MPI_Comm_rank, 2 sites"),
    ("allreduce0_ns", "MPI_Allreduce 0 B, 2 ranks"),
    ("sendrecv_self0_ns", "MPI_Sendrecv 0 B to self"),
)


def build(cc, name, out):
    exe = out / f"{name}-{cc}"
    subprocess.run([cc, "-O2", "-o", str(exe), str(HERE / "programs" / f"{name}.c")], check=True)
    return exe


def run(cmd, measured, tmp, options=("--no-sample", "--no-io"), perfweave=PERFWEAVE):
    """cmd, alone or under `perfweave run OPTIONS` (default: the MPI profile, no
    sampling) of the perfweave command given"""
    exp = None
    if measured:
        exp = tempfile.mkdtemp(dir=tmp, prefix="exp")
        shutil.rmtree(exp)
        cmd = [perfweave, "run", "-o", exp, *options, "--"] + cmd
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    values = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    values["wall_s"] = wall
    if exp:
        values["exp"] = exp
    return values


def footprint(exp):
    """Size of the experiment and memory of the runtime's call-site tables."""
    from perfweave.readers.profile import read_profile

    pf = read_profile(Path(exp) / "profile.pwprof")
    size = sum(p.stat().st_size for p in Path(exp).rglob("*") if p.is_file())
    ranks = pf.arrays["ranks"]
    return (
        size,
        int(ranks["table_resident"].max()),
        int(ranks["table_bytes"].max()),
        len(pf.arrays["sites"]),
    )


def alternate(launch, progs, variants, repeat, tmp, builds=None):
    """{(prog, variant): [run values]}: each program under each variant (None: bare, else
    perfweave run options), the variants alternating within each of the repeats; builds:
    {variant: perfweave command} of variants run under another build than this one."""
    runs = {(p, v): [] for p in progs for v in variants}
    for _ in range(repeat):
        for p, args in progs.items():
            for v, opts in variants.items():
                pw = (builds or {}).get(v, PERFWEAVE)
                runs[(p, v)].append(run(launch + args, opts is not None, tmp, opts or (), pw))
    return runs


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def bench_args(doc, repeat=5, mpi=",".join(FLAVORS), steps=20000, calls=None, baseline=False):
    """The options the overhead benchmarks share (--repeat, --mpi, --steps, --tiny-steps,
    and --calls where calls is given), parsed; Open MPI allowed to run as root."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--mpi", default=mpi)
    if calls is not None:
        ap.add_argument("--calls", type=int, default=calls)
    ap.add_argument("--steps", type=int, default=steps, help="steps of the app-like program")
    ap.add_argument("--tiny-steps", type=int, default=100000)
    if baseline:
        ap.add_argument("--baseline", metavar="PERFWEAVE", help="compare with this build")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return ap.parse_args()


def compare(args, tmp):
    """This build against args.baseline: bare, baseline and this build alternating."""
    builds = {"bare": None, "baseline": args.baseline, "this": PERFWEAVE}
    for flavor in args.mpi.split(","):
        cc, launch = FLAVORS[flavor]
        cheap = build(cc, "cheap_calls", tmp)
        heavy = build(cc, "msg_heavy", tmp)
        progs = {
            "cheap": [str(cheap), str(args.calls)],
            "app": [str(heavy), "app", str(args.steps)],
        }
        runs = {(p, b): [] for p in progs for b in builds}
        for _ in range(args.repeat):
            for p, argv in progs.items():
                for b, pw in builds.items():
                    runs[(p, b)].append(run(launch + argv, pw is not None, tmp, perfweave=pw))
        print(f"\n[{flavor}] ns added per call (median), baseline -> this build")
        for key, label in CHEAP:
            bare, old, new = (median_of(runs[("cheap", b)], key) for b in builds)
            print(
                f"  {label:28s} bare {bare:7.1f} ns   added: baseline {old - bare:7.1f} ns   "
                f"this {new - bare:7.1f} ns"
            )
        bare, old, new = (median_of(runs[("app", b)], "elapsed_s") for b in builds)
        print(
            f"  message-heavy, app-like: bare {bare:.3f} s   overhead: baseline "
            f"{100 * (old / bare - 1):+.2f} %   this {100 * (new / bare - 1):+.2f} %"
        )


def main():
    args = bench_args(__doc__, calls=1000000, baseline=True)
    if args.baseline:
        print(f"perfweave MPI overhead, this build against {args.baseline}: {args.repeat} runs")
        with tempfile.TemporaryDirectory() as tmp:
            compare(args, Path(tmp))
        return
    print(
        f"perfweave MPI overhead benchmark: {args.repeat} runs each, medians; "
        f"{os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for flavor in args.mpi.split(","):
            cc, launch = FLAVORS[flavor]
            cheap = build(cc, "cheap_calls", tmp)
            heavy = build(cc, "msg_heavy", tmp)
            runs = {(p, m): [] for p in ("cheap", "app", "tiny") for m in (False, True)}
            for _ in range(args.repeat):
                for m in (False, True):
                    runs[("cheap", m)].append(run(launch + [str(cheap), str(args.calls)], m, tmp))
                    runs[("app", m)].append(
                        run(launch + [str(heavy), "app", str(args.steps)], m, tmp)
                    )
                    runs[("tiny", m)].append(
                        run(launch + [str(heavy), "tiny", str(args.tiny_steps)], m, tmp)
                    )
            print(f"\n[{flavor}]")
            for key, label in CHEAP:
                b = median_of(runs[("cheap", False)], key)
                p = median_of(runs[("cheap", True)], key)
                print(
                    f"  {label:28s} bare {b:9.1f} ns/call   perfweave {p:9.1f} ns/call   "
                    f"added {p - b:7.1f} ns/call   ratio {p / b:5.2f}"
                )
            for prog, steps, every, label in (
                ("app", args.steps, 10, "message-heavy, app-like"),
                ("tiny", args.tiny_steps, 50, "message-heavy, worst case"),
            ):
                b = median_of(runs[(prog, False)], "elapsed_s")
                p = median_of(runs[(prog, True)], "elapsed_s")
                calls = steps * 2 + steps // every
                rate = calls / b
                print(
                    f"  {label} ({calls} calls/rank, {rate / 1e3:.0f}k calls/s): "
                    f"bare {b:.3f} s  perfweave {p:.3f} s  overhead {100 * (p / b - 1):+.2f} %"
                )
                b = median_of(runs[(prog, False)], "wall_s")
                p = median_of(runs[(prog, True)], "wall_s")
                print(
                    f"    whole launch (mpirun to exit): bare {b:.3f} s  perfweave {p:.3f} s  "
                    f"overhead {100 * (p / b - 1):+.2f} %"
                )
                size, resident, reserved, nsites = footprint(runs[(prog, True)][-1]["exp"])
                print(
                    f"    experiment {size} bytes ({nsites} site rows); call-site tables "
                    f"{resident / 1024:.0f} KiB resident per rank ({reserved / 1024:.0f} KiB "
                    "reserved)"
                )


if __name__ == "__main__":
    main()

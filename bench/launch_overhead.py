#!/usr/bin/env python3
"""Benchmark: the launch path's fixed cost (figures, not a test).

A trivial 2-rank MPI job (bench/programs/trivial_mpi.c: MPI_Init, MPI_Finalize) run bare
and under `perfweave run` (default options), alternating in each of --repeat rounds, in
one invocation; and, to split the cost, the command perfweave launched run directly with
perfweave's environment ("runtime alone": what the runtime costs in the ranks and
launcher, without perfweave run's own start and end), and the same with the I/O profile
off ("runtime alone, --no-io": the I/O profile's part of the fixed cost, a store per
process, by the difference of the two). Prints per MPI, for the wall time
and for the CPU time of all the job's processes (which a busy machine disturbs less),
the median of each, the median of the per-round differences to bare (ms added) and the
ratio of the medians. With --baseline OTHER_PERFWEAVE (the perfweave command of another
build), that build's `perfweave run` alternates too. First, `perfweave --help`'s own
time (the interpreter and the command line's imports).
Usage:
  .venv/bin/python bench/launch_overhead.py [--repeat 30] [--mpi openmpi,mpich]
      [--baseline /path/to/old/.venv/bin/perfweave]
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mpi_overhead import FLAVORS, PERFWEAVE, build

from perfweave import options


def timed(cmd, env=None):
    """(wall seconds, CPU seconds of every process of the job) of one run of cmd"""
    # stdin an empty pipe held open: MPICH's mpiexec dies of SIGPIPE now and then when its
    # stdin is at its end from the start (docs/launching.md)
    r, w = os.pipe()
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdin=r, capture_output=True, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return wall, cpu
    finally:
        os.close(r)
        os.close(w)


def runtime_alone(meta, exp):
    """(argv, environment) of the command perfweave launched, as experiment.json records
    it, with perfweave's variables set for experiment exp."""
    env = dict(os.environ, **options.runtime_env(meta["options"]))
    env["PERFWEAVE_EXPERIMENT"] = str(exp)
    env["LD_PRELOAD"] = meta["runtime_library"]
    return meta["launched"], env


def bench(flavor, args, tmp):
    cc, launch = FLAVORS[flavor]
    cmd = launch + [str(build(cc, "trivial_mpi", tmp))]
    exp = tmp / "exp"
    ways = {"bare": None, "perfweave run": PERFWEAVE}
    if args.baseline:
        ways["baseline perfweave run"] = args.baseline
    shutil.rmtree(exp, ignore_errors=True)
    timed([PERFWEAVE, "run", "-o", exp, "--", *cmd])  # warm the caches; its launch line
    alone = runtime_alone(json.loads((exp / "experiment.json").read_text()), exp)
    ways["runtime alone"] = alone
    ways["runtime alone, --no-io"] = (alone[0], dict(alone[1], PERFWEAVE_IO="0"))
    times = {w: [] for w in ways}
    for _ in range(args.repeat):
        for way, how in ways.items():
            shutil.rmtree(exp, ignore_errors=True)
            if how is None:
                times[way].append(timed(cmd))
            elif isinstance(how, tuple):
                exp.mkdir()
                times[way].append(timed(*how))
            else:
                times[way].append(timed([how, "run", "-o", exp, "--", *cmd]))
    print(f"\n[{flavor}] {' '.join(Path(w).name for w in cmd)}: medians of {args.repeat}")
    for k, what in ((0, "wall time"), (1, "CPU time of all its processes")):
        bare = [t[k] for t in times["bare"]]
        print(f"  {what}: bare {1e3 * statistics.median(bare):.1f} ms")
        for way in list(ways)[1:]:
            mine = [t[k] for t in times[way]]
            med = statistics.median(mine)
            added = statistics.median(t - b for t, b in zip(mine, bare))
            print(
                f"    {way:24s} {1e3 * med:7.1f} ms   added {1e3 * added:+7.1f} ms   "
                f"ratio {med / statistics.median(bare):5.3f}"
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--mpi", default=",".join(FLAVORS))
    ap.add_argument("--baseline", metavar="PERFWEAVE", help="another build's perfweave command")
    args = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print(
        f"perfweave launch path: trivial 2-rank job, {args.repeat} rounds alternating; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start"
    )
    helps = {"perfweave --help": PERFWEAVE}
    if args.baseline:
        helps["baseline perfweave --help"] = args.baseline
    times = {w: [timed([pw, "--help"]) for _ in range(args.repeat)] for w, pw in helps.items()}
    print()
    for way, t in times.items():
        wall, cpu = (statistics.median(x[k] for x in t) for k in (0, 1))
        print(f"  {way:28s} wall {1e3 * wall:6.1f} ms   CPU {1e3 * cpu:6.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        for flavor in args.mpi.split(","):
            bench(flavor, args, Path(tmp))
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    sys.exit(main())

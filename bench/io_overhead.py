#!/usr/bin/env python3
"""Benchmark: what the io module (--io) adds to I/O calls and to MPI programs (figures,
not a test).

1-byte write() to tmpfs (/dev/shm), 1-byte fwrite() (buffered) and fprintf() of a
formatted line, timed inside the program by the thread's CPU time (others' work on the
machine does not count; bench/programs/io_calls.c), bare and under `perfweave run --io --no-sample`,
alternating in one invocation: ns added per call (the budget is 60 ns, docs/io.md). Then
MPI programs on --ranks ranks (Open MPI), bare and under `perfweave run --no-io` and
`perfweave run --io`, on disk (a directory beside the system's temporary
files): three I/O-heavy ones, their time: a checkpoint (each rank writes --mib MiB to its
file in 1 MiB writes, fsyncs, reads it back), an ASCII output step (each rank fprintf's --lines
formatted lines) and a metadata-heavy loop (each rank opens, writes 4 KiB and closes its
file --opens times: the worst case, calls of ~1.5 us each); and a compute-heavy one
(additions for a fixed time with an allreduce every 10 ms; the work done). Prints
medians and the ratios to the bare run (the budget is 1 %), and the same of the CPU time
of all the run's processes (launcher, ranks, `perfweave run` itself: getrusage of the
children), which others' work on the machine changes less than the wall time. With --darshan LIB
(libdarshan.so, built as docs/performance.md says), each case also runs under Darshan
(LD_PRELOAD, its log to the temporary directory, no directory excluded, non-MPI
processes included) in the same alternation: a column beside ours.
Usage:
  .venv/bin/python bench/io_overhead.py [--repeat 5] [--calls 2000000] [--ranks 2]
      [--mib 256] [--lines 200000] [--opens 20000] [--seconds 2] [--only NAME,...]
      [--darshan /work/darshan-install/lib/libdarshan.so]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def value(cmd, key, cpu=None):
    """The number the program printed after key; with cpu (a list), the CPU time (user and
    system) of cmd and every process it waited for is appended to it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True).stdout
    if cpu is not None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime")))
    return float(next(ln.split()[1] for ln in out.splitlines() if ln.startswith(key)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2_000_000)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--opens", type=int, default=20_000)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument(
        "--only",
        default="",
        help="the cases to run, by the first word of their names (calls, checkpoint, "
        "ascii, metadata, compute); default all",
    )
    ap.add_argument("--darshan", metavar="LIB", help="libdarshan.so: a Darshan column too")
    args = ap.parse_args()
    if args.darshan and not Path(args.darshan).is_file():
        sys.exit(f"io_overhead: --darshan {args.darshan}: no such file")
    src = str(HERE / "programs" / "io_calls.c")
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        prog, mprog = Path(tmp) / "io_calls", Path(tmp) / "io_calls_mpi"
        subprocess.run(["gcc", "-O2", "-o", str(prog), src], check=True)
        subprocess.run(["mpicc.openmpi", "-O2", "-DWITH_MPI", "-o", str(mprog), src], check=True)
        run = 0

        def pw(*opts):
            nonlocal run
            run += 1
            return [PERFWEAVE, "run", "--no-sample", *opts, "-o", f"{tmp}/exp{run}", "--"]

        def darshan(cmd, mpi):
            """cmd under Darshan: LD_PRELOAD (mpirun -x for the ranks), a log per run."""
            nonlocal run
            run += 1
            conf = Path(tmp) / "darshan.conf"
            conf.write_text("NAME_INCLUDE ^/ *\n")  # no directory excluded
            env = {
                "LD_PRELOAD": args.darshan,
                "DARSHAN_LOGFILE": f"{tmp}/darshan{run}.log",
                "DARSHAN_CONFIG_PATH": str(conf),
                "DARSHAN_ENABLE_NONMPI": "1",
            }
            if mpi:
                xs = [a for k, v in env.items() for a in ("-x", f"{k}={v}")]
                return cmd[:1] + xs + cmd[1:]
            return ["env"] + [f"{k}={v}" for k, v in env.items()] + cmd

        only = set(filter(None, args.only.split(",")))
        print(
            f"{args.calls:,} calls each (write, fwrite: 1 byte), CPU time, medians of "
            f"{args.repeat} alternating runs"
        )
        for mode in ("write", "fwrite", "fprintf") if not only or "calls" in only else ():
            bare, io, dar = [], [], []
            for _ in range(args.repeat):
                cmd = [str(prog), mode, shm, str(args.calls)]
                bare.append(value(cmd, "ns_per_call"))
                io.append(value(pw("--io") + cmd, "ns_per_call"))
                if args.darshan:
                    dar.append(value(darshan(cmd, False), "ns_per_call"))
            b, m = statistics.median(bare), statistics.median(io)
            line = (
                f"  {mode:7s} to tmpfs  bare {b:7.2f} ns/call  --io {m:7.2f} ns/call  "
                f"added {m - b:6.2f} ns/call"
            )
            if dar:
                d = statistics.median(dar)
                line += f"  Darshan {d:7.2f} ns/call  added {d - b:6.2f} ns/call"
            print(line)
        launch = ["mpirun.openmpi", "--oversubscribe", "-n", str(args.ranks)]
        cases = (
            ("checkpoint", ["mpi-checkpoint", tmp, str(args.mib)], "seconds", "time"),
            ("ascii output", ["mpi-ascii", tmp, str(args.lines)], "seconds", "time"),
            ("metadata loop", ["mpi-io", tmp, str(args.opens)], "seconds", "time"),
            ("compute-heavy", ["mpi-compute", tmp, str(args.seconds)], "blocks", "work"),
        )
        print(f"MPI programs on {args.ranks} ranks (Open MPI), medians of {args.repeat}")
        for name, cmd, key, what in cases:
            if only and name.split()[0].split("-")[0] not in only:
                continue
            got = {"bare": [], "no io": [], "io": [], "darshan": []}
            cpu = {k: [] for k in got}
            for _ in range(args.repeat):
                run_cmd = launch + [str(mprog), *cmd]
                got["bare"].append(value(run_cmd, key, cpu["bare"]))
                got["no io"].append(value(pw("--no-io") + run_cmd, key, cpu["no io"]))
                got["io"].append(value(pw("--io") + run_cmd, key, cpu["io"]))
                if args.darshan:
                    got["darshan"].append(value(darshan(run_cmd, True), key, cpu["darshan"]))
            for label, runs in ((what, got), ("CPU s", cpu)):
                med = {k: statistics.median(v) for k, v in runs.items() if v}
                line = (
                    f"  {name:13s} {label}: bare {med['bare']:.4g}  perfweave --no-io "
                    f"{med['no io']:.4g} (ratio {med['no io'] / med['bare']:.4f})  --io "
                    f"{med['io']:.4g} (ratio {med['io'] / med['bare']:.4f}, to --no-io "
                    f"{med['io'] / med['no io']:.4f})"
                )
                if "darshan" in med:
                    line += (
                        f"  Darshan {med['darshan']:.4g} (ratio {med['darshan'] / med['bare']:.4f})"
                    )
                print(line)


if __name__ == "__main__":
    main()

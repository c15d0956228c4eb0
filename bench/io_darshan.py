#!/usr/bin/env python3
"""Side by side with Darshan: the same MPI program's I/O counted by Darshan and by
`perfweave run --io` (a validation script that prints figures, not a test: CI has no
Darshan).

bench/programs/io_darshan.c (known POSIX, STDIO and MPI-IO calls, docs/io.md) on --ranks
ranks (Open MPI) is run (a) bare, (b) under Darshan (LD_PRELOAD=--darshan-lib, one log per
run through DARSHAN_LOGFILE, shared-record reduction off so that every rank keeps its own
record, and a DARSHAN_CONFIG_PATH file with `NAME_INCLUDE ^/ *` so that no directory is
excluded), (c) under `perfweave run --io --no-sample`. darshan-parser's text of (b) and
`perfweave export --format darshan` of (c) are read by one parser; per (module, file,
rank) it prints the integer counters that differ (Darshan's value, ours), those equal, the
time counters of both (never equal), and the records only one tool has. Then each run's
wall time (the mpirun command's, median of --repeat) and its ratio to the bare one.
File names: the run's directory is DIR, digit runs of 4 or more (pids) are N.
Usage:
  .venv/bin/python bench/io_darshan.py --darshan-lib /work/darshan-install/lib/libdarshan.so \\
      --darshan-parser /work/darshan-install/bin/darshan-parser [--repeat 5] [--ranks 2]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
ME = "io_darshan.py"
NOT_KEPT = "-1"
DARSHAN_ONLY = ("HEATMAP",)  # Darshan modules not compared


class Failed(Exception):
    pass


def run(cmd, env=ENV):
    """Runs cmd: (its wall time in s, its stdout). Failed (with its stderr's tail) if it
    fails."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise Failed(f"{cmd[0]}: cannot run ({e.strerror or e})") from None
    if p.returncode:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-8:])
        raise Failed(f"{' '.join(map(str, cmd))} failed (exit {p.returncode}):\n{tail}")
    return time.perf_counter() - t0, p.stdout


def program_seconds(out):
    """The program's own "seconds T" (MPI_Init to its last I/O call, rank 0)."""
    for line in out.splitlines():
        if line.startswith("seconds "):
            return float(line.split()[1])
    raise Failed(f"io_darshan printed no 'seconds' line: {out.strip()[-200:]!r}")


def parse(text, run_dir):
    """darshan-parser's text (or ours): {(module, file, rank): {counter: value str}},
    with '<fs type>' among the counters. File names normalised (DIR, N)."""
    recs = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) != 8:
            continue
        module, rank, _rid, counter, value, name, _mnt, fs = f
        name = re.sub(r"\d{4,}", "N", name.replace(str(run_dir), "DIR"))
        rec = recs.setdefault((module, name, int(rank)), {"<fs type>": fs})
        rec[counter] = value
    return recs


def is_time(counter):
    return "_F_" in counter


def compare(dar, ours):
    """Prints the comparison; returns (equal, differ, one side -1) counts of integers."""
    totals = [0, 0, 0]
    keys = sorted(set(dar) | set(ours), key=lambda k: (k[0], k[1], k[2]))
    only = {"Darshan": [], "perfweave": []}
    for key in keys:
        if key[0] in DARSHAN_ONLY:
            continue
        if key not in ours or key not in dar:
            only["Darshan" if key in dar else "perfweave"].append(key)
            continue
        d, o = dar[key], ours[key]
        equal, differ, unkept, times = [], [], [], []
        for c, dv in d.items():
            ov = o.get(c)
            if ov is None:
                continue
            if is_time(c):
                times.append(f"{c[c.index('_F_') + 3 :]} {dv}/{ov}")
            elif dv == ov:
                equal.append(c)
            elif NOT_KEPT in (dv, ov):
                unkept.append(f"{c} {dv}/{ov}")
            else:
                differ.append((c, dv, ov))
        totals[0] += len(equal)
        totals[1] += len(differ)
        totals[2] += len(unkept)
        module, name, rank = key
        print(f"\n{module} {name} rank {rank}: {len(equal)} equal, {len(differ)} differ")
        for c, dv, ov in differ:
            print(f"  differ  {c:28s} Darshan {dv:>12s}  perfweave {ov:>12s}")
        print("  equal   " + " ".join(c.split("_", 1)[1] if "_" in c else c for c in equal))
        if unkept:
            print("  -1 on one side (Darshan/perfweave): " + ", ".join(unkept))
        print("  times s (Darshan/perfweave): " + ", ".join(times))
    others = [k for k in keys if k[0] in DARSHAN_ONLY]
    if others:
        mods = ", ".join(sorted({k[0] for k in others}))
        print(f"\nDarshan modules perfweave has no counterpart of: {mods} ({len(others)} records)")
    for who, ks in only.items():
        if ks:
            print(f"\nonly in {who}: {len(ks)} records")
            for module, name, rank in ks:
                print(f"  {module} {name} rank {rank}")
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--darshan-lib", required=True, help="libdarshan.so")
    ap.add_argument("--darshan-parser", required=True, help="darshan-parser")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kind (medians)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--dir", default="/dev/shm", help="where the program's files go")
    args = ap.parse_args()
    lib, parser = Path(args.darshan_lib).resolve(), Path(args.darshan_parser).resolve()
    if not lib.is_file():
        sys.exit(f"{ME}: --darshan-lib {args.darshan_lib}: no such file")
    if not (parser.is_file() and os.access(parser, os.X_OK)):
        sys.exit(f"{ME}: --darshan-parser {args.darshan_parser}: no such program")
    if args.repeat < 1 or args.ranks < 1:
        sys.exit(f"{ME}: --repeat and --ranks must be at least 1")
    for tool in ("mpicc.openmpi", "mpirun.openmpi"):
        if not shutil.which(tool):
            sys.exit(f"{ME}: {tool} not found (Open MPI is needed)")
    if not Path(PERFWEAVE).exists():
        sys.exit(f"{ME}: {PERFWEAVE} not found (make install, then run with .venv/bin/python)")
    if not Path(args.dir).is_dir():
        sys.exit(f"{ME}: --dir {args.dir}: no such directory")
    try:
        with tempfile.TemporaryDirectory(prefix="io_darshan.", dir=args.dir) as tmp:
            return measure(args, Path(tmp), lib, parser)
    except Failed as e:
        sys.exit(f"{ME}: {e}")


def measure(args, tmp, lib, parser):
    prog = tmp / "io_darshan"
    run(["mpicc.openmpi", "-O2", "-o", str(prog), str(HERE / "programs" / "io_darshan.c")])
    conf = tmp / "darshan.conf"
    conf.write_text("NAME_INCLUDE ^/ *\n")  # no default directory exclusion
    launch = ["mpirun.openmpi", "--oversubscribe", "-n", str(args.ranks)]
    times = {"bare": [], "Darshan": [], "perfweave --io": []}
    inside = {k: [] for k in times}
    texts = {}
    for i in range(args.repeat):
        for kind in times:
            d = tmp / f"{i}.{kind.split()[0]}"
            d.mkdir()
            cmd = [str(prog), str(d)]
            if kind == "bare":
                wall, out = run(launch + cmd)
            elif kind == "Darshan":
                log = d / "run.darshan"
                env = [f"LD_PRELOAD={lib}", f"DARSHAN_LOGFILE={log}", f"DARSHAN_CONFIG_PATH={conf}"]
                env.append("DARSHAN_DISABLE_SHARED_REDUCTION=1")
                xs = [a for e in env for a in ("-x", e)]
                wall, out = run(launch[:1] + xs + launch[1:] + cmd)
                if i == 0:
                    p = subprocess.run([str(parser), str(log)], capture_output=True, text=True)
                    if p.returncode:
                        raise Failed(f"darshan-parser {log} failed: {p.stderr.strip()}")
                    texts[kind] = (p.stdout, d)
            else:
                exp = d / "exp"
                pw = [PERFWEAVE, "run", "--io", "--no-sample", "-o", str(exp), "--"]
                wall, out = run(pw + launch + cmd)
                if i == 0:
                    txt = d / "darshan.txt"
                    run([PERFWEAVE, "export", str(exp), "--format", "darshan", "-o", str(txt)])
                    texts[kind] = (txt.read_text(), d)
            times[kind].append(wall)
            inside[kind].append(program_seconds(out))
    dar = parse(*texts["Darshan"])
    ours = parse(*texts["perfweave --io"])
    print(f"io_darshan on {args.ranks} ranks, files in {args.dir} (DIR); first run compared")
    eq, differ, unkept = compare(dar, ours)
    print(
        f"\ninteger counters of records in both: {eq} equal, {differ} differ, "
        f"{unkept} -1 on one side only"
    )
    print(f"\nmedians of {args.repeat}: the mpirun command's wall time (launch, MPI_Init and")
    print("the tool's own start and end included); the program's, MPI_Init to its last I/O")
    med = {k: statistics.median(v) for k, v in times.items()}
    mid = {k: statistics.median(v) for k, v in inside.items()}
    for k in times:
        print(
            f"  {k:15s} wall {med[k]:7.3f} s (ratio {med[k] / med['bare']:.3f})  "
            f"program {mid[k] * 1e3:7.3f} ms (ratio {mid[k] / mid['bare']:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

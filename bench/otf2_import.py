#!/usr/bin/env python3
"""Benchmark: how fast perfweave converts traces to and from OTF2 (figures, not a test).

  1. import (perfweave import) of the public Score-P traces in tests/data/otf2/;
  2. a generated experiment (bench/tracegen.py) of --ranks ranks (default 16) that each
     run --iterations (default 4000) steps of a ring halo exchange, an MPI_Allreduce and
     an MPI_Barrier: 17 records a step and rank (1,088,000 records by default);
  3. its export to OTF2 (records/s and OTF2 events/s), the import of that archive back
     (OTF2 events/s) and whether every record survived;
  4. its export to Chrome trace JSON.

The otf2 package reads and writes one event per Python call, so these rates are bounded
by it (docs/interop.md). Each figure is the best of --repeat runs. Usage:
  .venv/bin/python bench/otf2_import.py [--iterations 4000] [--ranks 16] [--repeat 1]
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tracegen  # noqa: E402
from perfweave.interop import chrome
from perfweave.interop import otf2 as pw_otf2
from perfweave.dtypes import EVENT_FLAGS, EVENT_TYPES
from perfweave.readers import trace as rt

T, F = EVENT_TYPES, EVENT_FLAGS
SHARED = HERE.parent / "tests" / "data" / "otf2"  # public Score-P traces


def best(fn, repeat):
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - t0, out))
    return min(runs, key=lambda x: x[0])


def survived(a, b, nranks):
    """Whether each rank's records of experiment a are those of b (the reader's: a
    generated trace is compact, an imported one 40-byte records)."""
    for r in range(nranks):
        x, y = rt.read_rank(a, r).records, rt.read_rank(b, r).records
        if len(x) != len(y):
            return False
        for k in ("type", "flags", "peer", "tag", "comm", "bytes"):
            if not (x[k] == y[k]).all():
                return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=4000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pw-otf2-bench."))
    try:
        print("OTF2 import of public Score-P traces (perfweave import)")
        for name in ("casita-10-ranks-tags", "pipit-ping-pong"):
            anchor = SHARED / name / "traces.otf2"
            if not anchor.is_file():
                print(f"  {name:22} missing ({anchor})")
                continue
            k = [0]

            def imp():
                k[0] += 1
                return pw_otf2.import_archive(anchor, tmp / f"{name}-{k[0]}")

            sec, s = best(imp, max(args.repeat, 3))
            print(
                f"  {name:22} {s['events']:>9,} events  {sec * 1e3:8.1f} ms  "
                f"{s['events'] / sec:>10,.0f} events/s (reading alone "
                f"{s['events'] / s['read_seconds']:,.0f} events/s)"
            )

        print(
            f"\nGenerated experiment: {args.ranks} ranks x {args.iterations} steps "
            "(ring exchange + MPI_Allreduce + MPI_Barrier)"
        )
        exp = tmp / "ring"
        t0 = time.perf_counter()
        nrec = tracegen.write(exp, args.ranks, args.ranks * args.iterations * tracegen.PER_ITER)
        print(f"  written with numpy       {nrec:>10,} records  {time.perf_counter() - t0:7.2f} s")
        k = [0]

        def exp_otf2():
            k[0] += 1
            return pw_otf2.export(exp, tmp / f"out{k[0]}" / "traces.otf2")

        sec, s = best(exp_otf2, args.repeat)
        print(
            f"  export to OTF2           {s['events']:>10,} events   {sec:7.2f} s  "
            f"{nrec / sec:>10,.0f} records/s  {s['events'] / sec:>10,.0f} OTF2 events/s"
        )
        anchor = Path(s["anchor"])
        size = sum(p.stat().st_size for p in anchor.parent.rglob("*") if p.is_file())
        print(
            f"  archive size             {size / 2**20:10.1f} MiB  "
            f"({size / s['events']:.1f} bytes/event; the trace's events files take "
            f"{sum(p.stat().st_size for p in (exp / 'traces').glob('*.events')) / 2**20:.1f} MiB)"
        )
        j = [0]

        def imp_back():
            j[0] += 1
            return pw_otf2.import_archive(anchor, tmp / f"back{j[0]}")

        sec, t = best(imp_back, args.repeat)
        ok = survived(exp, Path(t["experiment"]), args.ranks)
        print(
            f"  import of that archive   {t['events']:>10,} events   {sec:7.2f} s  "
            f"{t['events'] / sec:>10,.0f} events/s (reading alone "
            f"{t['events'] / t['read_seconds']:,.0f} events/s)"
        )
        print(f"  every record survived    {'yes' if ok else 'NO'}")
        c = [0]

        def exp_chrome():
            c[0] += 1
            return chrome.export(exp, tmp / f"chrome{c[0]}.json")

        sec, s = best(exp_chrome, args.repeat)
        print(
            f"  export to Chrome JSON    {s['events']:>10,} events   {sec:7.2f} s  "
            f"{nrec / sec:>10,.0f} records/s  "
            f"({Path(s['path']).stat().st_size / 2**20:.1f} MiB)"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

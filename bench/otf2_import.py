#!/usr/bin/env python3
"""Benchmark: how fast perfweave converts traces to and from OTF2 (figures, not a test).

  1. import (perfweave import) of the public Score-P traces in ../shared/data/otf2/;
  2. a generated experiment of --ranks ranks (default 16) that each run --iterations
     (default 7000) steps of a ring exchange (MPI_Irecv from the left, MPI_Isend to the
     right, MPI_Waitall) and an MPI_Allreduce: 9 records a step and rank, written
     directly with numpy (1,008,000 records by default);
  3. its export to OTF2 (records/s and OTF2 events/s), the import of that archive back
     (OTF2 events/s) and whether every record survived;
  4. its export to Chrome trace JSON.

The otf2 package reads and writes one event per Python call, so these rates are bounded
by it (docs/interop.md). Each figure is the best of --repeat runs. Usage:
  .venv/bin/python bench/otf2_import.py [--iterations 7000] [--ranks 16] [--repeat 1]
"""
import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave.interop import chrome
from perfweave.interop import otf2 as pw_otf2
from perfweave.readers.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES

T, F = EVENT_TYPES, EVENT_FLAGS
HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data" / "otf2"
FUNCTIONS = ["MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce"]


def generate(exp, nranks, iters):
    """An experiment whose traces are written with numpy alone: per step and rank the
    records CALL Irecv, IRECV, CALL Isend, SEND, CALL Waitall, RECV, SEND_DONE,
    CALL Allreduce, COLL. Times are ns (ticks = ns)."""
    exp.mkdir(parents=True)
    (exp / "traces").mkdir()
    step_ns = 20_000
    end = iters * step_ns + 10_000
    for r in range(nranks):
        left, right = (r - 1) % nranks, (r + 1) % nranks
        i = np.arange(iters, dtype=np.int64)
        base = 5_000 + i * step_ns + (r * 37) % 500
        rec = np.zeros((iters, 9), EVENT_DTYPE)
        rec["peer"], rec["comm"] = -1, -1
        k_recv = (1 << 20) + 2 * i
        k_send = k_recv + 1
        wait_end = base + 1_200 + (i * 7919 + r * 104729) % 3_000
        red0 = wait_end + 4_000 + (r * 13 + i) % 500
        red1 = iters * 0 + base + 15_000
        rows = [
            dict(type=T["CALL"], fn=0, t0=base, t1=base + 200),
            dict(type=T["IRECV"], t0=k_recv, flags=F["NONBLOCKING"], peer=left, tag=7,
                 comm=0, bytes=4096),
            dict(type=T["CALL"], fn=1, t0=base + 300, t1=base + 450),
            dict(type=T["SEND"], t0=k_send, flags=F["NONBLOCKING"], peer=right, tag=7,
                 comm=0, bytes=4096),
            dict(type=T["CALL"], fn=2, t0=base + 600, t1=wait_end),
            dict(type=T["RECV"], t0=k_recv, peer=left, tag=7, comm=0, bytes=4096),
            dict(type=T["SEND_DONE"], t0=k_send, peer=right, tag=7, comm=0),
            dict(type=T["CALL"], fn=3, t0=red0, t1=red1),
            dict(type=T["COLL"], comm=0, bytes=8, t1=8),
        ]
        for j, row in enumerate(rows):
            for key, val in row.items():
                rec[key][:, j] = val
        rec = rec.reshape(-1)
        rec.tofile(exp / "traces" / f"rank-{r}.events")
        meta = {"format": "perfweave-trace", "version": 1, "rank": r, "world_size": nranks,
                "host": "bench", "pid": 1000 + r, "state": "complete",
                "functions": FUNCTIONS, "families": ["p2p", "p2p", "sync", "coll"],
                "clock": {"ticks": [0, 10 ** 9], "ns": [0, 10 ** 9], "offset_init_ns": 0,
                          "offset_init_err_ns": 0, "offset_fini_ns": 0,
                          "offset_fini_err_ns": 0, "t_init_ns": 1_000, "t_fini_ns": end},
                "comms": [{"id": 0, "name": "MPI_COMM_WORLD", "ranks": list(range(nranks)),
                           "parent": -1, "seq": 0}],
                "windows": [], "groups": [], "objects": [],
                "flushes": [{"thread": 0, "first": 0, "count": len(rec)}],
                "records": len(rec), "lost": 0}
        (exp / "traces" / f"rank-{r}.json").write_text(json.dumps(meta))
    (exp / "experiment.json").write_text(json.dumps({
        "format": "perfweave-experiment", "version": 1, "command": ["bench-ring"],
        "state": "finished", "start_epoch": time.time(), "wall_seconds": end / 1e9,
        "exit_status": {"code": 0}}))
    return nranks * iters * 9


def best(fn, repeat):
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - t0, out))
    return min(runs, key=lambda x: x[0])


def survived(a, b, nranks):
    for r in range(nranks):
        x = np.fromfile(a / "traces" / f"rank-{r}.events", EVENT_DTYPE)
        y = np.fromfile(b / "traces" / f"rank-{r}.events", EVENT_DTYPE)
        if len(x) != len(y):
            return False
        for k in ("type", "flags", "peer", "tag", "comm", "bytes"):
            if not (x[k] == y[k]).all():
                return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=7000)
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
            print(f"  {name:22} {s['events']:>9,} events  {sec * 1e3:8.1f} ms  "
                  f"{s['events'] / sec:>10,.0f} events/s (reading alone "
                  f"{s['events'] / s['read_seconds']:,.0f} events/s)")

        print(f"\nGenerated experiment: {args.ranks} ranks x {args.iterations} steps "
              "(ring exchange + MPI_Allreduce)")
        exp = tmp / "ring"
        t0 = time.perf_counter()
        nrec = generate(exp, args.ranks, args.iterations)
        print(f"  written with numpy       {nrec:>10,} records  "
              f"{time.perf_counter() - t0:7.2f} s")
        k = [0]

        def exp_otf2():
            k[0] += 1
            return pw_otf2.export(exp, tmp / f"out{k[0]}" / "traces.otf2")
        sec, s = best(exp_otf2, args.repeat)
        print(f"  export to OTF2           {s['events']:>10,} events   {sec:7.2f} s  "
              f"{nrec / sec:>10,.0f} records/s  {s['events'] / sec:>10,.0f} OTF2 events/s")
        anchor = Path(s["anchor"])
        size = sum(p.stat().st_size for p in anchor.parent.rglob("*") if p.is_file())
        print(f"  archive size             {size / 2 ** 20:10.1f} MiB  "
              f"({size / s['events']:.1f} bytes/event; the records take "
              f"{nrec * EVENT_DTYPE.itemsize / 2 ** 20:.1f} MiB)")
        j = [0]

        def imp_back():
            j[0] += 1
            return pw_otf2.import_archive(anchor, tmp / f"back{j[0]}")
        sec, t = best(imp_back, args.repeat)
        ok = survived(exp, Path(t["experiment"]), args.ranks)
        print(f"  import of that archive   {t['events']:>10,} events   {sec:7.2f} s  "
              f"{t['events'] / sec:>10,.0f} events/s (reading alone "
              f"{t['events'] / t['read_seconds']:,.0f} events/s)")
        print(f"  every record survived    {'yes' if ok else 'NO'}")
        c = [0]

        def exp_chrome():
            c[0] += 1
            return chrome.export(exp, tmp / f"chrome{c[0]}.json")
        sec, s = best(exp_chrome, args.repeat)
        print(f"  export to Chrome JSON    {s['events']:>10,} events   {sec:7.2f} s  "
              f"{nrec / sec:>10,.0f} records/s  "
              f"({Path(s['path']).stat().st_size / 2 ** 20:.1f} MiB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

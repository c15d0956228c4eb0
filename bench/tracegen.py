"""Synthetic perfweave experiments of any size, for the trace benchmarks.

A ring halo exchange of a stencil code on R ranks, written with numpy straight into
the experiment format (docs/format.md, "Traces"; trace format 5, compact records
encoded by perfweave.readers.trace_compact in blocks of the runtime's default size, so
that readers meet what a traced run writes): per iteration every rank posts
MPI_Irecv from both neighbours, MPI_Isend to both, completes the four in MPI_Waitall,
and joins an MPI_Allreduce and an MPI_Barrier. That is 17 records per rank and
iteration. Computation between the exchanges is imbalanced at random (a
rank's neighbours then wait for it: Late Sender; everyone waits at the Allreduce:
Wait at N x N), so the analysis has real work to do.

    .venv/bin/python bench/tracegen.py OUT --ranks 256 --events 50000000

It imports the installed perfweave (`make install`): the record layouts come from its
generated perfweave._format, which the source tree does not hold.
"""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from perfweave.clock import rank0_clock
from perfweave.dtypes import EVENT_DTYPE, EVENT_TYPES as T, TRACE_VERSION
from perfweave.readers import trace_compact

FUNCTIONS = ["MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce", "MPI_Barrier"]
PER_ITER = 17


def rank_records(rank, nranks, iters, seed=1):
    """The records of one rank: a template of 17 records per iteration, tiled."""
    rng = np.random.default_rng(seed)  # same draws on every rank: ranks agree
    left, right = (rank - 1) % nranks, (rank + 1) % nranks
    # per-iteration compute time of every rank (ns); this rank's and its neighbours'
    work = rng.integers(20_000, 60_000, size=(iters, nranks), dtype=np.int64)
    period = 100_000 + work.max(axis=1)  # the iteration ends after the slowest
    start = np.cumsum(np.r_[0, period[:-1]]) + 1_000_000
    mine = start + work[:, rank]  # this rank starts exchanging here
    arrival = start + np.maximum(work[:, left], work[:, right])  # neighbours' sends
    rec = np.zeros((iters, PER_ITER), EVENT_DTYPE)
    rec["peer"] = -1
    rec["comm"] = -1
    t = mine
    k = 0

    def call(fn, t0, dt):
        nonlocal k
        r = rec[:, k]
        r["type"], r["fn"], r["t0"], r["t1"] = T["CALL"], FUNCTIONS.index(fn), t0, t0 + dt
        k += 1

    def sub(typ, **f):
        nonlocal k
        r = rec[:, k]
        r["type"] = T[typ]
        r["comm"] = 0
        for name, v in f.items():
            r[name] = v
        k += 1

    post = 4 * np.arange(iters, dtype=np.int64)  # posts numbered as the runtime does
    call("MPI_Irecv", t, 300)
    sub("IRECV", t0=1, t1=post + 1, peer=left, tag=7, bytes=4096, flags=1)
    call("MPI_Irecv", t + 400, 300)
    sub("IRECV", t0=2, t1=post + 2, peer=right, tag=7, bytes=4096, flags=1)
    call("MPI_Isend", t + 800, 500)
    sub("SEND", t0=3, t1=post + 3, peer=left, tag=7, bytes=4096, flags=1)
    call("MPI_Isend", t + 1400, 500)
    sub("SEND", t0=4, t1=post + 4, peer=right, tag=7, bytes=4096, flags=1)
    wait_in = t + 2000
    wait_out = np.maximum(wait_in, arrival + 2500) + 800
    call("MPI_Waitall", wait_in, wait_out - wait_in)
    sub("RECV", t0=1, t1=post + 1, peer=left, tag=7, bytes=4096)
    sub("RECV", t0=2, t1=post + 2, peer=right, tag=7, bytes=4096)
    sub("SEND_DONE", t0=3, t1=post + 3, peer=left, tag=7)
    sub("SEND_DONE", t0=4, t1=post + 4, peer=right, tag=7)
    red_in = wait_out + 1000
    red_out = start + period - 5_000
    call("MPI_Allreduce", red_in, np.maximum(red_out - red_in, 1_000))
    sub("COLL", bytes=8, t1=8)
    call("MPI_Barrier", start + period - 3_000, 2_000)
    sub("COLL")
    assert k == PER_ITER
    return rec.reshape(-1)


def write(out, nranks, events, seed=1):
    out = Path(out)
    iters = max(1, events // (nranks * PER_ITER))
    (out / "traces").mkdir(parents=True, exist_ok=True)
    meta = {
        "format": "perfweave-experiment",
        "version": 1,
        "perfweave_version": "bench",
        "command": ["tracegen", str(nranks), str(events)],
        "launched": [],
        "cwd": str(out),
        "host": "bench",
        "program": None,
        "launcher": None,
        "mpi_flavor": None,
        "runtime_library": "",
        "options": {"trace": True},
        "state": "finished",
        # a fixed launch time: exports of the experiment hold no time of their own
        "start_epoch": 1.7e9,
    }
    (out / "experiment.json").write_text(json.dumps(meta))
    total = 0
    for r in range(nranks):
        rec = rank_records(r, nranks, iters, seed)
        trace_compact.encode(rec, tid=1000 + r).tofile(out / "traces" / f"rank-{r}.events")
        total += len(rec)
        t_end = int(max(rec["t1"].max(), rec["t0"].max())) + 1000
        js = {
            "format": "perfweave-trace",
            "version": TRACE_VERSION,
            "rank": r,
            "world_size": nranks,
            "host": "bench",
            "pid": 1000 + r,
            "state": "complete",
            "functions": FUNCTIONS,
            "families": ["p2p", "p2p", "sync", "coll", "coll"],
            "clock": rank0_clock(500_000, t_end),
            "comms": [
                {
                    "id": 0,
                    "name": "MPI_COMM_WORLD",
                    "ranks": list(range(nranks)),
                    "parent": -1,
                    "seq": 0,
                }
            ],
            "windows": [],
            "groups": [],
            "objects": [],
            "records": len(rec),
            "lost": 0,
        }
        (out / "traces" / f"rank-{r}.json").write_text(json.dumps(js))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--events", type=int, default=50_000_000)
    a = ap.parse_args()
    t0 = time.perf_counter()
    n = write(a.out, a.ranks, a.events)
    dt = time.perf_counter() - t0
    size = sum(os.path.getsize(p) for p in Path(a.out, "traces").glob("*.events"))
    print(f"{n:,} events on {a.ranks} ranks, {size / 2**20:.0f} MiB, written in {dt:.1f} s")


if __name__ == "__main__":
    main()

"""The Chrome export's I/O segments (the io module's segment trace): on the track of the
thread that made them, or a track of their own, "cat": "io"."""

import json

import numpy as np

from perfweave.interop.chrome.formatting import Rows, format_rows, quoted
from perfweave.interop.chrome.sink import write_events

from perfweave._format import IO_LAYERS, IO_OPS
from perfweave.clock import global_ns
from perfweave.readers.io import read_io


def io_segments(X):
    """{rank: the I/O segments of its process} (names, tracks and times of rank 0's
    clock): t0, t1, tid, name, bytes, offset, layer. A segment goes on the track of the
    trace's thread that has its OS thread id (the trace's BLOCK records name it), so a
    thread's I/O and its MPI calls share one track; a thread the trace does not know (no
    MPI event) gets a track of its own, its OS id, as does every thread but the main one
    of a trace older than version 4."""
    io = read_io(X.path)
    X.notes.extend(io.notes)
    g = io.segments
    if not len(g):
        return {}
    base = [f.rsplit("/", 1)[-1] for f in io.files]
    names = quoted([f"{op} {b}" for op in IO_OPS for b in base])
    out = {}
    for r in X.ranks:
        s = g[g["rank"] == r]
        meta = X.metas.get(r) or {}
        if not len(s) or not meta.get("clock"):
            continue
        known = X.thread_ids(r)
        if not known:  # an older trace: its thread 0 is the process's main thread
            known = {0: int(io.processes["pid"][s["process"][0]])}
        tids = np.array(list(known.values()), np.int64)
        threads = np.array(list(known.keys()), np.int64)
        at = np.minimum(np.searchsorted(np.sort(tids), s["tid"]), len(tids) - 1)
        order = np.argsort(tids)
        hit = tids[order][at] == s["tid"]
        out[r] = {
            "t0": global_ns(meta, s["t0_ns"]),
            "t1": global_ns(meta, s["t1_ns"]),
            "tid": np.where(hit, threads[order][at], s["tid"]),
            "own": ~hit,
            "name": s["op"].astype(np.int64) * len(base) + s["file"],
            "names": names,
            "bytes": s["bytes"],
            "offset": s["offset"],
            "layer": s["layer"],
        }
    return out


def segment_events(f, r, s, origin, counts, first):
    """Rank r's I/O segments as complete events ("cat": "io") with their bytes, offset
    and layer; a track of their own for threads the trace does not know."""
    if s is None:
        return first
    other = np.unique(s["tid"][s["own"]])
    meta = [
        {
            "ph": "M",
            "name": "thread_name",
            "pid": r,
            "tid": int(t),
            "args": {"name": f"I/O of thread {t}"},
        }
        for t in other.tolist()
    ]
    first = write_events(
        f, "".join("," + json.dumps(e, separators=(",", ":")) for e in meta).encode(), first
    )
    R = Rows(len(s["t0"]))
    R.lit(',{"name":')
    R.name(s["names"], s["name"])
    R.lit(f',"cat":"io","ph":"X","pid":{int(r)},"tid":')
    R.int(s["tid"])
    R.lit(',"ts":')
    R.us(s["t0"] - origin)
    R.lit(',"dur":')
    R.us(np.maximum(s["t1"] - s["t0"], 0))
    R.lit(',"args":{"bytes":')
    R.int(s["bytes"])
    R.lit(',"offset":')
    R.int(s["offset"])
    R.lit(',"layer":')
    R.name(quoted(IO_LAYERS), s["layer"])
    R.lit("}}")
    counts["events"] += len(meta) + len(s["t0"])
    counts["segments"] = counts.get("segments", 0) + len(s["t0"])
    return write_events(f, format_rows([R]), first)

"""Reader of the heap module's records (heap/*.pwheap; docs/format.md "Heap profile"):
the model of model/heap.py. A record is read as it is, whether its process ended (the
header's state) or was killed (state -1: "killed", the counts up to then; a killed
process's count and bytes are summed from its histograms, which it kept current, and its
objects still live have no lifetime). A file that cannot be read is left out with a
note."""

import numpy as np

from perfweave._format import FILES, HEAP_MAGIC_NUMBER, HEAP_RANGES, RECORDS, STATES
from perfweave.model.heap import PROCESS_DTYPE, RANGE_DTYPE, SITE_DTYPE, HeapProfile
from perfweave.readers.dataset import Dataset

VERSION = FILES["heap"].version
PAGE = 4096
HEADER, OBJECT, SITE = (RECORDS[k] for k in ("heap_header", "heap_object", "heap_site"))


def _page(n):
    return (n + PAGE - 1) // PAGE * PAGE


def _ticks(lo, hi):
    return lo.astype(np.float64) + hi.astype(np.float64) * 2.0**64


_SUMMED = ("frees", "peak", "byte_s", "live_s", "hist_count", "hist_bytes")


def _one_per_site(s, path_hash):
    """A process's records of one call path (path_hash) as one row: the site's own record
    (its live bytes, peak and live span) and the records of the threads that recorded at
    once (their sums; docs/format.md), in the order of their first records."""
    _, first, inv = np.unique(path_hash, return_index=True, return_inverse=True)
    if len(first) == len(s):
        return s
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    at = rank[np.asarray(inv).ravel()]
    out = s[first[order]].copy()
    for k in _SUMMED:
        out[k] = 0
        np.add.at(out[k], at, s[k])
    np.minimum.at(out["min"], at, s["min"])
    np.maximum.at(out["max"], at, s["max"])
    return out


def read_heap(path):
    """The HeapProfile of experiment path (an empty one without heap/)."""
    out = HeapProfile()
    d = path / "heap"
    if not d.is_dir():
        return out
    objects, procs, sites, ranges = {}, [], [], []
    for f in sorted(d.glob("*.pwheap")):
        try:
            _read_one(f, len(procs), objects, procs, sites, ranges)
        except (OSError, ValueError) as e:
            out.notes.append(f"heap profile: {f.name}: {e}; left out")
    out.processes = np.array(procs, PROCESS_DTYPE) if procs else out.processes
    out.sites = np.concatenate(sites) if sites else out.sites
    out.ranges = np.concatenate(ranges) if ranges else out.ranges
    out.objects = list(objects)
    return out


def _read_one(f, index, objects, procs, sites, ranges):
    raw = np.fromfile(f, np.uint8)
    if len(raw) < HEADER.itemsize:
        raise ValueError("shorter than its header")
    h = raw[: HEADER.itemsize].view(HEADER)[0]
    if int(h["magic"]) != HEAP_MAGIC_NUMBER:
        raise ValueError("not a heap record (or its process died before it was made)")
    if int(h["version"]) != VERSION:
        raise ValueError(f"version {int(h['version'])}, this perfweave reads {VERSION}")
    hdr_len = _page(HEADER.itemsize)
    obj_len = _page(OBJECT.itemsize * int(h["max_objects"]))
    nobj, nsites = int(h["nobjects"]), int(h["nsites"])
    end = hdr_len + obj_len + SITE.itemsize * nsites
    if len(raw) < end or not 0 <= nobj <= int(h["max_objects"]):
        raise ValueError("cut short")
    objs = raw[hdr_len : hdr_len + OBJECT.itemsize * nobj].view(OBJECT)
    recs = raw[hdr_len + obj_len : end].view(SITE)
    recs = recs[recs["path_hash"] != 0]
    remap = np.array(
        [
            objects.setdefault(p.tobytes().split(b"\0")[0].decode(), len(objects))
            for p in objs["path"]
        ]
        + [-1],
        np.int64,
    )
    nspt = float(h["ns_per_tick"]) or 1.0
    state = int(h["state"])
    s = np.zeros(len(recs), SITE_DTYPE)
    s["process"] = index
    for k in ("fn", "depth", "frees", "min", "max", "peak", "hist_count", "hist_bytes"):
        s[k] = recs[k]
    s["object"] = np.where(recs["object"] >= 0, remap[recs["object"]], -1)
    s["offset"] = recs["offset"]
    s["byte_s"] = _ticks(recs["byte_ticks_lo"], recs["byte_ticks_hi"]) * nspt / 1e9
    s["live_s"] = recs["live_ticks"] * nspt / 1e9
    s = _one_per_site(s, recs["path_hash"])
    s["count"] = s["hist_count"].sum(axis=1)
    s["bytes"] = s["hist_bytes"].sum(axis=1)
    s["min"] = np.where(s["count"] > 0, s["min"], 0)
    dropped = int(s["count"][s["depth"] == 0].sum())  # site 0: the sites past max_sites
    sites.append(s[s["count"] > 0])
    r = np.zeros(HEAP_RANGES, RANGE_DTYPE)
    r["process"] = index
    r["range"] = np.arange(HEAP_RANGES)
    r["peak"] = h["range_peak"]
    r["byte_s"] = _ticks(h["range_ticks_lo"], h["range_ticks_hi"]) * nspt / 1e9
    ranges.append(r)
    host = f.name.rsplit(".", 2)[0]
    procs.append(
        (
            int(h["rank"]),
            int(h["pid"]),
            int(h["parent_pid"]),
            host,
            STATES[state] if 0 <= state < len(STATES) else "killed",
            int(h["sample_bytes"]),
            max(int(h["t_end"]) - int(h["t_start"]), 0) / 1e9,
            dropped,
            int(h["untracked"]),
            int(h["unseen_frees"]),
            int(h["bootstrap"]),
            int(h["unwinds"]),
            int(h["backtraces"]),
            int(h["tick_res_ns"]),
            int(h["live_bytes"]),
            int(h["peak_live_bytes"]),
        )
    )


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "heap", "heap", read_heap, "the allocation sites per process (perfweave run --heap)"
)

"""The regions module's analysis (runtime/modules/regions.c; docs/regions.md): the
program's regions, phases and measurement-off windows per rank, with their MPI time and
calls (recorded by the MPI module inside them) and, for a sampled run, the split of
their samples into compute, MPI, I/O and other (sleep, waits): a sample counts in every
region open in its thread at its time (the innermost and those around it) and in the
phase open then. No per-event Python loop: intervals are found by sorted searches, one
per nesting depth."""

from dataclasses import dataclass

import numpy as np

from perfweave._format import FAMILIES
from perfweave.model.table import records, table

RECORDED_BY = (
    "call perfweave_region_begin/end or perfweave_phase_begin/end (perfweave/perfweave.h, "
    "`use perfweave`), or MPI_Pcontrol, in the program run by `perfweave run`"
)

# a sample's activity (analysis/samples ACTIVITIES) -> the regions' time split
SPLIT = ["compute", "mpi", "io", "other"]
_SPLIT_OF = {"compute": "compute", "mathlib": "compute", "alloc": "compute", "io": "io"}
_SPLIT_OF.update({f"mpi_{f}": "mpi" for f in FAMILIES if f != "file"})
_SPLIT_OF["mpi_file"] = "io"  # MPI-IO


@dataclass
class RegionsResult:
    """The intervals (model/regions.py) and their sums.

    intervals: one row per interval, the model's columns (rank, pid, host, thread (OS
      id), name, kind, depth, t_begin, t_end (ns of the process's CLOCK_MONOTONIC),
      mpi_ns, mpi_calls, open), by rank, pid, thread and time;
    per_rank: one row per (kind, name, rank): count, time_s (inclusive: the program's own
      begin to end), mean_s, max_s, mpi_s, mpi_calls, mpi_pct (of time_s); with samples,
      samples (taken inside it: in the region or a region nested in it, or in the phase)
      and SPLIT_samples_pct (shares of those samples by activity);
    regions: the same per (kind, name) over the ranks: ranks, count, time_s (summed),
      max_rank_s (the largest rank's), mpi_s, mpi_calls, mpi_pct, and the samples' split."""

    ranks: int
    unmatched_ends: int
    dropped: int
    off_s: float  # measurement-off time, summed over processes
    sampled: bool
    intervals: np.ndarray
    per_rank: np.ndarray
    regions: np.ndarray
    notes: list

    def to_json(self):
        return {
            "ranks": self.ranks,
            "unmatched_ends": self.unmatched_ends,
            "dropped": self.dropped,
            "off_s": self.off_s,
            "sampled": self.sampled,
            "per_rank": records(self.per_rank),
            "regions": records(self.regions),
            "notes": list(self.notes),
        }


def attribute(intervals, pid, tid, t):
    """For events (pid, tid, t ns arrays) of threads: the index into intervals of the
    innermost region open in the event's thread at its time, and of the phase open then
    (-1: none)."""
    layers = enclosing(intervals, pid, tid, t)
    region = np.full(len(t), -1, np.int64)
    for idx in layers[1:]:  # innermost first
        region = np.where(region < 0, idx, region)
    return region, layers[0]


def enclosing(intervals, pid, tid, t):
    """For events (pid, tid, t ns arrays): a list of index arrays into intervals, the
    phase open in the event's thread at its time, then the region open there at each
    depth, deepest first (-1: none)."""
    n = len(t)
    if not n or not len(intervals):
        return [np.full(n, -1, np.int64)]
    # one integer per (pid, thread), then one sortable key per (thread, time)
    keys = np.concatenate(
        [intervals["pid"] * (1 << 32) + intervals["thread"], pid * (1 << 32) + tid]
    )
    _, g = np.unique(keys, return_inverse=True)
    g = g.reshape(-1)
    gi, gs = g[: len(intervals)], g[len(intervals) :]
    t0 = min(int(intervals["t_begin"].min()), int(t.min()))
    span = max(int(intervals["t_end"].max()), int(t.max())) - t0 + 1
    at = gs * span + (t - t0)
    kind, depth = intervals["kind"], intervals["depth"]
    layers = [kind == "phase"]
    for d in sorted(set(depth[kind == "region"].tolist()), reverse=True):
        layers.append((kind == "region") & (depth == d))
    out = []
    for sel in layers:  # the intervals of a layer do not overlap in a thread
        found = np.full(n, -1, np.int64)
        idx = np.flatnonzero(sel)
        if len(idx):
            begin = gi[idx] * span + (intervals["t_begin"][idx] - t0)
            order = np.argsort(begin, kind="stable")
            idx, begin = idx[order], begin[order]
            j = np.searchsorted(begin, at, "right") - 1
            cand = idx[np.maximum(j, 0)]
            ok = (j >= 0) & (gi[cand] == gs) & (t < intervals["t_end"][cand])
            found[ok] = cand[ok]
        out.append(found)
    return out


def sample_threads(p):
    """The (pid, tid, t ns) arrays of a sampled process's samples (model/samples.py), the
    events enclosing() places."""
    rec = p.records
    tids = np.array([th.get("tid", -1) for th in p.meta.get("threads", [])] + [-1], np.int64)
    tid = tids[np.clip(rec["thread"].astype(np.int64), 0, len(tids) - 1)]
    pid = np.full(len(rec), int(p.meta.get("pid", -1)), np.int64)
    return pid, tid, rec["t"].astype(np.int64)


def tree_prefixes(intervals, p):
    """Per sample of the sampled process p: the call tree's nodes of the phase and the
    regions open in its thread at its time, outermost first ("phase NAME", "region NAME",
    ...: a tuple, () outside any)."""
    n = len(p.records)
    if not len(intervals) or not n:
        return [()] * n
    layers = enclosing(intervals, *sample_threads(p))
    # outermost first: the phase, then the regions from the shallowest depth
    layers = [layers[0]] + layers[:0:-1]
    label = np.array(
        [f"{k} {name}" for k, name in zip(intervals["kind"].tolist(), intervals["name"].tolist())]
        + [""],
        dtype=object,
    )
    cols = [label[np.where(idx >= 0, idx, len(intervals))] for idx in layers]
    return [tuple(x for x in row if x) for row in zip(*cols)]


def sample_split(intervals, procs, activities, activity):
    """Per interval: the samples taken inside it (in its thread, between its begin and
    end: a region's include those of the regions nested in it), by SPLIT group, from the
    sampled processes (model/samples.py) and their samples' activity (per process,
    indexes into activities)."""
    counts = np.zeros((len(intervals), len(SPLIT)), np.int64)
    group = np.array([SPLIT.index(_SPLIT_OF.get(a, "other")) for a in activities], np.int64)
    for p, act in zip(procs, activity):
        rec = p.records
        if not len(rec):
            continue
        gr = group[np.asarray(act, np.int64)]
        for idx in enclosing(intervals, *sample_threads(p)):
            ok = idx >= 0
            np.add.at(counts, (idx[ok], gr[ok]), 1)
    return counts


def analyze(regions, procs=(), activities=(), activity=()):
    """The RegionsResult of a Regions; with samples: the sampled processes, the activity
    names and each process's samples' activity indexes (analysis/samples/classification
    classify)."""
    iv = regions.intervals
    dur = (iv["t_end"] - iv["t_begin"]).astype(np.float64) / 1e9
    sampled = bool(len(procs))
    split = sample_split(iv, procs, activities, activity) if sampled else None
    on = iv["kind"] != "off"
    part = split[on] if sampled else None
    return RegionsResult(
        ranks=len({p.rank for p in regions.processes if p.rank >= 0}),
        unmatched_ends=sum(p.unmatched_ends for p in regions.processes),
        dropped=sum(p.dropped for p in regions.processes),
        off_s=float(dur[~on].sum()),
        sampled=sampled,
        intervals=iv,
        per_rank=_table(iv[on], dur[on], part, ("kind", "name", "rank")),
        regions=_table(iv[on], dur[on], part, ("kind", "name")),
        notes=list(regions.notes),
    )


def _groups(iv, keys):
    """Dense group numbers of the rows of iv by the columns keys (first row of each)."""
    text = np.array(["\x00".join(map(str, r)) for r in zip(*[iv[k].tolist() for k in keys])])
    _, first, inv = np.unique(text, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def _table(iv, dur, split, keys):
    """Sums of the intervals iv (durations dur in s; the samples' split, or None) per
    distinct keys: phases first, then regions, each by most time (per_rank: of the
    region over its ranks), then rank."""
    per_rank = "rank" in keys
    if not len(iv):
        cols = {k: [] for k in keys}
        for k in ("count", "time_s", "mpi_s", "mpi_calls"):
            cols[k] = []
        return table(cols)
    first, inv = _groups(iv, keys)
    m = len(first)
    count = np.bincount(inv, minlength=m)
    time_s = np.bincount(inv, dur, m)
    cols = {k: iv[k][first] for k in keys}
    if per_rank:
        longest = np.zeros(m)
        np.maximum.at(longest, inv, dur)
        cols.update({"count": count, "time_s": time_s, "mean_s": time_s / count, "max_s": longest})
    else:
        pairs, pinv = _groups(iv, keys + ("rank",))
        of_pair = inv[pairs]
        ranks = np.bincount(of_pair, minlength=m)
        rank_time = np.bincount(pinv, dur, len(pairs))
        max_rank = np.zeros(m)
        np.maximum.at(max_rank, of_pair, rank_time)
        cols.update({"ranks": ranks, "count": count, "time_s": time_s, "max_rank_s": max_rank})
    mpi_s = np.bincount(inv, iv["mpi_ns"] / 1e9, m)
    cols["mpi_s"] = mpi_s
    cols["mpi_calls"] = np.bincount(inv, iv["mpi_calls"], m).astype(np.int64)
    cols["mpi_pct"] = 100 * mpi_s / np.maximum(time_s, 1e-12)
    if split is not None:
        s = np.zeros((m, len(SPLIT)), np.int64)
        np.add.at(s, inv, split)
        total = s.sum(axis=1)
        cols["samples"] = total
        for k, name in enumerate(SPLIT):
            cols[f"{name}_samples_pct"] = 100 * s[:, k] / np.maximum(total, 1)
    out = table(cols)
    # the order: phases, then regions; by the (kind, name)'s total time; then rank
    _, kn = _groups(out, ("kind", "name"))
    total_kn = np.bincount(kn, out["time_s"])[kn]
    order = np.lexsort(
        (
            out["rank"] if per_rank else np.zeros(m),
            out["name"].astype(str),
            -total_kn,
            out["kind"] != "phase",
        )
    )
    return out[order]

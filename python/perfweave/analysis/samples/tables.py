"""The tables a samples analysis returns (SamplesResult): the tables of places
(functions, lines, inclusive) with their shares by activity and across ranks, the call
tree and its per-rank rows, the table of every sample, the math libraries' view by
routine and caller, and the app time's split."""

import os
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from perfweave.analysis.samples.classification import CALLER_STACK_ENDS, MATHLIB
from perfweave.model.table import column, records, table

MATHLIB_ROUTINES = 10  # the routines of SamplesResult.mathlib, and callers of each
MATHLIB_CALLERS = 5
TREE_MIN_PCT = 0.5  # nodes below this inclusive share are left out
TREE_MAX_NODES = 300


LIBRARY_THREADS = "[threads of the library]"
STACK_ENDS = "[stack ends in the library]"


def mathlib_view(math_w, app_total, sym):
    """SamplesResult.mathlib of {(routine, static): {"callers": {caller: app samples},
    "objects": {object: app samples}, "unwrapped": app samples}}."""
    if not math_w or app_total <= 0:
        return None
    total = sum(sum(by["callers"].values()) for by in math_w.values())
    rows = []
    for (routine, static), by in math_w.items():
        n = sum(by["callers"].values())
        callers = []
        ranked = sorted(by["callers"].items(), key=lambda kv: -kv[1])
        for caller, x in ranked[:MATHLIB_CALLERS]:
            row = {"name": LIBRARY_THREADS, "function": "", "file": "", "line": 0}
            if caller == CALLER_STACK_ENDS:
                row = dict(row, name=STACK_ENDS)
            elif caller is not None:
                L = sym.resolve(caller[0], [caller[1]])[0]
                fn = L.function or f"{os.path.basename(caller[0])}+{caller[1]:#x}"
                where = f" ({os.path.basename(L.file)}:{L.line})" if L.file and L.line else ""
                row = {
                    "name": fn + where,
                    "function": fn,
                    "file": L.file or "",
                    "line": L.line or 0,
                }
            callers.append(dict(row, pct=100 * x / app_total, routine_pct=100 * x / n))
        rows.append(
            {
                "routine": routine,
                "object": max(by["objects"], key=by["objects"].get),
                "static": static,
                "pct": 100 * n / app_total,
                "math_pct": 100 * n / total,
                "unwrapped_pct": 100 * by["unwrapped"] / app_total,
                "callers": callers,
            }
        )
    rows.sort(key=lambda r: (-r["pct"], r["routine"]))
    return {"pct": 100 * total / app_total, "routines": rows[:MATHLIB_ROUTINES]}


def time_split(app_activity_pct):
    """Performance Reports' split of the app time from its samples (app_activity_pct:
    without the start-up in MPI_Init and the shutdown): compute (memory allocation
    included), MPI (every family), I/O, thread synchronisation, and, only when there is
    some, time in math libraries (apart from compute) and time asleep or blocked; None
    without samples in the app time."""
    if not app_activity_pct:
        return None
    act = app_activity_pct
    split = {
        "compute": act.get("compute", 0) + act.get("alloc", 0),
        "MPI": sum(v for k, v in act.items() if k.startswith("mpi_")),
        "I/O": act.get("io", 0),
        "threads": act.get("thread_sync", 0) + act.get("omp_sync", 0),
    }
    if act.get(MATHLIB, 0):
        split["math libraries"] = act[MATHLIB]
    idle = act.get("sleep", 0) + act.get("wait", 0)
    if idle:
        split["sleep/wait"] = idle
    return split


class PlaceColumns:
    """The columns that the tables of places (functions, lines, call tree nodes) share:
    a place's share of all samples by activity, and its share of each rank's samples
    (min, mean, max, imbalance, worst rank)."""

    def __init__(self, per_rank_total, activities, ranks, events):
        self.per_rank_total, self.activities, self.ranks = per_rank_total, activities, ranks
        self.events = events

    def of(self, arr):
        """{column: value} of a place's samples arr (proc, state), from `pct` on."""
        total = self.per_rank_total.sum()
        share = 100 * arr.sum(axis=1) / np.maximum(self.per_rank_total, 1)  # % per rank
        mean, mx = float(share.mean()), float(share.max())
        row = {
            f"{a}_pct": float(100 * arr[:, s].sum() / total) if arr[:, s].any() else 0.0
            for s, a in enumerate(self.activities[: arr.shape[1]])
        }
        row.update(
            rank_min_pct=float(share.min()),
            rank_mean_pct=mean,
            rank_max_pct=mx,
            imbalance=(mx - mean) / mx if mx > 0 else 0.0,
            worst_rank=self.ranks[int(share.argmax())],
        )
        return row

    def table(self, places, counts, extra):
        """The table of places ({name: (proc, state) samples}), by share, then name:
        name, the `extra` columns of each name, pct, then `of`'s columns and the
        events' counts."""
        total = self.per_rank_total.sum()
        rows = [
            {
                "name": key,
                **extra.get(key, {}),
                "pct": float(100 * arr.sum() / total),
                **self.of(arr),
            }
            for key, arr in places.items()
        ]
        for r in rows:
            c = counts.get(r["name"], np.zeros(len(self.events)))
            r.update({ev: int(c[e]) for e, ev in enumerate(self.events)})
        # ties by name: the order of equal shares must not follow set iteration (string
        # hashes differ from run to run)
        rows.sort(key=lambda r: (-r["pct"], str(r["name"])))
        return _rows_table(rows, self.columns(["name", *_first(extra), "pct"], self.events))

    def columns(self, head, tail):
        """The names of a table's columns: head, the shares' columns, tail."""
        return (
            head
            + [f"{a}_pct" for a in self.activities]
            + ["rank_min_pct", "rank_mean_pct", "rank_max_pct", "imbalance", "worst_rank"]
            + list(tail)
        )


def _first(extra):
    """The names of the extra columns (the same for every place)."""
    return list(next(iter(extra.values()), {}))


def _rows_table(rows, names):
    """A table of rows (dicts) with the columns names, in that order."""
    return table({k: [r[k] for r in rows] for k in names}, len(rows))


def call_tree_table(tree, per_rank_total, activities, ranks, tree_ctr=None, events=()):
    """The call tree of the samples (function paths from the outermost own frame), depth
    first, children by inclusive share: each node's inclusive and exclusive share of all
    samples, by activity, and its inclusive share per rank (min/mean/max, imbalance);
    with --counters, the events counted at its samples (inclusive and exclusive). Returns
    the table (SamplesResult.call_tree) and each node's path (a tuple of names)."""
    total = per_rank_total.sum()
    keep = {p: v for p, v in tree.items() if 100 * v[0].sum() / total >= TREE_MIN_PCT}
    children = {}
    for p in keep:
        children.setdefault(p[:-1], []).append(p)
    cols = PlaceColumns(per_rank_total, activities, ranks, events)
    out, paths = [], []

    def visit(p, parent, depth):
        if len(out) >= TREE_MAX_NODES:
            return
        v = keep[p]
        me = len(out)
        row = {
            "id": me,
            "parent": -1 if parent is None else parent,
            "depth": depth,
            "name": p[-1],
            "path": "/".join(p),
            "inclusive_pct": float(100 * v[0].sum() / total),
            "exclusive_pct": float(100 * v[1].sum() / total),
            **cols.of(v[0]),
        }
        cn = (tree_ctr or {}).get(p, np.zeros((2, len(events)), np.int64))
        for e, ev in enumerate(events):
            row[f"{ev}_inclusive"], row[f"{ev}_exclusive"] = int(cn[0][e]), int(cn[1][e])
        out.append(row)
        paths.append(p)
        for c in sorted(children.get(p, []), key=lambda c: -keep[c][0].sum()):
            visit(c, me, depth + 1)

    for root in sorted(children.get((), []), key=lambda c: -keep[c][0].sum()):
        visit(root, None, 0)
    head = ["id", "parent", "depth", "name", "path", "inclusive_pct", "exclusive_pct"]
    tail = [f"{ev}_{k}" for k in ("inclusive", "exclusive") for ev in events]
    return _rows_table(out, cols.columns(head, tail)), paths


def _per_sample_s(seconds):
    """The wall time of one weighted sample: the weights sum to the samples, so one is
    the wall time sampled (all threads) / the samples."""
    return sum(float(x.sum()) for x in seconds) / max(sum(map(len, seconds)), 1)


def call_tree_seconds(tree, seconds):
    """SamplesResult.call_tree_seconds: every node's exclusive wall time, none left out."""
    per_sample_s = _per_sample_s(seconds)
    return {path: v[1] * per_sample_s for path, v in tree.items()}


def call_tree_per_rank(tree, tree_table, paths, per_rank_total, activities, ranks, seconds):
    """SamplesResult.call_tree_per_rank: per node of the tree, rank and activity with
    samples, the node's samples' worth (inclusive and exclusive), shares of the rank's
    samples and their wall time."""
    per_sample_s = _per_sample_s(seconds)
    names = (
        "node",
        "rank",
        "activity",
        "samples",
        "exclusive_samples",
        "pct",
        "exclusive_pct",
        "seconds",
        "exclusive_seconds",
    )
    cols = {k: [] for k in names}
    for node, path in zip(tree_table["id"].tolist(), paths):
        v = tree[path]  # (incl/excl, proc, state)
        for j, s in zip(*np.nonzero(v[0])):
            inc, exc = float(v[0, j, s]), float(v[1, j, s])
            total = max(per_rank_total[j], 1)
            for k, x in zip(
                names,
                (
                    node,
                    ranks[j],
                    activities[s],
                    round(inc),
                    round(exc),
                    100 * inc / total,
                    100 * exc / total,
                    inc * per_sample_s,
                    exc * per_sample_s,
                ),
            ):
                cols[k].append(x)
    return table(
        {
            k: column(v) if v else np.zeros(0, object if k == "activity" else float)
            for k, v in cols.items()
        }
    )


def samples_table(procs, activities, events, activity, leaf, line, stack, deltas, seconds):
    """SamplesResult.samples: every sample, by rank, process, thread and time."""
    names = np.array(activities, object)
    parts = []
    for p, act, lf, ln, st, delta, secs in zip(procs, activity, leaf, line, stack, deltas, seconds):
        rec = p.records
        n = len(rec)
        cols = {
            "time_s": (rec["t"] - p.meta.get("t_start", 0)) / 1e9,
            "rank": np.full(n, p.rank, np.int64),
            "process": column([p.name] * n),
            "thread": rec["thread"].astype(np.int64),
            "activity": names[np.clip(np.asarray(act, np.int64), 0, len(activities) - 1)],
            "leaf": column(lf),
            "line": column(ln),
            "stack": column([";".join(s) for s in st]),
            "seconds": np.asarray(secs, np.float64),
        }
        for e, ev in enumerate(events):
            cols[ev] = delta[:, e].astype(np.int64) if delta.shape[1] > e else np.zeros(n, np.int64)
        parts.append(table(cols, n))
    out = np.concatenate(parts)
    _, process = np.unique(out["process"], return_inverse=True)
    order = np.lexsort((out["time_s"], out["thread"], process.reshape(-1), out["rank"]))
    return out[order]


@dataclass
class SamplesResult:
    """Where the sampled time goes (analyze): the summary of the samples, and its tables
    (structured arrays, model/table.py). Shares (`pct`) are of all samples, each
    weighted by the wall time it stands for (the package's _seconds), unless said
    otherwise.

    Tables of places, sorted by `pct` (then name):
      functions (self time), inclusive (anywhere on the stack): name, pct, ACTIVITY_pct
        (per activity of `activities`, 0 where none), rank_min_pct / rank_mean_pct /
        rank_max_pct (the place's share of each rank's samples), imbalance ((max - mean)
        / max), worst_rank; with counters one column per event (its increase at the
        place's samples);
      lines (self time of a source line): name ('fn (file.c:12)'), function, file (the
        source's path, "" without debug information), line (0 without), then as
        functions.
    call_tree: one row per node, depth first, children by inclusive share (nodes under
      TREE_MIN_PCT % left out, TREE_MAX_NODES at most): id, parent (-1 for a root),
      depth, name, path ('main/solve/kernel'), inclusive_pct, exclusive_pct, then the
      columns of the places from ACTIVITY_pct (inclusive) to worst_rank; with counters
      EVENT_inclusive, EVENT_exclusive.
    call_tree_per_rank (built on first use): one row per (node, rank, activity) with
      samples: node (call_tree's id), rank, activity, samples, exclusive_samples (the
      samples' weights, rounded), pct, exclusive_pct (of the rank's samples), seconds,
      exclusive_seconds.
    call_tree_seconds (built on first use): {path (a tuple of names, as call_tree's
      path split): (processes, activities) array of the node's exclusive wall time (s),
      processes in the order of `ranks`}, for every node of the tree, those call_tree
      leaves out (TREE_MIN_PCT, TREE_MAX_NODES) included: each sample's seconds once,
      so that a process's row sums to its sampled thread-seconds
      (analysis/callpaths.py).
    mathlib: the app time's samples in math libraries (MATHLIB), None without any:
      {"pct" (of the app time's samples), "routines": the MATHLIB_ROUTINES largest, each
      {"routine" (the routine its samples serve: classification.py _math_frames),
      "object" (the loaded object of most of its samples' outermost frame in a
      library), "static" (found by its name outside any math library: linked
      statically), "pct", "math_pct" (of the math samples), "unwrapped_pct" (of the
      app time's samples: called from outside the library without perfweave's
      wrapper), "callers": the MATHLIB_CALLERS largest, each
      {"name" ('solve (solver.f90:211)'; '[threads of the library]' for a thread with
      no frame outside it but its start, and its other samples; '[stack ends in the
      library]' where the walk stopped inside it in another thread), "function", "file",
      "line", "pct", "routine_pct"}}]}.
    samples (built on first use): one row per sample, by rank, process, thread and time:
      time_s (since the process's start), rank, process, thread, activity (its name),
      leaf (the self function), line (the self line's name), stack (the path of
      functions, outermost first, ';'-joined), seconds (the wall time it stands for),
      with counters one column per event (its increase since the thread's previous
      sample).

    to_json(top) is the report's "samples" (docs/mpi-profile.md)."""

    processes: int
    sample_count: int  # the samples' worth of wall time (weights), rounded: JSON "samples"
    ranks: list  # per process, in the order of the per-rank values
    recorded_activities: list  # the activities the runtime recorded (the first process's)
    activities: list  # the names of the activities (ACTIVITIES)
    activity_pct: dict  # {activity: % of all samples}
    activity_per_rank_pct: dict  # {activity: [% of each rank's samples]}, with samples
    app_samples: int  # samples of the app time (without start-up and shutdown)
    app_activity_pct: dict  # {activity: % of the app time's samples}, {} without
    activity_functions: dict  # {activity: [{name, pct}]}: library functions that decided
    call_tree: np.ndarray
    timeline: dict  # analysis/timebins.py: the activity over time
    functions: np.ndarray
    lines: np.ndarray
    inclusive: np.ndarray
    counters: list  # the --counters events
    counters_total: dict
    last_interval_ms: float
    thinned: int
    dropped: dict
    kept_per_thread_max: int
    phase_pct: dict = None  # {phase: % of samples}, with MPI_Init/Finalize windows
    phase_samples: dict = None
    time_split: dict = None  # sampling.time_split of app_activity_pct
    mathlib: dict = None  # the math libraries' app samples by routine and caller
    _build: dict = field(default_factory=dict, repr=False)  # the tables built on first use

    @cached_property
    def samples(self):
        return self._build["samples"]()

    @cached_property
    def call_tree_per_rank(self):
        return self._build["call_tree_per_rank"]()

    @cached_property
    def call_tree_seconds(self):
        return self._build["call_tree_seconds"]()

    def to_json(self, top=None):
        """The report's "samples" dict; top: rows of the tables of places (None: all)."""
        out = {
            "processes": self.processes,
            "samples": self.sample_count,
            "ranks": self.ranks,
            "recorded_activities": self.recorded_activities,
            "activities": self.activities,
            "activity_pct": self.activity_pct,
            "activity_per_rank_pct": self.activity_per_rank_pct,
            "app_samples": self.app_samples,
            "app_activity_pct": self.app_activity_pct,
            "activity_functions": self.activity_functions,
            "call_tree": [self._node_json(r) for r in records(self.call_tree)],
            "timeline": self.timeline,
            "functions": [self._place_json(r) for r in records(self.functions[:top])],
            "lines": [self._place_json(r) for r in records(self.lines[:top])],
            "inclusive": [self._place_json(r) for r in records(self.inclusive[:top])],
            "counters": self.counters,
            "counters_total": self.counters_total,
            "last_interval_ms": self.last_interval_ms,
            "thinned": self.thinned,
            "dropped": self.dropped,
            "kept_per_thread_max": self.kept_per_thread_max,
        }
        if self.phase_pct is not None:
            out["phase_pct"] = self.phase_pct
            out["phase_samples"] = self.phase_samples
        out["time_split"] = self.time_split
        out["mathlib"] = self.mathlib
        return out

    def _shares_json(self, r):
        return {
            "by_activity_pct": {a: r[f"{a}_pct"] for a in self.activities if r[f"{a}_pct"] != 0},
            "per_rank_pct": {
                "min": r["rank_min_pct"],
                "mean": r["rank_mean_pct"],
                "max": r["rank_max_pct"],
            },
            "imbalance": r["imbalance"],
            "worst_rank": r["worst_rank"],
        }

    def _place_json(self, r):
        out = {"name": r["name"], "pct": r["pct"], **self._shares_json(r)}
        if r.get("file"):
            out.update(function=r["function"], file=r["file"], line=r["line"])
        if self.counters:
            out["counters"] = {ev: r[ev] for ev in self.counters}
        return out

    def _node_json(self, r):
        out = {k: r[k] for k in ("id", "parent", "depth", "name", "inclusive_pct", "exclusive_pct")}
        if out["parent"] < 0:
            out["parent"] = None
        out.update(self._shares_json(r))
        if self.counters:
            for k in ("inclusive", "exclusive"):
                out[f"counters_{k}"] = {ev: r[f"{ev}_{k}"] for ev in self.counters}
        return out

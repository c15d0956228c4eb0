"""One table of metric x call path x rank (callpath_metrics): what `perfweave compare
--by callpath`, the Caliper json-split export and the CUBE export share, so that the
three agree node for node and value for value.

The nodes are the sampled call tree (analysis/samples/: a node's exclusive time per
process from its samples' seconds) and the MPI call sites of the profile, each placed
under its call path with the MPI function as the leaf (exact MPI time, visits and bytes;
not sampled). An experiment without samples (an import, a --no-sample run) has the MPI
call-site nodes only.

Where a call site goes: the runtime keeps its caller's return address and, with
--callsite-depth N > 1, N - 1 deeper frames; with the default of one frame the site's
own path is (caller, MPI function), and the samples say how the program reached the
caller. The site's path is put under the sampled path that ends with it: for each rank
the one where that rank's samples spent most time (in the MPI function under it, else in
the caller), so that a caller reached along two paths places each rank's calls where
that rank spends its time there. A site no sampled path ends with (no samples, or none
in that code) keeps its own path, rooted at its outermost known frame; one without a
caller (an imported trace, the sites beyond --max-callsites) is put under UNKNOWN_CALLER.

Names are functions, never addresses: a frame that has no symbol is named after its
object ('[libfoo.so]'), so that experiments of two builds join on the same name.
"""

import os
import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis import phases, samples as samples_analysis
from perfweave.analysis.samples.names import is_system, is_wrapper
from perfweave.model.profile import BRACKET
from perfweave.symbols import Symbolizer

UNKNOWN_CALLER = "[unknown caller]"  # MPI calls whose call site was not recorded
# the samples analysis names a frame without a symbol 'object+0x1a2b'
_ADDRESS = re.compile(r"^(.*)\+0x[0-9a-fA-F]+$")


@dataclass
class Metric:
    name: str  # time, mpi_time, visits, bytes_sent, bytes_recv (METRICS)
    unit: str  # "s", "count", "bytes"
    inclusive: bool  # values include the node's subtree (False: exclusive, "self")
    values: np.ndarray  # float64 [nodes x ranks]


# name: (unit, what it is), in the order callpath_metrics gives them
METRICS = {
    "time": ("s", "sampled wall time, exclusive (thread-seconds of the node's own samples)"),
    "mpi_time": ("s", "time in the MPI call, exact (the profile's, without MPI_Init/Finalize)"),
    "visits": ("count", "MPI calls"),
    "bytes_sent": ("bytes", "bytes the MPI calls sent"),
    "bytes_recv": ("bytes", "bytes the MPI calls received"),
}


@dataclass
class CallpathMetrics:
    """Metrics per call path and rank. Node i is named names[i] under parent[i] (-1: a
    root); a parent precedes its children and siblings have distinct names, so path(i)
    identifies the node. Column j is MPI rank ranks[j] (-1: a process without MPI, a
    column each). Every metric is exclusive (`inclusive` False); inclusive() sums one
    over the subtrees. notes: what the placement of call sites could not decide."""

    names: list
    parent: np.ndarray  # int64 [nodes]
    ranks: np.ndarray  # int32 [ranks]
    metrics: dict  # name -> Metric
    notes: list = field(default_factory=list)

    def path(self, i):
        """The names from the root to node i."""
        out = []
        while i >= 0:
            out.append(self.names[i])
            i = int(self.parent[i])
        return tuple(reversed(out))

    def paths(self):
        """path(i) of every node, in order."""
        out = []
        for i, name in enumerate(self.names):
            p = int(self.parent[i])
            out.append((out[p] if p >= 0 else ()) + (name,))
        return out

    def inclusive(self, name):
        """Metric `name`'s values summed over each node's subtree [nodes x ranks]."""
        v = self.metrics[name].values.copy()
        if self.metrics[name].inclusive:
            return v
        for i in range(len(self.names) - 1, -1, -1):  # children after their parent
            p = self.parent[i]
            if p >= 0:
                v[p] += v[i]
        return v

    @classmethod
    def from_literal(cls, paths, ranks, **metrics):
        """A table of plain values, for tests: paths ('/'-joined or tuples, parents
        included or not), ranks, and per metric name a list of per-rank rows parallel to
        paths (units from METRICS)."""
        paths = [tuple(p.split("/")) if isinstance(p, str) else tuple(p) for p in paths]
        names, parent, index = _nodes(paths)
        out = {}
        for m, rows in metrics.items():
            v = np.zeros((len(names), len(ranks)))
            for p, row in zip(paths, rows):
                v[index[p]] += row
            out[m] = Metric(m, METRICS[m][0], False, v)
        return cls(names, parent, np.asarray(ranks, np.int32), out)


def samples_of(experiment, symbolizer=None):
    """The SamplesResult of experiment's samples (as the report's), None without any."""
    procs = [p for p in experiment.samples if len(p.records)]
    if not procs:
        return None
    windows = phases.windows(experiment.profile)
    return samples_analysis.analyze(procs, symbolizer=symbolizer, windows=windows)


def _nodes(paths):
    """names, parent and {path: node} of the tree of paths and their prefixes: nodes in
    sorted order of their paths, so that a parent precedes its children."""
    every = set()
    for p in paths:
        every.update(p[:n] for n in range(1, len(p) + 1))
    ordered = sorted(every)
    index = {p: i for i, p in enumerate(ordered)}
    parent = np.array([index[p[:-1]] if len(p) > 1 else -1 for p in ordered], np.int64)
    return [p[-1] for p in ordered], parent, index


def _name(name):
    """A frame's name without an address."""
    m = _ADDRESS.match(name)
    return f"[{os.path.basename(m.group(1)) or '?'}]" if m else name


def _frame_names(location, path):
    """The function names of one frame, outermost first: the function it was compiled
    into, then those inlined into it (as the samples' call tree names a frame)."""
    if location is None or not location.function:
        return (f"[{os.path.basename(path) or '?'}]",)
    inl = tuple(f for f, _, _ in reversed(location.inlined_into) if f)
    return inl + (location.function,)


def _site_paths(profile, rows, symbolizer, imported):
    """Each site row's own path (outermost known frame first, the MPI function last):
    its deeper frames and caller, frames in system libraries left out."""
    wanted = {}
    for i in rows:
        s = profile.sites[i]
        if s["object"] >= 0:
            wanted.setdefault(int(s["object"]), set()).add(int(s["offset"]))
        f = profile.frames[s["first_frame"] : s["first_frame"] + s["nframes"]]
        for m, o in zip(f["object"].tolist(), f["offset"].tolist()):
            if m >= 0:
                wanted.setdefault(m, set()).add(o)
    names = {}
    for m, offs in wanted.items():
        path = profile.objects[m] if m < len(profile.objects) else ""
        if is_system(path) and not is_wrapper(path):
            continue  # libc's start-up frames, the MPI library's own: not the program's
        offs = sorted(offs)
        for o, loc in zip(offs, symbolizer.resolve(path, offs)):
            names[(m, o)] = _frame_names(loc, path)
    out = []
    for i in rows:
        s = profile.sites[i]
        fn = profile.functions[s["fn"]]
        if s["object"] < 0 or imported:
            out.append((UNKNOWN_CALLER, fn))
            continue
        f = profile.frames[s["first_frame"] : s["first_frame"] + s["nframes"]]
        frames = [(int(s["object"]), int(s["offset"]))] + list(
            zip(f["object"].tolist(), f["offset"].tolist())
        )
        p = tuple(x for k in reversed(frames) for x in names.get(k, ()))
        while len(p) > 1 and p[0] == "_start":
            p = p[1:]
        out.append((p or (UNKNOWN_CALLER,)) + (fn,))
    return out


def place(own, sampled, columns, notes):
    """Per column, the sampled path that site path `own` goes under (its full path,
    the MPI function last), or `own` where no sampled path ends with it. sampled: {path:
    exclusive seconds per column}."""
    if own[0] == UNKNOWN_CALLER:
        return [own] * columns
    caller = own[:-1]
    leaf = [p for p in sampled if p[-len(own) :] == own and len(p) >= len(own)]
    if leaf:
        weight = {p: sampled[p] for p in leaf}
        full = {p: p for p in leaf}
    else:
        # the MPI call itself was not sampled: where the caller was
        inner = {}
        for p, v in sampled.items():
            for n in range(len(caller), len(p) + 1):
                if p[n - len(caller) : n] == caller:
                    q = p[:n]
                    inner[q] = inner.get(q, 0) + v
        weight = inner
        full = {q: q + own[-1:] for q in inner}
    if not weight:
        return [own] * columns
    cands = sorted(weight)
    w = np.array([weight[c] for c in cands])  # [candidates x columns]
    best = np.where(w.max(axis=0) > 0, w.argmax(axis=0), int(w.sum(axis=1).argmax()))
    if len(cands) > 1:
        notes.append(
            f"{'/'.join(own)}: reached along {len(cands)} sampled paths; each rank's "
            "calls placed where its samples spent most time (--callsite-depth > 1 tells them apart)"
        )
    return [full[cands[b]] for b in best]


def callpath_metrics(experiment, symbolizer=None, samples=None):
    """The CallpathMetrics of experiment (readers' open_experiment result). samples: its
    samples' analysis (analysis/samples/ SamplesResult) where the caller has it already,
    else it is made here."""
    sym = symbolizer or Symbolizer()
    profile = experiment.profile
    sm = samples if samples is not None else samples_of(experiment, sym)

    # the columns: MPI ranks by number (the profile's and the samples'), then each
    # process without MPI
    prof_ranks = profile.ranks["rank"][profile.ranks["rank"] >= 0] if profile.mpi else []
    mpi_cols = sorted(
        set(int(r) for r in prof_ranks) | {r for r in (sm.ranks if sm else []) if r >= 0}
    )
    col_of_rank = {r: j for j, r in enumerate(mpi_cols)}
    ranks = list(mpi_cols)
    proc_col = []  # the column of each sampled process
    for r in sm.ranks if sm else []:
        if r >= 0:
            proc_col.append(col_of_rank[r])
        else:
            proc_col.append(len(ranks))
            ranks.append(-1)
    ncol = len(ranks)

    # sampled: exclusive seconds per path and column
    sampled = {}
    if sm is not None:
        for path, v in sm.call_tree_seconds.items():
            path = tuple(_name(n) for n in path)
            row = sampled.setdefault(path, np.zeros(ncol))
            np.add.at(row, proc_col, v.sum(axis=1))

    # MPI call sites: exact values per (site row, rank), placed per rank
    sites = profile.sites
    mpi_fns = profile.function_ids("mpi")
    bracket = [i for i in mpi_fns if profile.functions[i] in BRACKET]
    keep = (
        np.isin(sites["fn"], mpi_fns)
        & ~np.isin(sites["fn"], bracket)
        & np.isin(sites["rank"], list(col_of_rank))
    )
    rows = np.flatnonzero(keep)
    own = _site_paths(profile, rows, sym, bool(experiment.meta.get("imported_from")))
    notes = []
    placed = {}
    site_values = []  # (full path, column, time, visits, sent, recv)
    for i, p in zip(rows.tolist(), own):
        if p not in placed:
            placed[p] = place(p, sampled, ncol, notes)
        s = sites[i]
        j = col_of_rank[int(s["rank"])]
        site_values.append(
            (placed[p][j], j, s["total_ns"] / 1e9, s["count"], s["bytes_sent"], s["bytes_recv"])
        )

    names, parent, index = _nodes(list(sampled) + [v[0] for v in site_values])
    shape = (len(names), ncol)
    values = {m: np.zeros(shape) for m in METRICS}
    for path, row in sampled.items():
        values["time"][index[path]] += row
    if site_values:
        node = np.array([index[v[0]] for v in site_values], np.int64)
        col = np.array([v[1] for v in site_values], np.int64)
        for k, m in enumerate(("mpi_time", "visits", "bytes_sent", "bytes_recv"), start=2):
            np.add.at(values[m], (node, col), np.array([v[k] for v in site_values], float))
    return CallpathMetrics(
        names=names,
        parent=parent,
        ranks=np.array(ranks, np.int32),
        metrics={m: Metric(m, METRICS[m][0], False, values[m]) for m in METRICS},
        notes=notes,
    )

"""Where the sampled time goes: per function and per source line, the share of samples
(exclusive: the function is the innermost frame of the program's code; inclusive: it is
anywhere on the stack), split by what the thread was doing (computation, MPI family),
across ranks with min/mean/max and imbalance (max - mean) / max.

A sample's innermost frame is often in a library the program called (libc, libm, MPI);
"exclusive" time is charged to the innermost frame whose object is the program or one
of its own libraries (not a system or MPI library), so time in memcpy inside a solver
loop counts for the solver, as in MAP's "self time of the source line".

analyze() puts together the parts of this package, one job each: names.py (the names a
frame is classified by, from the specs' generated tables), classification.py (each
sample's activity, ACTIVITIES, classify), rooting.py (where a thread's path of
functions starts in the call tree) and tables.py (the tables of SamplesResult)."""

import os

import numpy as np

from perfweave.analysis import phases, timebins
from perfweave.analysis.phases import APP, PHASES
from perfweave.analysis.regions import tree_prefixes
from perfweave.analysis.samples.classification import ACTIVITIES, classify, classify_with_reasons
from perfweave.analysis.samples.names import is_system, is_wrapper, mpi_call_name
from perfweave.analysis.samples.rooting import IDLE_WORKERS, STATIC_INIT, rooted_paths
from perfweave.analysis.samples.tables import (
    PlaceColumns,
    SamplesResult,
    call_tree_per_rank,
    call_tree_seconds,
    call_tree_table,
    mathlib_view,
    samples_table,
    time_split,
)
from perfweave.symbols import Symbolizer

# analyze, and what other analyses take of the samples (docs/samples.md: classify)
__all__ = ["ACTIVITIES", "SamplesResult", "analyze", "classify"]


def analyze(procs, symbolizer=None, windows=None, regions=None):
    """The SamplesResult of the samples procs (an experiment's samples: a list of
    model.samples.ProcessSamples), or None without samples. windows: per rank, its MPI_Init
    and MPI_Finalize times (analysis/phases.py windows): the samples in MPI_Init
    (start-up) and from MPI_Finalize on (shutdown) stay in the call tree and the tables
    (shares of the samples) but not in the app time's activities (app_activity_pct,
    time_split, activity_functions), which the advice quotes. regions: the program's
    regions' intervals (model/regions.py Regions.intervals): a sample inside a phase or
    region is under the nodes "phase NAME", "region NAME" (nested as they are) at the
    root of the call tree (docs/regions.md "Where they appear")."""
    procs = [p for p in procs if len(p.records)]
    if not procs:
        return None
    sym = symbolizer or Symbolizer()
    activities = list(ACTIVITIES)  # the names of the activity indexes, this result's
    classified = classify_with_reasons(procs, sym, activities)
    # every (object path, offset) of interest: the chosen frame of each sample and all
    # frames for inclusive time, resolved once per object
    per_proc = []
    weights = []  # per process: each sample's wall time (_seconds)
    wanted = {}
    for p, (act, why, _) in zip(procs, classified):
        rec = p.records
        d = rec["depth"].astype(np.int64)
        objs = rec["object"]
        system = np.array([is_system(m) and not is_wrapper(m) for m in p.objects] + [True], bool)
        objpath = p.objects + [""]
        oidx = np.where(objs >= 0, objs, len(p.objects))
        valid = np.arange(objs.shape[1])[None, :] < d[:, None]
        own = valid & ~system[oidx]
        # the innermost own frame, else the innermost frame
        first_own = np.where(own.any(axis=1), own.argmax(axis=1), 0)
        chosen_m = oidx[np.arange(len(rec)), first_own]
        chosen_o = rec["offset"][np.arange(len(rec)), first_own]
        keys = [(objpath[m], int(o)) for m, o in zip(chosen_m.tolist(), chosen_o.tolist())]
        stacks = []
        for i in range(len(rec)):
            frames = [
                (objpath[oidx[i, k]], int(rec["offset"][i, k]))
                for k in range(int(d[i]))
                if own[i, k]
            ]
            stacks.append(frames[::-1])  # outermost first
        for k in keys + [k for st in stacks for k in st]:
            wanted.setdefault(k[0], set()).add(k[1])
        per_proc.append((p, keys, act, _deltas(p), stacks, why))
        weights.append(_seconds(p))
    # weights scaled so that they sum to the samples: totals stay sample counts, and
    # shares are of wall time, within a rank and across ranks (thread-seconds)
    wall = sum(float(w.sum()) for w in weights)
    seconds = weights  # each sample's wall time (s)
    weights = [
        w * (sum(map(len, weights)) / wall) if wall > 0 else np.ones(len(w)) for w in weights
    ]
    loc = {}
    for m, offs in wanted.items():
        offs = sorted(offs)
        if m and not m.startswith("["):
            for o, L in zip(offs, sym.resolve(m, offs)):
                loc[(m, o)] = L
    # frames in perfweave's MPI wrappers: an MPI_* function is the MPI call (named as in
    # C, for Fortran bindings too, without file:line); its own helpers are left out
    mpi_frame = {}
    for k, L in list(loc.items()):
        if is_wrapper(k[0]):
            name = mpi_call_name(L.function)
            mpi_frame[k] = name
            if name:
                loc[k] = type(L)(k[0], k[1], name)

    def clean(stack):  # outermost first
        out = []
        for k in stack:
            if k in mpi_frame:
                name = mpi_frame[k]
                if not name or (out and mpi_frame.get(out[-1]) == name):
                    continue  # a helper; a binding calling the C one
            out.append(k)
        return out

    # per sample: its stack, self frame (an MPI call is the place of an MPI sample),
    # and self line (the program's line: the MPI call's, for an MPI sample)
    line_keys = []
    for j, (p, keys, act, delta, stacks, why) in enumerate(per_proc):
        stacks = [clean(st) for st in stacks]
        keys = [st[-1] if st else k for st, k in zip(stacks, keys)]
        lkeys = [
            next((x for x in reversed(st) if x not in mpi_frame), k) for st, k in zip(stacks, keys)
        ]
        per_proc[j] = (p, keys, act, delta, stacks, why)
        line_keys.append(lkeys)
    ranks = [p.rank for p, *_ in per_proc]
    line_loc = {}  # line name -> (function, file, line)

    def fn_of(k):
        L = loc.get(k)
        return L.function if L and L.function else f"{os.path.basename(k[0]) or '?'}+{k[1]:#x}"

    chains = {}

    def chain_of(k):
        """The functions of one frame, outermost first: the function the code was
        compiled into, then those inlined into it (DWARF), so inlining keeps a caller."""
        c = chains.get(k)
        if c is None:
            L = loc.get(k)
            c = (f for f, _, _ in reversed(L.inlined_into) if f) if L and L.function else ()
            c = chains[k] = tuple(c) + (fn_of(k),)
        return c

    def line_of(k):
        L = loc.get(k)
        if L and L.file and L.line:
            name = f"{L.function or '?'} ({os.path.basename(L.file)}:{L.line})"
            line_loc[name] = (fn_of(k), L.file, L.line)
            return name
        return fn_of(k)

    # each sample's path of function names, outermost first, its thread rooted where the
    # program started it (rooted_paths); self names of samples rooted there
    paths, roots_self, tree_paths = [], [], []
    for p, keys, act, delta, stacks, why in per_proc:
        named = [tuple(f for k in st for f in chain_of(k)) for st in stacks]
        rooted = rooted_paths(p, named, act, sym)
        paths.append(rooted)
        if regions is not None and len(regions):
            pre = tree_prefixes(regions, p)
            tree_paths.append([a + (r or ("?",)) for a, r in zip(pre, rooted)])
        else:
            tree_paths.append(rooted)
        roots_self.append([r[-1] if r and not n else None for r, n in zip(rooted, named)])

    # per rank: samples by (function) exclusive/inclusive and by (line) exclusive; the
    # counters' increase since the thread's previous sample goes where the sample is
    nst = max(len(activities), 1)
    events = list(procs[0].meta.get("counters") or [])
    nev = len(events)
    tables = {"function": {}, "line": {}, "inclusive": {}}
    counts = {name: {} for name in tables}
    totals = np.zeros((len(per_proc), nst))
    app_totals = np.zeros((len(per_proc), nst))  # the samples of the app time only
    phase_w = np.zeros(len(PHASES))
    phase_n = np.zeros(len(PHASES), np.int64)
    ctr_total = np.zeros(max(nev, 1))
    tree = {}  # function path -> [incl, excl] (proc, state)
    callee = {}  # (activity, library function) -> samples
    tree_ctr = {}  # function path -> [incl, excl] (event)
    math_w = {}  # (routine, static) -> {"callers", "objects": {key: app samples}, "unwrapped"}
    for j, (p, keys, st, delta, stacks, why) in enumerate(per_proc):
        st = np.clip(st, 0, nst - 1)
        w = weights[j]
        np.add.at(totals[j], st, w)
        phase = phases.of_samples(p.records["t"], (windows or {}).get(p.rank))
        np.add.at(phase_w, phase, w)
        phase_n += np.bincount(phase, minlength=len(PHASES))
        app = phase == APP
        np.add.at(app_totals[j], st[app], w[app])
        for i, mf in classified[j][2].items():
            if app[i]:
                x = float(w[i])
                by = math_w.setdefault(
                    (mf.routine, mf.static), {"callers": {}, "objects": {}, "unwrapped": 0.0}
                )
                by["callers"][mf.caller] = by["callers"].get(mf.caller, 0.0) + x
                by["objects"][mf.object] = by["objects"].get(mf.object, 0.0) + x
                by["unwrapped"] += x * mf.unwrapped
        for a, fn, x, in_app in zip(st.tolist(), why, w.tolist(), app.tolist()):
            if fn and in_app:
                callee[(activities[a], fn)] = callee.get((activities[a], fn), 0) + x
        if nev:
            ctr_total += delta.sum(axis=0)
        for i, s in enumerate(np.clip(st, 0, nst - 1).tolist()):
            path = tree_paths[j][i] or ("?",)
            for n in range(1, len(path) + 1):
                node = tree.setdefault(path[:n], np.zeros((2, len(per_proc), nst)))
                node[0, j, s] += w[i]
                if nev:
                    tree_ctr.setdefault(path[:n], np.zeros((2, nev), np.int64))[0] += delta[i]
            tree[path][1, j, s] += w[i]
            if nev:
                tree_ctr[path][1] += delta[i]
        for i, (k, lk, s) in enumerate(zip(keys, line_keys[j], st.tolist())):
            rs = roots_self[j][i]
            for name, key in (("function", rs or fn_of(k)), ("line", rs or line_of(lk))):
                row = tables[name].setdefault(key, np.zeros((len(per_proc), nst)))
                row[j, s] += w[i]
                if nev:
                    counts[name][key] = counts[name].get(key, 0) + delta[i]
            for f in set(paths[j][i]) - {IDLE_WORKERS, STATIC_INIT}:
                row = tables["inclusive"].setdefault(f, np.zeros((len(per_proc), nst)))
                row[j, s] += w[i]
                if nev:
                    counts["inclusive"][f] = counts["inclusive"].get(f, 0) + delta[i]
    per_rank_total = totals.sum(axis=1)  # samples' worth of each rank's wall time
    cols = PlaceColumns(per_rank_total, activities, ranks, events)

    def places(name):
        extra = {}
        if name == "line":
            for key in tables[name]:
                # the function, source file and line of a line's name; a place without
                # one (no debug information) is named by its function, file "", line 0
                f, file, line = line_loc.get(key, (key, "", 0))
                extra[key] = {"function": f, "file": file, "line": line}
        return cols.table(tables[name], counts[name], extra)

    threads = [t for p in procs for t in p.meta.get("threads", [])]
    all_samples = per_rank_total.sum()
    app_samples = app_totals.sum()
    tree_table, tree_paths = call_tree_table(
        tree, per_rank_total, activities, ranks, tree_ctr, events
    )
    app_activity_pct = (
        {activities[s]: float(100 * app_totals[:, s].sum() / app_samples) for s in range(nst)}
        if app_samples > 0
        else {}
    )
    procs_ = [p for p, *_ in per_proc]

    def sample_table():
        return samples_table(
            procs_,
            activities,
            events,
            activity=[a for _, _, a, _, _, _ in per_proc],
            leaf=[[fn_of(k) for k in keys] for _, keys, *_ in per_proc],
            line=[[line_of(k) for k in lk] for lk in line_keys],
            stack=paths,
            deltas=[d for _, _, _, d, _, _ in per_proc],
            seconds=seconds,
        )

    def tree_per_rank_table():
        return call_tree_per_rank(
            tree, tree_table, tree_paths, per_rank_total, activities, ranks, seconds
        )

    def whole_tree():
        return call_tree_seconds(tree, seconds)

    return SamplesResult(
        processes=len(procs),
        sample_count=int(round(all_samples)),
        ranks=ranks,
        recorded_activities=procs[0].meta.get("activities") or ["compute"],
        activities=activities,
        activity_pct={
            activities[s]: float(100 * totals[:, s].sum() / all_samples) for s in range(nst)
        },
        activity_per_rank_pct={
            activities[s]: [float(x) for x in 100 * totals[:, s] / np.maximum(per_rank_total, 1)]
            for s in range(nst)
            if totals[:, s].any()
        },
        # of the app time's samples (the start-up and the shutdown are the MPI
        # library's and the launcher's): the report's time split and the advice
        app_samples=int(phase_n[APP]),
        app_activity_pct=app_activity_pct,
        # the library functions that made app samples I/O, allocation, synchronisation
        activity_functions={
            a: sorted(
                (
                    {"name": w, "pct": float(100 * n / app_samples)}
                    for (a2, w), n in callee.items()
                    if a2 == a
                ),
                key=lambda r: -r["pct"],
            )[:10]
            for a in sorted({a for a, _ in callee})
        },
        call_tree=tree_table,
        timeline=timebins.from_samples(procs, activities, [a for a, *_ in classified], seconds),
        functions=places("function"),
        lines=places("line"),
        inclusive=places("inclusive"),
        counters=events,
        counters_total={ev: int(ctr_total[e]) for e, ev in enumerate(events)},
        last_interval_ms=max((t["interval_ns"] for t in threads), default=0) / 1e6,
        thinned=max((t["thinned"] for t in threads), default=0),
        dropped={
            k: sum(p.meta.get("dropped", {}).get(k, 0) for p in procs)
            for k in ("threads", "timers", "memory")
        },
        kept_per_thread_max=max((t["kept"] for t in threads), default=0),
        phase_pct={ph: float(100 * phase_w[k] / all_samples) for k, ph in enumerate(PHASES)}
        if windows
        else None,
        phase_samples={ph: int(phase_n[k]) for k, ph in enumerate(PHASES)} if windows else None,
        time_split=time_split(app_activity_pct),
        mathlib=mathlib_view(math_w, app_totals.sum(), sym),
        _build={
            "samples": sample_table,
            "call_tree_per_rank": tree_per_rank_table,
            "call_tree_seconds": whole_tree,
        },
    )


def _seconds(p):
    """Each sample's wall time in seconds: the time since its thread's previous kept
    sample; a thread's first sample stands for its thread's median interval (when the
    thread started is not recorded), or the thread's last interval setting if it has
    only one.

    Why samples are weighted and not counted: the sampler's timer is wall-clock, but a
    thread waiting for a core (a busy or oversubscribed node) takes the timer's signal
    only when it runs again, and the timer, re-armed in the handler, does not fire in
    between: one sample, at the place where the thread was descheduled, for the whole
    wait. Counted, that place would get one interval of a wait of tens of ms: measured
    at a load of 11 on 2 cores, counts gave a function of 80 % of the wall time (by the
    program's own clock) 55 %, and a rank's 30 % in MPI_Barrier (by the MPI profile)
    17 %; weights were within 2 and 0.2 points of them."""
    rec = p.records
    order = np.lexsort((rec["t"], rec["thread"]))
    t = rec["t"][order].astype(np.int64)
    th = rec["thread"][order].astype(np.int64)
    dt = np.diff(t, prepend=t[:1]).astype(float) / 1e9
    first = np.r_[True, th[1:] != th[:-1]] if len(th) else np.zeros(0, bool)
    threads = p.meta.get("threads") or []
    for k in np.unique(th):
        mine = th == k
        later = dt[mine & ~first]
        setting = threads[k]["interval_ns"] / 1e9 if 0 <= k < len(threads) else 0.0
        dt[mine & first] = np.median(later) if len(later) else setting
    out = np.empty(len(rec))
    out[order] = dt
    return out


def _deltas(p):
    """(samples, events): each sample's counter increase since the previous sample of its
    thread (since counting began for a thread's first), 0 where a reading is missing."""
    events = p.meta.get("counters") or []
    rec = p.records
    if not events or "counters" not in (rec.dtype.names or ()):
        return np.zeros((len(rec), 0))
    c = rec["counters"][:, : len(events)].astype(np.int64)
    order = np.lexsort((rec["t"], rec["thread"]))
    out = np.zeros(c.shape, np.int64)
    prev = {}
    for i in order.tolist():
        th = int(rec["thread"][i])
        if (c[i] >= 0).all():
            last = prev.get(th, np.zeros(len(events), np.int64))
            out[i] = np.maximum(c[i] - last, 0)
            prev[th] = c[i]
    return out

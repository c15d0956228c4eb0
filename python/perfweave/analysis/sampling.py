"""Where the sampled time goes: per function and per source line, the share of samples
(exclusive: the function is the innermost frame of the program's code; inclusive: it is
anywhere on the stack), split by what the thread was doing (computation, MPI family),
across ranks with min/mean/max and imbalance (max - mean) / max.

A sample's innermost frame is often in a library the program called (libc, libm, MPI);
"exclusive" time is charged to the innermost frame whose module is the program or one
of its own libraries (not a system or MPI library), so time in memcpy inside a solver
loop counts for the solver, as in MAP's "self time of the source line"."""
import os

import numpy as np

from perfweave.readers.samples import read_samples
from perfweave.symbols import Symbolizer

SYSTEM_PREFIXES = ("/lib/", "/usr/lib/", "/lib64/", "/usr/lib64/", "[vdso]", "linux-vdso")


def _is_system(path):
    base = os.path.basename(path)
    return (not path or path.startswith(SYSTEM_PREFIXES) or base.startswith("libperfweave")
            or "libmpi" in base or "libpmpi" in base)


def analyze(exp, top=20, symbolizer=None):
    """JSON-ready summary, or None without samples."""
    procs = read_samples(exp)
    procs = [p for p in procs if len(p.records)]
    if not procs:
        return None
    sym = symbolizer or Symbolizer()
    states = procs[0].meta.get("states") or ["compute"]
    # every (module path, offset) of interest: the chosen frame of each sample and all
    # frames for inclusive time, resolved once per module
    per_proc = []
    wanted = {}
    for p in procs:
        rec = p.records
        d = rec["depth"].astype(np.int64)
        mods = rec["module"]
        system = np.array([_is_system(m) for m in p.modules] + [True], bool)
        modpath = p.modules + [""]
        midx = np.where(mods >= 0, mods, len(p.modules))
        valid = np.arange(mods.shape[1])[None, :] < d[:, None]
        own = valid & ~system[midx]
        # the innermost own frame, else the innermost frame
        first_own = np.where(own.any(axis=1), own.argmax(axis=1), 0)
        chosen_m = midx[np.arange(len(rec)), first_own]
        chosen_o = rec["offset"][np.arange(len(rec)), first_own]
        keys = [(modpath[m], int(o)) for m, o in zip(chosen_m.tolist(), chosen_o.tolist())]
        incl, stacks = [], []
        for i in range(len(rec)):
            frames = [(modpath[midx[i, k]], int(rec["offset"][i, k]))
                      for k in range(int(d[i])) if own[i, k]]
            incl.append(set(frames))
            stacks.append(frames[::-1])            # outermost first
        for k in keys:
            wanted.setdefault(k[0], set()).add(k[1])
        for s in incl:
            for k in s:
                wanted.setdefault(k[0], set()).add(k[1])
        per_proc.append((p, keys, incl, rec["state"].astype(np.int64), _deltas(p), stacks))
    loc = {}
    for m, offs in wanted.items():
        offs = sorted(offs)
        if m and not m.startswith("["):
            for o, L in zip(offs, sym.resolve(m, offs)):
                loc[(m, o)] = L
    ranks = [p.rank for p, *_ in per_proc]

    def fn_of(k):
        L = loc.get(k)
        return L.function if L and L.function else f"{os.path.basename(k[0]) or '?'}+{k[1]:#x}"

    def line_of(k):
        L = loc.get(k)
        if L and L.file and L.line:
            return f"{L.function or '?'} ({os.path.basename(L.file)}:{L.line})"
        return fn_of(k)

    # per rank: samples by (function) exclusive/inclusive and by (line) exclusive; the
    # counters' increase since the thread's previous sample goes where the sample is
    nst = max(len(states), 1)
    events = list(procs[0].meta.get("counters") or [])
    nev = len(events)
    tables = {"function": {}, "line": {}, "inclusive": {}}
    counts = {name: {} for name in tables}
    totals = np.zeros((len(per_proc), nst))
    ctr_total = np.zeros(max(nev, 1))
    tree = {}                                      # function path -> [incl, excl] (proc, state)
    for j, (p, keys, incl, st, delta, stacks) in enumerate(per_proc):
        st = np.clip(st, 0, nst - 1)
        np.add.at(totals[j], st, 1)
        if nev:
            ctr_total += delta.sum(axis=0)
        for stack, s in zip(stacks, np.clip(st, 0, nst - 1).tolist()):
            path = tuple(fn_of(k) for k in stack) or ("?",)
            for n in range(1, len(path) + 1):
                node = tree.setdefault(path[:n], np.zeros((2, len(per_proc), nst)))
                node[0, j, s] += 1
            tree[path][1, j, s] += 1
        for i, (k, s, inc) in enumerate(zip(keys, st.tolist(), incl)):
            for name, key in (("function", fn_of(k)), ("line", line_of(k))):
                row = tables[name].setdefault(key, np.zeros((len(per_proc), nst)))
                row[j, s] += 1
                if nev:
                    counts[name][key] = counts[name].get(key, 0) + delta[i]
            for f in {fn_of(x) for x in inc}:
                row = tables["inclusive"].setdefault(f, np.zeros((len(per_proc), nst)))
                row[j, s] += 1
                if nev:
                    counts["inclusive"][f] = counts["inclusive"].get(f, 0) + delta[i]
    per_rank_total = totals.sum(axis=1)

    def rows(name):
        table = tables[name]
        out = []
        for key, arr in table.items():
            share = 100 * arr.sum(axis=1) / np.maximum(per_rank_total, 1)   # % per rank
            mean, mx = float(share.mean()), float(share.max())
            out.append({"name": key, "pct": float(100 * arr.sum() / per_rank_total.sum()),
                        "by_state_pct": {states[s]: float(100 * arr[:, s].sum() /
                                                          per_rank_total.sum())
                                         for s in range(nst) if arr[:, s].any()},
                        "per_rank_pct": {"min": float(share.min()), "mean": mean, "max": mx},
                        "imbalance": (mx - mean) / mx if mx > 0 else 0.0,
                        "worst_rank": ranks[int(share.argmax())]})
            if nev:
                c = counts[name].get(key, np.zeros(nev))
                out[-1]["counters"] = {ev: int(c[e]) for e, ev in enumerate(events)}
        out.sort(key=lambda r: -r["pct"])
        return out[:top]

    threads = [t for p in procs for t in p.meta.get("threads", [])]
    return {"processes": len(procs), "samples": int(per_rank_total.sum()),
            "ranks": ranks, "states": states,
            "activity_pct": {states[s]: float(100 * totals[:, s].sum() / per_rank_total.sum())
                             for s in range(nst)},
            "call_tree": _tree(tree, per_rank_total, states, ranks),
            "functions": rows("function"), "lines": rows("line"),
            "inclusive": rows("inclusive"),
            "counters": events,
            "counters_total": {ev: int(ctr_total[e]) for e, ev in enumerate(events)},
            "last_interval_ms": max((t["interval_ns"] for t in threads), default=0) / 1e6,
            "thinned": max((t["thinned"] for t in threads), default=0),
            "dropped": {k: sum(p.meta.get("dropped", {}).get(k, 0) for p in procs)
                        for k in ("threads", "timers", "memory")},
            "kept_per_thread_max": max((t["kept"] for t in threads), default=0)}


def _deltas(p):
    """(samples, events): each sample's counter increase since the previous sample of its
    thread (since counting began for a thread's first), 0 where a reading is missing."""
    events = p.meta.get("counters") or []
    rec = p.records
    if not events or "counters" not in (rec.dtype.names or ()):
        return np.zeros((len(rec), 0))
    c = rec["counters"][:, :len(events)].astype(np.int64)
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


TREE_MIN_PCT = 0.5      # nodes below this inclusive share are left out
TREE_MAX_NODES = 300


def _tree(tree, per_rank_total, states, ranks):
    """The call tree of the samples (function paths from the outermost own frame), depth
    first, children by inclusive share: each node's inclusive and exclusive share of all
    samples, by activity, and its inclusive share per rank (min/mean/max, imbalance)."""
    total = per_rank_total.sum()
    keep = {p: v for p, v in tree.items() if 100 * v[0].sum() / total >= TREE_MIN_PCT}
    children = {}
    for p in keep:
        children.setdefault(p[:-1], []).append(p)
    out = []

    def visit(p, parent, depth):
        if len(out) >= TREE_MAX_NODES:
            return
        v = keep[p]
        share = 100 * v[0].sum(axis=1) / np.maximum(per_rank_total, 1)
        mx, mean = float(share.max()), float(share.mean())
        me = len(out)
        out.append({"id": me, "parent": parent, "depth": depth, "name": p[-1],
                    "inclusive_pct": float(100 * v[0].sum() / total),
                    "exclusive_pct": float(100 * v[1].sum() / total),
                    "by_state_pct": {states[s]: float(100 * v[0][:, s].sum() / total)
                                     for s in range(v.shape[2]) if v[0][:, s].any()},
                    "per_rank_pct": {"min": float(share.min()), "mean": mean, "max": mx},
                    "imbalance": (mx - mean) / mx if mx > 0 else 0.0,
                    "worst_rank": ranks[int(share.argmax())]})
        for c in sorted(children.get(p, []), key=lambda c: -keep[c][0].sum()):
            visit(c, me, depth + 1)

    for root in sorted(children.get((), []), key=lambda c: -keep[c][0].sum()):
        visit(root, None, 0)
    return out


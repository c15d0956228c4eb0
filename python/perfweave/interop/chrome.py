"""Chrome's Trace Event Format (chrome://tracing, ui.perfetto.dev) from an experiment's
event traces: one process per rank, one thread per recording thread, a complete event
("ph": "X") per MPI call, user region and trace buffer flush, and a flow arrow from each
matched send to the call that completed its receive. Messages are matched as `perfweave
analyze` matches them (source, destination, communicator, tag, sequence number).

Times are microseconds since the first event of the trace (its time on rank 0's clock,
in ns, is in "otherData"): CLOCK_MONOTONIC nanoseconds as microseconds would need more
digits than a double holds.
"""
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave.interop import FLUSH_REGION, default_output, load, pair_regions, region_names
from perfweave.model.trace import F, T

_SUBNAMES = {v: k for k, v in T.items()}


def _us(ns):
    return (np.asarray(ns, np.float64) / 1000.0).tolist()


def export(exp, out=None, force=False, symbolizer=None):
    """Write experiment exp's traces as Chrome trace JSON to out (default
    EXP/export/trace.json). Returns a summary dict (path, events, records, seconds)."""
    t_start = time.perf_counter()
    X = load(exp)
    path = Path(out or default_output(exp, "trace.json"))
    if path.is_dir():
        path = path / "trace.json"
    if path.exists() and not force:
        raise PerfweaveError(f"{path}: already exists (--force replaces it)")
    times = [rt.t0[np.isin(rt.rec["type"], [T["CALL"], T["FLUSH"], T["ENTER"]])]
             for rt in X.ranks]
    nonempty = [t for t in times if len(t)]
    origin = int(min(t.min() for t in nonempty)) if nonempty else 0
    events = []
    for rt in X.ranks:
        events += _rank_events(rt, origin, symbolizer)
    ncalls = sum(e.get("cat") == "MPI" for e in events)
    flows = _flows(X.path, origin)
    events += flows
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"generator": "perfweave export --format chrome",
                         "experiment": str(X.path), "origin_ns": origin,
                         "clock": "ns on rank 0's CLOCK_MONOTONIC; ts = (t - origin_ns) / "
                                  "1000", "notes": X.notes}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            # json.dumps encodes in C; json.dump streams through the Python encoder
            f.write(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, path)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    return {"path": str(path), "events": len(events), "calls": ncalls,
            "flows": len(flows) // 2, "records": sum(len(rt.rec) for rt in X.ranks),
            "ranks": len(X.ranks), "seconds": time.perf_counter() - t_start,
            "notes": X.notes}


def _rank_events(rt, origin, symbolizer):
    rec, typ, thr = rt.rec, rt.rec["type"], rt.thread
    r = rt.rank
    out = [{"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}},
           {"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}}]
    for t in sorted(set(thr.tolist()) | {0}):
        out.append({"ph": "M", "name": "thread_name", "pid": r, "tid": int(t),
                    "args": {"name": "master thread" if t == 0 else f"thread {t}"}})
    # MPI calls, with what they did
    ci = np.flatnonzero(typ == T["CALL"])
    names = np.array(list(rt.functions) + ["?"], dtype=object)
    fn = names[np.minimum(rec["fn"][ci].astype(np.int64), len(names) - 1)]
    args = [None] * len(ci)
    sub = np.flatnonzero(np.isin(typ, [T[k] for k in ("SEND", "RECV", "IRECV", "SEND_DONE",
                                                        "COLL", "WIN", "RMA", "WSYNC")]))
    if len(sub):
        owner = np.searchsorted(ci, sub, "right") - 1
        e = rec[sub]
        st = e["type"]
        cols = zip(owner.tolist(), [_SUBNAMES.get(int(x), "?") for x in st.tolist()],
                   e["peer"].tolist(), e["tag"].tolist(), e["bytes"].tolist(),
                   np.where(np.isin(st, [T["COLL"], T["RMA"]]), e["t1"], 0).tolist(),
                   np.isin(st, [T["SEND"], T["RECV"], T["IRECV"]]).tolist(),
                   ((e["flags"] & F["NONBLOCKING"]) != 0).tolist())
        for o, name, peer, tag, nbytes, received, tagged, nb in cols:
            if o < 0:
                continue
            d = {"type": name}
            if peer >= 0:
                d["peer"] = peer
            if tagged:
                d["tag"] = tag
            if nbytes:
                d["bytes"] = nbytes
            if received:
                d["bytes_received"] = received
            if nb:
                d["nonblocking"] = True
            if args[o] is None:
                args[o] = {"events": [d]}
            else:
                args[o]["events"].append(d)
    ts = _us(rt.t0[ci] - origin)
    dur = _us(rt.t1[ci] - rt.t0[ci])
    tids = thr[ci].tolist()
    for name, a, b, t, g in zip(fn.tolist(), ts, dur, tids, args):
        e = {"name": name, "cat": "MPI", "ph": "X", "pid": r, "tid": t, "ts": a, "dur": b}
        if g is not None:
            e["args"] = g
        out.append(e)
    # trace buffer flushes: the tracer's own time
    fi = np.flatnonzero(typ == T["FLUSH"])
    for a, b, t, n in zip(_us(rt.t0[fi] - origin), _us(rt.t1[fi] - rt.t0[fi]),
                          thr[fi].tolist(), rec["bytes"][fi].tolist()):
        out.append({"name": FLUSH_REGION, "cat": "perfweave", "ph": "X", "pid": r, "tid": t,
                    "ts": a, "dur": b, "args": {"bytes": n}})
    # user regions
    enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
    if enter.any():
        partner = np.full(len(rec), -1, np.int64)
        for t in np.unique(thr):
            s = np.flatnonzero(thr == t)
            p, _, _ = pair_regions(enter[s], leave[s])
            partner[s] = np.where(p >= 0, s[np.maximum(p, 0)], -1)
        ei = np.flatnonzero(enter)
        rnames, _, _ = region_names(rt, enter, symbolizer)
        end = np.where(partner[ei] >= 0, rt.t0[np.maximum(partner[ei], 0)],
                       max(rt.t_end, int(rt.t0[ei].max())))
        for name, a, b, t in zip(rnames.tolist(), _us(rt.t0[ei] - origin),
                                 _us(end - rt.t0[ei]), thr[ei].tolist()):
            out.append({"name": name, "cat": "user", "ph": "X", "pid": r, "tid": t, "ts": a,
                        "dur": b})
    return out


def _flows(exp, origin):
    """Flow events ("s" at the send's call, "f" at the end of the call that completed the
    receive) for every message matched as perfweave analyze matches them."""
    from perfweave.analysis.exchange import Local
    from perfweave.analysis import waitstates as ws

    L = ws.load(exp, Local(0), detail=True)
    S, V = ws.message_pairs(L)
    if not len(S):
        return []
    t_s = S["e"] - origin
    # the arrow ends inside the receiving call, just before its end
    r0, r1 = V["cb"], V["ce"]
    t_r = r1 - np.minimum(1, r1 - r0) - origin
    out = []
    for k, (sp, st, ts, rp, rt_, tr, b) in enumerate(zip(
            S["src"].tolist(), S["thread"].tolist(), _us(t_s),
            V["dst"].tolist(), V["thread"].tolist(), _us(t_r), V["bytes"].tolist())):
        out.append({"name": "message", "cat": "p2p", "ph": "s", "id": k, "pid": sp,
                    "tid": st, "ts": ts, "args": {"bytes": b}})
        out.append({"name": "message", "cat": "p2p", "ph": "f", "bp": "e", "id": k,
                    "pid": rp, "tid": rt_, "ts": tr})
    return out

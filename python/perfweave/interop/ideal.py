"""The ideal run of a replay (analysis/replay.py) as an experiment directory, for
viewing: `perfweave export IDEAL --format otf2|chrome` reads it like a recorded one.

Each rank's trace is written again with the ideal times: a call's enter and leave are
the replay's; a user function's enter or leave and a trace flush keep their place in the
computation around them (analysis/replay.ideal_at); what the records say besides times
(messages, requests, collectives, windows) is kept. The clock becomes the identity, on
every rank alike, starting where the recorded run started. The records are written back
to back with their threads' runs in `flushes`, as `perfweave import` writes them, and
the profile is the one of these records (analysis/imported_profile.from_traces).
"""

import json
from pathlib import Path

import numpy as np

from perfweave.analysis.exchange import Local
from perfweave.analysis.imported_profile import from_traces
from perfweave.analysis.replay import ideal_at
from perfweave.clock import host_clocks, rank0_clock, to_ns
from perfweave.dtypes import EVENT_TYPES as T
from perfweave.dtypes import TRACE_VERSION
from perfweave.errors import PerfweaveError
from perfweave.interop import new_directory, profile
from perfweave.readers import trace as rt
from perfweave.writing import json_text


def write_ideal(res, out):
    """Write the ideal run of ReplayResult res (of an experiment directory) to directory
    out. Returns out."""
    g = res.graph
    src = Path(g.loaded.trace.source) if g.loaded is not None else None
    if src is None or not (src / "traces").is_dir():
        raise PerfweaveError("the ideal trace is written from a replay of an experiment")
    if res.deadlock:
        raise PerfweaveError("the replay deadlocked: there is no ideal run to write")
    with new_directory(out) as tmp:
        (tmp / "traces").mkdir()
        origin = int(g.locations["t_begin"].min()) if len(g.locations["t_begin"]) else 0
        ranks = [rd.rank for rd in g.loaded.trace.ranks]
        # the clocks as the trace was loaded: one offset per host (waitstates/load.py)
        metas = {r: rt.read_meta(src, r) for r in ranks}
        host_clocks(metas, Local(g.loaded.trace.world_size))
        for r in ranks:
            rec, meta = _rank(res, src, r, metas[r], origin)
            rec.tofile(tmp / "traces" / f"rank-{r}.events")
            (tmp / "traces" / f"rank-{r}.json").write_text(json.dumps(meta))
        doc = json.loads((src / "experiment.json").read_text())
        doc["ideal_replay"] = dict(
            res.params,
            replayed_from=str(src.resolve()),
            t_ideal_s=res.t_ideal_s,
            t_recorded_s=res.t_recorded_s,
        )
        doc["wall_seconds"] = res.t_ideal_s
        (tmp / "experiment.json").write_text(json_text(doc))
        profile.write(tmp / "profile.pwprof", from_traces(tmp))
    return out


def _rank(res, src, rank, meta_note, origin):
    """(records, JSON) of one rank of the ideal run."""
    g = res.graph
    rf = rt.read_rank(src, rank, meta_note)
    rec, thread = np.array(rf.records), np.asarray(rf.thread)
    typ = rec["type"]
    mine = np.flatnonzero(g.locations["rank"] == rank)
    loc_of = dict(zip(g.locations["thread"][mine].tolist(), mine.tolist()))
    # calls are numbered by thread, then in order (model/trace.py prepare)
    order = np.argsort(thread, kind="stable")
    calls = order[typ[order] == T["CALL"]]
    base = int(g.locations["first"][mine[0]]) if len(mine) else 0
    idx = base + np.arange(len(calls))
    rec["t0"][calls] = origin + res.enter_ns[idx]
    rec["t1"][calls] = origin + res.leave_ns[idx]
    meta = rf.meta
    ideal = lambda ns, loc: (
        origin + ideal_at(g, res.enter_ns, res.leave_ns, res.useful_ns, ns, loc, res.measure)
    )
    # user functions' enters and leaves, flushes, MPI_Pcontrol levels (perfweave pop's
    # region of the ideal run): where they fall in the computation
    timed = np.flatnonzero(
        (typ == T["ENTER"]) | (typ == T["LEAVE"]) | (typ == T["FLUSH"]) | (typ == T["PCONTROL"])
    )
    if len(timed) and len(mine):
        loc = np.array([loc_of.get(t, mine[0]) for t in thread[timed].tolist()], np.int64)
        for field, ok in (("t0", np.ones(len(timed), bool)), ("t1", typ[timed] == T["FLUSH"])):
            ns = to_ns(meta, rec[field][timed].astype(np.int64))
            rec[field][timed[ok]] = ideal(ns[ok], loc[ok])
    main = loc_of.get(0, mine[0]) if len(mine) else -1
    t_init = t_fini = origin
    if main >= 0:
        t_init += int(res.loc_start_ns[main])
        t_fini = int(ideal([g.locations["t_end"][main]], [main])[0])
    runs = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]]) if len(thread) else []
    ends = np.r_[runs[1:], len(thread)] if len(thread) else []
    meta = dict(
        meta,
        version=TRACE_VERSION,
        clock=rank0_clock(t_init, t_fini),
        flushes=[
            {"thread": int(thread[a]), "first": int(a), "count": int(b - a)}
            for a, b in zip(np.asarray(runs).tolist(), np.asarray(ends).tolist())
        ],
        records=int(len(rec)),
        lost=0,
    )
    return rec, meta

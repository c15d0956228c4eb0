"""Automatic wait-state analysis of event traces (`perfweave analyze`).

The patterns and their waiting-time formulas are Scalasca 2.6's (summarised in
../shared/wait-states.md) and, for MPI-2 one-sided communication, those of Hermanns et
al., "Scalable detection of MPI-2 remote memory access inefficiency patterns" (IJHPCA
2012, section 4). Every pattern is computed on whole columns of numpy records: messages
are matched by (source, destination, communicator, tag, sequence number), collective
operations (blocking or not) by (communicator, sequence number), fences by (window,
sequence number), access and exposure epochs by (origin, target, window, sequence
number), all without a loop over events. Data another rank owns comes through
`exchange.route` (the identity in one process), so `mpirun -n K perfweave analyze
--parallel` runs this same code.

Times are integer nanoseconds on rank 0's clock throughout; a value is charged to a
(metric, call path, rank) and summed exactly, so the serial and parallel results agree
to the nanosecond.
"""

import time as _time

import numpy as np

from perfweave import progress
from perfweave.analysis import metrics as MT
from perfweave.analysis.exchange import Local
from perfweave.analysis.waitstates import clockcheck
from perfweave.analysis.waitstates.collectives import collectives
from perfweave.analysis.waitstates.common import C, CATS, WO_BUFFER, Acc, _reduce
from perfweave.analysis.waitstates.load import _unify, load
from perfweave.analysis.waitstates.p2p import point_to_point
from perfweave.analysis.waitstates.rma import rma
from perfweave.model.trace import classify
from perfweave.model.waitstates import COUNTS, VALUES_DTYPE, WaitStatesResult
from perfweave.readers.recorded import rank_ranges

# what other layers import: the Wrong Order buffer (tests), and the loader's rank
# helpers (interop/ reads traces as the analysis does)
from perfweave.analysis.waitstates.load import sibling_meta, world_size_of

__all__ = ["analyze", "analyze_trace", "build_result", "WO_BUFFER", "sibling_meta", "world_size_of"]


# ---------------------------------------------------------------- time, visits, bytes


def basics(L, acc):
    """Visits, bytes, and the time of every path: computation outside MPI, MPI calls by
    category (their waiting-time patterns are computed below), trace overhead; each
    rank summed them per path already."""
    metric_by_cat = np.array([MT.INDEX[MT.CATEGORY_METRIC[k]] for k in CATS], np.int64)
    cat_of = np.array([C[classify(f)[0]] for f in L.trace.functions], np.int64)
    for rd in L.trace.ranks:
        g = rd.gpaths
        rank = np.full(len(g), rd.rank)
        acc.add("visits", g, rank, rd.visits)
        acc.add("bytes", g, rank, rd.bytes)
        acc.add("overhead", g, rank, rd.overhead_ns)
        leaf = rd.path_fn >= 0
        acc.add("computation", g[~leaf], rank[~leaf], rd.time_ns[~leaf])
        cat = cat_of[rd.gfn[rd.path_fn[leaf]]]
        if rd.path_cat:  # completions of nonblocking collectives
            li = np.flatnonzero(leaf)
            for p, c in rd.path_cat.items():
                cat[np.searchsorted(li, p)] = C[c]
        acc.add_many(metric_by_cat[cat], g[leaf], rank[leaf], rd.time_ns[leaf])


# ---------------------------------------------------------------- driver


# traces of up to this many MPI calls get the critical path and the delay analysis by
# default. Its time is no longer the limit (~6 M events/s, docs/performance.md) but its
# memory is: it holds the whole trace's event graph in one process (~400 bytes a call
# more than the patterns), so this keeps a default analysis within ~1.6 GB more
ROOT_CAUSE_CALLS = 4_000_000


def analyze(exp, ex=None, correct_clocks=False, min_latency_ns=None, root_causes=None):
    """Analyse the traces of experiment directory exp. Returns the WaitStatesResult on
    the process of rank 0 (and in a serial run), None on the others. correct_clocks:
    compute the patterns on times corrected by the controlled logical clock
    (clockcheck.py), with the minimum message latency min_latency_ns (None: 0).
    root_causes: also the critical path and the delay analysis (analysis/rootcause.py)
    over the whole trace's event graph, which in a parallel analysis the first process
    loads for it; None: for traces of up to ROOT_CAUSE_CALLS MPI calls."""
    ex = ex or Local(0)
    t_start = _time.perf_counter()
    L = load(exp, ex, detail=root_causes is not False and ex.nproc == 1)
    if root_causes is None:
        calls = np.array([L.ncalls], np.int64)
        root_causes = int(ex.allreduce(calls, "sum")[0]) <= ROOT_CAUSE_CALLS
    whole = None
    if root_causes:
        # the graph is global: the first process builds it from the whole trace
        whole = L if ex.nproc == 1 else load(exp, Local(0), detail=True) if ex.me == 0 else None
    return _patterns(
        L, ex, str(exp), _time.perf_counter() - t_start, (correct_clocks, min_latency_ns), whole
    )


def analyze_trace(trace, ex=None, correct_clocks=False, min_latency_ns=None, root_causes=True):
    """Analyse a Trace built in memory (Trace.from_literal): its WaitStatesResult."""
    ex = ex or Local(trace.world_size)
    serial = root_causes and ex.nproc == 1
    L = _unify(trace, ex, [rd.rank for rd in trace.ranks], detail=serial)
    return _patterns(
        L,
        ex,
        trace.source or "literal",
        0.0,
        (correct_clocks, min_latency_ns),
        L if serial else None,
    )


def _patterns(L, ex, name, load_s, clocks=(False, None), whole=None):
    """The patterns of the loaded trace L; with whole (the whole trace loaded with detail
    in this process: L itself in a serial analysis), its root causes too."""
    t_loaded = _time.perf_counter()
    acc = Acc()
    notes = dict.fromkeys(COUNTS, 0)  # what each pattern counts (model/waitstates.py)
    # with --correct-clocks every pattern sees corrected times; the patterns meet the
    # clock-condition violations as they go (clock.found)
    clock = clockcheck.Check(L, ex, *clocks)
    with progress.task("wait states", 5 + (whole is not None), "step") as bar:
        bar.step(0, "wait states: time in MPI")
        basics(L, acc)
        bar.step(1, "wait states: collectives")
        deferred = collectives(L, ex, acc, notes, clock.found)
        bar.step(1, "wait states: point to point")
        point_to_point(L, ex, acc, notes, deferred, clock.found)
        bar.step(1, "wait states: clock condition")
        violations, clock, clock_notes = clock.result(L, ex)
        notes["clock_violations"] = violations  # (counted at the first process)
        bar.step(1, "wait states: one-sided")
        rma(L, ex, acc, notes)
        if whole is not None:
            from perfweave.analysis import rootcause  # it builds on this package's modules

            bar.step(1, "wait states: root causes")
            rc = rootcause.analyze_loaded(whole)
            rootcause.what_if(rc)
            rootcause.charge(rc, acc)
        bar.step(1)
    m, p, r, v = acc.reduced()
    nev = L.trace.nevents
    parts = ex.gather(
        (
            (m, p, r, v),
            notes,
            L.notes,
            nev,
            {
                rd.rank: (rd.t_begin, rd.t_end, rd.complete, rd.host, rd.state)
                for rd in L.trace.ranks
            },
        )
    )
    if parts is None:
        return None
    t_done = _time.perf_counter()
    cat = [np.concatenate(x) for x in zip(*[pt[0] for pt in parts])]
    m, p, r, v = _reduce(*cat)
    counts = {k: sum(pt[1][k] for pt in parts) for k in notes}
    text_notes = [n for pt in parts for n in pt[2]]
    ranks_info = {}
    for pt in parts:
        ranks_info.update(pt[4])
    result = build_result(
        name,
        L,
        (m, p, r, v),
        counts,
        text_notes,
        ranks_info,
        sum(pt[3] for pt in parts),
        ex.nproc,
        {"load_s": load_s, "patterns_s": t_done - t_loaded},
    )
    result.clock = clock
    result.notes += clock_notes  # facts about the clocks: the result is whole all the same
    return result


def build_result(exp, L, mprv, counts, text_notes, ranks_info, nevents, nproc, timing):
    m, p, r, v = mprv
    world = L.trace.world_size
    notes = list(text_notes)
    if L.trace.missing:
        notes.append(
            f"no trace from {len(L.trace.missing)} of {world} ranks: "
            f"{rank_ranges(L.trace.missing)}; patterns that involve them are not "
            "computed"
        )
    if counts["unmatched_sends"] or counts["unmatched_receives"]:
        notes.append(
            f"{counts['unmatched_sends']} sent and {counts['unmatched_receives']} "
            "received messages have no partner in the trace (a rank's trace is "
            "missing or truncated, or messages were received with MPI_Mrecv)"
        )
    if counts["incomplete_collectives"]:
        notes.append(
            f"{counts['incomplete_collectives']} collective operations lack a "
            "participant's record, or a nonblocking one was never completed; "
            "they were not analysed"
        )
    complete = not notes and all(x[2] for x in ranks_info.values())
    values = {}
    for mid in MT.IDS:
        sel = m == MT.INDEX[mid]
        values[mid] = (p[sel], r[sel], v[sel])
    # sums for "sum" metrics, bottom up
    for mid in reversed(list(MT.walk())):
        if MT.HOW[mid] == "sum":
            kids = [values[c] for c in MT.CHILDREN[mid]]
            pp = np.concatenate([k[0] for k in kids]) if kids else np.zeros(0, np.int64)
            rr = np.concatenate([k[1] for k in kids]) if kids else np.zeros(0, np.int64)
            vv = np.concatenate([k[2] for k in kids]) if kids else np.zeros(0, np.int64)
            z = np.zeros(len(pp), np.int64)
            _, pp, rr, vv = _reduce(z, pp, rr, vv)
            values[mid] = (pp, rr, vv)
    total_time = int(values["time"][2].sum())
    metrics, columns = [], []
    for mid in MT.walk():
        pp, rr, vv = values[mid]
        tot = int(vv.sum())
        unit = MT.UNIT[mid]
        root = MT.root_of(mid)
        denom = total_time if unit == "s" else int(values[root][2].sum())
        metrics.append(
            {
                "id": mid,
                "name": MT.NAME[mid],
                "parent": MT.PARENT[mid],
                "unit": unit,
                "depth": MT.depth(mid),
                "description": MT.DESCRIPTION[mid],
                "total": tot / 1e9 if unit == "s" else tot,
                "pct": 100.0 * tot / denom if denom else 0.0,
            }
        )
        columns.append((mid, pp, rr, vv / 1e9 if unit == "s" else vv))
    index = {lab: i for i, lab in enumerate(L.paths)}
    paths = [
        {"id": i, "labels": list(lab), "parent": index.get(lab[:-1])}
        for i, lab in enumerate(L.paths)
    ]
    result = WaitStatesResult.from_literal(
        metrics,
        paths,
        [],
        ranks=[
            {
                "rank": k,
                "host": ranks_info[k][3],
                "state": ranks_info[k][4],
                "complete": bool(ranks_info[k][2]),
                "time_s": (ranks_info[k][1] - ranks_info[k][0]) / 1e9,
            }
            for k in sorted(ranks_info)
        ],
        complete=complete,
        notes=notes,
        world_size=world,
        events=int(nevents),
        counts=counts,
        analysis=dict(timing, processes=nproc),
        experiment=str(exp),
    )
    n = sum(len(c[1]) for c in columns)
    vt = np.zeros(n, VALUES_DTYPE)
    vt["metric"] = np.repeat(
        np.array([c[0] for c in columns], object), [len(c[1]) for c in columns]
    )
    for k, name in ((1, "callpath"), (2, "rank"), (3, "value")):
        vt[name] = np.concatenate([c[k] for c in columns]) if n else []
    result.values = vt
    return result

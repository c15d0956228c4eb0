"""Root causes of waiting: the critical path on the recorded times and the delay analysis,
over the event graph of a trace (analysis/eventgraph.py).

- **Wait states** are taken from the graph with the wait-state formulas
  (docs/wait-states.md), one per waiting call, each with the call that caused it on
  another location: Late Sender (the send's start), Late Receiver (the receive's
  posting), Wait at Barrier / N x N / Fence / Window Create-Free (the last arrival), Late
  Broadcast (the root), Early Reduce (the last sender), Late Post and Early Wait (the
  partner's post / complete).
- **Critical path** (Böhme et al., "Scalable critical-path based performance analysis",
  IPDPS 2012, section III): from the end of the location that finishes last, walk
  backwards; a wait state met on the way is left for the location that caused it, at the
  causing call's enter. Its profile is each call path's time on it; the critical-path
  imbalance of a call path is its time on the path minus its mean activity time per
  location (time less waiting), where positive.
- **Delay analysis** (Böhme et al., "Identifying the root causes of wait states in
  large-scale parallel applications", ICPP 2010, section IV, and Scalasca 2.6's
  scout): for a wait state of ω ns on location W caused by location D, the
  synchronisation interval runs on both from their last earlier synchronisation point (a
  message between the two, or a collective or fence both took part in) to the wait. The
  delay d(p) of call path p is D's activity time on p in the interval (time less its
  own wait states) minus W's time on p there, where positive; D's wait states in the
  interval (Σw) also made it late. With scale = min(ω / (Σd + Σw), 1), the short-term
  costs are scale·d(p) on D's paths, the indirect part of ω is scale·Σw and the rest is
  direct; the long-term costs come from a backward pass over wait states by their end
  time: the costs a wait state has propagated to it (rcost) go to D's delays as
  rcost/(Σd + Σw)·d(p), and every wait state w' of D in the interval gets
  (scale + rcost/(Σd + Σw))·w' propagated to it; the part scale·w' of w' is
  propagating (the largest over the waits it caused), the rest terminal.

Everything is integer nanoseconds except the scaled costs (floats, rounded to ns when
charged to the metric tree).
"""

import math
from dataclasses import dataclass, field

import numpy as np

# wait-state kinds: (id, the metric of the delay it is charged to, Scalasca's name)
KINDS = ("latesender", "latereceiver", "barrier", "n2n", "12n", "n21", "rma", "finalize")
K = {k: i for i, k in enumerate(KINDS)}

_BARRIER_LIKE = {"MPI_Barrier", "MPI_Ibarrier"}
_N2N = {
    "MPI_Allreduce",
    "MPI_Allgather",
    "MPI_Allgatherv",
    "MPI_Alltoall",
    "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
    "MPI_Iallreduce",
    "MPI_Iallgather",
    "MPI_Iallgatherv",
    "MPI_Ialltoall",
    "MPI_Ireduce_scatter",
    "MPI_Ireduce_scatter_block",
}
_12N = {"MPI_Bcast", "MPI_Scatter", "MPI_Scatterv", "MPI_Ibcast", "MPI_Iscatter", "MPI_Iscatterv"}
_N21 = {"MPI_Reduce", "MPI_Gather", "MPI_Gatherv", "MPI_Ireduce", "MPI_Igather", "MPI_Igatherv"}
# completion calls that are no wait (the rank polled)
_POLL = ("MPI_Test",)
# sends whose completion can wait for the receiver (docs/wait-states.md, Late Receiver)
_LR_CALLS = {"MPI_Send", "MPI_Ssend", "MPI_Wait"}


@dataclass
class WaitStates:
    """One row per waiting call: waiter and causer call ids (graph calls), kind (K),
    omega (ns waited), end (ns: when the causer entered, the wait's end)."""

    waiter: np.ndarray
    causer: np.ndarray
    kind: np.ndarray
    omega: np.ndarray
    end: np.ndarray

    def __len__(self):
        return len(self.waiter)


@dataclass
class RootCauses:
    """The result: per wait state (rows of `waits`) its direct / indirect wait,
    propagating part and the costs it was given; per (kind, path, rank) the short- and
    long-term delay costs; the critical path."""

    graph: object
    waits: WaitStates
    direct: np.ndarray  # per wait state, ns (float)
    indirect: np.ndarray
    propagating: np.ndarray
    # {(kind, "short"|"long"): {(path, rank): ns}}
    costs: dict = field(default_factory=dict)
    # critical path: segments (location, t_from, t_to) from the start of the run onwards
    segments: list = field(default_factory=list)
    cp_profile: dict = field(default_factory=dict)  # {(path, rank): ns on the path}
    cp_imbalance: dict = field(default_factory=dict)  # {path: ns}
    activity: dict = field(default_factory=dict)  # {(path, rank): ns of activity}
    # per wait state with an interval: (row, (first interval, causing call), {path: delay})
    delays: list = field(default_factory=list)
    comp_path: object = None  # per call, the call path of the computation before it
    savings: list = field(default_factory=list)  # [(rank, path, s saved)]: what_if

    @property
    def cp_length(self):
        return sum(b - a for _, a, b in self.segments)

    def total_costs(self):
        """{(rank, path): short + long-term costs over every kind} (ns)."""
        out = {}
        for per in self.costs.values():
            for (p, r), v in per.items():
                out[(r, p)] = out.get((r, p), 0.0) + v
        return out

    def causes(self):
        """[(rank, path, short ns, long ns)], the largest total first."""
        st, lt = {}, {}
        for (kind, term), per in self.costs.items():
            dst = st if term == "short" else lt
            for (p, r), v in per.items():
                dst[(r, p)] = dst.get((r, p), 0.0) + v
        keys = set(st) | set(lt)
        rows = [(r, p, st.get((r, p), 0.0), lt.get((r, p), 0.0)) for r, p in keys]
        return sorted(rows, key=lambda x: (-(x[2] + x[3]), x[0], x[1]))


# ---------------------------------------------------------------- wait states


def wait_states(g):
    """The wait states of event graph g (WaitStates), one per waiting call: where a call
    waited for several partners (a multi-wait, or a call that is a Late Sender and a
    collective completion), the longest wait."""
    c = g.calls
    t0, t1 = c["t0"].astype(np.int64), c["t1"].astype(np.int64)
    fname = np.array(list(g.functions) + ["?"], object)[np.where(c["fn"] >= 0, c["fn"], -1)]
    poll = np.array([str(f).startswith(_POLL) for f in fname], bool)
    rows = []  # (waiter, causer, kind, omega)

    m = g.messages
    if len(m["scall"]):
        s, rd, rp = m["scall"], m["rdone"], m["rpost"]
        om = np.minimum(t0[s], t1[rd]) - t0[rd]
        ok = (om > 0) & ~poll[rd]
        rows.append((rd[ok], s[ok], np.full(ok.sum(), K["latesender"]), om[ok]))
        sd = m["sdone"]
        has = sd >= 0
        sdi = np.where(has, sd, 0)
        lr_call = np.array([f in _LR_CALLS for f in fname[sdi]], bool) & has
        om = t0[rp] - t0[sdi]
        ok = lr_call & (om > 0) & (t1[sdi] > t0[rp])
        rows.append((sdi[ok], rp[ok], np.full(ok.sum(), K["latereceiver"]), om[ok]))

    rows += _collective_waits(g, t0, t1, fname, poll)
    # MPI_Finalize synchronises the ranks as a barrier does (Scalasca's Wait at Finalize):
    # the critical path goes on from its last arrival; it is no delay metric
    fin = np.flatnonzero(fname == "MPI_Finalize")
    if len(fin) > 1:
        last = fin[np.argmax(t0[fin])]
        om = np.minimum(t0[last], t1[fin]) - t0[fin]
        ok = om > 0
        rows.append((fin[ok], np.full(ok.sum(), last), np.full(ok.sum(), K["finalize"]), om[ok]))

    r = g.rma_sync
    if len(r["a"]):
        a, b = r["a"].astype(np.int64), r["b"].astype(np.int64)
        om = np.minimum(t0[a], t1[b]) - t0[b]
        ok = (om > 0) & ~poll[b]
        rows.append((b[ok], a[ok], np.full(ok.sum(), K["rma"]), om[ok]))

    if rows:
        w, d, k, om = (np.concatenate([np.asarray(x[i], np.int64) for x in rows]) for i in range(4))
    else:
        w = d = k = om = np.zeros(0, np.int64)
    # one per waiting call: the longest
    order = np.lexsort((-om, w))
    w, d, k, om = w[order], d[order], k[order], om[order]
    first = np.r_[True, w[1:] != w[:-1]] if len(w) else np.zeros(0, bool)
    w, d, k, om = w[first], d[first], k[first], om[first]
    return WaitStates(waiter=w, causer=d, kind=k, omega=om, end=t0[w] + om)


def _collective_waits(g, t0, t1, fname, poll):
    """Collective waits per participation: the wait starts at the enter of the call that
    completes it (bcall when blocking, the MPI_Wait* of a nonblocking one)."""
    inst, parts = g.coll_instances, g.coll_parts
    if not len(parts["inst"]):
        return []
    ii = parts["inst"].astype(np.int64)
    keep = inst["whole"][ii] & (parts["open"] == 0) & (parts["ecall"] >= 0)
    idx = np.flatnonzero(keep)
    if not len(idx):
        return []
    ii = ii[idx]
    b = parts["bcall"][idx].astype(np.int64)
    e = parts["ecall"][idx].astype(np.int64)
    root = parts["root"][idx] != 0
    kind_i = inst["kind"][ii]
    fn = fname[b]
    cls = np.array(
        [
            "barrier"
            if (kd != 0 or f in _BARRIER_LIKE)
            else "n2n"
            if f in _N2N
            else "12n"
            if f in _12N
            else "n21"
            if f in _N21
            else ""
            for kd, f in zip(kind_i.tolist(), fn.tolist())
        ],
        object,
    )
    arrive = t0[b]
    # per instance: the last arrival (all), the root's arrival, the last non-root arrival
    order = np.lexsort((arrive, ii))
    last = {}
    last_nonroot = {}
    root_of = {}
    for j in order.tolist():
        i = int(ii[j])
        last[i] = j
        if root[j]:
            root_of[i] = j
        else:
            last_nonroot[i] = j
    out_w, out_d, out_k, out_o = [], [], [], []
    for j in range(len(idx)):
        c = cls[j]
        if not c or poll[e[j]]:
            continue
        i = int(ii[j])
        if c in ("barrier", "n2n"):
            src = last[i]
        elif c == "12n":
            if root[j] or i not in root_of:
                continue
            src = root_of[i]
        else:  # n21: only the root waits, for the last sender
            if not root[j] or i not in last_nonroot:
                continue
            src = last_nonroot[i]
        if src == j:
            continue
        start = t0[e[j]]
        om = min(arrive[src], t1[e[j]]) - start
        if om > 0:
            out_w.append(e[j])
            out_d.append(b[src])
            out_k.append(K[c])
            out_o.append(om)
    return [(out_w, out_d, out_k, out_o)]


# ---------------------------------------------------------------- activity per call path


class _Timeline:
    """Each location's bursts and calls as one ordered list of intervals with their call
    path: a call's burst (the computation before it, charged to the path of the code
    that called it: the call's path less its MPI leaf) precedes the call itself."""

    def __init__(self, g, waits):
        c = g.calls
        self.g = g
        n = len(c["t0"])
        t0, t1 = c["t0"].astype(np.int64), c["t1"].astype(np.int64)
        parent = _parents(g.paths)
        self.comp_path = parent[c["path"]]
        # interval 2k: burst before call k, 2k+1: call k
        start = np.empty(2 * n, np.int64)
        stop = np.empty(2 * n, np.int64)
        start[1::2], stop[1::2] = t0, t1
        stop[0::2] = t0
        start[0::2] = t0 - c["useful"].astype(np.int64)
        self.start, self.stop = start, stop
        path = np.empty(2 * n, np.int64)
        path[0::2], path[1::2] = self.comp_path, c["path"]
        self.path = path
        # time of each interval that is not waiting (a call's wait is not activity)
        wait = np.zeros(2 * n, np.int64)
        wait[2 * waits.waiter + 1] = waits.omega
        self.wait = wait
        self.rank = np.repeat(c["rank"].astype(np.int64), 2)

    def time_map(self, lo, hi, active=True):
        """{path: ns} over intervals lo..hi-1 (interval ids)."""
        if hi <= lo:
            return {}
        v = self.stop[lo:hi] - self.start[lo:hi]
        if active:
            v = v - self.wait[lo:hi]
        p = self.path[lo:hi]
        out = {}
        for pp, vv in zip(p.tolist(), v.tolist()):
            if vv > 0:
                out[pp] = out.get(pp, 0) + vv
        return out

    def clipped(self, lo, hi, a, b):
        """{path: ns} of intervals lo..hi-1 clipped to [a, b] (a critical-path segment:
        its wait states, if any, lie outside)."""
        if hi <= lo or b <= a:
            return {}
        s = np.maximum(self.start[lo:hi], a)
        e = np.minimum(self.stop[lo:hi], b)
        v = e - s
        out = {}
        for pp, vv in zip(self.path[lo:hi].tolist(), v.tolist()):
            if vv > 0:
                out[pp] = out.get(pp, 0) + vv
        return out


def _fn_id(g, name):
    return g.functions.index(name) if name in g.functions else -2


def _parents(paths):
    index = {tuple(lab): i for i, lab in enumerate(paths)}
    return np.array([index.get(tuple(lab[:-1]), i) for i, lab in enumerate(paths)], np.int64)


# ---------------------------------------------------------------- synchronisation points


class _SyncPoints:
    """For each pair of locations, their synchronisation points in order: (call on the
    one, call on the other) for every message between them and every collective
    operation or fence both took part in, but a rooted one (broadcast, scatter, gather,
    reduce...) only where one of the two is its root: it orders each rank against the
    root, never two others (one may leave it before the other enters), as in scout."""

    def __init__(self, g):
        c = g.calls
        loc = c["loc"].astype(np.int64)
        pairs = {}

        def add(a, b):
            la, lb = loc[a], loc[b]
            for x, y, lx, ly in zip(a.tolist(), b.tolist(), la.tolist(), lb.tolist()):
                if lx == ly:
                    continue
                if lx > ly:
                    x, y, lx, ly = y, x, ly, lx
                pairs.setdefault((lx, ly), []).append((x, y))

        m = g.messages
        if len(m["scall"]):
            add(m["scall"].astype(np.int64), m["rdone"].astype(np.int64))
        r = g.rma_sync
        if len(r["a"]):
            add(r["a"].astype(np.int64), r["b"].astype(np.int64))
        self.pairs = {k: np.array(sorted(v), np.int64) for k, v in pairs.items()}
        self._sorted, self._inst = {}, {}
        # collectives: per location, its (instance, completing call) in call order;
        # MPI_Init synchronises every rank as a collective does (instance -1), as in scout
        parts = g.coll_parts
        self.coll = {}
        init = np.flatnonzero(c["fn"] == _fn_id(g, "MPI_Init"))
        if len(parts["inst"]) or len(init):
            ok = (parts["open"] == 0) & (parts["ecall"] >= 0)
            ec = np.r_[parts["ecall"][ok].astype(np.int64), init]
            inst = np.r_[parts["inst"][ok].astype(np.int64), np.full(len(init), -1)]
            lc = loc[ec]
            order = np.lexsort((ec, lc))
            for lo in np.unique(lc).tolist():
                sel = order[lc[order] == lo]
                self.coll[lo] = (ec[sel], inst[sel])
        rooted = np.flatnonzero(parts["root"] == 1) if len(parts["inst"]) else []
        self.root = dict(zip(parts["inst"][rooted].tolist(), loc[parts["bcall"][rooted]].tolist()))

    def previous(self, ld, d, lw, w):
        """(call on ld, call on lw) of the last synchronisation point of locations ld and
        lw before calls d and w, or (-1, -1). Looks back from d over at most LOOK_BACK
        points of each kind: the last one is nearly always the first looked at."""
        best = (-1, -1)
        key = (min(ld, lw), max(ld, lw))
        got = self.pairs.get(key)
        if got is not None:
            pairs = self._by_side(key, got, ld < lw)
            cd, cw = pairs
            k = int(np.searchsorted(cd, d))
            for j in range(k - 1, max(k - 1 - LOOK_BACK, -1), -1):
                if cw[j] < w:
                    best = (int(cd[j]), int(cw[j]))
                    break
        if ld in self.coll and lw in self.coll:
            ed, idd = self.coll[ld]
            at_w = self._index(lw)
            k = int(np.searchsorted(ed, d))
            for j in range(k - 1, max(k - 1 - LOOK_BACK, -1), -1):
                if ed[j] <= best[0]:
                    break
                if self.root.get(int(idd[j]), ld) not in (ld, lw):
                    continue
                cw = at_w.get(int(idd[j]))
                if cw is not None and cw < w:
                    best = (int(ed[j]), cw)
                    break
        return best

    def _by_side(self, key, arr, d_first):
        """The pairs of key as (calls on d's side sorted, the partner calls)."""
        cache = self._sorted.setdefault((key, d_first), None)
        if cache is None:
            cd, cw = (arr[:, 0], arr[:, 1]) if d_first else (arr[:, 1], arr[:, 0])
            o = np.argsort(cd, kind="stable")
            cache = self._sorted[(key, d_first)] = (cd[o], cw[o])
        return cache

    def _index(self, lo):
        """{instance: completing call} of location lo."""
        got = self._inst.get(lo)
        if got is None:
            e, i = self.coll[lo]
            got = self._inst[lo] = dict(zip(i.tolist(), e.tolist()))
        return got


LOOK_BACK = 64


# ---------------------------------------------------------------- the analysis


def analyze_graph(g):
    """Root causes of the wait states of event graph g, and its critical path."""
    W = wait_states(g)
    tl = _Timeline(g, W)
    sp = _SyncPoints(g)
    c = g.calls
    loc = c["loc"].astype(np.int64)
    first = g.locations["first"].astype(np.int64)
    n = len(W)
    direct = np.zeros(n)
    indirect = np.zeros(n)
    propagating = np.zeros(n)
    rcost = np.zeros(n)
    costs = {}
    # the wait states of each location by waiting call, to find those in an interval
    by_loc = {}
    # Wait at Finalize only steers the critical path: the delay analysis is scout's, of
    # the MPI patterns
    rows = np.flatnonzero(W.kind != K["finalize"])
    order = rows[np.lexsort((W.waiter[rows], loc[W.waiter[rows]]))]
    for lo in np.unique(loc[W.waiter[rows]]).tolist():
        sel = order[loc[W.waiter[order]] == lo]
        by_loc[lo] = (W.waiter[sel], sel)
    # each wait state's interval: its delays and the causer's wait states in it
    info = [None] * n
    spans = [None] * n  # (first interval, synchronising call) on the causer
    for s in rows.tolist():
        w, d = int(W.waiter[s]), int(W.causer[s])
        lw, ld = int(loc[w]), int(loc[d])
        pd, pw = sp.previous(ld, d, lw, w)
        # intervals: from the previous synchronisation call to the burst before the
        # synchronising call
        lo_d = 2 * pd + 2 if pd >= 0 else 2 * int(first[ld])
        lo_w = 2 * pw + 2 if pw >= 0 else 2 * int(first[lw])
        tmap_d = tl.time_map(lo_d, 2 * d + 1)
        tmap_w = tl.time_map(lo_w, 2 * w + 1, active=False)
        if pd >= 0:
            # the previous synchronisation call counts from the moment both had entered
            # it (its completion), as in scout
            t_sync = max(int(c["t0"][pd]), int(c["t0"][pw]))
            for tm, pc in ((tmap_d, pd), (tmap_w, pw)):
                for p, v in tl.clipped(2 * pc + 1, 2 * pc + 2, t_sync, int(c["t1"][pc])).items():
                    tm[p] = tm.get(p, 0) + v
        delay = {p: v - tmap_w.get(p, 0) for p, v in tmap_d.items() if v > tmap_w.get(p, 0)}
        inner = []
        if ld in by_loc:
            calls_l, rows_l = by_loc[ld]
            lo = np.searchsorted(calls_l, pd + 1 if pd >= 0 else int(first[ld]))
            inner = rows_l[lo : np.searchsorted(calls_l, d)].tolist()
        info[s] = (delay, float(sum(delay.values())), inner, float(W.omega[inner].sum()))
        spans[s] = (lo_d, d)
    # backward pass: a wait state's costs are complete once every wait state it
    # propagated into (those whose interval holds it) has been handled
    for s in _backward_order(W, info):
        delay, sum_d, inner, sum_w = info[s]
        om = float(W.omega[s])
        if sum_d + sum_w <= 0:
            direct[s] = om
            continue
        scale_w = min(om / (sum_d + sum_w), 1.0)
        scale_c = rcost[s] / (sum_d + sum_w)
        indirect[s] = scale_w * sum_w
        direct[s] = om - indirect[s]
        rank_d = int(c["rank"][W.causer[s]])
        kind = KINDS[int(W.kind[s])]
        short = costs.setdefault((kind, "short"), {})
        long_ = costs.setdefault((kind, "long"), {})
        for p, v in delay.items():
            short[(p, rank_d)] = short.get((p, rank_d), 0.0) + scale_w * v
            if scale_c > 0:
                long_[(p, rank_d)] = long_.get((p, rank_d), 0.0) + scale_c * v
        for i in inner:
            wi = float(W.omega[i])
            rcost[i] += (scale_w + scale_c) * wi
            propagating[i] = max(propagating[i], scale_w * wi)
    res = RootCauses(
        graph=g,
        waits=W,
        direct=direct,
        indirect=indirect,
        propagating=propagating,
        costs={k: v for k, v in costs.items() if v},
    )
    res.delays = [(s, spans[s], info[s][0]) for s in range(n) if info[s] is not None]
    res.comp_path = tl.comp_path
    _critical_path(g, W, tl, res)
    return res


def _backward_order(W, info):
    """Wait states so that each comes before those it propagates into (Kahn's order on
    "w' lies in the interval of w"), latest end first among the ready ones."""
    import heapq

    n = len(W)
    indeg = np.zeros(n, np.int64)
    for x in info:
        for i in x[2] if x is not None else ():
            indeg[i] += 1
    ready = [
        (-int(W.end[s]), -int(W.waiter[s]), s)
        for s in range(n)
        if indeg[s] == 0 and info[s] is not None
    ]
    heapq.heapify(ready)
    out = []
    while ready:
        s = heapq.heappop(ready)[2]
        out.append(s)
        for i in info[s][2]:
            indeg[i] -= 1
            if indeg[i] == 0:
                heapq.heappush(ready, (-int(W.end[i]), -int(W.waiter[i]), i))
    return out


def _critical_path(g, W, tl, res):
    c = g.calls
    locs = g.locations
    nloc = len(locs["first"])
    if not len(c["t0"]) or not nloc:
        return
    loc = c["loc"].astype(np.int64)
    first = locs["first"].astype(np.int64)
    stop = np.r_[first[1:], len(c["t0"])]
    t1 = c["t1"].astype(np.int64)
    t0 = c["t0"].astype(np.int64)
    last = np.array([t1[stop[i] - 1] if stop[i] > first[i] else 0 for i in range(nloc)])
    # a location ends where its rank entered MPI_Finalize (the trace's calls stop there,
    # unless it holds the call): the computation after its last call is on the path too
    ends = np.maximum(last, locs["t_end"].astype(np.int64))
    cur = int(np.argmax(ends))
    t = int(ends[cur])
    if t > last[cur] and stop[cur] > first[cur]:
        tail = (int(tl.comp_path[stop[cur] - 1]), int(c["rank"][first[cur]]))
        tail_from = int(last[cur])
    else:
        tail = None
    iv_hi = 2 * int(stop[cur])  # the walk has covered the intervals of cur up to iv_hi
    waiters = {}
    order = np.lexsort((W.waiter, loc[W.waiter]))
    lw = loc[W.waiter[order]]
    for lo in np.unique(lw).tolist():
        sel = order[lw == lo]
        waiters[lo] = (W.waiter[sel], sel)
    segs = []
    profile = {}
    while True:
        hi = iv_hi // 2
        calls_w, rows_w = waiters.get(cur, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        k = int(np.searchsorted(calls_w, hi)) - 1
        while k >= 0 and W.end[rows_w[k]] > t:
            k -= 1
        lo_call = int(first[cur])
        if k >= 0:
            w, j = int(calls_w[k]), int(rows_w[k])
            a = int(W.end[j])
        else:
            w = None
            a = max(int(t0[lo_call] - c["useful"][lo_call]), int(locs["t_begin"][cur]))
        rank = int(c["rank"][lo_call])
        lo_iv = 2 * w + 1 if w is not None else 2 * lo_call
        for p, v in tl.clipped(lo_iv, iv_hi, a, t).items():
            profile[(p, rank)] = profile.get((p, rank), 0) + v
        if tail is not None:
            profile[tail] = profile.get(tail, 0) + t - max(a, tail_from)
            tail = None
        segs.append((cur, a, t))
        if w is None:
            break
        d = int(W.causer[j])
        # the causer's burst before d ends at d's enter, the wait's end
        cur, t, iv_hi = int(loc[d]), a, 2 * d + 1
    res.segments = segs[::-1]
    res.cp_profile = profile
    # activity per (path, rank) from MPI_Init's return to MPI_Finalize's enter (where
    # the trace holds the two calls, as an imported one does, they are left out), with
    # the computation after the last call; the imbalance against its mean
    act = {}
    lo_t = np.repeat(locs["t_begin"].astype(np.int64)[loc], 2)
    hi_t = np.repeat(ends[loc], 2)
    v = np.minimum(tl.stop, hi_t) - np.maximum(tl.start, lo_t)
    v = np.maximum(v, 0) - np.where(v > 0, tl.wait, 0)
    for p, r, x in zip(tl.path.tolist(), tl.rank.tolist(), v.tolist()):
        if x > 0:
            act[(p, r)] = act.get((p, r), 0) + x
    for i in range(nloc):
        if stop[i] > first[i] and ends[i] > last[i]:
            key = (int(tl.comp_path[stop[i] - 1]), int(c["rank"][first[i]]))
            act[key] = act.get(key, 0) + int(ends[i] - last[i])
    res.activity = act
    per_path = {}
    for (p, _), x in act.items():
        per_path[p] = per_path.get(p, 0) + x
    on_path = {}
    for (p, _), x in profile.items():
        on_path[p] = on_path.get(p, 0) + x
    res.cp_imbalance = {
        p: x - per_path.get(p, 0) / nloc
        for p, x in on_path.items()
        if x - per_path.get(p, 0) / nloc > 0
    }


# ---------------------------------------------------------------- what if

SAVINGS_TOP = 3  # causes replayed without their delay


def what_if(res, top=SAVINGS_TOP):
    """For the top causes in computation (rank, call path of computation, by costs): the
    seconds the ideal-network replay (analysis/replay.py) saves when the cause's delays
    are removed, i.e. each burst of that path in a delaying interval shortened by its
    share of the delay there (the burst set to the waiting side's). One replay per
    cause, against the replay of the recorded bursts. Sets res.savings and returns it."""
    from perfweave.analysis import replay

    g = res.graph
    c = g.calls
    useful = c["useful"].astype(np.int64)
    comp = set(res.comp_path.tolist())
    causes = [x for x in res.causes() if x[1] in comp and x[2] + x[3] > 0][:top]
    if not causes:
        res.savings = []
        return res.savings
    base = replay.replay(g)
    out = []
    for rank, path, _, _ in causes:
        cut = np.zeros(len(useful), np.float64)
        for s, (lo, d), delay in res.delays:
            if int(c["rank"][d]) != rank or delay.get(path, 0) <= 0:
                continue
            calls = np.arange((lo + 1) // 2, d + 1)
            calls = calls[res.comp_path[calls] == path]
            have = useful[calls].sum()
            if have <= 0:
                continue
            # the bursts' share of this delay; where intervals overlap, the largest
            share = useful[calls] * min(delay[path] / have, 1.0)
            cut[calls] = np.maximum(cut[calls], share)
        new = useful - np.rint(cut).astype(np.int64)
        alt = replay.replay(g, useful=new)
        if math.isfinite(base.t_ideal_s) and math.isfinite(alt.t_ideal_s):
            out.append((rank, path, base.t_ideal_s - alt.t_ideal_s))
    res.savings = out
    return out


# ---------------------------------------------------------------- into the metric tree


def charge(res, acc):
    """Add the root-cause metrics of res (RootCauses) to acc (waitstates.common.Acc):
    delay costs on the causing rank's call paths, the classification of Late Sender /
    Late Receiver time on the waiting call, the critical path and its imbalance."""
    g = res.graph
    c = g.calls
    for (kind, term), per in res.costs.items():
        if kind == "finalize":
            continue
        metric = f"delay_{kind}" if term == "short" else f"delay_{kind}_longterm"
        _add(acc, metric, per)
    W = res.waits
    p2p = {K["latesender"]: ("latesender", "ls"), K["latereceiver"]: ("latereceiver", "lr")}
    for k, (name, short) in p2p.items():
        sel = W.kind == k
        if not sel.any():
            continue
        path = c["path"][W.waiter[sel]]
        rank = c["rank"][W.waiter[sel]]
        om = W.omega[sel].astype(np.float64)
        for metric, v in (
            (f"mpi_wait_direct_{name}", res.direct[sel]),
            (f"mpi_wait_indirect_{name}", res.indirect[sel]),
            (f"mpi_wait_propagating_{short}", res.propagating[sel]),
            (f"mpi_wait_terminal_{short}", om - res.propagating[sel]),
        ):
            acc.add(metric, path, rank, np.rint(v).astype(np.int64))
    _add(acc, "critical_path", res.cp_profile)
    _add(acc, "delay_savings", {(p, r): v * 1e9 for r, p, v in res.savings if v > 0})
    on_path = {}
    for (p, _), x in res.cp_profile.items():
        on_path[p] = on_path.get(p, 0) + x
    _add(
        acc,
        "critical_path_imbalance",
        {
            (p, r): res.cp_imbalance[p] * x / on_path[p]
            for (p, r), x in res.cp_profile.items()
            if p in res.cp_imbalance
        },
    )


def _add(acc, metric, per):
    if not per:
        return
    keys = list(per)
    acc.add(
        metric,
        np.array([k[0] for k in keys], np.int64),
        np.array([k[1] for k in keys], np.int64),
        np.rint(np.array([per[k] for k in keys], np.float64)).astype(np.int64),
    )


def analyze_loaded(L):
    """RootCauses of a trace loaded in one process with detail (waitstates.load)."""
    from perfweave.analysis import eventgraph

    return analyze_graph(eventgraph.build(L))

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

All wait states are handled at once, in numpy (docs/architecture.md): the synchronisation
points by searches in sorted arrays, the delays by sums over (wait state, interval) rows
in chunks of bounded size; only the backward pass needs an order (Kahn's, over "w' lies
in the interval of w"), and it is a linear propagation: the C kernel
pw_propagate_costs of libperfweave-replay.so, else numpy level by level. The critical
path is walked a segment at a time (a few per iteration of the program).
"""

import ctypes
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis import longest_path

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
    delays: object = None  # Delays: per (wait state, call path) its delay (ns)
    comp_path: object = None  # per call, the call path of the computation before it
    savings: list = field(default_factory=list)  # [(rank, path, s saved)]: what_if

    @property
    def cp_length(self):
        return sum(b - a for _, a, b in self.segments)

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
    is_fn = _fn_test(g)
    poll = is_fn(lambda f: f.startswith(_POLL))
    rows = []  # (waiter, causer, kind, omega)

    m = g.messages
    if len(m["scall"]):
        s, rd, rp = (m[k].astype(np.int64) for k in ("scall", "rdone", "rpost"))
        om = np.minimum(t0[s], t1[rd]) - t0[rd]
        ok = (om > 0) & ~poll[rd]
        rows.append((rd[ok], s[ok], np.full(ok.sum(), K["latesender"]), om[ok]))
        sd = m["sdone"].astype(np.int64)
        has = sd >= 0
        sdi = np.where(has, sd, 0)
        lr_call = is_fn(lambda f: f in _LR_CALLS)[sdi] & has
        om = t0[rp] - t0[sdi]
        ok = lr_call & (om > 0) & (t1[sdi] > t0[rp])
        rows.append((sdi[ok], rp[ok], np.full(ok.sum(), K["latereceiver"]), om[ok]))

    rows += _collective_waits(g, t0, t1, is_fn, poll)
    # MPI_Finalize synchronises the ranks as a barrier does (Scalasca's Wait at Finalize):
    # the critical path goes on from its last arrival; it is no delay metric
    fin = np.flatnonzero(is_fn(lambda f: f == "MPI_Finalize"))
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


def _fn_test(g):
    """is_fn(test): per call of g, test(name of its function) (False for none), the
    test made once per function."""
    fn = g.calls["fn"].astype(np.int64)
    names = list(g.functions)
    at = np.where(fn >= 0, fn, len(names))
    return lambda test: np.array([bool(test(f)) for f in names] + [False], bool)[at]


def _collective_waits(g, t0, t1, is_fn, poll):
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
    # the kind of wait by function; fences and window creation/free wait as barriers
    cls = np.full(len(idx), -1, np.int64)
    for kind, names in (("n21", _N21), ("12n", _12N), ("n2n", _N2N), ("barrier", _BARRIER_LIKE)):
        cls[is_fn(lambda f, names=names: f in names)[b]] = K[kind]
    cls[inst["kind"][ii] != 0] = K["barrier"]
    arrive = t0[b]
    # per instance: the last arrival (all), the root's arrival, the last non-root arrival
    order = np.lexsort((arrive, ii))
    ninst = len(inst["kind"])

    def last_of(sel):
        o = order[sel[order]]
        out = np.full(ninst + 1, -1, np.int64)  # [-1]: no instance
        if len(o):
            end = np.r_[ii[o][1:] != ii[o][:-1], True]
            out[ii[o][end]] = o[end]
        return out

    every = np.ones(len(idx), bool)
    src = np.select(
        [
            (cls == K["barrier"]) | (cls == K["n2n"]),
            (cls == K["12n"]) & ~root,
            (cls == K["n21"]) & root,
        ],
        [last_of(every)[ii], last_of(root)[ii], last_of(~root)[ii]],
        -1,
    )
    ok = (src >= 0) & ~poll[e] & (src != np.arange(len(idx)))
    om = np.minimum(arrive[np.maximum(src, 0)], t1[e]) - t0[e]
    ok &= om > 0
    return [(e[ok], b[src[ok]], cls[ok], om[ok])]


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
        self.npaths = max(len(g.paths), 1)
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
        # what time_map sums per interval: its time, its activity (time less waiting)
        self.time = np.maximum(stop - start, 0)
        self.active = np.maximum(stop - start - wait, 0)


def _fn_id(g, name):
    return g.functions.index(name) if name in g.functions else -2


def _parents(paths):
    index = {tuple(lab): i for i, lab in enumerate(paths)}
    return np.array([index.get(tuple(lab[:-1]), i) for i, lab in enumerate(paths)], np.int64)


# ---------------------------------------------------------------- bulk helpers

# (item, interval) rows expanded at once, and the dense (item, key) sums one pass may
# keep: bound the memory where many wait states have long intervals (a rank that talks
# to many partners in turn)
ROWS = 1 << 18
DENSE = 1 << 20


def _ranges(lo, count):
    """(item, index) rows of ranges lo[i] .. lo[i] + count[i] - 1, in item order."""
    count = np.maximum(count, 0)
    seg = np.repeat(np.arange(len(lo)), count)
    start = np.cumsum(count) - count
    return seg, np.repeat(np.asarray(lo, np.int64) - start, count) + np.arange(len(seg))


def _chunks(rows, per=1):
    """[a, b) slices of items whose rows (per item) sum to ROWS at most (an item alone
    may pass it), and with (b - a) * per <= DENSE where per <= DENSE."""
    cum = np.cumsum(rows)
    limit = ROWS
    most = max(DENSE // max(per, 1), 1)
    a, n = 0, len(rows)
    while a < n:
        base = cum[a - 1] if a else 0
        b = int(np.searchsorted(cum, base + limit, side="right"))
        b = min(max(b, a + 1), a + most, n)
        yield a, b
        a = b


def _sum_by(key, value, nkeys):
    """(keys, sums) of value summed by integer key in 0 .. nkeys - 1, ascending, for the
    keys that occur (the dense way: whose sum is not 0). Sums of integers are exact
    (float64 below 2**53 ns)."""
    if nkeys <= DENSE:
        tot = np.bincount(key, value, minlength=nkeys)
        k = np.flatnonzero(tot)
        return k, tot[k]
    k, inv = np.unique(key, return_inverse=True)
    return k, np.bincount(inv.reshape(-1), value, minlength=len(k))


# ---------------------------------------------------------------- synchronisation points


class _SyncPoints:
    """For each pair of locations, their synchronisation points in order: (call on the
    one, call on the other) for every message between them and every collective
    operation or fence both took part in, but a rooted one (broadcast, scatter, gather,
    reduce...) only where one of the two is its root: it orders each rank against the
    root, never two others (one may leave it before the other enters), as in scout.

    A location's calls are consecutive, so one array sorted by (partner location, call)
    holds every pair's points in order; looked up for all wait states at once."""

    def __init__(self, g):
        c = g.calls
        loc = c["loc"].astype(np.int64)
        self.n = n = max(len(loc), 1)
        m, r = g.messages, g.rma_sync
        a = np.r_[m["scall"].astype(np.int64), r["a"].astype(np.int64)]
        b = np.r_[m["rdone"].astype(np.int64), r["b"].astype(np.int64)]
        keep = loc[a] != loc[b]
        a, b = a[keep], b[keep]
        # every point from both sides, by (the other's location, this call, the other's)
        one, other = np.r_[a, b], np.r_[b, a]
        key = loc[other] * n + one
        o = np.lexsort((other, key))
        self.key, self.one, self.other = key[o], one[o], other[o]
        # collectives: each location's (completing call, instance) in call order; MPI_Init
        # synchronises every rank as a collective does (instance -1), as in scout
        parts = g.coll_parts
        init = np.flatnonzero(c["fn"] == _fn_id(g, "MPI_Init"))
        ok = (parts["open"] == 0) & (parts["ecall"] >= 0)
        ec = np.r_[parts["ecall"][ok].astype(np.int64), init]
        inst = np.r_[parts["inst"][ok].astype(np.int64), np.full(len(init), -1)]
        o = np.lexsort((ec, loc[ec]))
        self.ec, self.inst = ec[o], inst[o]
        # (location, instance) -> its completing call there (the last in call order)
        self.ni = ni = len(g.coll_instances["kind"]) + 1
        k2 = loc[self.ec] * ni + self.inst + 1
        o = np.argsort(k2, kind="stable")
        k2s = k2[o]
        last = np.r_[k2s[1:] != k2s[:-1], True] if len(k2s) else np.zeros(0, bool)
        self.ikey, self.icall = k2s[last], self.ec[o][last]
        # the root's location per instance (-1: none; [-1] for MPI_Init's)
        self.root = np.full(ni, -1, np.int64)
        rooted = np.flatnonzero(parts["root"] == 1)
        self.root[parts["inst"][rooted].astype(np.int64)] = loc[parts["bcall"][rooted]]

    def previous(self, ld, d, lw, w, first):
        """(calls on ld, calls on lw): per wait state (arrays), the last synchronisation
        point of locations ld and lw before calls d and w, or (-1, -1); first: each
        location's first call. Looks back from d over at most LOOK_BACK points of each
        kind, all wait states at once: the last point is nearly always the first looked
        at, so the rounds after the first see few."""
        pd = np.full(len(d), -1, np.int64)
        pw = np.full(len(d), -1, np.int64)
        if len(self.key):
            k = np.searchsorted(self.key, lw * self.n + d)
            lb = np.searchsorted(self.key, lw * self.n + first[ld])
            rows, j = np.arange(len(d)), k - 1
            for _ in range(LOOK_BACK):
                live = j >= lb
                rows, j, lb = rows[live], j[live], lb[live]
                if not len(rows):
                    break
                hit = self.other[j] < w[rows]
                pd[rows[hit]], pw[rows[hit]] = self.one[j[hit]], self.other[j[hit]]
                rows, j, lb = rows[~hit], j[~hit] - 1, lb[~hit]
        if len(self.ec):
            k = np.searchsorted(self.ec, d)
            lb = np.searchsorted(self.ec, first[ld])
            rows, j = np.arange(len(d)), k - 1
            for _ in range(LOOK_BACK):
                live = j >= lb
                rows, j, lb = rows[live], j[live], lb[live]
                e = self.ec[j]
                live = e > pd[rows]  # no later than the message found: done
                rows, j, lb, e = rows[live], j[live], lb[live], e[live]
                if not len(rows):
                    break
                i = self.inst[j]
                rl = self.root[i]
                q = lw[rows] * self.ni + i + 1
                at = np.minimum(np.searchsorted(self.ikey, q), max(len(self.ikey) - 1, 0))
                cw = self.icall[at] if len(self.ikey) else np.zeros(len(q), np.int64)
                hit = (rl < 0) | (rl == ld[rows]) | (rl == lw[rows])
                hit &= (self.ikey[at] == q) if len(self.ikey) else False
                hit &= cw < w[rows]
                pd[rows[hit]], pw[rows[hit]] = e[hit], cw[hit]
                rows, j, lb = rows[~hit], j[~hit] - 1, lb[~hit]
        return pd, pw


LOOK_BACK = 64


# ---------------------------------------------------------------- the analysis


def analyze_graph(g):
    """Root causes of the wait states of event graph g, and its critical path."""
    W = wait_states(g)
    tl = _Timeline(g, W)
    sp = _SyncPoints(g)
    c = g.calls
    loc = c["loc"].astype(np.int64)
    t0, t1 = c["t0"].astype(np.int64), c["t1"].astype(np.int64)
    first = g.locations["first"].astype(np.int64)
    n = len(W)
    om = W.omega.astype(np.float64)
    # Wait at Finalize only steers the critical path: the delay analysis is scout's, of
    # the MPI patterns
    rows = np.flatnonzero(W.kind != K["finalize"])
    active = np.zeros(n, bool)
    active[rows] = True
    # the wait states by waiting call (one each; a location's calls are consecutive), to
    # find those of the causer in an interval: a range of this order
    inner = rows[np.argsort(W.waiter[rows], kind="stable")]
    csum = np.r_[0, np.cumsum(W.omega[inner])]
    # each wait state's interval: from the previous synchronisation call to the burst
    # before the waiting and the causing call
    w, d = W.waiter[rows], W.causer[rows]
    lw, ld = loc[w], loc[d]
    pd, pw = sp.previous(ld, d, lw, w, first)
    lo_d = np.where(pd >= 0, 2 * pd + 2, 2 * first[ld])
    lo_w = np.where(pw >= 0, 2 * pw + 2, 2 * first[lw])
    lo = np.full(n, -1, np.int64)
    lo[rows] = lo_d
    ia, ib = np.zeros(n, np.int64), np.zeros(n, np.int64)
    ia[rows] = np.searchsorted(W.waiter[inner], np.where(pd >= 0, pd + 1, first[ld]))
    ib[rows] = np.searchsorted(W.waiter[inner], d)
    sum_w = (csum[ib] - csum[ia]).astype(np.float64)
    dl = _delays(tl, t0, t1, rows, (lo_d, d, pd), (lo_w, w, pw))
    sum_d = np.bincount(dl.row, dl.ns, minlength=n)
    dl.lo = lo
    S = sum_d + sum_w
    has = S > 0
    scale_w = np.where(has, np.minimum(om / np.where(has, S, 1), 1.0), 0.0)
    # backward pass: a wait state's costs are complete once every wait state it
    # propagated into (those whose interval holds it) has been handled
    rcost, done = _propagate(ia, ib, inner, om, scale_w, S, active)
    run = done & active
    scale_c = np.where(run & has, rcost / np.where(has, S, 1), 0.0)
    indirect = np.where(run & has, scale_w * sum_w, 0.0)
    direct = np.where(run, om - indirect, 0.0)
    propagating = np.zeros(n)
    src = np.flatnonzero(run & has & (ib > ia))
    if len(src):
        s, at = _ranges(ia[src], ib[src] - ia[src])
        i = inner[at]
        np.maximum.at(propagating, i, scale_w[src[s]] * om[i])
    res = RootCauses(
        graph=g,
        waits=W,
        direct=direct,
        indirect=indirect,
        propagating=propagating,
        costs=_costs(g, W, dl, run, scale_w, scale_c),
    )
    res.delays = dl
    res.comp_path = tl.comp_path
    _critical_path(g, W, tl, res)
    return res


@dataclass
class Delays:
    """The delays of the wait states: one row per (wait state, call path) with a delay
    (row: into RootCauses.waits; ns > 0), by row and path; lo: per wait state, the first
    interval of its synchronisation interval on the causer (-1: none, as for Wait at
    Finalize), which ends at the causing call."""

    row: np.ndarray
    path: np.ndarray
    ns: np.ndarray
    lo: np.ndarray = None


def _delays(tl, t0, t1, rows, causer, waiter):
    """The Delays of wait states rows: causer and waiter are (first interval, the call
    the interval ends at, the previous synchronisation call or -1) per row. Each
    wait state's intervals are expanded to (wait state, interval) rows and summed by
    (wait state, path), causer's activity minus waiter's time, in chunks."""
    lo_d, d, pd = causer
    lo_w, w, pw = waiter
    nd, nw = 2 * d + 1 - lo_d, 2 * w + 1 - lo_w
    # the previous synchronisation call counts from the moment both had entered it (its
    # completion), as in scout
    synced = pd >= 0
    t_sync = np.maximum(t0[pd], t0[pw])
    x_d = np.where(synced, np.maximum(t1[pd] - t_sync, 0), 0)
    x_w = np.where(synced, np.maximum(t1[pw] - t_sync, 0), 0)
    p_d, p_w = tl.path[2 * pd + 1], tl.path[2 * pw + 1]
    P = tl.npaths
    out = []
    for a, b in _chunks(np.maximum(nd, 0) + np.maximum(nw, 0) + 2, per=P):
        m = b - a
        s_d, i_d = _ranges(lo_d[a:b], nd[a:b])
        s_w, i_w = _ranges(lo_w[a:b], nw[a:b])
        one = np.arange(m)
        key = np.concatenate(
            (s_d * P + tl.path[i_d], s_w * P + tl.path[i_w], one * P + p_d[a:b], one * P + p_w[a:b])
        )
        value = np.concatenate((tl.active[i_d], -tl.time[i_w], x_d[a:b], -x_w[a:b]))
        k, net = _sum_by(key, value.astype(np.float64), m * P)
        pos = net > 0
        k = k[pos]
        out.append((rows[a + k // P], k % P, np.rint(net[pos]).astype(np.int64)))
    if not out:
        z = np.zeros(0, np.int64)
        return Delays(z, z, z)
    return Delays(*(np.concatenate(x) for x in zip(*out)))


def _costs(g, W, dl, run, scale_w, scale_c):
    """{(kind, "short"|"long"): {(path, rank): ns}}: each delay scaled by its wait
    state's short- and long-term scale, on the causing rank."""
    sel = run[dl.row]
    row, path, ns = dl.row[sel], dl.path[sel], dl.ns[sel].astype(np.float64)
    rank = g.calls["rank"].astype(np.int64)[W.causer[row]]
    nr = int(rank.max()) + 1 if len(rank) else 1
    P = max(len(g.paths), 1)
    key = (W.kind[row] * P + path) * nr + rank
    costs = {}
    for term, scale in (("short", scale_w), ("long", scale_c)):
        v = scale[row] * ns
        pos = v > 0 if term == "long" else np.ones(len(v), bool)
        k, tot = _sum_by(key[pos], v[pos], len(KINDS) * P * nr)
        for kk, x in zip(k.tolist(), tot.tolist()):
            kind, rest = divmod(kk, P * nr)
            costs.setdefault((KINDS[kind], term), {})[divmod(rest, nr)] = x
    return costs


# ---------------------------------------------------------------- long-term costs


@functools.lru_cache(maxsize=None)
def _kernel():
    """pw_propagate_costs of libperfweave-replay.so, or None where it is not built."""
    lib = longest_path.library()
    fn = getattr(lib, "pw_propagate_costs", None) if lib is not None else None
    if fn is None:
        return None
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 9
    return fn


def _propagate(ia, ib, inner, omega, scale, S, active, use_c=True):
    """(rcost, done) of the backward pass: for every wait state s, in an order where
    each comes before those it propagates into (Kahn's), rcost[i] += (scale[s] +
    rcost[s] / S[s]) * omega[i] for each wait state i inner to s (inner[ia[s]:ib[s]]);
    done: handled (not on a cycle, nor behind one). The C kernel where built, else
    numpy, a level of the order at a time."""
    n = len(omega)
    args = [np.ascontiguousarray(x, np.int64) for x in (ia, ib, inner)]
    args += [np.ascontiguousarray(x, np.float64) for x in (omega, scale, S)]
    args.append(np.ascontiguousarray(active, np.uint8))
    fn = _kernel() if use_c else None
    rcost, done = np.zeros(n), np.zeros(n, np.uint8)
    if fn is not None:
        if fn(n, *(a.ctypes.data for a in args + [rcost, done])) < 0:
            raise MemoryError("root causes: out of memory")
        return rcost, done.astype(bool)
    ia, ib, inner, omega, scale, S, active = args
    active = active.astype(bool)
    src = np.flatnonzero(active & (ib > ia))
    s, at = _ranges(ia[src], ib[src] - ia[src])
    indeg = np.bincount(inner[at], minlength=n)
    ready = np.flatnonzero(active & (indeg == 0))
    while len(ready):
        done[ready] = 1
        f = np.where(
            S[ready] > 0, scale[ready] + rcost[ready] / np.where(S[ready] > 0, S[ready], 1), 0
        )
        s, at = _ranges(ia[ready], ib[ready] - ia[ready])
        i = inner[at]
        np.add.at(rcost, i, f[s] * omega[i])
        np.subtract.at(indeg, i, 1)
        i = np.unique(i)
        ready = i[(indeg[i] == 0) & active[i]]
    return rcost, done.astype(bool)


# ---------------------------------------------------------------- the critical path


def _critical_path(g, W, tl, res):
    c = g.calls
    locs = g.locations
    nloc = len(locs["first"])
    if not len(c["t0"]) or not nloc:
        return
    loc = c["loc"].astype(np.int64)
    rank_of = c["rank"].astype(np.int64)
    first = locs["first"].astype(np.int64)
    stop = np.r_[first[1:], len(c["t0"])]
    t1 = c["t1"].astype(np.int64)
    t0 = c["t0"].astype(np.int64)
    last = np.where(stop > first, t1[np.maximum(stop - 1, 0)], 0)
    # a location ends where its rank entered MPI_Finalize (the trace's calls stop there,
    # unless it holds the call): the computation after its last call is on the path too
    ends = np.maximum(last, locs["t_end"].astype(np.int64))
    cur = int(np.argmax(ends))
    t = int(ends[cur])
    if t > last[cur] and stop[cur] > first[cur]:
        tail = (int(tl.comp_path[stop[cur] - 1]), int(rank_of[first[cur]]))
        tail_from = int(last[cur])
    else:
        tail = None
    iv_hi = 2 * int(stop[cur])  # the walk has covered the intervals of cur up to iv_hi
    # the wait states by waiting call (a location's calls are consecutive); the walk goes
    # one segment at a time, a few per iteration of the program
    rows_w = np.argsort(W.waiter, kind="stable")
    calls_w = W.waiter[rows_w]
    end = W.end[rows_w]
    # where each location's walk ends: its first burst's start, from MPI_Init's return
    begin = np.maximum(
        t0[first] - c["useful"][first].astype(np.int64), locs["t_begin"].astype(np.int64)
    ).tolist()
    segs = []  # (location, first interval, interval bound, from, to)
    while True:
        lo_call = int(first[cur])
        k0, k = np.searchsorted(calls_w, (lo_call, iv_hi // 2)).tolist()
        k -= 1
        while k >= k0 and end[k] > t:
            k -= 1
        if k >= k0:
            w, j = int(calls_w[k]), int(rows_w[k])
            a = int(end[k])
        else:
            w = None
            a = begin[cur]
        segs.append((cur, 2 * w + 1 if w is not None else 2 * lo_call, iv_hi, a, t))
        if w is None:
            break
        d = int(W.causer[j])
        # the causer's burst before d ends at d's enter, the wait's end
        cur, t, iv_hi = int(loc[d]), a, 2 * d + 1
    segs = np.array(segs[::-1], np.int64).reshape(-1, 5)
    res.segments = [tuple(x) for x in segs[:, [0, 3, 4]].tolist()]
    nr = int(rank_of.max()) + 1
    # each segment's intervals clipped to it, by (path, rank)
    seg_rank = rank_of[first[segs[:, 0]]]
    keys, vals = [], []
    for a, b in _chunks(np.maximum(segs[:, 2] - segs[:, 1], 0)):
        s, iv = _ranges(segs[a:b, 1], segs[a:b, 2] - segs[a:b, 1])
        s += a
        v = np.minimum(tl.stop[iv], segs[s, 4]) - np.maximum(tl.start[iv], segs[s, 3])
        pos = v > 0
        keys.append(tl.path[iv[pos]] * nr + seg_rank[s[pos]])
        vals.append(v[pos])
    profile = _by_path_rank(np.concatenate(keys), np.concatenate(vals), tl.npaths, nr)
    if tail is not None:
        a = int(segs[-1, 3])
        profile[tail] = profile.get(tail, 0) + int(segs[-1, 4]) - max(a, tail_from)
    res.cp_profile = profile
    # activity per (path, rank) from MPI_Init's return to MPI_Finalize's enter (where
    # the trace holds the two calls, as an imported one does, they are left out), with
    # the computation after the last call; the imbalance against its mean
    t_begin = locs["t_begin"].astype(np.int64)
    keys, vals = [], []
    for a, b in _chunks(np.full(len(c["t0"]), 2)):  # the intervals of calls a .. b - 1
        at = loc[a:b]
        lo_t, hi_t = np.repeat(t_begin[at], 2), np.repeat(ends[at], 2)
        v = np.minimum(tl.stop[2 * a : 2 * b], hi_t) - np.maximum(tl.start[2 * a : 2 * b], lo_t)
        v = np.maximum(v, 0) - np.where(v > 0, tl.wait[2 * a : 2 * b], 0)
        pos = np.flatnonzero(v > 0)
        keys.append(tl.path[2 * a + pos] * nr + rank_of[a + pos // 2])
        vals.append(v[pos])
    act = _by_path_rank(np.concatenate(keys), np.concatenate(vals), tl.npaths, nr)
    for i in range(nloc):
        if stop[i] > first[i] and ends[i] > last[i]:
            key = (int(tl.comp_path[stop[i] - 1]), int(rank_of[first[i]]))
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


def _by_path_rank(key, value, npaths, nr):
    """{(path, rank): ns} of value summed by key path * nr + rank."""
    k, tot = _sum_by(key, value.astype(np.float64), npaths * nr)
    tot = np.rint(tot).astype(np.int64)
    return {(p, r): x for p, r, x in zip((k // nr).tolist(), (k % nr).tolist(), tot.tolist())}


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
    dl = res.delays
    causer = res.waits.causer[dl.row]
    rank_of = c["rank"][causer]
    out = []
    for rank, path, _, _ in causes:
        cut = np.zeros(len(useful), np.float64)
        sel = np.flatnonzero((rank_of == rank) & (dl.path == path))
        lo = (dl.lo[dl.row[sel]] + 1) // 2
        hi = causer[sel] + 1
        for a, b in _chunks(hi - lo):
            s, calls = _ranges(lo[a:b], hi[a:b] - lo[a:b])
            keep = res.comp_path[calls] == path
            s, calls = s[keep], calls[keep]
            have = np.bincount(s, useful[calls], minlength=b - a)
            ok = have[s] > 0
            s, calls = s[ok], calls[ok]
            # the bursts' share of this delay; where intervals overlap, the largest
            share = useful[calls] * np.minimum(dl.ns[sel[a + s]] / have[s], 1.0)
            np.maximum.at(cut, calls, share)
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

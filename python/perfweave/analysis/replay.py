"""The replay of a trace on an ideal network (docs/pop.md, "The ideal-network replay").

Each location keeps its computation (the useful time before each call, as recorded, or
as the caller overrides it for a what-if) and its calls in order; an MPI call takes no
time of its own and ends as soon as what it waits for allows:

- a message is matched as recorded (a wildcard receive keeps the message it got). By
  default sends are eager: a send completes locally, and the call that completes the
  receive leaves at max(its own enter, the send's start + transfer). With
  `eager_limit=N`, sends of more than N bytes, and synchronous sends always, are
  rendezvous: the calls that complete the send and the receive both leave at
  max(the send's start, the receive's post) + transfer (and their own enters);
- a collective operation (blocking or not), fence, window creation or free: every
  participant's completing call leaves at the last participant's arrival (the enter of
  the call that started it there) + its cost;
- active target RMA (waitstates/rma.py's pairing): MPI_Win_complete leaves after the
  targets' MPI_Win_post entered, MPI_Win_wait after the origins' MPI_Win_complete
  entered (+ latency); RMA transfers take no time.

Cost model of the what-ifs (`latency_s` L, `bandwidth_Bps` W; defaults 0 and infinite):
a message of B bytes transfers in L + B/W; a collective of P members in
ceil(log2 P) * L + B/W, B the most bytes one participant sends plus receives; a fence
or window creation/free in ceil(log2 P) * L; an active-target synchronisation in L.

Each node of the event graph (a call's enter and its leave, a collective instance's
hub) gets its ideal time as a longest path (analysis/longest_path.py); a cycle is a
program that would deadlock under these rules (sends that cross under rendezvous), and
is reported with the calls where each location would block.

Times are ns; the ideal run starts at 0 on every location (MPI_Init left).
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.analysis import eventgraph as eg
from perfweave.analysis.longest_path import NONE, kernel, longest_path
from perfweave.model.trace import Cols, Trace

# how the critical path reached a call (ReplayResult.critical_path "via")
VIA = ("start", "computation", "call", "message", "collective", "rma")


@dataclass
class ReplayResult:
    graph: eg.EventGraph
    enter_ns: np.ndarray  # ideal enter of each call of graph.calls
    leave_ns: np.ndarray  # ... and leave
    useful_ns: np.ndarray  # the computation before each call replayed (ns)
    loc_start_ns: np.ndarray  # ideal time of each location's region start
    loc_end_ns: np.ndarray  # ... and end
    in_region: np.ndarray  # locations that take part in the region
    t_ideal_s: float  # the region's runtime on the ideal network (inf: deadlock)
    t_recorded_s: float  # ... as recorded
    params: dict
    deadlock: list = None  # where each location would block, if the replay deadlocks
    edge_kind: np.ndarray = None  # VIA code of each edge of the solved graph
    _paths: object = None  # longest_path.Paths of the nodes (2 per call, then hubs)
    region_start: np.ndarray = None  # recorded region of each location (ns)
    region_end: np.ndarray = None
    notes: list = field(default_factory=list)
    # how much of the computation between two recorded instants was replayed, when the
    # replay's computation is not all of it (a useful= override): measure(locations, t)
    # -> counted ns before t on each location (perfweave pop: the region's time); None:
    # all of it. ideal_at places instants by it.
    measure: object = None

    def critical_path(self):
        """The calls on the ideal run's longest path, in order, as Cols: call (index into
        graph.calls), loc, rank, thread, fn (function name), enter, leave (ideal ns), via
        (how the path came to the call: VIA's names: computation on its location,
        message, collective, rma; "start" for the first); fn and via are lists. Empty on
        a deadlock."""
        names = ("call", "loc", "rank", "thread", "enter", "leave")
        if self.deadlock or not self.in_region.any():
            return Cols({k: np.zeros(0, np.int64) for k in names}, fn=[], via=[])
        ncalls = len(self.enter_ns)
        P = self._paths
        end = np.where(self.in_region, self.loc_end_ns, NONE)
        loc = int(np.argmax(end))
        node = self._node_at(loc, self.region_end[loc])
        nodes, how = [], []
        while node >= 0:
            nodes.append(node)
            p, e = int(P.pred[node]), int(P.pred_edge[node])
            if p < 0:
                how.append(0)
            elif e >= 0:
                how.append(int(self.edge_kind[e]))
            else:  # along the location: computation before an enter, or a call's own
                how.append(VIA.index("computation" if node % 2 == 0 else "call"))
            node = p
        nodes, how = np.array(nodes[::-1], np.int64), np.array(how[::-1], np.int64)
        keep = nodes < 2 * ncalls  # hubs of collectives are no calls
        calls, how = nodes[keep] // 2, how[keep]
        # a call once, with how the path came to its first node
        first = np.r_[True, calls[1:] != calls[:-1]]
        calls, how = calls[first], how[first]
        c = self.graph.calls
        return Cols(
            call=calls,
            loc=c["loc"][calls],
            rank=c["rank"][calls],
            thread=c["thread"][calls],
            enter=self.enter_ns[calls],
            leave=self.leave_ns[calls],
            fn=[self.graph.call_name(i) for i in calls.tolist()],
            via=[VIA[h] for h in how.tolist()],
        )

    def _node_at(self, loc, t):
        """The node the ideal time of recorded instant t of location loc is measured
        from (the enter of the call t falls in, else the leave of the call before)."""
        i, inside = _call_at(self.graph, loc, t)
        if inside:
            return 2 * i
        return 2 * (i - 1) + 1 if i > int(self.graph.locations["first"][loc]) else -1

    def to_json(self):
        """The summary as JSON values (t_ideal_s null on a deadlock)."""
        finite = lambda x: x if math.isfinite(x) else None
        params = {k: finite(v) if isinstance(v, float) else v for k, v in self.params.items()}
        return {
            "t_ideal_s": finite(self.t_ideal_s),
            "t_recorded_s": self.t_recorded_s,
            "params": params,
            "deadlock": self.deadlock,
            "notes": self.notes,
        }


def replay(
    exp_or_loaded,
    eager_limit=None,
    latency_s=0.0,
    bandwidth_Bps=math.inf,
    region=None,
    useful=None,
    use_c=True,
):
    """Replay a trace on an ideal network (module docstring): ReplayResult.

    exp_or_loaded: an experiment directory, a Loaded (load(..., detail=True)), a Trace
    (Trace.from_literal) or an EventGraph. region: None (each rank's MPI_Init left ..
    MPI_Finalize entered), (t_start, t_end) for every location, {rank: (t_start, t_end)}
    or {(rank, thread): ...} (locations not named are left out), or an array (locations,
    2); recorded ns on rank 0's clock. useful: the computation before each call (ns, an
    array over graph.calls) instead of the recorded one, for what-ifs. use_c: False for
    the numpy kernel (tests compare the two)."""
    g = as_graph(exp_or_loaded)
    if latency_s < 0 or not bandwidth_Bps > 0:
        raise ValueError("replay: latency must be >= 0 and bandwidth > 0")
    if eager_limit is not None and eager_limit < 0:
        raise ValueError("replay: the eager limit must be >= 0 bytes")
    c = g.calls
    nc = len(c["t0"])
    if useful is None:
        useful = c["useful"]
    useful = np.asarray(useful, np.int64)
    if len(useful) != nc:
        raise ValueError(f"replay: useful has {len(useful)} values for {nc} calls")
    lat = int(round(latency_s * 1e9))
    src, dst, w, kind, ninst = _edges(g, eager_limit, lat, bandwidth_Bps)
    chain, init = call_chains(g, useful, ninst)
    P = longest_path(len(chain), src, dst, w, chain, init, use_c=use_c, overwrite_init=True)
    enter, leave = P.time[0 : 2 * nc : 2], P.time[1 : 2 * nc : 2]
    rs, re, member = _region(g, region)
    params = {
        "eager_limit": eager_limit,
        "latency_s": latency_s,
        "bandwidth_Bps": bandwidth_Bps,
        "cost_model": "message: L + B/W; collective: ceil(log2 P)*L + B/W; "
        "fence, window: ceil(log2 P)*L; active-target sync: L",
    }
    res = ReplayResult(
        graph=g,
        enter_ns=enter,
        leave_ns=leave,
        useful_ns=useful,
        loc_start_ns=np.zeros(len(rs), np.int64),
        loc_end_ns=np.zeros(len(rs), np.int64),
        in_region=member,
        t_ideal_s=math.inf,
        t_recorded_s=_span(rs, re, member) / 1e9,
        params=params,
        edge_kind=kind,
        _paths=P,
        region_start=rs,
        region_end=re,
    )
    res.notes = _notes(g, use_c)
    if P.left:
        res.deadlock = _deadlock(g, P.cyclic[0 : 2 * nc].reshape(-1, 2).any(axis=1))
        return res
    res.loc_start_ns = ideal_at(g, enter, leave, useful, rs)
    res.loc_end_ns = ideal_at(g, enter, leave, useful, re)
    res.t_ideal_s = _span(res.loc_start_ns, res.loc_end_ns, member) / 1e9
    return res


def call_chains(g, useful, extra):
    """(chain, init) of longest_path (analysis/longest_path.py) for graph g's calls as
    nodes 2c (call c's enter) and 2c + 1 (its leave), then `extra` nodes alone
    (collective instances' hubs): each location's calls one chain, with the computation
    useful[c] from the previous leave to an enter, none from an enter to its leave; a
    location's first enter at its computation from 0."""
    nc = len(useful)
    chain = np.full(2 * nc + extra, NONE, np.int64)
    chain[0 : 2 * nc : 2] = useful
    chain[1 : 2 * nc : 2] = 0
    firsts = g.locations["first"]
    firsts = firsts[firsts < nc]
    chain[2 * firsts] = NONE
    init = np.full(len(chain), NONE, np.int64)
    init[2 * firsts] = useful[firsts]
    return chain, init


def as_graph(x):
    """An EventGraph from an experiment directory, a Loaded, a Trace or an EventGraph."""
    if isinstance(x, eg.EventGraph):
        return x
    if isinstance(x, Trace):
        return eg.from_trace(x)
    if isinstance(x, (str, Path)):
        return eg.load_graph(x)
    return eg.build(x)


def _xfer(nbytes, bandwidth):
    """ns to move nbytes at bandwidth bytes/s (0 at infinite bandwidth)."""
    if math.isinf(bandwidth):
        return np.zeros(len(nbytes), np.int64)
    return np.rint(np.asarray(nbytes, np.float64) * (1e9 / bandwidth)).astype(np.int64)


def _edges(g, eager_limit, lat, bandwidth):
    """(src, dst, weight, VIA code, instances) of the graph's edges between locations:
    node 2c is call c's enter, 2c + 1 its leave, 2 * calls + i collective instance i's
    hub. The columns are filled in place, part by part (no concatenation: on large
    traces fresh memory costs more than the arithmetic)."""
    nc = len(g.calls["t0"])
    loc = g.calls["loc"]
    parts = []  # (source: index, times, plus; destination: likewise; weight, VIA code)

    def add(a, b, weight, via, a_leave=False, b_hub=False, a_hub=False):
        a_node = (a, 1, 2 * nc) if a_hub else (a, 2, int(a_leave))
        b_node = (b, 1, 2 * nc) if b_hub else (b, 2, 1)
        parts.append((a_node, b_node, weight, VIA.index(via)))

    m = g.messages
    xfer = lat + _xfer(m["bytes"], bandwidth)
    rdv = m["sync"] != 0
    if eager_limit is not None:
        rdv |= m["bytes"] > eager_limit
    add(m["scall"], m["rdone"], xfer, "message")
    # the receive's post: on the receiving location it comes first anyway (eager), but
    # a rendezvous transfer starts only then
    post = rdv | (loc[m["rpost"]] != loc[m["rdone"]])
    if post.any():
        add(m["rpost"][post], m["rdone"][post], np.where(rdv, xfer, 0)[post], "message")
    sd = rdv & (m["sdone"] >= 0)
    if sd.any():
        add(m["scall"][sd], m["sdone"][sd], xfer[sd], "message")
        add(m["rpost"][sd], m["sdone"][sd], xfer[sd], "message")
    # collective instances: arrivals -> hub -> departures
    ci, cp = g.coll_instances, g.coll_parts
    ninst = len(ci["kind"])
    size = np.maximum(ci["size"], ci["present"]).astype(np.int64)
    steps = np.ceil(np.log2(np.maximum(size, 1))).astype(np.int64)
    cost = steps * lat + np.where(ci["kind"] == eg.COLL, _xfer(ci["bytes"], bandwidth), 0)
    add(cp["bcall"], cp["inst"], 0, "collective", b_hub=True)
    left = cp["ecall"] >= 0
    inst = cp["inst"] if left.all() else cp["inst"][left]
    ecall = cp["ecall"] if left.all() else cp["ecall"][left]
    add(inst, ecall, cost[inst], "collective", a_hub=True)
    r = g.rma_sync
    add(r["a"], r["b"], lat, "rma")
    total = sum(len(p[0][0]) for p in parts)
    src, dst, w = (np.empty(total, np.int64) for _ in range(3))
    kind = np.empty(total, np.int8)
    pos = 0
    for (a, am, ao), (b, bm, bo), weight, via in parts:
        sl = slice(pos, pos + len(a))
        for out, (x, mul, plus) in ((src, (a, am, ao)), (dst, (b, bm, bo))):
            np.multiply(x, mul, out=out[sl], dtype=np.int64)  # int32 ids: no overflow
            if plus:
                out[sl] += plus
        w[sl] = weight
        kind[sl] = via
        pos = sl.stop
    return src, dst, w, kind, ninst


def _region(g, region):
    """(recorded start, end of each location's region, whether it takes part)."""
    loc = g.locations
    nl = len(loc["rank"])
    start, end = loc["t_begin"].copy(), loc["t_end"].copy()
    member = np.ones(nl, bool)
    if region is None:
        pass
    elif isinstance(region, dict):
        member[:] = False
        for i, (rk, th) in enumerate(zip(loc["rank"].tolist(), loc["thread"].tolist())):
            span = region.get((rk, th), region.get(rk))
            if span is not None:
                start[i], end[i] = int(span[0]), int(span[1])
                member[i] = True
    else:
        a = np.asarray(region, np.int64)
        if a.shape == (2,):
            start[:], end[:] = a[0], a[1]
        elif a.shape == (nl, 2):
            start, end = a[:, 0].copy(), a[:, 1].copy()
        else:
            raise ValueError(
                "replay: region must be (start, end), {rank: (start, end)} or (locations, 2)"
            )
    member &= np.diff(np.r_[loc["first"], len(g.calls["t0"])]) > 0
    return start, end, member


def _span(start, end, member):
    if not member.any():
        return 0
    return int(end[member].max()) - int(start[member].min())


def _call_at(g, loc, t):
    """For recorded instants t on locations loc (arrays, or one of each): the first call
    of the location that has not left by t, and whether t lies inside it."""
    one = np.ndim(loc) == 0
    loc, t = np.atleast_1d(loc), np.atleast_1d(np.asarray(t, np.int64))
    c, first = g.calls, g.locations["first"]
    nc = len(c["t0"])
    last = np.r_[first[1:], nc]
    i = np.empty(len(loc), np.int64)
    for l in np.unique(loc).tolist():  # locations: few; instants: many
        sel = np.flatnonzero(loc == l)
        a, b = int(first[l]), int(last[l])
        i[sel] = a + np.searchsorted(c["t1"][a:b], t[sel], "right")
    inside = (i < last[loc]) & (c["t0"][np.minimum(i, max(nc - 1, 0))] <= t)
    if one:
        return int(i[0]), bool(inside[0])
    return i, inside


def ideal_at(g, enter, leave, useful, t, loc=None, measure=None):
    """The ideal time of recorded instants t on locations loc (default: one instant per
    location, in order): inside a call, the call's ideal enter; in the computation before
    a call, the previous call's ideal leave plus the time computed since (at most the
    computation before the call); before a location's first call, the time since its
    rank's MPI_Init left (likewise at most). measure: ReplayResult.measure, what of the
    time since counts (None: all)."""
    t = np.asarray(t, np.int64)
    loc = np.arange(len(g.locations["rank"])) if loc is None else np.asarray(loc, np.int64)
    if not len(loc):
        return np.zeros(0, np.int64)
    i, inside = _call_at(g, loc, t)
    c = g.calls
    nc = len(c["t0"])
    first = g.locations["first"][loc]
    last = np.r_[g.locations["first"][1:], nc][loc]
    prev = i - 1
    has_prev = prev >= first
    origin = np.where(has_prev, c["t1"][np.maximum(prev, 0)], g.locations["t_begin"][loc])
    since = t - origin if measure is None else measure(loc, t) - measure(loc, origin)
    since = np.maximum(since, 0)
    nxt = np.minimum(i, max(nc - 1, 0))
    since = np.where(i < last, np.minimum(since, useful[nxt]), since)
    base = np.where(has_prev, leave[np.maximum(prev, 0)], 0)
    return np.where(inside, enter[nxt], base + since).astype(np.int64)


def _deadlock(g, blocked):
    """Where each location would block: its first call on or behind a cycle."""
    c = g.calls
    out = []
    idx = np.flatnonzero(blocked)
    locs, first = np.unique(c["loc"][idx], return_index=True)
    for l, k in zip(locs.tolist(), idx[first].tolist()):
        out.append(
            {
                "rank": int(c["rank"][k]),
                "thread": int(c["thread"][k]),
                "call": k,
                "function": g.call_name(k),
                "callpath": list(g.paths[int(c["path"][k])]),
                "recorded_enter_ns": int(c["t0"][k]),
            }
        )
    return out


def deadlock_text(res):
    """One line that says where a replay deadlocked."""
    where = ", ".join(
        f"rank {d['rank']}"
        + (f" thread {d['thread']}" if d["thread"] else "")
        + f" in {d['function']}"
        for d in res.deadlock[:8]
    )
    more = len(res.deadlock) - 8
    return (
        f"the program would deadlock on this network (eager limit {res.params['eager_limit']}): "
        f"{where}" + (f" and {more} more locations" if more > 0 else "")
    )


def _notes(g, use_c):
    u = g.unmatched
    notes = []
    if use_c and kernel() is None:
        notes.append(
            "libperfweave-replay.so is not built: the longest paths were computed with "
            "numpy, round after round (slow on long traces)"
        )
    if u.get("sends") or u.get("receives"):
        notes.append(
            f"{u['sends']} sends and {u['receives']} receives without partner: replayed as "
            "local calls"
        )
    if u.get("collectives"):
        notes.append(
            f"{u['collectives']} collective instances lack participants: they join those present"
        )
    return notes

"""The POP efficiency metrics of a traced run (docs/pop.md).

From the event graph of the trace (analysis/eventgraph.py): the region of interest
(the MPI_Pcontrol(1) ... MPI_Pcontrol(0) intervals when the program marks them, else
MPI_Init ... MPI_Finalize), each location's useful time in it (time outside MPI calls),
and the POP factors: Parallel Efficiency = Load Balance x Communication Efficiency,
Communication Efficiency = Serialisation Efficiency x Transfer Efficiency, with the ideal
runtime taken two independent ways:

- the replay of the trace on an ideal network (analysis/replay.py);
- the critical path of useful computation (as OTF-CPT computes it on the fly: every
  location carries a clock of useful time; a receive completes at the max of its own
  clock and the sender's clock at the send, a collective at the max of its
  participants' clocks at their entry, a synchronous send at the max of its clock and
  the receiver's at the post), a longest path through the event graph that the
  replay's kernel finds in one pass.

Both the multiplicative factors and the additive ones (pypop's "hybrid additive": each
factor is 1 - the time it loses / runtime, so a parent's loss is the sum of its
children's) are given; scaling factors against reference experiments too.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.analysis.longest_path import longest_path
from perfweave.model.trace import R

# pypop's order: each row is (key, name, depth in the tree)
FACTORS = (
    ("global_efficiency", "Global Efficiency", 0),
    ("parallel_efficiency", "Parallel Efficiency", 1),
    ("load_balance", "Load Balance", 2),
    ("communication_efficiency", "Communication Efficiency", 2),
    ("serialisation_efficiency", "Serialisation Efficiency", 3),
    ("transfer_efficiency", "Transfer Efficiency", 3),
    ("computation_scaling", "Computation Scaling", 1),
    ("instruction_scaling", "Instruction Scaling", 2),
    ("ipc_scaling", "IPC Scaling", 2),
    ("frequency_scaling", "Frequency Scaling", 2),
)
NO_PMU = "n/a: no PMU"


# ---- the region of interest ----


def rank_intervals(pcontrol, t_begin, t_end):
    """The region of one rank as disjoint [begin, end) intervals (ns), from its
    MPI_Pcontrol rows (time, level): a level other than 0 starts an interval (if none is
    open), a level 0 ends it; one still open at the end ends at t_end. Without
    Pcontrol calls: [t_begin, t_end]."""
    if pcontrol is None or not len(pcontrol):
        return np.array([[t_begin, t_end]], np.int64)
    t, on = pcontrol[:, 0], pcontrol[:, 1] != 0
    state = np.r_[False, on]  # before each row, then after it
    starts = t[on & ~state[:-1]]
    stops = t[~on & state[:-1]]
    if state[-1]:
        stops = np.r_[stops, t_end]
    return np.stack([np.clip(starts, t_begin, t_end), np.clip(stops, t_begin, t_end)], axis=1)


def union_length(intervals):
    """The total length of the union of [begin, end) intervals (rows)."""
    if not len(intervals):
        return 0
    iv = intervals[np.argsort(intervals[:, 0], kind="stable")]
    reach = np.maximum.accumulate(iv[:, 1])
    # an interval adds what reaches beyond everything before it
    prev = np.r_[np.int64(np.iinfo(np.int64).min), reach[:-1]]
    return int(np.maximum(iv[:, 1] - np.maximum(iv[:, 0], prev), 0).sum())


def measure_before(intervals, t):
    """For each time of t: how much of the region (disjoint sorted intervals) lies
    before it."""
    a, b = intervals[:, 0], intervals[:, 1]
    cum = np.r_[0, np.cumsum(b - a)]
    k = np.searchsorted(a, t, "right")  # intervals begun by t
    last = np.maximum(k - 1, 0)
    inside = np.where(k > 0, np.clip(t - a[last], 0, (b - a)[last]), 0)
    return cum[np.maximum(k - 1, 0)] * (k > 0) + inside


@dataclass
class Region:
    """The region of interest: intervals per rank (disjoint, sorted) and whether the
    program marked it with MPI_Pcontrol."""

    intervals: dict  # rank -> (n, 2) int64 ns on rank 0's clock
    marked: bool
    runtime_ns: int  # length of the union of every rank's intervals
    notes: list = field(default_factory=list)


def region_of(trace, locations):
    """The Region of a Trace (model/trace.py) whose locations (the event graph's) give
    each rank's MPI_Init .. MPI_Finalize."""
    span = {}
    for r, b, e in zip(
        locations["rank"].tolist(), locations["t_begin"].tolist(), locations["t_end"].tolist()
    ):
        span[r] = (b, e)
    for rd in trace.ranks:
        span.setdefault(rd.rank, (rd.t_begin, rd.t_end))
    marked_ranks = [rd.rank for rd in trace.ranks if rd.pcontrol is not None and len(rd.pcontrol)]
    notes = []
    if marked_ranks and len(marked_ranks) < len(trace.ranks):
        notes.append(
            f"{len(trace.ranks) - len(marked_ranks)} rank(s) called no MPI_Pcontrol: "
            "their region is MPI_Init .. MPI_Finalize"
        )
    intervals = {}
    for rd in trace.ranks:
        b, e = span[rd.rank]
        iv = rank_intervals(rd.pcontrol if marked_ranks else None, b, e)
        intervals[rd.rank] = iv[iv[:, 1] > iv[:, 0]] if len(iv) else iv
    allv = np.concatenate(list(intervals.values())) if intervals else np.zeros((0, 2), np.int64)
    return Region(intervals, bool(marked_ranks), union_length(allv), notes)


# ---- useful time ----


def useful_bursts(graph, region):
    """(u, tail): for each call of the event graph the useful time (region time outside
    MPI) on its location since the previous call (or the region's start), and for each
    location the useful time after its last call."""
    calls, loc = graph.calls, graph.locations
    n = len(calls["t0"])
    u = np.zeros(n, np.int64)
    tail = np.zeros(len(loc["rank"]), np.int64)
    first = np.r_[loc["first"], n]
    for i, r in enumerate(loc["rank"].tolist()):
        a, b = int(first[i]), int(first[i + 1])
        iv = region.intervals.get(r)
        if iv is None or not len(iv):
            continue
        t0 = measure_before(iv, calls["t0"][a:b])
        t1 = measure_before(iv, calls["t1"][a:b])
        prev = np.r_[0, t1[:-1]]
        u[a:b] = np.maximum(t0 - prev, 0)
        total = int((iv[:, 1] - iv[:, 0]).sum())
        tail[i] = max(total - (int(t1[-1]) if b > a else 0), 0)
    return u, tail


def merge_intervals(iv):
    """The union of [begin, end) rows as disjoint sorted rows."""
    if not len(iv):
        return np.zeros((0, 2), np.int64)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    reach = np.maximum.accumulate(iv[:, 1])
    # a row starts a new piece where it begins beyond everything before it
    new = np.r_[True, iv[1:, 0] > reach[:-1]]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(iv)] - 1
    return np.stack([iv[starts, 0], reach[ends]], axis=1).astype(np.int64)


def clip_to(iv, region_iv):
    """The part of disjoint sorted rows iv inside the disjoint sorted rows region_iv."""
    parts = [
        np.stack([np.maximum(iv[:, 0], a), np.minimum(iv[:, 1], b)], axis=1)
        for a, b in region_iv.tolist()
    ]
    out = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
    return out[out[:, 1] > out[:, 0]]


def io_intervals(exp, graph):
    """{(rank, thread): disjoint sorted (n, 2) ns on rank 0's clock} of the I/O calls of
    each location (the io module's segment trace, --io --trace; {} without one). A
    segment goes to the trace's thread with its OS thread id (the trace's BLOCK
    records); an older trace without them: the process's main thread is thread 0."""
    from perfweave.clock import global_ns
    from perfweave.readers import trace as rt
    from perfweave.readers.io import read_io

    io = read_io(Path(exp))
    g = io.segments
    if g is None or not len(g):
        return {}
    out = {}
    for r in sorted(set(graph.locations["rank"].tolist())):
        s = g[g["rank"] == r]
        meta = rt.read_meta(exp, r)[0] or {}
        if not len(s) or not meta.get("clock"):
            continue
        known = rt.rank_thread_ids(exp, r) or {0: int(io.processes["pid"][s["process"][0]])}
        t0, t1 = global_ns(meta, s["t0_ns"]), global_ns(meta, s["t1_ns"])
        for thread, tid in known.items():
            mine = s["tid"] == tid
            if mine.any():
                out[(r, thread)] = merge_intervals(np.stack([t0[mine], t1[mine]], axis=1))
    return out


def io_bursts(graph, region, io):
    """(io_u, io_tail): for each call of the event graph the time of I/O calls (outside
    MPI: io, io_intervals) in the region on its location since the previous call, and
    for each location after its last call; useful_bursts' u and tail hold them."""
    calls, loc = graph.calls, graph.locations
    n = len(calls["t0"])
    io_u = np.zeros(n, np.int64)
    io_tail = np.zeros(len(loc["rank"]), np.int64)
    first = np.r_[loc["first"], n]
    for i, (r, th) in enumerate(zip(loc["rank"].tolist(), loc["thread"].tolist())):
        iv = region.intervals.get(r)
        if (r, th) not in io or iv is None or not len(iv):
            continue
        J = clip_to(io[(r, th)], iv)
        if not len(J):
            continue
        a, b = int(first[i]), int(first[i + 1])
        t0 = measure_before(J, calls["t0"][a:b])
        t1 = measure_before(J, calls["t1"][a:b])
        io_u[a:b] = np.maximum(t0 - np.r_[0, t1[:-1]], 0)
        io_tail[i] = max(int((J[:, 1] - J[:, 0]).sum()) - (int(t1[-1]) if b > a else 0), 0)
    return io_u, io_tail


# ---- the critical path of useful computation ----


def _edges(graph):
    """(source call, target call) pairs: the target's leave waits for the source's
    clock at its enter."""
    m = graph.messages
    src, dst = [m["scall"]], [m["rdone"]]
    sync = (m["sync"] != 0) & (m["sdone"] >= 0)
    src.append(m["rpost"][sync])
    dst.append(m["sdone"][sync])
    rs = graph.rma_sync
    if len(rs["a"]):
        src.append(rs["a"])
        dst.append(rs["b"])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def _collective_parts(graph):
    """(inst, bcall, ecall, feeds, fed) of the participations: feeds: its entry clock
    reaches the others; fed: its completion waits for the others' (by the collective's
    role: a one-to-all operation only the root feeds, an all-to-one only the root is
    fed; the others, all to all)."""
    cp = graph.coll_parts
    inst, bcall, ecall = cp["inst"], cp["bcall"], cp["ecall"]
    role = graph.calls["role"][bcall] if len(bcall) else np.zeros(0, np.int16)
    root = cp["root"] != 0
    feeds = np.where(role == R["12n"], root, True)
    fed = np.where(role == R["n21"], root, True) & (ecall >= 0)
    return inst.astype(np.int64), bcall.astype(np.int64), ecall.astype(np.int64), feeds, fed


def critical_path(graph, u, tail, use_c=True):
    """The longest path of useful computation (ns): per location a clock of useful
    time; at each call, the clock at its leave is the max of the clock at its enter and
    the clocks its dependencies bring (_edges, _collective_parts). That is a longest
    path over the replay's nodes (each call's enter and leave, a hub per collective
    instance; analysis/replay.py call_chains) with a location's useful time on its
    chain and the dependencies as edges of weight 0, found in one pass by the replay's
    kernel (analysis/longest_path.py; use_c=False: its numpy fallback). Returns (path
    length, the clock at each location's end, None), or (None, None, why) when the
    dependencies form a cycle: a call would wait for a clock its own location reaches
    only after it (a collective this reading takes as synchronising that the program
    relied on not to be: a rank that receives, before its MPI_Scan, what a lower rank
    sends after its own)."""
    from perfweave.analysis.replay import call_chains

    n = len(graph.calls["t0"])
    src, dst = _edges(graph)
    inst, bcall, ecall, feeds, fed = _collective_parts(graph)
    ninst = int(inst.max()) + 1 if len(inst) else 0
    hub = 2 * n + inst
    esrc = np.concatenate([2 * src, 2 * bcall[feeds], hub[fed]])
    edst = np.concatenate([2 * dst + 1, hub[feeds], 2 * ecall[fed] + 1])
    chain, init = call_chains(graph, u, ninst)
    P = longest_path(
        len(chain), esrc, edst, np.zeros(len(esrc), np.int64), chain, init, use_c, True
    )
    if P.left:
        stuck = int(P.cyclic[0 : 2 * n].reshape(-1, 2).any(axis=1).sum())
        return None, None, f"the recorded dependencies form a cycle ({stuck} calls on or behind it)"
    leave = P.time[1 : 2 * n : 2]
    first = graph.locations["first"].astype(np.int64)
    end = tail.astype(np.int64).copy()
    has = np.flatnonzero(np.r_[first[1:], n] > first)
    last = np.r_[first[1:], n][has] - 1
    end[has] += leave[last]
    return int(end.max(initial=0)), end, None


# ---- the ideal-network replay's runtime of the region ----


def ideal_replay(graph, region, u, tail, **what_if):
    """(ideal runtime of the region ns or None, why not, the ReplayResult) from the
    replay on an ideal network (analysis/replay.py) with each call's computation the
    region's useful time before it (u; none outside the region, so the gaps between
    intervals take no time). The region runs, on the ideal network, from the earliest
    location's entry into it (the ideal leave of its last call before it; 0 if none) to
    the latest location's end (the ideal leave of its last call plus its useful time
    after it). what_if: eager_limit, latency_s, bandwidth_Bps."""
    from perfweave.analysis import replay as rp

    res = rp.replay(graph, useful=u, **what_if)
    res.measure = _region_measure(graph, region)
    if res.deadlock:
        return None, rp.deadlock_text(res), res
    calls, loc = graph.calls, graph.locations
    n = len(calls["t0"])
    first = loc["first"].astype(np.int64)
    last = np.r_[first[1:], n]
    starts, ends = [], []
    for i, r in enumerate(loc["rank"].tolist()):
        a, b = int(first[i]), int(last[i])
        iv = region.intervals.get(r)
        if b <= a or iv is None or not len(iv):
            continue
        k = a + int(np.searchsorted(calls["t1"][a:b], iv[0, 0], "right")) - 1
        starts.append(int(res.leave_ns[k]) if k >= a else 0)
        ends.append(int(res.leave_ns[b - 1]) + int(tail[i]))
    if not ends:
        return None, "no location has calls in the region", res
    return max(ends) - min(starts), None, res


def _region_measure(graph, region):
    """ReplayResult.measure of a replay whose computation is the region's: for instants
    t on locations loc, the region's time before t on each one's rank."""
    ranks = graph.locations["rank"]
    empty = np.zeros((0, 2), np.int64)

    def measure(loc, t):
        loc, t = np.asarray(loc, np.int64), np.asarray(t, np.int64)
        out = np.zeros(len(t), np.int64)
        for r in np.unique(ranks[loc]).tolist():
            sel = ranks[loc] == r
            iv = region.intervals.get(r, empty)
            out[sel] = measure_before(iv, t[sel]) if len(iv) else 0
        return out

    return measure


# ---- the factors ----


def factors(useful, runtime, ideal):
    """The multiplicative and additive POP factors (dicts by FACTORS' keys) from the
    useful times of the locations, the runtime and an ideal runtime (None: unknown)."""
    useful = np.asarray(useful, np.float64)
    T = float(runtime)
    mx = float(useful.max()) if len(useful) else 0.0
    mean = float(useful.mean()) if len(useful) else 0.0
    mul, add = {}, {}
    if T <= 0 or mx <= 0:
        return mul, add
    mul["load_balance"] = mean / mx
    mul["communication_efficiency"] = mx / T
    mul["parallel_efficiency"] = mean / T
    add["load_balance"] = 1 - (mx - mean) / T
    add["communication_efficiency"] = 1 - (T - mx) / T
    add["parallel_efficiency"] = 1 - (T - mean) / T
    if ideal is not None and ideal > 0:
        mul["serialisation_efficiency"] = mx / ideal
        mul["transfer_efficiency"] = ideal / T
        add["serialisation_efficiency"] = 1 - (ideal - mx) / T
        add["transfer_efficiency"] = 1 - (T - ideal) / T
    return mul, add


def scaling(useful_total, nranks, ref, weak=False):
    """Computation scaling against a reference run (ref: its summed useful time and rank
    count): strong scaling, the same work, expects the same summed useful time; weak
    scaling, work growing with the ranks, expects it to grow by their ratio."""
    if useful_total <= 0 or ref["useful_total_ns"] <= 0:
        return None
    expected = ref["useful_total_ns"] * (nranks / ref["ranks"] if weak else 1.0)
    return expected / useful_total


@dataclass
class PopResult:
    """What perfweave pop reports (to_json: docs/pop.md)."""

    experiment: str
    ranks: int
    region: Region
    locations: list  # [(rank, thread)]
    useful_ns: np.ndarray
    ideal: dict  # name -> {"t_ideal_ns", "mul", "add", ...}: "replay", "critical_path"
    mul: dict  # factors without an ideal runtime
    add: dict
    refs: list = field(default_factory=list)  # [{"experiment", "ranks", "useful_total_ns"}]
    scaling: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    replayed: object = None  # the ReplayResult (analysis/replay.py), if replayed
    counters: dict = None  # useful_counters of its profile, if measured
    io_ns: np.ndarray = None  # I/O time outside MPI per location, where measured
    # the sampled thread factors (analysis/pop_threads.py), or why there are none
    threads: object = None

    def to_json(self):
        return {
            "format": "perfweave-pop",
            "version": 1,
            "experiment": self.experiment,
            "ranks": self.ranks,
            "region": {
                "marked": self.region.marked,
                "runtime_s": self.region.runtime_ns / 1e9,
                "intervals": {
                    str(r): [[int(a) / 1e9, int(b) / 1e9] for a, b in iv.tolist()]
                    for r, iv in sorted(self.region.intervals.items())
                },
            },
            "useful": {
                "locations": [{"rank": r, "thread": t} for r, t in self.locations],
                "seconds": [int(x) / 1e9 for x in self.useful_ns.tolist()],
                "mean_s": float(self.useful_ns.mean()) / 1e9 if len(self.useful_ns) else 0.0,
                "max_s": int(self.useful_ns.max(initial=0)) / 1e9,
                "total_s": int(self.useful_ns.sum()) / 1e9,
                "io_seconds": None
                if self.io_ns is None
                else [int(x) / 1e9 for x in self.io_ns.tolist()],
            },
            "multiplicative": self.mul,
            "additive": self.add,
            "ideal": {
                k: {kk: vv for kk, vv in v.items() if kk != "t_ideal_ns"}
                | {"t_ideal_s": None if v.get("t_ideal_ns") is None else v["t_ideal_ns"] / 1e9}
                for k, v in self.ideal.items()
            },
            "scaling": self.scaling,
            "references": self.refs,
            "notes": self.notes,
            "threads": self.threads,
        }


def analyze(graph, experiment="", what_if=None, replay_ideal=None, replay_note=None, io=None):
    """PopResult of an event graph. what_if: the replay's parameters (replay_ideal);
    None: no replay (ideal_replay), replay_ideal given instead (ns; None: not available, replay_note
    says why). io: the I/O calls
    per location (io_intervals; None: read from the experiment), not useful time."""
    trace = graph.loaded.trace
    region = region_of(trace, graph.locations)
    u, tail = useful_bursts(graph, region)
    if io is None:
        io = io_intervals(experiment, graph) if experiment else {}
    io_u, io_tail = io_bursts(graph, region, io)
    u, tail = u - io_u, tail - io_tail
    replayed = None
    if what_if is not None:
        replay_ideal, replay_note, replayed = ideal_replay(graph, region, u, tail, **what_if)
    loc = graph.locations
    nloc = len(loc["rank"])
    useful = np.bincount(graph.calls["loc"], weights=u, minlength=nloc).astype(np.int64) + tail
    io_ns = np.bincount(graph.calls["loc"], weights=io_u, minlength=nloc).astype(np.int64)
    io_ns += io_tail
    # ranks traced without any call: a location of their own, all useful
    have = set(loc["rank"].tolist())
    locs = list(zip(loc["rank"].tolist(), loc["thread"].tolist()))
    extra = [rd.rank for rd in trace.ranks if rd.rank not in have]
    for r in extra:
        iv = region.intervals.get(r)
        locs.append((r, 0))
        useful = np.r_[useful, int((iv[:, 1] - iv[:, 0]).sum()) if iv is not None else 0]
        io_ns = np.r_[io_ns, 0]
    T = region.runtime_ns
    mul, add = factors(useful, T, None)
    ideal = {}
    cp, _, cp_note = critical_path(graph, u, tail)
    for name, t_ideal, note in (
        ("replay", replay_ideal, replay_note),
        ("critical_path", cp, cp_note),
    ):
        m, a = factors(useful, T, t_ideal)
        entry = {"t_ideal_ns": t_ideal}
        entry["multiplicative"] = {k: m[k] for k in m if k not in mul}
        entry["additive"] = {k: a[k] for k in a if k not in add}
        if note:
            entry["note"] = note
        ideal[name] = entry
    if replayed is not None:
        ideal["replay"]["params"] = {
            k: (None if isinstance(v, float) and math.isinf(v) else v)
            for k, v in replayed.params.items()
        }
    result = PopResult(
        experiment=str(experiment),
        ranks=len(trace.ranks),
        region=region,
        locations=locs,
        useful_ns=useful,
        ideal=ideal,
        mul=mul,
        add=add,
        notes=list(region.notes),
        io_ns=io_ns if io else None,
    )
    result.replayed = replayed
    return result


NEEDS_TRACE = "needs --trace"


def from_profile(profile, experiment=""):
    """PopResult of an experiment without a trace, from its profile's rank records
    (readers/profile.py ProfileFile): per rank, the useful time is the region's time
    less its MPI time there (region_ns - region_mpi_ns where the program marked a
    region, else app_ns - mpi_ns), so LB and CommE, not SerE and TE (no ideal runtime
    without the calls' order). The runtime is the longest rank's region where marked
    (the trace's, the union of every rank's intervals, is longer by the ranks' skew at
    the marks), else from the first MPI_Init return to the last MPI_Finalize entry on
    rank 0's clock, as the trace's."""
    r = profile.arrays["ranks"]
    r = np.sort(r[r["rank"] >= 0], order="rank")
    marked = r["region_intervals"] > 0
    notes = []
    if marked.any():
        if not marked.all():
            notes.append(
                f"{int((~marked).sum())} rank(s) marked no MPI_Pcontrol region: their "
                "region is MPI_Init .. MPI_Finalize"
            )
        span = np.where(marked, r["region_ns"], r["app_ns"])
        mpi = np.where(marked, r["region_mpi_ns"], r["mpi_ns"])
        T = int(span.max())
    else:
        span, mpi = r["app_ns"], r["mpi_ns"]
        complete = r["state"] == 0
        end = r["t_fini_enter"] - np.where(complete, r["offset_fini_ns"], r["offset_init_ns"])
        T = int(end.max() - (r["t_init_leave"] - r["offset_init_ns"]).min()) if len(r) else 0
    if (r["nthreads"] > 1).any():
        notes.append(
            "the profile sums a rank's threads' MPI time: one location per rank "
            "(the trace has one per thread)"
        )
    notes.append(
        "from the profile (no trace): SerE and TE n/a (the ideal runtimes need --trace); "
        "I/O outside MPI counts as useful time"
    )
    useful = np.maximum(span - mpi, 0).astype(np.int64)
    mul, add = factors(useful, T, None)
    blank = {"t_ideal_ns": None, "multiplicative": {}, "additive": {}, "note": NEEDS_TRACE}
    return PopResult(
        experiment=str(experiment),
        ranks=len(r),
        region=Region({}, bool(marked.any()), T),
        locations=[(int(k), 0) for k in r["rank"].tolist()],
        useful_ns=useful,
        ideal={"replay": dict(blank), "critical_path": dict(blank)},
        mul=mul,
        add=add,
        notes=notes,
    )


PMU_EVENTS = {"instructions": "PAPI_TOT_INS", "cycles": "PAPI_TOT_CYC"}


def useful_counters(profile):
    """{"instructions", "cycles"} counted outside MPI calls (the counts' `before`: from
    each thread's previous measured call to the next, over the whole run) of a profile
    (readers/profile.py ProfileFile), or None when it lacks either event (no --counters,
    or no PMU)."""
    if profile is None:
        return None
    names = list(profile.header.get("counters") or [])
    counts = profile.arrays.get("counts")
    if counts is None or not len(counts):
        return None
    out = {}
    for key, event in PMU_EVENTS.items():
        if event not in names:
            return None
        sel = counts["event"] == names.index(event)
        out[key] = int(counts["before"][sel].sum())
    return out if out["instructions"] > 0 and out["cycles"] > 0 else None


def process_useful(result):
    """Each rank's process-level useful time (ns): its main thread's location, else its
    first (the thread factors set the other threads against it)."""
    out = {}
    for (r, t), u in zip(result.locations, result.useful_ns.tolist()):
        if t == 0 or r not in out:
            out[r] = int(u)
    return out


def add_references(result, refs, weak=False, counters=None):
    """Scaling factors of result against reference PopResults (the first is the
    baseline; docs/pop.md). counters: {experiment: {"instructions", "cycles"}} of
    useful time where measured; without them the PMU factors are NO_PMU. Where result
    has sampled thread factors (result.threads set), also the MPI+OpenMP scaling
    (pop_threads.hybrid_scaling) against the baseline's."""
    if not refs:
        return result
    base = refs[0]
    ref = {"ranks": base.ranks, "useful_total_ns": int(base.useful_ns.sum())}
    result.refs = [
        {
            "experiment": r.experiment,
            "ranks": r.ranks,
            "useful_total_s": int(r.useful_ns.sum()) / 1e9,
            "threads": r.threads,
        }
        for r in refs
    ]
    cs = scaling(int(result.useful_ns.sum()), result.ranks, ref, weak)
    out = {"mode": "weak" if weak else "strong", "ranks_ratio": result.ranks / base.ranks}
    out["computation_scaling"] = cs
    c, cb = (counters or {}).get(result.experiment), (counters or {}).get(base.experiment)
    if c and cb and c.get("instructions") and c.get("cycles") and cb.get("cycles"):
        k = result.ranks / base.ranks if weak else 1.0
        ins = cb["instructions"] * k / c["instructions"]
        ipc = (c["instructions"] / c["cycles"]) / (cb["instructions"] / cb["cycles"])
        out["instruction_scaling"] = ins
        out["ipc_scaling"] = ipc
        out["frequency_scaling"] = cs / (ins * ipc) if cs else None
    else:
        for k in ("instruction_scaling", "ipc_scaling", "frequency_scaling"):
            out[k] = NO_PMU
    result.scaling = out
    pe = result.mul.get("parallel_efficiency")
    if cs is not None and pe is not None:
        out["global_efficiency"] = pe * cs
    if result.threads is not None:  # sampled thread factors were asked for
        from perfweave.analysis.pop_threads import hybrid_scaling

        out["hybrid"] = hybrid_scaling(
            result.threads, process_useful(result), base.threads, process_useful(base), weak
        )
    return result

"""One run's measurements correlated per interval (`perfweave run --all`, docs/all.md).

An interval table (INTERVAL_DTYPE: rank, thread, name, kind, depth, t_begin, t_end in ns
of the rank's CLOCK_MONOTONIC, the clock of samples, I/O segments and the node timeline)
is crossed with everything the run recorded. Intervals are the MPI life phases of
analysis/phases.py (`phase_intervals`) or any other table of that shape (user regions).
Per interval and rank (`per_rank`, ROW_DTYPE):

  wall_s                 t_end - t_begin;
  compute_s, other_s     the samples' share of computation, and of sleep, wait and
                         threads' other activities, of the interval's thread, times wall_s;
  mpi_s                  time inside MPI calls: with a trace, the rank's traced calls
                         clipped to the interval (MPI_Init's own time from the profile's
                         rank record, from MPI_Finalize's entry on the samples' share);
                         without, the samples' MPI share times wall_s;
  io_s, io_bytes_*       POSIX/stdio/MPI-IO calls: with the I/O segment trace (--io
                         --trace) each call's time clipped to the interval and its bytes
                         where it started (exact); without, the samples' I/O share and the
                         I/O profile's time bins, split by overlap (approximate);
  wait_s                 waiting time of the wait states (Late Sender, Wait at N x N, ...:
                         analysis/rootcause.py wait_states on the trace's event graph)
                         clipped to the interval; NaN without a trace;
  energy_j               the node's RAPL energy counters, interpolated at the interval's
                         ends (node-wide: every rank of the node sees the same); NaN where
                         RAPL is absent (`sources` says why);
  gpu_energy_j,          the node's GPUs (NVML, summed over GPUs): energy from their energy
  gpu_power_w            counters interpolated at the interval's ends, or where a GPU has
                         none the time integral of its power readings; the mean power is
                         gpu_energy_j over the part of the interval the timeline covers
                         (a phase may end after its last tick; node-wide; NaN without NVML);
  counters               per event (`counters` table): the change of the samples' counter
                         values between the first and last sample inside the interval.

`sources` says, for each column, where it came from or why it is absent; `intervals`
gives per (name, kind, depth) min / mean / max over ranks. numpy throughout: clipping
is np.clip of whole columns, one interval at a time (there are few).
"""

from dataclasses import dataclass, field

import numpy as np

INTERVAL_DTYPE = np.dtype(
    [
        ("rank", "<i4"),
        ("thread", "<i4"),
        ("name", "O"),
        ("kind", "O"),  # "phase" | "region"
        ("depth", "<i4"),
        ("t_begin", "<i8"),
        ("t_end", "<i8"),
    ]
)
NUMBERS = (
    "wall_s compute_s mpi_s io_s other_s wait_s io_bytes_read io_bytes_written energy_j"
    " gpu_energy_j gpu_power_w"
).split()
ROW_DTYPE = np.dtype(
    [(k, INTERVAL_DTYPE[k]) for k in ("name", "kind", "depth", "rank", "thread")]
    + [("samples", "<i8")]
    + [(k, "<f8") for k in NUMBERS]
)
COUNTER_DTYPE = np.dtype(
    [
        ("name", "O"),
        ("kind", "O"),
        ("depth", "<i4"),
        ("rank", "<i4"),
        ("event", "O"),
        ("value", "<f8"),
    ]
)


def intervals_of(rows):
    """An interval table from dicts (rank, thread, name, kind, depth, t_begin, t_end)."""
    out = np.zeros(len(rows), INTERVAL_DTYPE)
    for i, r in enumerate(rows):
        for k in INTERVAL_DTYPE.names:
            out[k][i] = r[k]
    return out


def region_intervals(table, samples=()):
    """The program's own regions and phases (model/regions.py's interval table) of its MPI
    ranks as an interval table, each thread as its samples name it (the index of the
    thread whose "tid" it is in the rank's samples; -1: a thread not sampled)."""
    index = {}
    for ps in samples:
        for k, th in enumerate(ps.meta.get("threads") or []):
            index[(ps.rank, int(th.get("tid", -1)))] = k
    keep = table[(table["rank"] >= 0) & np.isin(table["kind"], ["region", "phase"])]
    rows = [
        {
            "rank": int(r["rank"]),
            "thread": index.get((int(r["rank"]), int(r["thread"])), -1),
            "name": r["name"],
            "kind": r["kind"],
            "depth": int(r["depth"]),
            "t_begin": int(r["t_begin"]),
            "t_end": int(r["t_end"]),
        }
        for r in keep
    ]
    return intervals_of(rows)


def overlap(t0, t1, begin, end):
    """Per span [t0, t1), its time inside [begin, end) (ns, int64 arrays)."""
    return np.clip(np.minimum(t1, end) - np.maximum(t0, begin), 0, None)


@dataclass
class Spans:
    """Timed spans of one rank on one clock: MPI calls, I/O calls (with bytes and op),
    waits; offset maps the rank's CLOCK_MONOTONIC onto the spans' clock."""

    mpi: tuple = None  # (t0, t1) arrays
    io: tuple = None  # (t0, t1, bytes, is a read, is a write) arrays
    wait: tuple = None  # (t0, t1)
    to_clock: object = None  # local ns array -> the spans' clock


@dataclass
class CorrelationResult:
    """per_rank: ROW_DTYPE, one row per interval and rank; counters: COUNTER_DTYPE;
    intervals: per (name, kind, depth) stats over ranks; sources: {column: where from}."""

    per_rank: np.ndarray
    counters: np.ndarray
    sources: dict = field(default_factory=dict)
    intervals_from: str = "phases"

    def intervals(self):
        out = []
        seen = {}
        for i, row in enumerate(self.per_rank):
            seen.setdefault((row["name"], row["kind"], int(row["depth"])), []).append(i)
        for (name, kind, depth), idx in seen.items():
            rows = self.per_rank[idx]
            entry = {"name": name, "kind": kind, "depth": depth, "ranks": len(idx)}
            for k in NUMBERS:
                entry[k] = _stats(rows[k])
            entry["samples"] = int(rows["samples"].sum())
            c = self.counters
            mine = c[(c["name"] == name) & (c["kind"] == kind) & (c["depth"] == depth)]
            events = dict.fromkeys(mine["event"])
            entry["counters"] = {ev: _stats(mine["value"][mine["event"] == ev]) for ev in events}
            out.append(entry)
        return out

    def to_json(self):
        return {
            "intervals_from": self.intervals_from,
            "sources": self.sources,
            "intervals": self.intervals(),
            "per_rank": [{k: _plain(row[k]) for k in ROW_DTYPE.names} for row in self.per_rank],
        }


def _plain(v):
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _stats(values):
    v = np.asarray(values, np.float64)
    v = v[~np.isnan(v)]
    if not len(v):
        return None
    return {"min": float(v.min()), "mean": float(v.mean()), "max": float(v.max())}


# ------------------------------------------------------------------- the samples


def _activity_classes(activities):
    """Per activity name (the samples' description's PW_ACTIVITIES) its class: compute,
    mpi (mpi_FAMILY), io (mpi_file: MPI-IO; POSIX and stdio calls are compute to the
    sampler, their time comes from the I/O segment trace) or other (sleep, wait)."""
    out = []
    for a in activities:
        if a == "compute":
            out.append("compute")
        elif a == "mpi_file":
            out.append("io")
        elif a.startswith("mpi_"):
            out.append("mpi")
        else:
            out.append("other")
    return np.array(out, dtype=object)


def _sample_shares(ps, thread, begin, end):
    """(samples, {class: share}, {event: change}) of process samples ps's thread in
    [begin, end)."""
    rec = ps.records
    sel = rec[(rec["thread"] == thread) & (rec["t"] >= begin) & (rec["t"] < end)]
    n = len(sel)
    shares = {}
    if n:
        classes = _activity_classes(ps.meta.get("activities") or [])
        act = sel["activity"].astype(np.int64)
        known = act < len(classes)
        cls = np.where(known, classes[np.minimum(act, max(len(classes) - 1, 0))], "other")
        for c in ("compute", "mpi", "io", "other"):
            shares[c] = float((cls == c).sum()) / n
    changes = {}
    events = ps.meta.get("counters") or []
    if n >= 2 and events:
        for i, ev in enumerate(events):
            v = sel["counters"][:, i].astype(np.float64)
            ok = v >= 0
            if ok.sum() >= 2:
                changes[ev] = float(v[ok][-1] - v[ok][0])
    return n, shares, changes


# ------------------------------------------------------------------- the trace


def _trace_spans(exp_path, sources):
    """{rank: Spans} of the traced MPI calls and the wait states; {} without a trace."""
    from perfweave.analysis.trace_source import load
    from perfweave.clock import global_ns
    from perfweave.model.trace import T
    from perfweave.readers import trace as rt

    if not rt.trace_dir(exp_path).is_dir() or not rt.list_ranks(exp_path):
        sources["mpi_s"] = "samples (no trace: perfweave run --trace)"
        sources["wait_s"] = "absent: no trace (perfweave run --trace)"
        return {}
    X = load(exp_path)
    spans = {}
    for r in X.ranks:
        rt_ = X.rank(r)
        call = rt_.rec["type"] == T["CALL"]
        meta = rt_.meta
        spans[r] = Spans(
            mpi=(rt_.t0[call], rt_.t1[call]),
            to_clock=lambda local, meta=meta: global_ns(meta, np.asarray(local, np.int64)),
        )
    sources["mpi_s"] = "trace (the rank's MPI calls; MPI_Init from the profile)"
    try:
        _wait_spans(exp_path, spans)
        sources["wait_s"] = "trace: wait states of the event graph (analysis/rootcause.py)"
    except (ValueError, KeyError, MemoryError) as e:
        sources["wait_s"] = f"absent: the trace's event graph could not be built ({e})"
    return spans


def _wait_spans(exp_path, spans):
    from perfweave.analysis import eventgraph, rootcause
    from perfweave.analysis.exchange import Local
    from perfweave.analysis.waitstates.load import load

    g = eventgraph.build(load(exp_path, Local(0), detail=True))
    W = rootcause.wait_states(g)
    loc = g.calls["loc"].astype(np.int64)[W.waiter]
    rank = g.locations["rank"].astype(np.int64)[loc]
    end = W.end.astype(np.int64)
    begin = end - W.omega.astype(np.int64)
    for r, s in spans.items():
        mine = rank == r
        s.wait = (begin[mine], end[mine])


# ------------------------------------------------------------------- I/O


def _io_spans(io, sources, spans):
    """I/O calls of each rank (segments, on the rank's clock), into spans; returns the
    per-rank bins {rank: (t_start_ns, bin_s, read, write)} for a run without segments."""
    segs = io.segments if io is not None else None
    if io is None or not len(io.processes):
        sources["io_s"] = "samples: MPI-IO only (POSIX and stdio calls need the I/O profile)"
        sources["io_bytes"] = "absent: no I/O profile"
        return {}
    if segs is not None and len(segs):
        from perfweave._format import IO_OPS

        read_op, write_op = IO_OPS.index("read"), IO_OPS.index("write")
        for r in np.unique(segs["rank"]).tolist():
            s = segs[segs["rank"] == r]
            sp = spans.setdefault(int(r), Spans())
            t0, t1 = s["t0_ns"].astype(np.int64), s["t1_ns"].astype(np.int64)
            if sp.to_clock is not None:  # onto the trace's clock
                t0, t1 = sp.to_clock(t0), sp.to_clock(t1)
            sp.io = (t0, t1, s["bytes"].astype(np.int64), s["op"] == read_op, s["op"] == write_op)
        sources["io_s"] = "I/O segment trace (each call clipped to the interval)"
        sources["io_bytes"] = "I/O segment trace (each call's bytes where it started: exact)"
        return {}
    bins = {}
    for i, p in enumerate(io.processes):
        if p["rank"] >= 0 and io.bins and io.bins[i] is not None:
            bin_s, rd, wr = io.bins[i]
            bins[int(p["rank"])] = (int(p["t_start_ns"]), float(bin_s), rd, wr)
    sources["io_s"] = "samples (the I/O segment trace needs --io --trace)"
    sources["io_bytes"] = "I/O profile's time bins, split by overlap (approximate)"
    return bins


def _bin_bytes(b, begin, end):
    t_start, bin_s, rd, wr = b
    width = bin_s * 1e9
    edges = t_start + np.arange(len(rd) + 1) * width
    share = overlap(edges[:-1], edges[1:], begin, end) / width
    return float((share * rd).sum()), float((share * wr).sum())


# ------------------------------------------------------------------- energy


def _energy(timelines, sources):
    """{host: (t, cumulative joules)} of the nodes' RAPL package counters."""
    out = {}
    why = []
    for tl in timelines or ():
        cols = [
            i
            for i, s in enumerate(tl.series)
            if s["source"] == "rapl" and s.get("kind") == "counter" and s.get("unit") in ("J", "uJ")
        ]
        if not cols:
            why.append(f"{tl.host}: {tl.absent.get('rapl') or 'no RAPL series'}")
            continue
        scale = [1e-6 if tl.series[i].get("unit") == "uJ" else 1.0 for i in cols]
        v = tl.values[:, cols] * np.array(scale)
        ok = ~np.isnan(v).any(axis=1)
        out[tl.host] = (tl.t[ok].astype(np.float64), v[ok].sum(axis=1))
    if out:
        sources["energy_j"] = "node timeline: RAPL energy counters (node-wide)"
    elif timelines:
        sources["energy_j"] = "absent: " + "; ".join(why)
    else:
        sources["energy_j"] = "absent: no node timeline (--node-interval 0)"
    return out


def _gpu_energy(timelines, sources):
    """{host: (t, cumulative joules)} of the node's GPUs (NVML): per GPU its energy
    counter (gpuN.energy_j), else the trapezoid integral of its power (gpuN.power_w)."""
    out, how, why = {}, set(), []
    for tl in timelines or ():
        by_gpu = {}
        for i, s in enumerate(tl.series):
            if s["source"] == "nvml" and "." in s["name"]:
                gpu, _, what = s["name"].partition(".")
                by_gpu.setdefault(gpu, {})[what] = i
        t = tl.t.astype(np.float64)
        total = np.zeros(len(t))
        found = False
        for cols in by_gpu.values():
            if "energy_j" in cols:
                v = tl.values[:, cols["energy_j"]]
                how.add("energy counters")
            elif "power_w" in cols and len(t) > 1:
                w = tl.values[:, cols["power_w"]]
                ok = ~np.isnan(w)
                w = np.interp(t, t[ok], w[ok]) if ok.any() else np.zeros(len(t))
                steps = (w[1:] + w[:-1]) / 2 * np.diff(t) / 1e9
                v = np.concatenate([[0.0], np.cumsum(steps)])
                how.add("power readings integrated")
            else:
                continue
            ok = ~np.isnan(v)
            if ok.any():
                total += np.interp(t, t[ok], v[ok])
                found = True
        if found:
            out[tl.host] = (t, total)
        else:
            why.append(f"{tl.host}: {tl.absent.get('nvml') or 'no GPU series'}")
    if out:
        sources["gpu_energy_j"] = "node timeline: NVML " + " and ".join(sorted(how))
        sources["gpu_power_w"] = "gpu_energy_j / the time the node timeline covers (all GPUs)"
    else:
        what = "; ".join(why) if timelines else "no node timeline (--node-interval 0)"
        sources["gpu_energy_j"] = sources["gpu_power_w"] = "absent: " + what
    return out


# ------------------------------------------------------------------- the driver


def correlate(intervals, samples=(), io=None, timelines=(), exp_path=None, mpi_init=None):
    """The CorrelationResult of an interval table (INTERVAL_DTYPE) against the run's
    samples (ProcessSamples list), I/O profile (IoProfile), node timelines, the trace of
    experiment directory exp_path (None: no trace) and mpi_init {rank: (MPI_Init entered,
    left, MPI_Finalize entered)} (local ns: the trace holds neither call; after
    MPI_Finalize's entry the MPI time is the samples' share)."""
    sources = {}
    spans = _trace_spans(exp_path, sources) if exp_path is not None else {}
    if exp_path is None:
        sources["mpi_s"] = "samples (no trace: perfweave run --trace)"
        sources["wait_s"] = "absent: no trace (perfweave run --trace)"
    traced = any(s.mpi is not None for s in spans.values())
    bins = _io_spans(io, sources, spans)
    energy = _energy(timelines, sources)
    gpu_energy = _gpu_energy(timelines, sources)
    one_node = timelines[0].host if timelines and len(timelines) == 1 else None
    by_rank = {ps.rank: ps for ps in samples if ps.rank >= 0}
    sources["compute_s"] = "samples" if by_rank else "absent: no samples (--sample)"
    events = sorted({ev for ps in by_rank.values() for ev in (ps.meta.get("counters") or [])})
    sources["counters"] = (
        "samples' counter values (" + ", ".join(events) + ")" if events else "absent: no --counters"
    )
    rows = np.zeros(len(intervals), ROW_DTYPE)
    counters = []
    for i, iv in enumerate(intervals):
        r, begin, end = int(iv["rank"]), int(iv["t_begin"]), int(iv["t_end"])
        row = rows[i]
        for k in ("name", "kind", "depth", "rank", "thread"):
            row[k] = iv[k]
        wall = max(end - begin, 0) / 1e9
        row["wall_s"] = wall
        ps = by_rank.get(r)
        n, shares, changes = (
            _sample_shares(ps, int(iv["thread"]), begin, end) if ps else (0, {}, {})
        )
        row["samples"] = n
        share = {c: shares.get(c, np.nan) for c in ("compute", "mpi", "io", "other")}
        row["compute_s"] = share["compute"] * wall
        row["other_s"] = share["other"] * wall
        sp = spans.get(r, Spans())
        b, e = (
            (int(x) for x in sp.to_clock(np.array([begin, end])))
            if sp.to_clock is not None
            else (begin, end)
        )
        if traced:
            t0, t1 = sp.mpi if sp.mpi is not None else (np.zeros(0, np.int64),) * 2
            mpi_ns = overlap(t0, t1, b, e).sum()
            if mpi_init and r in mpi_init:
                ie, il, fini = mpi_init[r]
                mpi_ns += max(min(il, end) - max(ie, begin), 0)
                # MPI_Finalize and after: no trace there, the samples' share
                after = max(end - max(fini, begin), 0)
                mpi_ns += np.nan_to_num(share["mpi"]) * after
            row["mpi_s"] = mpi_ns / 1e9
            row["wait_s"] = overlap(*sp.wait, b, e).sum() / 1e9 if sp.wait is not None else 0.0
        else:
            row["mpi_s"] = share["mpi"] * wall
            row["wait_s"] = np.nan
        if sp.io is not None:
            t0, t1, nbytes, reads, writes = sp.io
            row["io_s"] = overlap(t0, t1, b, e).sum() / 1e9
            start_in = (t0 >= b) & (t0 < e)
            row["io_bytes_written"] = nbytes[start_in & writes].sum()
            row["io_bytes_read"] = nbytes[start_in & reads].sum()
        else:
            profiled = io is not None and len(io.processes) > 0
            row["io_s"] = share["io"] * wall
            if r in bins:
                row["io_bytes_read"], row["io_bytes_written"] = _bin_bytes(bins[r], begin, end)
            else:  # a rank of a profiled run with no I/O call has none
                row["io_bytes_read"] = row["io_bytes_written"] = 0.0 if profiled else np.nan
        # without the rank's samples, the node of a run on one node is known all the same
        host = ps.meta.get("host") if ps else one_node
        if host in energy:
            t, joules = energy[host]
            row["energy_j"] = np.interp(end, t, joules) - np.interp(begin, t, joules)
        else:
            row["energy_j"] = np.nan
        if host in gpu_energy:
            t, joules = gpu_energy[host]
            row["gpu_energy_j"] = np.interp(end, t, joules) - np.interp(begin, t, joules)
            covered = (np.clip(end, t[0], t[-1]) - np.clip(begin, t[0], t[-1])) / 1e9
            row["gpu_power_w"] = row["gpu_energy_j"] / covered if covered > 0 else np.nan
        else:
            row["gpu_energy_j"] = row["gpu_power_w"] = np.nan
        for ev, v in changes.items():
            counters.append((iv["name"], iv["kind"], iv["depth"], r, ev, v))
    table = np.zeros(len(counters), COUNTER_DTYPE)
    for i, c in enumerate(counters):
        table[i] = c
    return CorrelationResult(per_rank=rows, counters=table, sources=sources)

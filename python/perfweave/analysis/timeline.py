"""The node timelines summed up (model/timeline.py NodeTimeline, one per node): per node,
what each series counted (a counter's total, mean and peak rate; a gauge's mean and
maximum), and how the busiest series and the ranks' activity moved over the run (a few
time slices). The report's "node_timeline" section shows it (report/timeline.py)."""

import math
from dataclasses import dataclass, field

import numpy as np

from perfweave._format import FAMILIES
from perfweave.model.table import column, records, table
from perfweave.model.timeline import nanmean

SLICES = 8  # time slices of the "over time" table
MAX_MARKS = 200  # phases and outermost regions marked per node
BUSIEST = 4  # node counters in the "over time" table
SERIES_COLUMNS = (
    "source",
    "name",
    "label",
    "unit",
    "kind",
    "total",
    "mean_rate",
    "peak_rate",
    "mean",
    "max",
    "active",
)


@dataclass
class NodeSummary:
    """One node's timeline summed up. series: one row per series, in the node's order
    (a numpy structured array, model/table.py): source, name, label (a process's series
    named by its rank where it has one: 'rank 3.cpu_ns', else 'pid 42.cpu_ns'), unit,
    kind (counter or gauge); a counter's total (its increase over the run), mean_rate
    (total / duration) and peak_rate (the highest rate between two ticks), a gauge's mean
    and max; NaN where not read or not the series' kind; active (a counter that
    counted, a gauge that was not always 0). over_time: the run in up to SLICES slices
    (None with fewer than two intervals or nothing to show): series and units (the
    BUSIEST node counters), activity (the MPI families with time), processes, and per
    slice t0_s, t1_s, rates (mean rate of each series) and activity_pct ({family: % of
    the processes' wall time}, outside_mpi)."""

    host: str
    interval_ms: float
    ticks: int
    duration_s: float
    sampler_cpu_s: float
    sampler_cpu_pct: float
    complete: bool
    absent: dict
    notes: list
    series: np.ndarray
    over_time: dict = None
    # the phases and outermost regions of the node's processes (model/regions.py) on the
    # timeline's clock: s from its first tick; phases first, at most MAX_MARKS
    marks: list = field(default_factory=list)
    marks_left_out: int = 0

    def to_json(self):
        series = []
        for r in records(self.series):
            row = {k: r[k] for k in ("source", "name", "label", "unit", "kind")}
            for k in (
                ("total", "mean_rate", "peak_rate") if r["kind"] == "counter" else ("mean", "max")
            ):
                row[k] = _finite(r[k])
            row["active"] = r["active"]
            series.append(row)
        return {
            "host": self.host,
            "interval_ms": self.interval_ms,
            "ticks": self.ticks,
            "duration_s": self.duration_s,
            "sampler_cpu_s": self.sampler_cpu_s,
            "sampler_cpu_pct": self.sampler_cpu_pct,
            "complete": self.complete,
            "absent": self.absent,
            "notes": self.notes,
            "series": series,
            "over_time": self.over_time,
            "marks": self.marks,
            "marks_left_out": self.marks_left_out,
        }


@dataclass
class NodeTimelineResult:
    """Every node's summary (summarize): to_json() is the report's "node_timeline"."""

    nodes: list = field(default_factory=list)

    def to_json(self):
        return {"nodes": [n.to_json() for n in self.nodes]}


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def summarize(nodes, pids=None, regions=None):
    """The NodeTimelineResult of an experiment's node timelines (one NodeTimeline per
    node), or None if it has none. pids: {pid: rank}, to name the per-process series by
    rank; regions: the program's regions' intervals (model/regions.py), marked on their
    node's timeline (marks)."""
    if not nodes:
        return None
    out = NodeTimelineResult([_node(tl, pids or {}) for tl in nodes])
    if regions is not None and len(regions):
        for n, tl in zip(out.nodes, nodes):
            n.marks, n.marks_left_out = marks(tl, regions)
    return out


def marks(tl, intervals):
    """The phases and outermost regions of the processes on tl's node, on its clock (both
    the node's CLOCK_MONOTONIC): [{rank, pid, kind, name, t_begin_s, t_end_s}] in s from
    the timeline's first tick, phases first then by begin, at most MAX_MARKS; and how
    many more there were."""
    if not len(tl.t):
        return [], 0
    iv = intervals[
        (intervals["host"] == tl.host)
        & (
            (intervals["kind"] == "phase")
            | ((intervals["kind"] == "region") & (intervals["depth"] == 0))
        )
    ]
    order = np.lexsort((iv["t_begin"], iv["kind"] != "phase"))
    t0 = int(tl.t[0])
    rows = [
        {
            "rank": int(r["rank"]),
            "pid": int(r["pid"]),
            "kind": str(r["kind"]),
            "name": str(r["name"]),
            "t_begin_s": (int(r["t_begin"]) - t0) / 1e9,
            "t_end_s": (int(r["t_end"]) - t0) / 1e9,
        }
        for r in iv[order[:MAX_MARKS]]
    ]
    return rows, max(len(iv) - MAX_MARKS, 0)


def _node(tl, pids):
    m = tl.meta
    dur = (tl.t[-1] - tl.t[0]) / 1e9 if len(tl.t) > 1 else 0.0
    cpu = m.get("sampler_cpu_ns", 0) / 1e9
    rates = tl.rates()
    cols = {k: [] for k in SERIES_COLUMNS}
    for i, s in enumerate(tl.series):
        label = s["name"]
        if s["source"] == "proc":
            pid, _, what = label.partition(".")
            if pid.isdigit() and pids.get(int(pid), -1) >= 0:
                label = f"rank {pids[int(pid)]}.{what}"
            else:
                label = f"pid {pid}.{what}"
        col = rates[:, i] if len(rates) else np.zeros(0)
        ok = col[np.isfinite(col)]
        row = dict.fromkeys(("total", "mean_rate", "peak_rate", "mean", "max"))
        if s["kind"] == "counter":
            row["total"] = _finite(tl.total(i))
            row["mean_rate"] = (
                _finite(row["total"] / dur) if dur and row["total"] is not None else None
            )
            row["peak_rate"] = _finite(ok.max()) if len(ok) else None
            active = bool(row["total"])
        else:
            v = tl.values[:, i]
            v = v[np.isfinite(v)]
            row["mean"] = _finite(v.mean()) if len(v) else None
            row["max"] = _finite(v.max()) if len(v) else None
            active = bool(len(v) and v.max() != 0)
        row.update(source=s["source"], name=s["name"], label=label, unit=s["unit"], kind=s["kind"])
        row["active"] = active
        for k in SERIES_COLUMNS:
            v = row[k]
            cols[k].append(np.nan if v is None else v)
    series = table(
        {
            k: np.array(v, np.float64)
            if k in ("total", "mean_rate", "peak_rate", "mean", "max")
            else np.array(v, bool)
            if k == "active"
            else column(v)
            for k, v in cols.items()
        },
        len(tl.series),
    )
    return NodeSummary(
        host=tl.host,
        interval_ms=m.get("interval_ms"),
        ticks=int(len(tl.t)),
        duration_s=dur,
        sampler_cpu_s=cpu,
        sampler_cpu_pct=100 * cpu / dur if dur else 0.0,
        complete=bool(m.get("complete")),
        absent=tl.absent,
        notes=tl.notes,
        series=series,
        over_time=_slices(tl, rates, series),
    )


def slice_edges(tl, slices=SLICES):
    """The edges of node timeline tl's over-time slices, in s since its first tick (up
    to `slices` equal slices, no narrower than its ticks; the I/O profile's rates use
    them too: analysis/io.py), None with fewer than two intervals."""
    if len(tl.t) < 3:
        return None
    return np.linspace(0, (tl.t[-1] - tl.t[0]) / 1e9, min(slices, len(tl.t) - 1) + 1)


def _slices(tl, rates, series):
    """The run in up to SLICES equal time slices: the ranks' activity (share of wall
    time in MPI by family, and outside MPI; mean over the node's measured processes,
    from their activity pages) and the mean rate of the busiest node counters."""
    if len(rates) < 2:
        return None
    busy = np.flatnonzero(
        (series["kind"] == "counter") & series["active"] & (series["source"] != "proc")
    ).tolist()
    mean_rate = np.nan_to_num(series["mean_rate"])  # None: 0
    busy.sort(key=lambda i: -mean_rate[i])
    busy = busy[:BUSIEST]
    # activity columns: per family, the processes' MPI-time series
    fam_cols = tl.activity_columns()
    have = [f for f in FAMILIES if fam_cols[f] and series["active"][fam_cols[f]].any()]
    nproc = max((len(v) for v in fam_cols.values()), default=0)
    if not busy and not nproc:
        return None
    t = (tl.t - tl.t[0]) / 1e9
    mid = (t[1:] + t[:-1]) / 2
    edges = slice_edges(tl)
    nsl = len(edges) - 1
    which = np.clip(np.searchsorted(edges, mid, "right") - 1, 0, nsl - 1)
    rows = []
    for k in range(nsl):
        sel = which == k
        row = {
            "t0_s": float(edges[k]),
            "t1_s": float(edges[k + 1]),
            "rates": [_finite(nanmean(rates[sel, i])) if sel.any() else None for i in busy],
        }
        if nproc:
            act = {}
            for f in FAMILIES:
                cols = fam_cols[f]
                v = rates[np.ix_(sel, cols)] / 1e9 if sel.any() and cols else np.zeros(0)
                act[f] = _finite(100 * nanmean(v)) if v.size else 0.0
            act["outside_mpi"] = _finite(100 - sum(x or 0 for x in act.values()))
            row["activity_pct"] = act
        rows.append(row)
    return {
        "series": [series["label"][i] for i in busy],
        "units": [series["unit"][i] for i in busy],
        "activity": have,
        "processes": nproc,
        "slices": rows,
    }

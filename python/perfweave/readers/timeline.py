"""The node timeline of an experiment: timeline/HOST.values + timeline/HOST.json
(docs/format.md "Node timeline"), written by the runtime's node sampler
(runtime/modules/timeline.c), one pair per node.

read_timelines(exp) -> [NodeTimeline]: per node, the tick times and a (ticks x series)
matrix of values (NaN where a series had no reading at a tick), with each series'
source, name, unit and kind. Counters hold cumulative values (already unwrapped);
rates() turns them into per-second rates between ticks.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.errors import FormatError
from perfweave._format import FAMILIES, FILES
from perfweave.readers.dtypes import TIMELINE_DTYPE, TIMELINE_VERSION
from perfweave.readers.files import check, read_array, read_json, short


@dataclass
class NodeTimeline:
    host: str
    meta: dict
    series: list  # dicts: source, name, unit, kind
    t: np.ndarray  # ns (CLOCK_MONOTONIC of the node), one per tick
    values: np.ndarray  # (ticks, series) float64, NaN where unread
    notes: list = field(default_factory=list)

    @property
    def absent(self):
        """{source: why it is absent}."""
        return dict(self.meta.get("absent") or {})

    def index(self, source, name):
        for i, s in enumerate(self.series):
            if s["source"] == source and s["name"] == name:
                return i
        raise KeyError(f"{self.host}: no series {source}:{name}")

    def activity_columns(self):
        """{family: indices of the processes' PID.mpi_FAMILY_ns series}."""
        return {
            f: [
                i
                for i, s in enumerate(self.series)
                if s["source"] == "proc" and s["name"].endswith(f".mpi_{f}_ns")
            ]
            for f in FAMILIES
        }

    def rates(self):
        """(ticks - 1, series): per second between consecutive ticks; counters as the
        difference over the interval, gauges as the mean of the interval's two ends."""
        if len(self.t) < 2:
            return np.zeros((0, len(self.series)))
        dt = np.diff(self.t).astype(np.float64) / 1e9
        v = self.values
        counter = np.array([s["kind"] == "counter" for s in self.series], bool)
        out = np.where(counter, np.diff(v, axis=0) / dt[:, None], (v[1:] + v[:-1]) / 2)
        self._spread_mpi_time(out, dt)
        return out

    def _spread_mpi_time(self, rates, dt):
        """A process's MPI time is added to its page when a call ends, so a call longer
        than a tick (MPI_Init, a long wait) lands in one interval, over 100 % of it. What
        exceeds an interval's length moves back to the intervals before it, in the
        families' proportions: where the call was."""
        procs = {}
        for f, cols in self.activity_columns().items():
            for i in cols:
                procs.setdefault(self.series[i]["name"].rsplit(".mpi_", 1)[0], []).append(i)
        cap = dt * 1e9  # ns in each interval
        for cols in procs.values():
            amount = np.nan_to_num(rates[:, cols]) * dt[:, None]  # ns of MPI per interval
            over = np.flatnonzero(amount.sum(axis=1) > cap)
            if not len(over):
                continue
            # from the last interval over its length backwards, each excess goes on into
            # the intervals before it until one has room (later ones first: an earlier
            # one over its length then also takes what came from after it)
            for k in over[::-1]:
                carry = np.zeros(len(cols))
                while k >= 0:
                    a = amount[k] + carry
                    tot = a.sum()
                    if tot <= cap[k]:
                        amount[k] = a
                        break
                    amount[k] = a * (cap[k] / tot)
                    carry = a - amount[k]
                    k -= 1
            ok = ~np.isnan(rates[:, cols])
            rates[:, cols] = np.where(ok, amount / dt[:, None], rates[:, cols])

    def total(self, i):
        """A counter's increase over the whole timeline (its unit), NaN if never read."""
        col = self.values[:, i]
        ok = np.flatnonzero(~np.isnan(col))
        return float(col[ok[-1]] - col[ok[0]]) if len(ok) else float("nan")

    def window(self, i, t0, t1):
        """A counter's increase between the last tick at or before t0 and the first at
        or after t1 (both ns on this node's clock)."""
        col = self.values[:, i]
        ok = ~np.isnan(col)
        t, col = self.t[ok], col[ok]
        a = max(int(np.searchsorted(t, t0, "right")) - 1, 0)
        b = min(int(np.searchsorted(t, t1, "left")), len(t) - 1)
        return float(col[b] - col[a]), int(t[b] - t[a])


def nanmean(a, axis=None):
    """np.nanmean without its warning for an all-NaN slice (a series unread there, a
    damaged file): NaN there."""
    a = np.asarray(a, np.float64)
    ok = ~np.isnan(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, a, 0).sum(axis=axis) / ok.sum(axis=axis)


def timeline_dir(exp):
    return Path(exp) / "timeline"


def read_timelines(exp):
    """Every node's timeline of experiment exp ([] if it has none)."""
    d = timeline_dir(exp)
    if not d.is_dir():
        return []
    out = []
    for meta_path in sorted(d.glob("*.json")):
        out.append(read_node(meta_path))
    return out


# the keys readers use, with their types (docs/format.md "Node timeline")
META_SCHEMA = {
    "host": str,
    "pid": int,
    "interval_ms": float,
    "complete": bool,
    "ticks": int,
    "t_first": int,
    "t_last": int,
    "sampler_cpu_ns": float,
    "ns_per_tick": float,
    "series": [{"source": str, "name": str, "unit": str, "kind": str}],
    "absent": {},
}


def read_node(meta_path):
    meta_path = Path(meta_path)
    meta = read_json(meta_path, "node timeline")
    if meta.get("format") != FILES["timeline"].magic:
        raise FormatError(f"{meta_path}: not a perfweave node timeline")
    if meta.get("version") != TIMELINE_VERSION:
        raise FormatError(
            f"{meta_path}: node timeline version {short(meta.get('version'))}, "
            f"this perfweave reads version {TIMELINE_VERSION}"
        )
    check(meta, META_SCHEMA, meta_path, "node timeline")
    if not all(
        {"source", "name", "unit", "kind"} <= s.keys() for s in meta.get("series", [])
    ) or not all(isinstance(v, str) for v in meta.get("absent", {}).values()):
        raise FormatError(f"{meta_path}: corrupt node timeline (series or absent)")
    host = meta.get("host", meta_path.stem)
    series = list(meta.get("series") or [])
    notes = []
    vpath = meta_path.with_suffix(".values")
    try:
        raw = read_array(vpath)
    except FileNotFoundError:
        raw = np.zeros(0, np.uint8)
    n = len(raw) // TIMELINE_DTYPE.itemsize
    if len(raw) % TIMELINE_DTYPE.itemsize:
        notes.append(f"{vpath.name}: ends with a partial record (ignored)")
    rec = raw[: n * TIMELINE_DTYPE.itemsize].view(TIMELINE_DTYPE)
    ok = (rec["series"] >= 0) & (rec["series"] < len(series))
    if not ok.all():
        notes.append(
            f"{vpath.name}: {int((~ok).sum())} records name unknown series "
            "(the run ended before the JSON was rewritten): ignored"
        )
        rec = rec[ok]
    # NaN: not read; times are CLOCK_MONOTONIC ns, never negative
    ok = (np.isfinite(rec["value"]) | np.isnan(rec["value"])) & (rec["t"] >= 0)
    if not ok.all():
        notes.append(
            f"{vpath.name}: {int((~ok).sum())} records with an infinite value or a "
            "negative time (corrupt): ignored"
        )
        rec = rec[ok]
    if not meta.get("complete"):
        notes.append(
            f"{host}: the sampler did not stop normally (its process was killed?); "
            "the timeline ends at its last tick"
        )
    t, tick = np.unique(rec["t"], return_inverse=True)
    values = np.full((len(t), len(series)), np.nan)
    values[tick.reshape(-1), rec["series"]] = rec["value"]
    # series counted in the runtime's ticks (MPI time of the activity pages): to ns with
    # the calibration of the end of the run
    npt = float(meta.get("ns_per_tick") or 1.0)
    for i, s in enumerate(series):
        if s.get("unit") == "ticks":
            values[:, i] *= npt
            series[i] = dict(s, unit="ns")
    return NodeTimeline(host, meta, series, t, values, notes)

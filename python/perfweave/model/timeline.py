"""The node timeline of one node (runtime/modules/nodes.c, `perfweave run
--node-interval`; docs/format.md "Node timeline"): the tick times and a (ticks x series)
matrix of values (NaN where a series had no reading at a tick), with each series'
source, name, unit and kind. Counters hold cumulative values (already unwrapped);
rates() turns them into per-second rates between ticks. readers/timeline.py builds one
per node from the files' records (TIMELINE_DTYPE: time, series, value) through
`from_records`, `from_literal` from plain values (tests); `ExperimentDir.timelines` is
the list of them, which analysis/timeline.py and the API take."""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import FAMILIES
from perfweave.dtypes import TIMELINE_DTYPE


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

    @classmethod
    def from_records(cls, host, meta, series, records, notes=()):
        """The timeline of records in the file's layout (TIMELINE_DTYPE, checked: every
        series index in range): one row per distinct time, values in ns where a series
        counts the runtime's ticks (unit "ticks", converted with meta's ns_per_tick)."""
        series = list(series)
        t, tick = np.unique(records["t"], return_inverse=True)
        values = np.full((len(t), len(series)), np.nan)
        values[tick.reshape(-1), records["series"]] = records["value"]
        # series counted in the runtime's ticks (MPI time of the activity pages): to ns with
        # the calibration of the end of the run
        npt = float(meta.get("ns_per_tick") or 1.0)
        for i, s in enumerate(series):
            if s.get("unit") == "ticks":
                values[:, i] *= npt
                series[i] = dict(s, unit="ns")
        return cls(host, meta, series, t, values, list(notes))

    @classmethod
    def from_literal(cls, series, ticks, host="h", **meta):
        """A node's timeline of plain values. series: dicts with source, name, unit and
        kind ("counter": cumulative, or "gauge"); ticks: [(time in ns, [value per series,
        None where not read])]. meta: the description's keys (interval_ms, complete,
        sampler_cpu_ns, absent, ...; host and series are the arguments)."""
        series = [dict(s) for s in series]
        rows = [(t, i, v) for t, vals in ticks for i, v in enumerate(vals) if v is not None]
        rec = np.zeros(len(rows), TIMELINE_DTYPE)
        for k, (t, i, v) in enumerate(rows):
            rec[k]["t"], rec[k]["series"], rec[k]["value"] = t, i, v
        meta = {"host": host, "complete": True, "ticks": len(ticks), **meta, "series": series}
        return cls.from_records(host, meta, series, rec)


def nanmean(a, axis=None):
    """np.nanmean without its warning for an all-NaN slice (a series unread there, a
    damaged file): NaN there."""
    a = np.asarray(a, np.float64)
    ok = ~np.isnan(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, a, 0).sum(axis=axis) / ok.sum(axis=axis)

"""The node timeline in `perfweave report`: per node, what each source counted (totals,
mean and peak rates), how the busiest series moved over the run (a few time slices),
which sources were absent and why, and what the sampler thread cost."""

import math
import textwrap

import numpy as np

from perfweave._format import FAMILIES
from perfweave.model.timeline import nanmean

SLICES = 8  # time slices of the "over time" table
SHOWN = 24  # series per node in the table


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def summarize(nodes, pids=None):
    """JSON-ready summary of an experiment's node timelines (readers.timeline
    NodeTimeline, one per node), or None if it has none. pids: {pid: rank}, to name the
    per-process series by rank."""
    if not nodes:
        return None
    pids = pids or {}
    out = []
    for tl in nodes:
        m = tl.meta
        dur = (tl.t[-1] - tl.t[0]) / 1e9 if len(tl.t) > 1 else 0.0
        cpu = m.get("sampler_cpu_ns", 0) / 1e9
        rates = tl.rates()
        series = []
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
            row = {
                "source": s["source"],
                "name": s["name"],
                "label": label,
                "unit": s["unit"],
                "kind": s["kind"],
            }
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
            row["active"] = active
            series.append(row)
        out.append(
            {
                "host": tl.host,
                "interval_ms": m.get("interval_ms"),
                "ticks": int(len(tl.t)),
                "duration_s": dur,
                "sampler_cpu_s": cpu,
                "sampler_cpu_pct": 100 * cpu / dur if dur else 0.0,
                "complete": bool(m.get("complete")),
                "absent": tl.absent,
                "notes": tl.notes,
                "series": series,
                "over_time": _slices(tl, rates, series),
            }
        )
    return {"nodes": out}


def _slices(tl, rates, series):
    """The run in up to SLICES equal time slices: the ranks' activity (share of wall
    time in MPI by family, and outside MPI; mean over the node's measured processes,
    from their activity pages) and the mean rate of the busiest node counters."""
    if len(rates) < 2:
        return None
    busy = [
        i
        for i, s in enumerate(series)
        if s["kind"] == "counter" and s["active"] and s["source"] != "proc"
    ]
    busy.sort(key=lambda i: -(series[i]["mean_rate"] or 0))
    busy = busy[:4]
    # activity columns: per family, the processes' MPI-time series
    fam_cols = tl.activity_columns()
    have = [f for f in FAMILIES if fam_cols[f] and any(series[i]["active"] for i in fam_cols[f])]
    nproc = max((len(v) for v in fam_cols.values()), default=0)
    if not busy and not nproc:
        return None
    t = (tl.t - tl.t[0]) / 1e9
    mid = (t[1:] + t[:-1]) / 2
    nsl = min(SLICES, len(rates))
    edges = np.linspace(0, t[-1], nsl + 1)
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
        "series": [series[i]["label"] for i in busy],
        "units": [series[i]["unit"] for i in busy],
        "activity": have,
        "processes": nproc,
        "slices": rows,
    }


# unit -> (steps of (suffix, factor), largest first) for amounts and for rates
_BYTES = ((" GiB", 2**30), (" MiB", 2**20), (" KiB", 2**10), (" B", 1))
_BYTES_S = ((" GB/s", 1e9), (" MB/s", 1e6), (" kB/s", 1e3), (" B/s", 1))
_SCALES = {
    ("bytes", False): _BYTES,
    ("byte", False): _BYTES,
    ("bytes", True): _BYTES_S,
    ("byte", True): _BYTES_S,
    ("ns", False): ((" s", 1e9),),
    ("ns", True): ((" cores", 1e9),),  # CPU ns per second
    ("uJ", False): ((" J", 1e6),),
    ("uJ", True): ((" W", 1e6),),
    ("J", True): ((" W", 1),),
}


def _fmt(v, unit, rate):
    """An amount (rate False) or a per-second rate of unit, scaled for reading."""
    if v is None:
        return "-"
    steps = _SCALES.get((unit, rate))
    if steps is None:
        return f"{v:.4g} {unit}{'/s' if rate else ''}"
    for suffix, f in steps:
        if abs(v) >= f or f == steps[-1][1]:
            digits = 0 if f == 1 and suffix.startswith(" B") else (2 if unit == "ns" else 1)
            return f"{v / f:.{digits}f}{suffix}"


def _rate(v, unit):
    return _fmt(v, unit, True)


def _amount(v, unit):
    return _fmt(v, unit, False)


def render(tl, table, max_rows=None, width=None):
    """Text lines for a summarize() result; table: the report's table formatter.
    max_rows: series shown per node (None: SHOWN), node-level series before the
    per-process ones; width: the widest line (None: no limit)."""
    from perfweave.report.text import MORE, _fit

    out = []
    if tl.get("error"):
        out += ["", f"Node timeline: not shown ({tl['error']})"]
    for n in tl["nodes"]:
        out += [""] + textwrap.wrap(
            f"Node timeline: {n['host']} ({n['ticks']} samples every {n['interval_ms']} ms "
            f"over {n['duration_s']:.1f} s; sampler thread {n['sampler_cpu_s']:.3f} s CPU = "
            f"{n['sampler_cpu_pct']:.2f} % of one core)",
            width or 10**6,
            subsequent_indent="  ",
        )
        rows = []
        active = [s for s in n["series"] if s["active"]]
        if max_rows is not None:  # the node's own series first, then the processes'
            active.sort(key=lambda s: s["source"] == "proc")
        limit = SHOWN if max_rows is None else max_rows
        for s in active[:limit]:
            if s["kind"] == "counter":
                rows.append(
                    [
                        s["source"],
                        s["label"],
                        _amount(s["total"], s["unit"]),
                        _rate(s["mean_rate"], s["unit"]),
                        _rate(s["peak_rate"], s["unit"]),
                    ]
                )
            else:
                rows.append(
                    [
                        s["source"],
                        s["label"],
                        "",
                        f"{_amount(s['mean'], s['unit'])} mean",
                        f"{_amount(s['max'], s['unit'])} max",
                    ]
                )
        if rows:
            out += table(
                rows, ["source", "series", "total", "mean", "peak"], ["<", "<", ">", ">", ">"]
            )
        idle = len(n["series"]) - len(active)
        if len(active) > limit or idle:
            out.append(
                f"  ({max(len(active) - limit, 0)} more active, {idle} idle series; "
                f"{'' if max_rows is None else MORE + ', or '}--json)"
            )
        ot = n.get("over_time")
        if ot and max_rows is not None:
            out.append("  (over time, per slice of the run: --full or --json)")
        elif ot:
            acts = ["outside_mpi"] + ot["activity"] if ot.get("processes") else []
            out.append(
                "  over time: share of the ranks' wall time (mean over "
                f"{ot.get('processes', 0)} processes) and node rates, per slice "
                "of the run:"
                if acts
                else "  over time (mean rate per slice of the run):"
            )
            out += table(
                [
                    [f"{r['t0_s']:.1f}-{r['t1_s']:.1f} s"]
                    + [
                        ("-" if r["activity_pct"][a] is None else f"{r['activity_pct'][a]:.0f} %")
                        for a in acts
                    ]
                    + [_rate(v, u) for v, u in zip(r["rates"], ot["units"])]
                    for r in ot["slices"]
                ],
                ["time"]
                + [("outside MPI" if a == "outside_mpi" else f"MPI {a}") for a in acts]
                + ot["series"],
            )
        if max_rows is None:
            for src, why in sorted(n["absent"].items()):
                out.append(f"  absent     {src}: {why}")
        elif n["absent"]:
            out.append(
                _fit(
                    f"  absent     {', '.join(sorted(n['absent']))} (why: --full or --json)", width
                )
            )
        for note in n["notes"]:
            out.append(f"  note       {note}")
    return out

"""The node timeline in `perfweave report` as text: per node, what each source counted
(totals, mean and peak rates), how the busiest series moved over the run (a few time
slices), which sources were absent and why, and what the sampler thread cost (the
report's "node_timeline", analysis/timeline.py)."""

import textwrap

SHOWN = 24  # series per node in the table

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
    """Text lines for the report's "node_timeline" (analysis/timeline.py
    NodeTimelineResult.to_json); table: the report's table formatter.
    max_rows: series shown per node (None: SHOWN), node-level series before the
    per-process ones; width: the widest line (None: no limit)."""
    from perfweave.report.widgets import MORE, fit_line

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
                fit_line(
                    f"  absent     {', '.join(sorted(n['absent']))} (why: --full or --json)", width
                )
            )
        out += _mark_lines(n, width)
        for note in n["notes"]:
            out.append(f"  note       {note}")
    return out


def _mark_lines(n, width):
    """A line per phase and outermost region of the node's processes: its span on the
    timeline (the first begin to the last end, s from the first tick), over how many
    ranks and intervals."""
    from perfweave.report.widgets import fit_line

    spans = {}
    for m in n.get("marks") or []:
        key = (m["kind"], m["name"])
        t0, t1, who, k = spans.get(key, (m["t_begin_s"], m["t_end_s"], set(), 0))
        spans[key] = (min(t0, m["t_begin_s"]), max(t1, m["t_end_s"]), who | {m["pid"]}, k + 1)
    out = []
    for (kind, name), (t0, t1, who, k) in spans.items():
        line = f"  {kind:<10} {name}: {t0:.3f}-{t1:.3f} s (processes {len(who)}, intervals {k})"
        out.append(fit_line(line, width))
    if n.get("marks_left_out"):
        out.append(f"  ({n['marks_left_out']} more phases and regions: --json)")
    return out

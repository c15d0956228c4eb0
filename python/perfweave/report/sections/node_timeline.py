"""The node timeline (--node-interval; model/timeline.py, summed up by
analysis/timeline.py): per node what each source counted, how the busiest series moved
over the run, which sources were absent; in the HTML, per node the processes' activity
and the busiest rates plotted over time."""

import numpy as np

from perfweave.errors import FormatError
from perfweave._format import FAMILIES
from perfweave.analysis.timeline import summarize
from perfweave.model.timeline import nanmean
from perfweave.report import timeline
from perfweave.report.widgets import escape, family_activity, html_table, text_table
from perfweave.report.section import Section

MAX_POINTS = 2000  # per chart: ticks beyond are averaged in groups
RATE_SERIES = 6  # node counters per rates chart


class NodeTimeline(Section):
    name = "node_timeline"

    def collect(self, experiment, report, top):
        pids = {}
        for prof in (experiment.processes, experiment.profile):
            if prof is not None and "pid" in prof.ranks.dtype.names:
                pids.update({int(p): int(r) for p, r in zip(prof.ranks["pid"], prof.ranks["rank"])})
        try:
            res = summarize(experiment.timelines, pids, experiment.regions.intervals)
            tl = None if res is None else res.to_json()
        except FormatError as e:  # the rest of the report stands without it
            tl = {"nodes": [], "error": str(e)}
        return {"node_timeline": tl}

    def text(self, data, view):
        tl = data.get("node_timeline")
        if not tl:
            return []
        return timeline.render(
            tl,
            lambda rows, header, align=None: text_table(rows, header, align, view.width),
            max_rows=view.max_rows,
            width=view.width,
        )

    def html(self, data, page):
        tl = data.get("node_timeline")
        # the charts' series are too long for the report's JSON: read from the files
        charts = {n["host"]: n for n in timeline_charts(page.experiment)}
        parts = []
        if tl and tl.get("error"):
            parts.append(f"<p class=note>Node timeline: not shown: {escape(tl['error'])}</p>")
        for n in (tl or {}).get("nodes", []):
            # the text's lines and tables, every series and slice (report/timeline.py)
            lines = timeline.render({"nodes": [n]}, _html_table, max_rows=None)
            parts.append(f"<h2>{escape(lines[1])}</h2>")
            parts += _charts(charts.pop(n["host"], {}), page)
            parts += _bands(n)
            parts += [x if x.startswith("<table") else f"<p>{escape(x.strip())}</p>"
                      for x in lines[2:] if x]  # fmt: skip
        for node in charts.values():  # a node the report's data has not (a damaged file)
            parts.append(f"<h2>Node timeline: {escape(node['host'])}</h2>")
            parts += _charts(node, page)
        return parts


def _bands(node):
    """The node's phases and outermost regions (marks) as bands over the run's time, a
    row per rank (process), each band labelled with its name and span."""
    if not node.get("marks"):
        return []
    span = max(node["duration_s"], max(m["t_end_s"] for m in node["marks"]), 1e-9)
    rows = {}
    for m in node["marks"]:
        rows.setdefault((m["rank"], m["pid"]), []).append(m)
    out = ["<h3>Phases and regions over time (outermost)</h3><div class=pw-bands>"]
    for (rank, pid), ms in sorted(rows.items()):
        who = f"rank {rank}" if rank >= 0 else f"pid {pid}"
        out.append(
            f'<div style="position:relative;height:1.4em;margin:2px 0">'
            f'<span style="position:absolute;left:0;width:6em">{escape(who)}</span>'
        )
        for m in ms:
            left = 100 * max(m["t_begin_s"], 0) / span
            width = max(100 * (m["t_end_s"] - max(m["t_begin_s"], 0)) / span, 0.2)
            label = f"{m['kind']} {m['name']}: {m['t_begin_s']:.3f}-{m['t_end_s']:.3f} s"
            colour = "#9ecae1" if m["kind"] == "phase" else "#fdd0a2"
            out.append(
                f'<span class=pw-band title="{escape(label)}" data-t0="{m["t_begin_s"]:.9f}" '
                f'data-t1="{m["t_end_s"]:.9f}" style="position:absolute;top:0;height:1.3em;'
                f"left:calc(6em + (100% - 6em) * {left / 100:.6f});"
                f"width:calc((100% - 6em) * {width / 100:.6f});background:{colour};"
                f'overflow:hidden;white-space:nowrap;font-size:80%">{escape(m["name"])}</span>'
            )
        out.append("</div>")
    out.append("</div>")
    if node.get("marks_left_out"):
        out.append(f"<p class=note>{node['marks_left_out']} more not shown (--json)</p>")
    return ["".join(out)]


def _html_table(rows, header, align=None):
    return [html_table(rows, header)]


def _charts(node, page):
    """The node's activity and rates charts (timeline_charts), or why not."""
    if node.get("error"):
        return [f"<p class=note>not shown: {escape(node['error'])}</p>"]
    parts = []
    if node.get("activity"):
        parts.append(
            f"<h3>Activity of the {node['activity']['processes']} processes "
            "(share of wall time, mean over processes)</h3>"
            + page.plot(node["activity"], "% of wall time (stacked)", stacked=True)
        )
    if node.get("rates"):
        parts.append("<h3>Node rates</h3>" + page.plot(node["rates"], "rate"))
    return parts


def _finite_list(a):
    return [None if not np.isfinite(v) else float(v) for v in a]


def _downsample(t, cols):
    n = len(t)
    if n <= MAX_POINTS:
        return t, cols
    k = -(-n // MAX_POINTS)
    m = n // k * k
    t2 = t[:m].reshape(-1, k).mean(axis=1)
    with np.errstate(invalid="ignore"):
        cols2 = [nanmean(c[:m].reshape(-1, k), axis=1) for c in cols]
    return t2, cols2


def timeline_charts(experiment):
    """Per node: the activity chart (share of the ranks' wall time by MPI family, and
    outside MPI) and the rates chart (busiest node counters), as plain lists."""
    out = []
    try:
        nodes = experiment.timelines
    except FormatError as e:  # a damaged timeline: the rest of the report stands
        return [{"host": "?", "error": str(e)}]
    for tl in nodes:
        if len(tl.t) < 2:
            continue
        rates = tl.rates()
        t = ((tl.t[1:] + tl.t[:-1]) / 2 - tl.t[0]) / 1e9
        node = {"host": tl.host, "absent": tl.absent}
        # activity: mean over processes of each family's share of wall time
        fams, cols = [], []
        fam_cols = tl.activity_columns()
        procs = max(len(v) for v in fam_cols.values())
        for f in FAMILIES:
            idx = fam_cols[f]
            if idx and np.nansum(rates[:, idx]) > 0:
                with np.errstate(invalid="ignore"):
                    cols.append(100 * nanmean(rates[:, idx], axis=1) / 1e9)
                fams.append(f)
        if procs:
            # (a call longer than a tick is already spread over its ticks: tl.rates())
            inside = np.nansum(np.vstack(cols), axis=0) if cols else np.zeros(len(t))
            tt, cc = _downsample(t, [np.clip(100 - inside, 0, 100)] + cols)
            node["activity"] = {
                "t": _finite_list(tt),
                "names": ["outside MPI"] + [f"MPI {f}" for f in fams],
                # outside MPI drawn as computing, each family as its MPI activity
                "activities": ["compute"] + [family_activity(f) for f in fams],
                "values": [_finite_list(c) for c in cc],
                "processes": procs,
            }
        # rates: the busiest node-level counters (not per process)
        busy = [
            i
            for i, s in enumerate(tl.series)
            if s["kind"] == "counter" and s["source"] != "proc" and np.nansum(rates[:, i]) > 0
        ]
        busy.sort(key=lambda i: -nanmean(rates[:, i]))
        busy = busy[:RATE_SERIES]
        if busy:
            tt, cc = _downsample(t, [rates[:, i] for i in busy])
            node["rates"] = {
                "t": _finite_list(tt),
                "names": [f"{tl.series[i]['source']}:{tl.series[i]['name']}" for i in busy],
                "units": [tl.series[i]["unit"] + "/s" for i in busy],
                "values": [_finite_list(c) for c in cc],
            }
        out.append(node)
    return out


SECTION = NodeTimeline()

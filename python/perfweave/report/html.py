"""`perfweave report --html FILE`: the report as one self-contained HTML file that works
offline: the summary, the MPI call-site table, wait states, counters, and per node the
timeline plotted (the ranks' activity over time and the node's rates), drawn with the
vendored uPlot (report/vendor/). Every string that comes from the program or the
machine is escaped: HTML text with html.escape, embedded data as JSON whose "<" is
written \\u003c, so no string can close the script element or open a tag.
"""
import html
import json
from importlib import resources

import numpy as np

from perfweave.errors import FormatError
from perfweave.readers.timeline import FAMILIES, read_timelines

MAX_POINTS = 2000      # per chart: ticks beyond are averaged in groups
RATE_SERIES = 6        # node counters per rates chart


def _vendor(name):
    return resources.files("perfweave.report").joinpath("vendor", name).read_text()


def _e(x):
    return html.escape(str(x), quote=True)


def _json_for_script(obj):
    return json.dumps(obj, allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


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
        cols2 = [np.nanmean(c[:m].reshape(-1, k), axis=1) for c in cols]
    return t2, cols2


def timeline_charts(path):
    """Per node: the activity chart (share of the ranks' wall time by MPI family, and
    outside MPI) and the rates chart (busiest node counters), as plain lists."""
    out = []
    try:
        nodes = read_timelines(path)
    except FormatError as e:          # a damaged timeline: the rest of the report stands
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
                    cols.append(100 * np.nanmean(rates[:, idx], axis=1) / 1e9)
                fams.append(f)
        if procs:
            inside = np.nansum(np.vstack(cols), axis=0) if cols else np.zeros(len(t))
            # a call's time is counted when it ends: a call longer than a tick (MPI_Init)
            # lands in one tick; show at most 100 %, in the families' proportions
            scale = np.where(inside > 100, 100 / np.maximum(inside, 1e-9), 1.0)
            cols = [c * scale for c in cols]
            inside = np.minimum(inside, 100)
            tt, cc = _downsample(t, [np.clip(100 - inside, 0, 100)] + cols)
            node["activity"] = {"t": _finite_list(tt), "names": ["outside MPI"] +
                                [f"MPI {f}" for f in fams],
                                "values": [_finite_list(c) for c in cc], "processes": procs}
        # rates: the busiest node-level counters (not per process)
        busy = [i for i, s in enumerate(tl.series) if s["kind"] == "counter"
                and s["source"] != "proc" and np.nansum(rates[:, i]) > 0]
        busy.sort(key=lambda i: -np.nanmean(rates[:, i]))
        busy = busy[:RATE_SERIES]
        if busy:
            tt, cc = _downsample(t, [rates[:, i] for i in busy])
            node["rates"] = {"t": _finite_list(tt),
                             "names": [f"{tl.series[i]['source']}:{tl.series[i]['name']}"
                                       for i in busy],
                             "units": [tl.series[i]["unit"] + "/s" for i in busy],
                             "values": [_finite_list(c) for c in cc]}
        out.append(node)
    return out


def _table(rows, header, cls=""):
    h = "".join(f"<th>{_e(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


def _t(s):
    return f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.3f} ms"


def render(data, experiment):
    """The HTML text of report data (report/data.py collect) of experiment."""
    m = data["mpi_profile"]
    parts = [f"<h1>perfweave report</h1><p class=sub>{_e(data['experiment'])}</p>"]
    facts = [("command", " ".join(data.get("command") or [])),
             ("wall time", _t(data["wall_s"]) if data.get("wall_s") is not None else "?"),
             ("state", data.get("state", "?"))]
    if m["mpi"]:
        facts += [("ranks", f"{m['ranks']} on {len(m['hosts'])} host(s): "
                            f"{', '.join(m['hosts'][:8])}"),
                  ("MPI library", (m["mpi_library"] or "?").split(",")[0]),
                  ("time in MPI", f"{m['mpi_pct']['mean']:.1f} % mean, "
                                  f"{m['mpi_pct']['min']:.1f} % min, "
                                  f"{m['mpi_pct']['max']:.1f} % max over ranks")]
    parts.append(_table(facts, ["", ""], "facts"))
    for note in data.get("notes", []):
        parts.append(f"<p class=note>{_e(note)}</p>")
    if data.get("advice"):
        parts.append("<h2>Advice</h2><ul class=advice>" +
                     "".join(f"<li>{_e(a['text'])}</li>" for a in data["advice"]) + "</ul>")
    sm = data.get("sampling")
    if sm and not sm.get("error"):
        parts.append(f"<h2>Where the time goes ({sm['samples']} samples)</h2>")
        for title, key in (("functions (self)", "functions"), ("source lines (self)", "lines"),
                           ("functions (inclusive)", "inclusive")):
            parts.append(_table([[f"{r['pct']:.1f}", r["name"],
                                  ", ".join(f"{k} {v:.0f}" for k, v in r["by_state_pct"].items()),
                                  f"{r['per_rank_pct']['min']:.1f} / {r['per_rank_pct']['mean']:.1f}"
                                  f" / {r['per_rank_pct']['max']:.1f}", f"{r['imbalance']:.2f}"]
                                 for r in sm[key][:15]],
                                ["%", title, "by activity (%)", "per rank min / mean / max %",
                                 "imbalance"]))
    if m["mpi"]:
        parts.append("<h2>MPI call sites</h2>")
        parts.append(_table([[c["id"], c["function"], c["where"], c["calls"], _t(c["time_s"]),
                              f"{c['app_pct']:.2f}", f"{c['mpi_pct']:.2f}", f"{c['cov']:.2f}",
                              c["ranks"]] for c in m["callsites"][:50]],
                            ["id", "function", "location", "calls", "time", "App %", "MPI %",
                             "COV", "ranks"]))
        if m.get("counters"):
            evs = m["counters"]
            parts.append("<h2>Counters per call site</h2>")
            parts.append(_table([[c["id"], c["function"], c["where"]] +
                                 [x for ev in evs for x in (c["counters"][ev]["inside"],
                                                            c["counters"][ev]["before"])]
                                 for c in m["callsites"][:50] if "counters" in c],
                                ["id", "function", "location"] +
                                [f"{ev} {w}" for ev in evs for w in ("inside", "before")]))
    ws = data.get("wait_states")
    if ws and ws.get("patterns"):
        parts.append("<h2>Wait states</h2>")
        parts.append(_table([[p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]]
                             for p in ws["patterns"]],
                            ["pattern", "time", "%", "largest at"]))
    charts = timeline_charts(experiment.path)
    for k, node in enumerate(charts):
        parts.append(f"<h2>Node timeline: {_e(node['host'])}</h2>")
        if node.get("error"):
            parts.append(f"<p class=note>not shown: {_e(node['error'])}</p>")
            continue
        if node.get("activity"):
            parts.append(f"<h3>Activity of the {node['activity']['processes']} processes "
                         "(share of wall time, mean over processes)</h3>"
                         f'<div class=chart id="act{k}"></div>')
        if node.get("rates"):
            parts.append(f'<h3>Node rates</h3><div class=chart id="rate{k}"></div>')
        for src, why in sorted(node.get("absent", {}).items()):
            parts.append(f"<p class=note>absent: {_e(src)}: {_e(why)}</p>")
    body = "\n".join(parts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>perfweave report</title>
<style>{_vendor("uPlot.min.css")}
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }}
h1 {{ margin-bottom: 0; }} .sub {{ color: #666; margin-top: 0; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 2px 10px; text-align: right; }}
td:nth-child(2), td:nth-child(3), th {{ text-align: left; }}
table.facts td {{ text-align: left; }} .note {{ color: #a40; }}
.chart {{ margin-bottom: 1.5em; }}
</style>
<script>{_vendor("uPlot.iife.min.js")}</script>
</head><body>
{body}
<script type="application/json" id="pw-charts">{_json_for_script(charts)}</script>
<script>
(function () {{
  var charts = JSON.parse(document.getElementById("pw-charts").textContent);
  var colours = ["#999", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"];
  var drawn = 0;
  function plot(el, d, label, stacked) {{
    if (!el || !d) return;
    var series = [{{label: "time (s)"}}], data = [d.t];
    var acc = d.t.map(function () {{ return 0; }});
    d.names.forEach(function (name, i) {{
      var v = d.values[i];
      if (stacked) {{ acc = acc.map(function (a, j) {{ return a + (v[j] || 0); }}); v = acc.slice(); }}
      series.push({{label: name + (d.units ? " (" + d.units[i] + ")" : ""),
                   stroke: colours[i % colours.length], width: 1.5,
                   fill: stacked ? colours[i % colours.length] + "55" : undefined}});
      data.push(v);
    }});
    if (stacked) {{ series = [series[0]].concat(series.slice(1).reverse());
                    data = [data[0]].concat(data.slice(1).reverse()); }}
    new uPlot({{width: Math.min(1100, window.innerWidth - 60), height: 260, series: series,
               axes: [{{label: "seconds since the first sample"}}, {{label: label}}],
               scales: {{x: {{time: false}}}}}}, data, el);
    drawn++;
  }}
  charts.forEach(function (node, k) {{
    plot(document.getElementById("act" + k), node.activity, "% of wall time (stacked)", true);
    plot(document.getElementById("rate" + k), node.rates, "rate", false);
  }});
  document.body.setAttribute("data-rendered", String(drawn));
}})();
</script>
</body></html>
"""

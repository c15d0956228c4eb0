"""`perfweave report --html FILE`: the report as one self-contained HTML file that works
offline: the summary, the samples' flame graph, call tree and activity over time per
rank, the MPI call-site table, wait states, counters, and per node the timeline plotted
(the ranks' activity over time and the node's rates), drawn with the vendored uPlot
(report/vendor/) and inline script. Every string that comes from the program or the
machine is escaped: HTML text with html.escape, embedded data as JSON whose "<" is
written \\u003c, so no string can close the script element or open a tag.
"""
import html
import json
from importlib import resources

import numpy as np

from perfweave.errors import FormatError
from perfweave.report import summary
from perfweave.report.summary import duration as _t
from perfweave.readers.timeline import FAMILIES, nanmean, read_timelines
from perfweave.report.data import mpi_library_line

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
        cols2 = [nanmean(c[:m].reshape(-1, k), axis=1) for c in cols]
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
                    cols.append(100 * nanmean(rates[:, idx], axis=1) / 1e9)
                fams.append(f)
        if procs:
            # (a call longer than a tick is already spread over its ticks: tl.rates())
            inside = np.nansum(np.vstack(cols), axis=0) if cols else np.zeros(len(t))
            tt, cc = _downsample(t, [np.clip(100 - inside, 0, 100)] + cols)
            node["activity"] = {"t": _finite_list(tt), "names": ["outside MPI"] +
                                [f"MPI {f}" for f in fams],
                                "values": [_finite_list(c) for c in cc], "processes": procs}
        # rates: the busiest node-level counters (not per process)
        busy = [i for i, s in enumerate(tl.series) if s["kind"] == "counter"
                and s["source"] != "proc" and np.nansum(rates[:, i]) > 0]
        busy.sort(key=lambda i: -nanmean(rates[:, i]))
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


def _sampling_views(sm):
    """The flame graph and activity strips (drawn by SAMPLING_JS from the embedded data)
    and the call tree as a collapsible table."""
    out = []
    tree = sm.get("call_tree") or []
    if tree:
        out.append("<h3>Flame graph (width: inclusive share of the samples; click a frame "
                   "to zoom, the top bar to zoom out)</h3><p class=ctl>colour by "
                   "<select id=pw-flame-mode><option value=activity>leading activity</option>"
                   "<option value=imbalance>imbalance across ranks</option></select> "
                   "<span id=pw-flame-legend class=legend></span></p>"
                   "<div id=pw-flame class=flame></div>")
        kids = {n["parent"] for n in tree}
        rows = []
        for n in tree:
            pr = n["per_rank_pct"]
            tog = ('<button class=tog aria-expanded=true>&#9662;</button>' if n["id"] in kids
                   else '<span class=tog></span>')
            rows.append(f'<tr data-depth="{n["depth"]}"><td style="padding-left:'
                        f'{0.3 + 1.2 * n["depth"]:.1f}em">{tog}{_e(n["name"])}</td>'
                        f'<td>{n["inclusive_pct"]:.1f}</td><td>{n["exclusive_pct"]:.1f}</td>'
                        f'<td>{_e(_by_activity(n["by_state_pct"]))}</td>'
                        f'<td>{pr["min"]:.1f} / {pr["mean"]:.1f} / {pr["max"]:.1f}</td>'
                        f'<td>{n["imbalance"]:.2f}</td><td>{_e(n["worst_rank"])}</td></tr>')
        head = "".join(f"<th>{x}</th>" for x in (
            "call tree", "inclusive %", "self %", "by activity (%)",
            "per rank min / mean / max %", "imbalance", "worst rank"))
        out.append(f'<h3>Call tree</h3><table class=tree id=pw-tree><thead><tr>{head}</tr>'
                   f'</thead><tbody>{"".join(rows)}</tbody></table>')
    tl = sm.get("timeline")
    if tl and tl.get("activities"):
        out.append(f"<h3>Activity over time ({len(tl['ranks'])} ranks, "
                   f"{len(tl['edges_s']) - 1} bins of {_t(tl['bin_s'])})</h3>"
                   '<div class=chart id="pw-act-mean"></div>'
                   "<p class=ctl>per rank: the leading activity of each bin, darker the larger "
                   "its share <span id=pw-strip-legend class=legend></span></p>"
                   '<canvas id="pw-act-ranks" class=strip></canvas>')
    return out


def _by_activity(by_state):
    return ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in by_state.items())


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
                  ("MPI library", mpi_library_line(m["mpi_library"])),
                  ("app time", f"{_t(m['app_time_s']['mean'])} mean, "
                               f"{_t(m['app_time_s']['min'])} min, "
                               f"{_t(m['app_time_s']['max'])} max (MPI_Init to MPI_Finalize)"),
                  ("time in MPI", summary.mpi_share(m))]
    for label, text in (("start-up", summary.startup(data)),
                        ("time split", summary.time_split(data))):
        if text:
            facts.append((label, text))
    parts.append(_table(facts, ["", ""], "facts"))
    for note in data.get("notes", []):
        parts.append(f"<p class=note>{_e(note)}</p>")
    if data.get("advice"):
        parts.append("<h2>Advice</h2><ul class=advice>" +
                     "".join(f"<li>{_e(a['text'])}</li>" for a in data["advice"]) + "</ul>")
    sm = data.get("sampling")
    if sm and not sm.get("error"):
        whole = ", start-up and shutdown included" if "phase_pct" in sm else ""
        parts.append(f"<h2>Where the time goes ({sm['samples']} samples{whole}; every % "
                     "here is of the samples)</h2>")
        parts += _sampling_views(sm)
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
                            ["id", "function", "location", "calls", "time",
                             "App % (of the app time)", "MPI % (of the MPI time)", "COV",
                             "ranks"]))
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
{SAMPLING_CSS}
</style>
<script>{_vendor("uPlot.iife.min.js")}</script>
</head><body>
{body}
<script type="application/json" id="pw-charts">{_json_for_script(charts)}</script>
<script type="application/json" id="pw-sampling">{_json_for_script(_sampling_data(sm))}</script>
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
                   stroke: d.colours ? d.colours[i] : colours[i % colours.length], width: 1.5,
                   fill: stacked ? (d.colours ? d.colours[i] : colours[i % colours.length]) +
                                   "55" : undefined}});
      data.push(v);
    }});
    if (stacked) {{ series = [series[0]].concat(series.slice(1).reverse());
                    data = [data[0]].concat(data.slice(1).reverse()); }}
    new uPlot({{width: Math.min(1100, window.innerWidth - 60), height: 260, series: series,
               axes: [{{label: d.xlabel || "seconds since the first sample"}}, {{label: label}}],
               scales: {{x: {{time: false}}}}}}, data, el);
    drawn++;
  }}
  charts.forEach(function (node, k) {{
    plot(document.getElementById("act" + k), node.activity, "% of wall time (stacked)", true);
    plot(document.getElementById("rate" + k), node.rates, "rate", false);
  }});
  var sm = JSON.parse(document.getElementById("pw-sampling").textContent);
  if (sm) {{ {SAMPLING_JS}
    flame(sm);
    activity(sm, plot);
  }}
  document.body.setAttribute("data-rendered", String(drawn));
}})();
</script>
</body></html>
"""


def _sampling_data(sm):
    """What SAMPLING_JS draws: the call tree and the activity over time, or null."""
    if not sm or sm.get("error"):
        return None
    return {"call_tree": sm.get("call_tree") or [], "timeline": sm.get("timeline"),
            "activity_pct": sm.get("activity_pct") or {}}


SAMPLING_CSS = """
.flame { position: relative; width: 100%; max-width: 1400px; margin-bottom: 1em;
         font: 12px/16px system-ui, sans-serif; cursor: pointer; }
.fg { position: absolute; height: 16px; box-sizing: border-box; border: 1px solid #fff;
      overflow: hidden; white-space: nowrap; text-overflow: ellipsis; padding: 0 3px;
      color: #000; }
.fg.anc { opacity: 0.55; }
.fg:hover { border-color: #000; }
#pw-tip { position: fixed; display: none; background: #fffff4; border: 1px solid #999;
          padding: 4px 8px; font: 12px/1.4 system-ui, sans-serif; max-width: 600px;
          pointer-events: none; z-index: 10; white-space: pre-wrap; }
.legend span.sw { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 10px;
                  vertical-align: middle; border: 1px solid #888; }
.ctl { margin: 0.3em 0; color: #444; }
table.tree td { text-align: right; }
table.tree td:first-child, table.tree td:nth-child(4), table.tree th { text-align: left; }
.tog { display: inline-block; width: 1.4em; border: 0; background: none; padding: 0;
       cursor: pointer; }
.tog[aria-expanded=false] { transform: rotate(-90deg); }
canvas.strip { display: block; margin-bottom: 1.5em; }
"""

# Inserted in the page's script, where plot() (uPlot) is defined. Program strings reach
# the page only through textContent (never innerHTML).
SAMPLING_JS = """
var ACT = {compute: "#5aa02c", mpi_p2p: "#1f77b4", mpi_coll: "#d62728", mpi_rma: "#9467bd",
           mpi_sync: "#e377c2", mpi_io: "#8c564b", mpi_other: "#17becf", sleep: "#b0b0b0",
           io: "#ff7f0e", alloc: "#bcbd22", thread_sync: "#7f3f98", omp_sync: "#ad494a"};
var SPARE = ["#ffbb78", "#98df8a", "#aec7e8", "#c5b0d5", "#c49c94", "#dbdb8d"];
function actColour(name) {
  if (!ACT[name]) ACT[name] = SPARE[Object.keys(ACT).length % SPARE.length];
  return ACT[name];
}
function label(name) { return String(name).replace(/_/g, " "); }
function legend(el, items) {
  if (!el) return;
  el.textContent = "";
  items.forEach(function (it) {
    var sw = document.createElement("span");
    sw.className = "sw"; sw.style.background = it[1];
    el.appendChild(sw);
    el.appendChild(document.createTextNode(it[0]));
  });
}
var tip = document.createElement("div");
tip.id = "pw-tip";
document.body.appendChild(tip);
function showTip(e, lines) {
  tip.textContent = lines.join("\\n");
  tip.style.display = "block";
  tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 420) + "px";
  tip.style.top = (e.clientY + 14) + "px";
}
function hideTip() { tip.style.display = "none"; }
function pct(x) { return x.toFixed(1) + " %"; }

function flame(sm) {
  var el = document.getElementById("pw-flame");
  if (!el || !sm.call_tree.length) return;
  var ROW = 17, byId = {}, kids = {}, mode = "activity";
  sm.call_tree.forEach(function (n) {
    byId[n.id] = n;
    var p = n.parent === null ? "top" : n.parent;
    (kids[p] = kids[p] || []).push(n);
  });
  function leading(n) {
    var best = null, v = -1;
    Object.keys(n.by_state_pct).forEach(function (k) {
      if (n.by_state_pct[k] > v) { v = n.by_state_pct[k]; best = k; }
    });
    return best;
  }
  function imbColour(x) {
    x = Math.min(Math.max(x, 0) / 0.5, 1);
    return "hsl(0," + Math.round(85 * x) + "%," + Math.round(88 - 33 * x) + "%)";
  }
  function colour(n) {
    return mode === "imbalance" ? imbColour(n.imbalance) : actColour(leading(n));
  }
  function bar(row, left, width, n, anc) {
    var d = document.createElement("div");
    d.className = "fg" + (anc ? " anc" : "");
    d.style.top = (row * ROW) + "px";
    d.style.left = left.toFixed(4) + "%";
    d.style.width = width.toFixed(4) + "%";
    d.style.background = n ? colour(n) : "#ddd";
    d.setAttribute("data-id", n ? String(n.id) : "all");
    d.textContent = n ? n.name : "all samples";
    el.appendChild(d);
  }
  function render() {
    var m = /zoom=(\\d+)/.exec(location.hash);
    var f = m && byId[m[1]] ? byId[m[1]] : null;
    var rows = 1, row = 1, scale = 1, x = 0, start = kids.top || [];
    el.textContent = "";
    bar(0, 0, 100, null, !!f);
    if (f) {
      var chain = [];
      for (var a = byId[f.parent]; a; a = byId[a.parent]) chain.unshift(a);
      chain.forEach(function (a) { bar(row++, 0, 100, a, true); });
      scale = 100 / Math.max(f.inclusive_pct, 1e-9);
      start = [f];
    }
    function lay(n, x0, r) {
      bar(r, x0, n.inclusive_pct * scale, n, false);
      rows = Math.max(rows, r + 1);
      (kids[n.id] || []).forEach(function (c) {
        lay(c, x0, r + 1);
        x0 += c.inclusive_pct * scale;
      });
    }
    start.forEach(function (n) { lay(n, x, row); x += n.inclusive_pct * scale; });
    el.style.height = (rows * ROW) + "px";
    el.setAttribute("data-zoom", f ? String(f.id) : "all");
    if (mode === "imbalance")
      legend(document.getElementById("pw-flame-legend"),
             [0, 0.1, 0.2, 0.3, 0.4, 0.5].map(function (x) {
               return [x === 0.5 ? ">= 0.5 (max - mean) / max" : String(x), imbColour(x)]; }));
    else
      legend(document.getElementById("pw-flame-legend"),
             Object.keys(sm.activity_pct).filter(function (k) { return sm.activity_pct[k] > 0; })
               .map(function (k) { return [label(k), actColour(k)]; }));
  }
  el.addEventListener("click", function (e) {
    var d = e.target.closest(".fg");
    if (!d) return;
    var id = d.getAttribute("data-id");
    location.hash = id === "all" ? "" : "zoom=" + id;
    render();                  // now, not at the hashchange event (a later task)
  });
  el.addEventListener("mousemove", function (e) {
    var d = e.target.closest(".fg"), n = d && byId[d.getAttribute("data-id")];
    if (!n) { hideTip(); return; }
    var pr = n.per_rank_pct;
    showTip(e, [n.name,
      "inclusive " + pct(n.inclusive_pct) + ", self " + pct(n.exclusive_pct),
      "by activity: " + Object.keys(n.by_state_pct).map(function (k) {
        return label(k) + " " + pct(n.by_state_pct[k]); }).join(", "),
      "per rank: min " + pct(pr.min) + ", mean " + pct(pr.mean) + ", max " + pct(pr.max),
      "imbalance " + n.imbalance.toFixed(2) + " (worst rank " + n.worst_rank + ")"]);
  });
  el.addEventListener("mouseleave", hideTip);
  var sel = document.getElementById("pw-flame-mode");
  if (sel) sel.addEventListener("change", function () { mode = sel.value; render(); });
  window.addEventListener("hashchange", render);
  render();
  // the call-tree table: a row's button folds its subtree
  var table = document.getElementById("pw-tree");
  if (table) table.addEventListener("click", function (e) {
    var b = e.target.closest("button.tog");
    if (!b) return;
    b.setAttribute("aria-expanded", b.getAttribute("aria-expanded") === "true" ? "false" : "true");
    var below = Infinity;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var depth = +r.getAttribute("data-depth");
      if (depth > below) { r.hidden = true; return; }
      below = Infinity;
      r.hidden = false;
      var t = r.querySelector("button.tog");
      if (t && t.getAttribute("aria-expanded") === "false") below = depth;
    });
  });
}

function activity(sm, plot) {
  var tl = sm.timeline;
  if (!tl || !tl.activities.length) return;
  var cols = tl.activities.map(actColour), nb = tl.edges_s.length - 1;
  var mid = tl.edges_s.slice(0, nb).map(function (e) { return e + tl.bin_s / 2; });
  plot(document.getElementById("pw-act-mean"),
       {t: mid, names: tl.activities.map(label), colours: cols,
        values: tl.mean.map(function (v) {
          return v.map(function (x) { return x === null ? null : 100 * x; }); }),
        xlabel: "seconds since the node's first process started"},
       "% of samples (stacked)", true);
  legend(document.getElementById("pw-strip-legend"),
         tl.activities.map(function (a) { return [label(a), actColour(a)]; }));
  var cv = document.getElementById("pw-act-ranks");
  if (!cv) return;
  var nr = tl.ranks.length, h = Math.max(3, Math.min(16, Math.floor(320 / nr)));
  var gutter = 70, w = Math.min(1100, window.innerWidth - 60);
  cv.width = w; cv.height = nr * h + 18;
  var g = cv.getContext("2d"), bw = (w - gutter) / nb;
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#f4f4f4";
  g.fillRect(gutter, 0, w - gutter, nr * h);
  tl.ranks.forEach(function (rank, j) {
    var every = Math.ceil(12 / h);
    if (j % every === 0) {
      g.fillStyle = "#333";
      g.fillText(rank < 0 ? "process " + j : "rank " + rank, 2, j * h + Math.min(h, 12) - 1);
    }
    for (var k = 0; k < nb; k++) {
      var best = -1, v = -1;
      tl.activities.forEach(function (a, s) {
        var f = tl.fractions[j][s][k];
        if (f !== null && f > v) { v = f; best = s; }
      });
      if (best < 0) continue;
      g.globalAlpha = 0.25 + 0.75 * v;
      g.fillStyle = cols[best];
      g.fillRect(gutter + k * bw, j * h, Math.ceil(bw), h - (h > 4 ? 1 : 0));
    }
    g.globalAlpha = 1;
  });
  g.fillStyle = "#333";
  [0, 0.25, 0.5, 0.75, 1].forEach(function (q) {
    var s = tl.edges_s[nb] * q, x = gutter + q * (w - gutter);
    g.fillText(s.toFixed(2) + " s", Math.min(x, w - 40), nr * h + 14);
  });
  cv.addEventListener("mousemove", function (e) {
    var r = cv.getBoundingClientRect(), j = Math.floor((e.clientY - r.top) / h),
        k = Math.floor((e.clientX - r.left - gutter) / bw);
    if (j < 0 || j >= nr || k < 0 || k >= nb) { hideTip(); return; }
    showTip(e, [(tl.ranks[j] < 0 ? "process " + j : "rank " + tl.ranks[j]) + ", " +
                tl.edges_s[k].toFixed(3) + "-" +
                tl.edges_s[k + 1].toFixed(3) + " s, " + tl.samples[j][k] + " samples"]
      .concat(tl.activities.map(function (a, s) {
        var f = tl.fractions[j][s][k];
        return label(a) + " " + (f === null ? "-" : pct(100 * f)); })));
  });
  cv.addEventListener("mouseleave", hideTip);
  cv.setAttribute("data-series", tl.activities.join(","));
}
"""

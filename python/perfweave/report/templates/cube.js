/* The wait states' three panes (report/sections/wait_states.py cube_html): the metric
   tree, the selected metric over the call tree, the selected call path over the ranks.
   A path's value is its subtree's sum, a metric's includes its children's. */
document.addEventListener("DOMContentLoaded", function () {
  var cb = JSON.parse(document.getElementById("pw-cube").textContent);
  var root = document.getElementById("pw-cube-view");
  if (!cb || !root) return;
  function dur(s) {  /* report/summary.py duration */
    var a = Math.abs(s);
    if (a >= 100) return s.toFixed(1) + "s";
    if (a >= 1) return s.toFixed(3) + "s";
    if (a >= 1e-3) return (s * 1e3).toFixed(3) + "ms";
    if (a > 0) return (s * 1e6).toFixed(1) + "us";
    return "0";
  }
  function pct(s) { return (cb.total_s ? 100 * s / cb.total_s : 0).toFixed(2) + " %"; }
  var parent = {}, depth = {};
  cb.callpaths.forEach(function (c) {
    parent[c.id] = c.parent;
    depth[c.id] = c.parent === null ? 0 : depth[c.parent] + 1;
  });
  /* {path: [inclusive, exclusive, {rank: inclusive}]} of a metric */
  function sums(mid) {
    var per = {};
    (cb.values[mid] || []).forEach(function (v) {
      for (var q = v[0], own = true; q !== null && q !== undefined; q = parent[q], own = false) {
        var s = per[q] || (per[q] = [0, 0, {}]);
        s[0] += v[2]; if (own) s[1] += v[2];
        s[2][v[1]] = (s[2][v[1]] || 0) + v[2];
      }
    });
    return per;
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function row(pane, id, indent, name, cells, onclick) {
    var r = el("div", "row");
    r.setAttribute("data-id", String(id));
    var n = el("span", "nm", name);
    n.style.paddingLeft = (indent * 12) + "px";
    n.title = name;
    r.appendChild(n);
    cells.forEach(function (c) { r.appendChild(el("span", "v", c)); });
    r.addEventListener("click", onclick);
    pane.appendChild(r);
    return r;
  }
  var panes = ["metrics", "paths", "ranks"].map(function (k) {
    return document.getElementById("pw-cube-" + k);
  });
  var metric = cb.metrics.some(function (m) { return m.id === cb.selected; }) ?
               cb.selected : cb.metrics[0].id, path = null, per = {};
  function drawMetrics() {
    var p = panes[0];
    p.textContent = "";
    p.appendChild(el("h4", "", "Metric (inclusive, % of time, exclusive)"));
    cb.metrics.forEach(function (m) {
      var r = row(p, m.id, m.depth, m.name, [dur(m.value_s), pct(m.value_s), dur(m.exclusive_s)],
                  function () { select(m.id, null); });
      if (m.id === metric) r.classList.add("sel");
    });
  }
  function drawPaths() {
    var p = panes[1];
    p.textContent = "";
    var name = cb.metrics.filter(function (m) { return m.id === metric; })[0].name;
    p.appendChild(el("h4", "", name + " by call path (inclusive, %, exclusive)"));
    cb.callpaths.forEach(function (c) {
      var s = per[c.id];
      if (!s) return;
      var leaf = c.name.split(" > ").pop();
      var r = row(p, c.id, depth[c.id], leaf, [dur(s[0]), pct(s[0]), dur(s[1])],
                  function () { select(metric, c.id); });
      r.title = c.name;
      if (c.id === path) r.classList.add("sel");
    });
  }
  function drawRanks() {
    var p = panes[2];
    p.textContent = "";
    var s = per[path], c = cb.callpaths.filter(function (x) { return x.id === path; })[0];
    p.appendChild(el("h4", "", c ? "over the ranks at " + c.name.split(" > ").pop()
                                     : "no call path with a value"));
    if (!s) return;
    var most = 0;
    cb.ranks.forEach(function (r) { most = Math.max(most, Math.abs(s[2][r] || 0)); });
    cb.ranks.forEach(function (r) {
      var v = s[2][r] || 0, line = el("div", "row rank");
      line.setAttribute("data-id", String(r));
      line.appendChild(el("span", "nm", "rank " + r));
      var track = el("span", "track"), bar = el("span", "bar");
      bar.style.width = (most ? 100 * Math.abs(v) / most : 0) + "%";
      track.appendChild(bar);
      line.appendChild(track);
      line.appendChild(el("span", "v", dur(v)));
      line.appendChild(el("span", "v", pct(v)));
      p.appendChild(line);
    });
  }
  function select(m, c) {
    metric = m;
    per = sums(m);
    if (c === null || !per[c]) {  /* the call path with the largest exclusive value */
      c = null;
      cb.callpaths.forEach(function (x) {
        if (per[x.id] && (c === null || per[x.id][1] > per[c][1])) c = x.id;
      });
    }
    path = c;
    root.setAttribute("data-metric", metric);
    root.setAttribute("data-callpath", path === null ? "" : String(path));
    drawMetrics(); drawPaths(); drawRanks();
  }
  select(metric, null);
});

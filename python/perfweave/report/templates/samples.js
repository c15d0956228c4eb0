function legend(el, items, acts) {
  if (!el) return;
  el.textContent = "";
  items.forEach(function (it, i) {
    if (acts) drew(el.id, acts[i], it[1]);
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
  tip.textContent = lines.join("\n");
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
    Object.keys(n.by_activity_pct).forEach(function (k) {
      if (n.by_activity_pct[k] > v) { v = n.by_activity_pct[k]; best = k; }
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
    var m = /zoom=(\d+)/.exec(location.hash);
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
    {
      var shown = Object.keys(sm.activity_pct).filter(function (k) {
        return sm.activity_pct[k] > 0; });
      legend(document.getElementById("pw-flame-legend"),
             shown.map(function (k) { return [label(k), actColour(k)]; }), shown);
    }
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
      "by activity: " + Object.keys(n.by_activity_pct).map(function (k) {
        return label(k) + " " + pct(n.by_activity_pct[k]); }).join(", "),
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
       {t: mid, names: tl.activities.map(label), activities: tl.activities,
        values: tl.mean.map(function (v) {
          return v.map(function (x) { return x === null ? null : 100 * x; }); }),
        xlabel: "seconds since the node's first process started"},
       "% of samples (stacked)", true);
  legend(document.getElementById("pw-strip-legend"),
         tl.activities.map(function (a) { return [label(a), actColour(a)]; }), tl.activities);
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
  tl.activities.forEach(function (a, s) { drew(cv.id, a, cols[s]); });
}

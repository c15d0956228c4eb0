/* The trace timeline of report/sections/trace_interval.py: a lane per rank (and thread),
   its MPI calls as bars coloured by function over the time between them (compute, light
   grey); the pointer's bar is named below the chart. */
document.addEventListener("DOMContentLoaded", function () {
  var ti = JSON.parse(document.getElementById("pw-trace-interval").textContent);
  var cv = document.getElementById("pw-trace-canvas");
  if (!ti || !cv) return;
  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#ff7f0e",
                 "#17becf", "#bcbd22", "#7f7f7f"];
  var lane = 16, left = 110, top = 4, axis = 22;
  var width = Math.min(1100, window.innerWidth - 60), colour = {}, used = [];
  ti.bars.forEach(function (b) {  /* a colour per function, in order of appearance */
    if (!(b[1] in colour)) { colour[b[1]] = palette[used.length % palette.length]; used.push(b[1]); }
  });
  cv.width = width;
  cv.height = top + ti.lanes.length * lane + axis;
  var g = cv.getContext("2d"), span = Math.max(ti.end_s - ti.start_s, 1e-12);
  function x(s) { return left + (width - left - 10) * (s - ti.start_s) / span; }
  g.font = "12px system-ui, sans-serif";
  g.textBaseline = "middle";
  ti.lanes.forEach(function (l, i) {
    g.fillStyle = "#222";
    g.fillText("rank " + l.rank + (l.thread ? "." + l.thread : ""), 4, top + i * lane + lane / 2);
    g.fillStyle = "#e8e8e8";  /* compute: the time between the calls */
    g.fillRect(left, top + i * lane + 2, width - left - 10, lane - 4);
  });
  ti.bars.forEach(function (b) {
    var a = Math.max(x(b[2]), left), e = Math.min(x(b[3]), width - 10);
    g.fillStyle = colour[b[1]];
    g.fillRect(a, top + b[0] * lane + 2, Math.max(e - a, 1), lane - 4);
  });
  g.fillStyle = "#222";
  var y = top + ti.lanes.length * lane + axis / 2;
  g.fillText(ti.start_s.toFixed(4) + " s", left, y);
  g.textAlign = "right";
  g.fillText(ti.end_s.toFixed(4) + " s", width - 10, y);
  g.textAlign = "center";
  g.fillText("seconds since MPI_Init", (left + width - 10) / 2, y);
  var legend = document.getElementById("pw-trace-legend");
  used.forEach(function (f) {
    var s = document.createElement("span");
    s.style.marginRight = "1em";
    s.innerHTML = "<span style=\"display:inline-block;width:10px;height:10px;background:" +
                  colour[f] + "\"></span> ";
    s.appendChild(document.createTextNode(ti.functions[f]));
    legend.appendChild(s);
  });
  var tip = document.getElementById("pw-trace-tip");
  cv.addEventListener("mousemove", function (ev) {
    var r = cv.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
    var l = Math.floor((py - top) / lane), t = ti.start_s + (px - left) * span / (width - left - 10);
    var hit = ti.bars.filter(function (b) { return b[0] === l && b[2] <= t && t <= b[3]; })[0];
    tip.textContent = hit ? "rank " + ti.lanes[l].rank + ": " + ti.functions[hit[1]] +
      (hit[4] > 1 ? " and " + (hit[4] - 1) + " more calls merged" : "") + ", " +
      ((hit[3] - hit[2]) * 1e3).toFixed(3) + " ms at " + hit[2].toFixed(6) + " s" : "";
  });
  cv.setAttribute("data-bars", String(ti.bars.length));
});

"""The HTML report's views of a traced and sampled run (tests/runtime/programs/views.c):
the wait states' three panes (metric tree x call paths x ranks) against the analysis'
table, the trace timeline's interval against the trace's own calls (the Chrome export,
and the program's count of its calls), the source view of the hottest lines against the
program's source; clicked in headless Chromium (test_html.py's Browser). Set
PW_SCREENSHOTS=DIR to keep a screenshot of each view there (docs/images/)."""

import base64
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from perfweave.report.summary import duration
from harness import FLAVORS, PERFWEAVE, PROGRAMS, site_lines, reported_by_rank
from test_html import Browser, html_report

PERSIST = os.environ.get("PW_SCREENSHOTS")
BARRIER_SLEEP = 0.3  # views.c: rank 0 sleeps this long before MPI_Barrier


def pw(*args):
    res = subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{args}:\n{res.stdout}\n{res.stderr}"
    return res


def durations(s):
    """report/summary.py duration's text back to seconds."""
    m = re.fullmatch(r"(-?[\d.]+)(s|ms|us)", s)
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)] if m else 0.0


@pytest.fixture(scope="module")
def views_run(tmp_path_factory, build_dir):
    """views.c built from a copy of its source (so that the source can be taken away),
    traced and sampled on 3 ranks of Open MPI, analysed: (run, source copy)."""
    from harness import Run

    mpi = FLAVORS["openmpi"]
    tmp = tmp_path_factory.mktemp("views")
    src = tmp / "views.c"
    shutil.copy(PROGRAMS / "views.c", src)
    prog = tmp / "views"
    subprocess.run([mpi.cc, "-g", "-O0", "-o", str(prog), str(src), "-lm"], check=True)
    exp = tmp / "exp"
    proc = subprocess.run(
        [
            PERFWEAVE,
            "run",
            "-o",
            str(exp),
            "--trace",
            "--sample",
            "--",
            *mpi.launch(3),
            str(prog),
            "2000",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    pw("analyze", exp)
    return Run(exp, proc), src


def test_three_panes_equal_the_analysis_table(views_run):
    """Every metric x call path x rank value of the page's cube is the analysis' value
    (perfweave.open(EXP).wait_states()), every time metric with a value is there, and the
    built-in wait (rank 0 sleeps 0.3 s before the barrier) is on ranks 1 and 2."""
    r, _ = views_run
    ws = r.report()["wait_states"]
    cb = ws["cube"]
    df = r.open().wait_states()
    metrics = {m["id"] for m in cb["metrics"]}
    time_tree = df[(df["unit"] == "s") & df["metric"].isin(metrics)]
    want = Counter()
    for m, p, k, v in zip(
        time_tree["metric"], time_tree["callpath"], time_tree["rank"], time_tree["value"]
    ):
        want[(m, int(p), int(k))] += v
    got = Counter()
    for mid, rows in cb["values"].items():
        for p, k, v in rows:
            got[(mid, p, k)] += v
    assert cb["cut"] == 0 and got == want and len(got) > 10
    totals = df[df["unit"] == "s"].groupby("metric")["value"].sum()
    assert metrics == {m for m, v in totals.items() if v > 0 and m in metrics}
    for m in cb["metrics"]:  # inclusive = the analysis' total; exclusive less children's
        assert abs(m["value_s"] - totals[m["id"]]) <= 1e-9 * max(1, m["value_s"])
        kids = sum(c["value_s"] for c in cb["metrics"] if c["parent"] == m["id"])
        assert abs(m["exclusive_s"] - (m["value_s"] - kids)) < 1e-9
    barrier = {k: v for (m, _, k), v in got.items() if m == "mpi_barrier_wait"}
    assert cb["selected"] == ws["patterns"][0]["id"]
    # rank 0's own clock saw the sleep; the others wait about as long (busy machine: the
    # sleep is a lower bound, the wake-up a few ms late at most 0.1 s more)
    for k in (1, 2):
        assert BARRIER_SLEEP * 0.8 <= barrier[k] <= BARRIER_SLEEP + 0.3, barrier
    # the text report (--full) shows each of those numbers
    text = r.text_report()
    assert "Wait states by metric, call path and rank" in text
    bw = [m for m in cb["metrics"] if m["id"] == "mpi_barrier_wait"][0]
    assert re.search(rf"{re.escape(bw['name'])}: [\d.]+m?s \({bw['pct']:.2f} %\)", text)


def chrome_calls(exp):
    """{rank: [(start s, end s), ...]} of the MPI calls of the Chrome export, each rank's
    times from its first call."""
    pw("export", exp, "--format", "chrome", "--force")
    doc = json.loads((exp / "export" / "trace.json").read_text())
    out = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "MPI" and e.get("ph") == "X":
            out.setdefault(e["pid"], []).append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
    return {k: sorted(v) for k, v in out.items()}


def assert_calls_of_chrome(ti, ch):
    """Each lane's calls in the interval ti are the Chrome export ch's in that window
    (times aligned at each rank's first call), within a microsecond's rounding at its
    edges; the bars drawn count them all."""
    for lane in ti["lanes"]:
        calls = ch[lane["rank"]]
        shift = lane["first_s"] - calls[0][0]
        a, b = ti["start_s"] - shift, ti["end_s"] - shift
        inside = sum(1 for s, e in calls if e >= a and s <= b)
        edge = sum(1 for s, e in calls if min(abs(e - a), abs(s - b)) < 2e-6)
        assert abs(lane["calls"] - inside) <= edge, (lane, inside)
    drawn = sum(b[4] for b in ti["bars"])
    assert drawn == ti["calls"] == sum(lane["calls"] for lane in ti["lanes"])


def test_trace_interval_chosen_by_the_user(views_run):
    """`report --interval START:END`: the timeline over exactly that interval, its calls
    the Chrome export's there; said in the text report without --full; START past the
    trace's end is said in place of the chart; a malformed interval is one line, exit 2."""
    r, _ = views_run
    auto = r.report()["trace_interval"]
    w = auto["end_s"] - auto["start_s"]
    a, b = auto["start_s"] + w / 4, auto["start_s"] + w * 3 / 4  # inside the busiest window
    ti = r.report("--interval", f"{a!r}:{b!r}")["trace_interval"]
    assert ti["chosen"] and not ti["whole"] and not auto["chosen"]
    assert abs(ti["start_s"] - a) < 1e-9 and abs(ti["end_s"] - b) < 1e-9
    assert ti["calls"] > 0
    assert_calls_of_chrome(ti, chrome_calls(r.exp))
    text = " ".join(r.text_report("--interval", f"{a!r}:{b!r}").split())
    assert f"Trace timeline: {duration(a)} to {duration(b)} of the run (as chosen)" in text
    late = r.report("--interval", "1e6:")["trace_interval"]
    assert "--interval starts at 1e+06 s, after the trace's end" in late["error"]
    bad = subprocess.run(
        [PERFWEAVE, "report", "--interval", "3:1", str(r.exp)], capture_output=True, text=True
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "expected START:END in seconds" in bad.stderr


def test_trace_interval_is_the_trace_in_that_window(views_run):
    """More calls than drawn whole: the window with the most MPI time, which holds the
    barrier wait; its calls per rank are the Chrome export's in that window (times
    aligned at each rank's first call), within a microsecond's rounding at its edges."""
    r, _ = views_run
    ti = r.report()["trace_interval"]
    per_rank = reported_by_rank(r.proc, "calls")
    assert sum(per_rank.values()) > 5000 and not ti["whole"]
    # the barrier's long waits on ranks 1 and 2 are in the interval, whole or cut
    names = ti["functions"]
    long_ = {
        ti["lanes"][b[0]]["rank"]
        for b in ti["bars"]
        if names[b[1]] == "MPI_Barrier" and b[3] - b[2] >= BARRIER_SLEEP * 0.5
    }
    assert {1, 2} <= long_
    ch = chrome_calls(r.exp)
    assert {k: len(v) for k, v in ch.items()} == per_rank  # the trace has every call
    assert_calls_of_chrome(ti, ch)
    text = " ".join(r.text_report().split())  # --full: the interval's line, the export's
    assert (
        f"Trace timeline: {duration(ti['start_s'])} to {duration(ti['end_s'])} of the run "
        f"(the window with the most time in MPI calls), {ti['calls']:,} MPI calls on 3 lanes"
    ) in text
    assert f"perfweave export {r.exp} --format chrome" in text


def test_trace_interval_of_a_small_run_is_the_whole_run(build, run_pw):
    """A run of few calls is shown whole: each rank's lane has every call the program
    counted, none merged."""
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "views.c")
    r = run_pw(mpi.launch(3) + [prog, 20, 1], ["--trace", "--no-sample"])
    ti = r.report()["trace_interval"]
    assert ti["whole"] and not ti["merged"]
    assert {lane["rank"]: lane["calls"] for lane in ti["lanes"]} == reported_by_rank(
        r.proc, "calls"
    )
    assert all(b[4] == 1 for b in ti["bars"]) and len(ti["bars"]) == ti["calls"]


def test_source_view_shows_the_hot_loop(views_run):
    """The hottest line is views.c's marked inner loop, shown with the 3 lines around it
    as the file has them and its share of the samples; without the file, the view says
    the source is not readable."""
    r, src = views_run
    rep = r.report()
    hot = site_lines("views.c")["hot"]
    text = src.read_text().splitlines()
    [f] = [f for f in rep["source"] if f["file"] == str(src)]
    assert f["readable"]
    lines = {n: (t, p) for snip in f["snippets"] for n, t, p in snip}
    assert all(lines[n][0] == text[n - 1] for n in range(hot - 3, hot + 4))
    top = max((p or 0, n) for n, (_, p) in lines.items())
    assert top[1] == hot and "@site hot" in lines[hot][0]
    sampled = sum(x["pct"] for x in rep["samples"]["lines"] if x.get("line") == hot)
    assert abs(lines[hot][1] - sampled) < 1e-9 and sampled > 5
    assert f"{lines[hot][1]:5.1f} % {hot:>6}  " in r.text_report()
    moved = src.with_suffix(".moved")
    src.rename(moved)
    try:
        [g] = [f for f in r.report()["source"] if f["file"] == str(src)]
        assert not g["readable"] and "No such file" in g["reason"]
        assert f"{src}: source not readable" in r.text_report()
    finally:
        moved.rename(src)


CUBE_ROWS = (
    '[...document.querySelectorAll("#pw-cube-%s .row")].map(r => [r.getAttribute("data-id"),'
    ' [...r.querySelectorAll(".v")].map(v => v.textContent)])'
)


def shot(b, selector, name, tmp_path):
    """A PNG of the element of selector: into PW_SCREENSHOTS if set, else tmp_path."""
    rect = b.js(
        f"(() => {{ const e = document.querySelector('{selector}'); e.scrollIntoView();"
        " const r = e.getBoundingClientRect();"
        " return [r.x + window.scrollX, r.y + window.scrollY, r.width, r.height]; })()"
    )
    png = b.call(
        "Page.captureScreenshot",
        clip={"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3], "scale": 1},
    )["data"]
    out = Path(PERSIST or tmp_path) / f"{name}.png"
    out.write_bytes(base64.b64decode(png))
    assert out.stat().st_size > 2000
    return out


def test_views_in_chromium(views_run, tmp_path):
    """In headless Chromium: no console message; a click on a metric changes the call
    path pane to that metric's values, a click on a call path the rank pane to its
    ranks' values (the report's own sums); the timeline drew every bar."""
    from perfweave.report.sections.wait_states import cube_sums

    r, _ = views_run
    rep = r.report()
    cb = rep["wait_states"]["cube"]
    sums = cube_sums(cb)
    out = tmp_path / "views.html"
    html_report(r.exp, out)
    b = Browser()
    try:
        b.open(out.as_uri())
        view = "document.getElementById('pw-cube-view')"
        assert b.js(f"{view}.getAttribute('data-metric')") == cb["selected"]
        for mid in ("mpi_barrier_wait", "mpi"):
            b.js(f"document.querySelector('#pw-cube-metrics .row[data-id=\"{mid}\"]').click()")
            assert b.js(f"{view}.getAttribute('data-metric')") == mid
            paths = b.js(CUBE_ROWS % "paths")
            assert {int(i) for i, _ in paths} == set(sums[mid])
            for i, (inc, pct, exc) in paths:
                s = sums[mid][int(i)]
                assert abs(durations(inc) - s[0]) <= 0.001 * s[0] + 1e-7
                assert abs(durations(exc) - s[1]) <= 0.001 * s[1] + 1e-7
                assert abs(float(pct.split()[0]) - 100 * s[0] / cb["total_s"]) <= 0.006
            # the call path with the most of it, over the ranks
            p = max(sums[mid], key=lambda k: (sums[mid][k][1], -k))
            b.js(f"document.querySelector('#pw-cube-paths .row[data-id=\"{p}\"]').click()")
            assert b.js(f"{view}.getAttribute('data-callpath')") == str(p)
            ranks = b.js(CUBE_ROWS % "ranks")
            assert [int(k) for k, _ in ranks] == cb["ranks"]
            for k, (sec, pct) in ranks:
                v = sums[mid][p][2].get(int(k), 0.0)
                assert abs(durations(sec) - v) <= 0.001 * v + 1e-7
        assert b.js("document.getElementById('pw-trace-canvas').getAttribute('data-bars')") == str(
            len(rep["trace_interval"]["bars"])
        )
        assert b.js("document.querySelectorAll('table.src tr.hot').length") > 0
        b.js(
            "document.querySelector('#pw-cube-metrics .row[data-id=\"mpi_barrier_wait\"]').click()"
        )
        shot(b, "#pw-cube-view", "html-wait-states", tmp_path)
        shot(b, "#pw-trace-view", "html-trace-interval", tmp_path)
        shot(b, "table.src", "html-source", tmp_path)
        assert b.console() == []
    finally:
        b.close()

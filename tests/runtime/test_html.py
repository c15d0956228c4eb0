"""perfweave report --html: one self-contained file that renders offline in headless
Chromium (Debian's chromium) without console errors, with every chart drawn (the node
timeline's, the samples' flame graph (widths, click to zoom) and activity over time, the
per-rank MPI chart, the message-size histograms), every activity in its one colour in
every chart, every number of the text report in the page, a screenshot per view, and
every string from the program escaped. The page is drawn from the report's data, so it
is checked against `perfweave report --json` of the same experiment (the call tree, the
activity timeline): the report is the subject. One run (phases_page) serves the tests of
the whole page."""

import base64
import fcntl
import html
import json
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import FLAVORS, PERFWEAVE, Run, run_with_stdin_open

sys.path.insert(0, str(Path(__file__).parents[1] / "python"))  # the check of both reports
from report_numbers import HINT, NUMBER, assert_agree, numbers, page_text  # noqa: E402

from perfweave.report.widgets import ACTIVITY_COLOURS, activity_name  # noqa: E402

HOSTILE = "<img src=x onerror=alert(1)></script>&amp;"


def chromium(url, *extra):
    exe = shutil.which("chromium")
    if not exe:
        pytest.fail("chromium is not installed (make test installs it)")
    res = subprocess.run(
        [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln]
    return res, console


def html_report(exp, out):
    """perfweave report --html OUT EXP, which must succeed."""
    res = subprocess.run(
        [PERFWEAVE, "report", "--html", str(out), str(exp)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def phases_page(build, tmp_path_factory):
    """One run shared by the tests of the whole page (its cost paid once): phases.c on 3
    ranks of Open MPI (computation, MPI_Allreduce, then MPI_Sendrecv around a ring),
    sampled, with the node timeline, a counter and the I/O profile, a string of HTML in
    its arguments; `perfweave report --html` of it, and its report's JSON and text."""
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "phases.c")
    tmp = tmp_path_factory.mktemp("html")
    exp = tmp / "exp"
    options = ["--node-interval", "50", "--counters", "perf::PAGE-FAULTS", "--sample", "--io"]
    cmd = [PERFWEAVE, "run", "-o", str(exp), *options, "--", *mpi.launch(3), prog, 300, HOSTILE]
    proc = run_with_stdin_open(list(map(str, cmd)), timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = tmp / "report.html"
    res = subprocess.run(
        [PERFWEAVE, "report", "--html", str(out), str(exp)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # the page, and one line saying so: not the text report as well
    assert res.returncode == 0 and res.stdout == "", res.stdout
    assert res.stderr.startswith(f"perfweave: wrote {out} "), res.stderr
    run = Run(exp, proc)
    return SimpleNamespace(
        exp=exp,
        out=out,
        tmp=tmp,
        data=run.report(),
        texts=[run.text_report(), run.text_report("--max-rows", "4")],
    )


def test_html_report_renders_offline(phases_page):
    out = phases_page.out
    page = out.read_text()
    # self-contained: no resource fetched from anywhere
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert "uPlot" in page and HOSTILE not in page
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert dom.returncode == 0
    assert console == [], console  # no errors, no messages at all
    # node activity + node rates + the samples' activity over time + the I/O rates
    # (uPlot), and the per-rank activity strip
    assert re.search(r'<body[^>]*data-rendered="4"', dom.stdout)
    assert dom.stdout.count("<canvas") == 5
    assert 'class="fg"' in dom.stdout and 'id="pw-tree"' in dom.stdout
    assert "<img" not in dom.stdout and "&lt;img src=x" in dom.stdout
    for text in (
        "Where the time goes",
        "phases.c:",
        "Advice",
        "communication-bound",
        "MPI time per rank",
        "MPI call sites",
        "MPI_Sendrecv",
        "Counters per call site",
        "Message sizes",
        "Communication matrix",
        "I/O profile",
        "Node timeline",
        "absent",
        "nvml",
    ):
        assert text in dom.stdout, text
    # every chart drawn: the SVG ones have their bars, each uPlot chart its canvas
    for el in ("pw-rank-mpi", "pw-sizes-0"):
        svg = dom.stdout[dom.stdout.index(f'id="{el}"') :]
        assert svg[: svg.index("</svg>")].count("data-activity=") >= 3 - 2 * (el != "pw-rank-mpi")


def test_html_and_text_report_agree_on_every_number(phases_page):
    """Section by section (report_numbers.py) on the report's data of a real run, and
    over the whole page: every number of `perfweave report --full` and of the default
    text report is in the page that `perfweave report --html` wrote, written alike."""
    from perfweave.readers.experiment import open_experiment

    assert_agree(phases_page.data, open_experiment(phases_page.exp))
    shown = numbers(page_text([phases_page.out.read_text()]))
    for text in phases_page.texts:
        missing = [
            (n, line)
            for line in text.splitlines()
            if not HINT.match(line)
            for n in NUMBER.findall(line)
            if n not in shown
        ]
        assert not missing, missing[:20]


def test_every_chart_colours_an_activity_alike(phases_page):
    """The samples' flame graph legend, activity chart and per-rank strip, the node
    timeline's process-activity chart and the per-rank MPI chart draw each activity in
    the one colour of widgets.py ACTIVITY_COLOURS (what each drew, as the page's script
    recorded it while drawing: window.pwDrawn)."""
    b = Browser()
    try:
        b.open(phases_page.out.as_uri())
        drawn = b.js("window.pwDrawn")
        assert b.console() == []
    finally:
        b.close()
    charts = {d["chart"] for d in drawn}
    assert {
        "pw-act-mean",
        "pw-act-ranks",
        "pw-strip-legend",
        "pw-flame-legend",
        "pw-rank-mpi",
        "pw-sizes-0",
    } <= charts, charts
    assert any(c.startswith("plot") for c in charts)  # the node timeline's
    colour = {}
    for d in drawn:
        colour.setdefault(d["activity"], set()).add(d["colour"].lower())
    assert {"compute", "mpi_coll", "mpi_p2p"} <= set(colour)
    assert colour == {a: {ACTIVITY_COLOURS[a]} for a in colour}, colour
    # each chart that draws compute and collectives
    for chart in ("pw-act-mean", "pw-rank-mpi"):
        assert {d["activity"] for d in drawn if d["chart"] == chart} >= {"compute", "mpi_coll"}
    node = [d for d in drawn if d["chart"].startswith("plot")]
    assert {d["activity"] for d in node} >= {"compute", "mpi_coll"}


# the views of the page, each as the element that starts it (its heading) and the one
# that starts the next: docs/html-report.md's screenshots
VIEWS = {
    "run": ("h1", "Advice"),
    "samples": ("Where the time goes", "Call tree"),
    "activity": ("Activity over time", "functions (self)"),
    "mpi-per-rank": ("MPI time per rank", "MPI functions by time"),
    "message-sizes": ("Message sizes", "Communication matrix"),
    "comm-matrix": ("Communication matrix", "Point-to-point pairs"),
    "node-timeline": ("Node timeline", None),
}


def test_a_screenshot_per_view(phases_page):
    """Each view of the page captured alone (headless Chromium, the view's part of the
    page): a PNG that is not blank. With PERFWEAVE_SCREENSHOTS=DIR they are also saved
    there (docs/: `PERFWEAVE_SCREENSHOTS=docs pytest -k screenshot tests/runtime/test_html.py`)."""
    find = """(() => {
      const hs = [...document.querySelectorAll("h1, h2, h3")];
      const start = hs.find(h => h.tagName === "%s" || h.textContent.startsWith("%s"));
      const stop = %s;
      const top = start.getBoundingClientRect().top + window.scrollY - 8;
      const end = stop ? stop.getBoundingClientRect().top + window.scrollY
                       : Math.min(top + 640, document.body.scrollHeight);
      return [top, Math.min(end - top, 640)];
    })()"""
    b = Browser()
    shots = {}
    try:
        b.open(phases_page.out.as_uri())
        b.call(
            "Emulation.setDeviceMetricsOverride",
            width=1150,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        for name, (start, stop) in VIEWS.items():
            after = (
                f'hs.slice(hs.indexOf(start) + 1).find(h => h.textContent.startsWith("{stop}"))'
                if stop
                else "null"
            )
            top, height = b.js(find % (start.upper(), start, after))
            assert height > 40, name
            shot = b.call(
                "Page.captureScreenshot",
                format="png",
                captureBeyondViewport=True,
                clip={"x": 0, "y": top, "width": 1150, "height": height, "scale": 1},
            )
            shots[name] = base64.b64decode(shot["data"])
        assert b.console() == []
    finally:
        b.close()
    for name, png in shots.items():
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 8000, name
        (phases_page.tmp / f"{name}.png").write_bytes(png)
    to = os.environ.get("PERFWEAVE_SCREENSHOTS")
    if to:
        for name, png in shots.items():
            Path(to, f"html-{name}.png").write_bytes(png)


def test_html_of_a_corrupt_timeline_still_renders(build, run_pw, tmp_path):
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "phases.c")
    r = run_pw(mpi.launch(2) + [prog, 100], ["--no-sample", "--no-io"])  # timeline charts only
    for p in (r.exp / "timeline").glob("*.json"):
        p.write_text("{broken")
    out = tmp_path / "r.html"
    html_report(r.exp, out)
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert console == [] and 'data-rendered="0"' in dom.stdout and "not shown" in dom.stdout


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-
    pipe: JSON messages ended by NUL on fds 3 and 4), to click in a page and read it."""

    def __init__(self):
        exe = shutil.which("chromium")
        if not exe:
            pytest.fail("chromium is not installed (make test installs it)")

        def high(fd):  # out of the way of fds 3 and 4 in the child
            h = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return h

        to_r, self.to_w = map(high, os.pipe())
        self.from_r, from_w = map(high, os.pipe())

        def child():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--window-size=1200,1400",
                "about:blank",
            ],
            preexec_fn=child,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self.buf, self.n, self.events, self.session = b"", 0, [], None

    def call(self, method, timeout=60, **params):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self.next(timeout)
            if m.get("id") == self.n:
                assert "error" not in m, m
                return m["result"]
            self.events.append(m)

    def next(self, timeout):
        while b"\0" not in self.buf:
            ready, _, _ = select.select([self.from_r], [], [], timeout)
            assert ready, "chromium did not answer"
            chunk = os.read(self.from_r, 1 << 16)
            assert chunk, "chromium exited"
            self.buf += chunk
        m, self.buf = self.buf.split(b"\0", 1)
        return json.loads(m)

    def open(self, url):
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Runtime.enable")
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self.next(60))

    def js(self, expression):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in res, res
        return res["result"].get("value")

    def console(self):
        return [
            e
            for e in self.events
            if e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")
        ]

    def close(self):
        self.session = None
        try:
            self.call("Browser.close", timeout=20)
        except (AssertionError, OSError):
            pass
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self.to_w)
        os.close(self.from_r)


FLAME = (
    '[...document.querySelectorAll("#pw-flame .fg")].map(d => [d.getAttribute("data-id"), '
    "d.textContent, parseFloat(d.style.left), parseFloat(d.style.width), "
    'd.classList.contains("anc")])'
)


def flame_bars(dom):
    """(id, name, left %, width %, ancestor) of the flame graph's bars in a dumped DOM."""
    return [
        (m[2], html.unescape(m[5]), float(m[3]), float(m[4]), m[1] == " anc")
        for m in re.finditer(
            r'<div class="fg( anc)?" data-id="(\w+)" style="top: \d+px; '
            r'left: ([\d.]+)%; width: ([\d.]+)%;[^"]*">([^<]*)</div>',
            dom,
        )
    ]


def test_flame_graph_zoom_activity_and_hostile_function_names(build, run_pw, tmp_path):
    """A C++ program whose demangled function names hold "<script>", "&" and "<": the
    flame graph's bars carry them as text, widths in proportion to the inclusive shares;
    a click zooms into a frame (and the top bar back out); the activity chart has one
    series per activity; nothing the program named becomes markup."""
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "cxx_script_names.cpp")
    r = run_pw(mpi.launch(2) + [prog], ["--sample", "--sample-interval-ms", "2"])
    sm = r.report()["samples"]
    tree = {n["id"]: n for n in sm["call_tree"]}
    by_name = {n["name"]: n for n in sm["call_tree"]}
    burn = by_name["void burn<script>(double)"]
    main = by_name["main"]
    assert "operator&(Box<script>, Box<script>)" in by_name
    out = tmp_path / "r.html"
    html_report(r.exp, out)
    page = out.read_text()
    assert "burn<script>" not in page and "burn\\u003cscript\\u003e" in page
    assert page.count("<script") == 5  # uPlot, three data blocks, the page's
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert console == [], console
    assert dom.stdout.count("<script") == 5 and "burn&lt;script&gt;(double)" in dom.stdout
    # not zoomed: the top bar, then each node at its inclusive share of all samples
    bars = flame_bars(dom.stdout)
    assert bars[0][:2] == ("all", "all samples") and bars[0][3] == 100
    assert len(bars) == len(tree) + 1
    for i, name, left, width, anc in bars[1:]:
        assert name == tree[int(i)]["name"] and not anc
        assert abs(width - tree[int(i)]["inclusive_pct"]) < 0.01
    # the call-tree table: every node, escaped, with its per-rank min/mean/max
    rows = re.findall(
        r'<tr data-depth="(\d+)"><td[^>]*>.*?</(?:button|span)>([^<]*)</td>'
        r"<td>([\d.]+)</td>.*?<td>([\d.]+) / ([\d.]+) / ([\d.]+)</td>",
        dom.stdout,
    )
    assert [(int(d), html.unescape(n)) for d, n, *_ in rows] == [
        (n["depth"], n["name"]) for n in sm["call_tree"]
    ]
    # activity over time: one series per activity in the chart, the strip's as well
    tl = sm["timeline"]
    chart = dom.stdout[dom.stdout.index('id="pw-act-mean"') :]
    chart = chart[: chart.index("</table>")]
    labels = re.findall(r'class="u-label">([^<]*)<', chart)
    assert sorted(labels[1:]) == sorted(activity_name(a) for a in tl["activities"])
    assert f'data-series="{",".join(tl["activities"])}"' in dom.stdout
    assert {"compute", "mpi_coll"} <= set(tl["activities"])  # rank 0 waits for rank 1
    # zoom by link: main's children at their share of main
    zoomed = flame_bars(chromium(out.as_uri() + f"#zoom={main['id']}", "--dump-dom")[0].stdout)
    kids = {
        i: w
        for i, _, _, w, anc in zoomed
        if not anc and int(i) != main["id"] and tree[int(i)]["parent"] == main["id"]
    }
    assert abs(kids[str(burn["id"])] - 100 * burn["inclusive_pct"] / main["inclusive_pct"]) < 0.01
    # zoom by clicking, in a browser driven over the DevTools protocol
    b = Browser()
    try:
        b.open(out.as_uri())
        b.js(f"document.querySelector('#pw-flame .fg[data-id=\"{burn['id']}\"]').click()")
        bars = b.js(FLAME)
        assert b.js('document.getElementById("pw-flame").getAttribute("data-zoom")') == str(
            burn["id"]
        )
        # the top bar and main above, faded; burn<script> full width; its spin below
        assert [(x[1], x[4]) for x in bars[:3]] == [
            ("all samples", True),
            ("main", True),
            (burn["name"], False),
        ]
        assert bars[2][3] == 100
        [spin] = [n for n in sm["call_tree"] if n["parent"] == burn["id"]]
        assert bars[3][1] == "spin(double)"
        assert abs(bars[3][3] - 100 * spin["inclusive_pct"] / burn["inclusive_pct"]) < 0.01
        b.js("document.querySelector('#pw-flame .fg[data-id=\"all\"]').click()")
        again = b.js(FLAME)
        assert len(again) == len(tree) + 1 and not any(x[4] for x in again)
        assert abs(again[1][3] - tree[int(again[1][0])]["inclusive_pct"]) < 0.01
        # the table folds main's subtree and unfolds it
        b.js('document.querySelector("#pw-tree tbody tr button.tog").click()')
        hidden = b.js('[...document.querySelectorAll("#pw-tree tbody tr")].map(r => r.hidden)')
        first = sm["call_tree"][0]
        sub = [n["id"] for n in sm["call_tree"] if n["id"] != first["id"]]
        under = set()
        for n in sm["call_tree"][1:]:
            if n["parent"] == first["id"] or n["parent"] in under:
                under.add(n["id"])
        assert hidden == [i in under for i in [first["id"]] + sub] and any(hidden)
        b.js('document.querySelector("#pw-tree tbody tr button.tog").click()')
        assert not any(
            b.js('[...document.querySelectorAll("#pw-tree tbody tr")].map(r => r.hidden)')
        )
        assert b.console() == []
    finally:
        b.close()


def test_html_io_rates_chart_on_the_node_timeline_clock(build, run_pw, tmp_path):
    """The I/O profile's read and write MB/s over time is a chart of the page, on the
    node timeline's clock, in finer slices than the text report's table: its bytes (rate
    times slice width) are the program's own count, in the first of its two phases."""
    prog = build(None, "io_phases.c")
    n = 100
    r = run_pw([prog, tmp_path, n, 600], ["--io", "--node-interval", "20", "--no-sample"])
    written = int(dict(ln.split() for ln in r.proc.stdout.splitlines())["written"])
    assert written == n * 4096
    out = tmp_path / "io.html"
    html_report(r.exp, out)
    page = out.read_text()
    m = re.search(r'<script type="application/json" id="pw-plots">(.*?)</script>', page, re.S)
    plots = json.loads(m.group(1))
    (io,) = [p for p in plots if p["chart"]["names"] == ["read", "write"]]
    t, (rd, wr) = io["chart"]["t"], io["chart"]["values"]
    assert len(t) > 8 and sum(rd) == 0  # finer than the table's 8 slices
    assert "node timeline" in io["chart"]["xlabel"]
    width = (t[-1] - t[0]) / (len(t) - 1)  # equal slices: mid-points one width apart
    assert abs(sum(wr) * width * 1e6 - written) <= 1e-6 * written
    half = len(t) // 2
    assert sum(wr[:half]) >= 0.95 * sum(wr)  # the writing phase is the first half
    # the node timeline's activity chart spans the same clock
    (act,) = [p for p in plots if p["stacked"]]
    assert abs(act["chart"]["t"][-1] - t[-1]) < 2 * width + 0.05
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert dom.returncode == 0 and console == [], console
    assert re.search(rf'<body[^>]*data-rendered="{len(plots)}"', dom.stdout)
    assert f'id="{io["id"]}"' in dom.stdout and "read and write over time" in dom.stdout

"""perfweave report --html: one self-contained file that renders offline in headless
Chromium (Debian's chromium) without console errors, with the node timeline's charts
drawn, and with every string from the program escaped."""
import re
import shutil
import subprocess

import pytest

from harness import FLAVORS, PERFWEAVE

HOSTILE = "<img src=x onerror=alert(1)></script>&amp;"


def chromium(url, *extra):
    exe = shutil.which("chromium")
    if not exe:
        pytest.fail("chromium is not installed (make test installs it)")
    res = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                          *extra, url], capture_output=True, text=True, timeout=120)
    console = [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln]
    return res, console


def test_html_report_renders_offline(build, run_pw, tmp_path):
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "phases.c")
    r = run_pw(mpi.launch(3) + [prog, 300, HOSTILE],
               ["--node-interval", "50", "--counters", "perf::PAGE-FAULTS", "--sample"])
    out = tmp_path / "report.html"
    res = subprocess.run([PERFWEAVE, "report", "--html", str(out), str(r.exp)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    # self-contained: no resource fetched from anywhere
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', page)
    assert "uPlot" in page and HOSTILE not in page
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert dom.returncode == 0
    assert console == [], console                     # no errors, no messages at all
    assert re.search(r'<body[^>]*data-rendered="2"', dom.stdout)   # activity + rates
    assert dom.stdout.count("<canvas") == 2
    assert "<img" not in dom.stdout and "&lt;img src=x" in dom.stdout
    for text in ("Where the time goes", "phases.c:", "Advice", "communication-bound", "MPI call sites", "MPI_Sendrecv",
                 "Counters per call site",
                 "Node timeline", "absent: nvml"):
        assert text in dom.stdout
    shot = tmp_path / "report.png"
    chromium(out.as_uri(), f"--screenshot={shot}", "--window-size=1200,1400")
    assert shot.exists() and shot.stat().st_size > 20000


def test_html_of_a_corrupt_timeline_still_renders(build, run_pw, tmp_path):
    mpi = FLAVORS["openmpi"]
    prog = build(mpi, "phases.c")
    r = run_pw(mpi.launch(2) + [prog, 100])
    for p in (r.exp / "timeline").glob("*.json"):
        p.write_text("{broken")
    out = tmp_path / "r.html"
    res = subprocess.run([PERFWEAVE, "report", "--html", str(out), str(r.exp)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    dom, console = chromium(out.as_uri(), "--dump-dom")
    assert console == [] and 'data-rendered="0"' in dom.stdout and "not shown" in dom.stdout

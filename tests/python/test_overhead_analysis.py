"""analysis/overhead.py and report/overhead.py on runs stated as literals: the bootstrap's
interval, "not resolvable", the perturbation's distance, the text and the figure."""

import numpy as np
import pytest

from perfweave.analysis.overhead import COMPUTATION, bootstrap, shares, summarize, tvd
from perfweave.launch.overhead import Run, variants
from perfweave.errors import PerfweaveError
from perfweave.report.overhead import plot, svg, text


def facts(routine_ns, raw=1000, events=0, trace=0):
    return {
        "raw_bytes": raw,
        "allocated_bytes": raw + 96,
        "compressed_bytes": raw // 4,
        "compression": "gzip",
        "by_entry": {"profile.pwprof": raw - trace, **({"traces": trace} if trace else {})},
        "ranks": 2,
        "trace_bytes": trace,
        "trace_events": events,
        "routine_ns": routine_ns,
    }


def test_bootstrap_pairs_the_rounds():
    # every round's mode run takes exactly 1.5 x its bare run, whatever the round's load:
    # paired resampling gives an interval of width 0
    bare = [1.0, 2.0, 1.2, 3.0, 1.1]
    est, lo, hi = bootstrap([1.5 * b for b in bare], bare, lambda a, b: a / b)
    assert est == pytest.approx(1.5) and lo == pytest.approx(1.5) and hi == pytest.approx(1.5)
    # the difference of means: 10 ms added per round, exactly
    est, lo, hi = bootstrap([b + 0.01 for b in bare], bare, lambda a, b: a - b)
    assert (est, lo, hi) == pytest.approx((0.01, 0.01, 0.01))
    # noise: the interval holds the estimate and is as wide as the data allow
    rng = np.random.default_rng(1)
    mode = list(1.2 + rng.normal(0, 0.05, 20))
    est, lo, hi = bootstrap(mode, [1.0] * 20, lambda a, b: a / b)
    assert lo < est < hi and lo > 1.1 and hi < 1.3


def test_tvd_of_shares():
    p = shares({"a": 3.0, "b": 1.0})
    assert p == {"a": 0.75, "b": 0.25}
    assert tvd(p, p) == 0
    assert tvd(p, {"a": 0.25, "b": 0.75}) == pytest.approx(0.5)
    assert tvd({"a": 1.0}, {"b": 1.0}) == 1


def run(variant, round_, wall, rss=10240, routine=None, **kw):
    return Run(variant, round_, wall, rss, 20 << 20, facts(routine, **kw) if routine else {})


def test_summary_of_literal_runs():
    vs = variants(["profile", "trace"], ["env X=1"], "none")
    assert [v.name for v in vs] == ["bare", "profile", "trace", "env X=1"]
    a = {COMPUTATION: 6e8, "MPI_Send": 4e8}
    b = {COMPUTATION: 5e8, "MPI_Send": 5e8}
    runs = []
    for r, bare in enumerate([1.0, 1.02, 0.98]):
        runs += [
            run("bare", r, bare),
            run("profile", r, bare * 1.001, rss=11264, routine=a),
            run("trace", r, bare * 1.5, rss=20480, routine=b, events=100, trace=4000),
            run("env X=1", r, bare + 0.010),
        ]
    cal = {("bare", "mpi"): [3.0, 3.0, 3.0], ("profile", "mpi"): [18.0, 19.0, 20.0]}
    doc = summarize(["prog"], vs, runs, cal).to_json()
    by = {v["name"]: v for v in doc["variants"]}
    # 0.1 % is inside the bare runs' own 2 % spread: not resolvable
    assert doc["bare"]["spread"] == pytest.approx(0.02)
    assert not by["profile"]["resolvable"] and by["trace"]["resolvable"]
    assert by["trace"]["ratio"] == pytest.approx(1.5)
    assert by["env X=1"]["added_s"] == pytest.approx(0.010)
    assert by["trace"]["peak_rss_added_mib"] == pytest.approx(10)
    assert by["trace"]["bytes"]["bytes_per_event"] == 40
    assert by["trace"]["bytes"]["per_rank"] == 500
    assert by["trace"]["bytes"]["allocated"] == 1096
    assert by["trace"]["bytes"]["samples"] == 0 and by["trace"]["bytes"]["bytes_per_sample"] is None
    assert by["profile"]["ns_per_call"]["mpi"]["added_ns"] == pytest.approx(16)
    assert by["trace"]["ns_per_call"] == {}
    # the cheaper profile is the reference; trace moved 10 % of the time to MPI_Send
    assert doc["perturbation"]["reference"] == "profile"
    assert doc["perturbation"]["within_reference_tvd"] == 0
    assert by["trace"]["tvd_to_reference"] == pytest.approx(0.1)
    assert by["env X=1"]["tvd_to_reference"] is None and by["env X=1"]["bytes"] is None
    assert doc["notes"] and "3 rounds" in doc["notes"][0]
    lines = text(doc)
    assert "note: 3 rounds" in lines[-1]
    assert any(ln.split()[:2] == ["profile", "n.r."] for ln in lines)
    assert any("40.0 B/event" in ln for ln in lines)
    figure = svg(doc)
    assert figure.startswith("<svg") and figure.count("<rect") == 4 + 4 + 3


def test_variants_errors():
    with pytest.raises(PerfweaveError, match="unknown mode 'x'"):
        variants(["x"], [], "auto")
    with pytest.raises(PerfweaveError, match="nothing to compare"):
        variants([], [], "auto")
    with pytest.raises(PerfweaveError, match="unknown calibration"):
        variants(["profile"], [], "gpu")
    with pytest.raises(PerfweaveError, match="--compare"):
        variants([], ["env 'X"], "auto")
    vs = variants(["io", "trace"], ["t"], "auto", "--trace-buffer 65536")
    assert [v.calibrates for v in vs] == [[], ["io"], ["mpi"], ["io", "mpi"]]
    assert vs[2].words[-2:] == ["--trace-buffer", "65536"]


def test_plot_formats(tmp_path):
    """plot writes an SVG whatever is installed; another format needs matplotlib, and
    without it the error is one sentence."""
    vs = variants(["profile"], [], "none")
    runs = [run("bare", 0, 1.0), run("profile", 0, 1.1, routine={COMPUTATION: 1.0})]
    doc = summarize(["prog"], vs, runs, {}).to_json()
    plot(doc, tmp_path / "f.svg")
    assert (tmp_path / "f.svg").read_text().startswith(("<svg", "<?xml"))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(PerfweaveError, match="only an SVG"):
            plot(doc, tmp_path / "f.png")
    else:
        plot(doc, tmp_path / "f.png")
        assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"

"""perfweave boundness' analysis on runs stated as literals (numbers known by construction):
the slowdowns and their verdicts by the stated rule, the samples' binomial error widening
the rounds' interval, the heap sites' bound of being live during a routine, the result
written and read back as the dataset of its runs, the last-level cache read from a sysfs
tree, and the stressor's placement."""

import json
import math

import pytest

from perfweave.analysis import boundness as b
from perfweave.errors import PerfweaveError
from perfweave.launch import boundness as launch
from perfweave.launch.overhead import Run
from perfweave.readers.boundness import boundness_of, read_boundness


def facts(routines, cpu, samples=1000, heap_sites=()):
    """A run's facts: routines {name: cpu_s} (their share of samples: cpu_s / cpu)."""
    return {
        "cpu_s": cpu,
        "sampled_s": cpu,
        "samples": samples,
        "threads": 1,
        "cpu_estimated": False,
        "routines": {k: [v, v, round(samples * v / cpu)] for k, v in routines.items()},
        "heap_sites": list(heap_sites),
        "corunner": "done seconds 1.0 bytes 5e9 bytes_per_s 5e9 threads 1",
    }


def runs(rounds, heap_sites=()):
    """Baseline: triad 1 s, fma 1 s; beside the stressor: triad 2 s (+/- 2 %), fma 1 s."""
    out = []
    for i in range(rounds):
        wobble = 1 + 0.02 * (-1) ** i
        out.append(
            Run("baseline", i, 2.0, 0, 0, facts({"triad": 1.0, "fma": 1.0}, 2.0, 20000, heap_sites))
        )
        out.append(
            Run("stressor", i, 3.0, 0, 0, facts({"triad": 2.0 * wobble, "fma": 1.0}, 3.0, 20000))
        )
    return out


SETUP = {"machine": {"cores": [0, 1], "llc_bytes": 1 << 20}, "program_threads": 1}


def test_slowdowns_and_verdicts():
    res = b.summarize(["./p"], runs(5), SETUP)
    rows = {r["routine"]: r for r in res.to_json()["routines"]}
    assert rows["triad"]["slowdown"] == pytest.approx(2.0, rel=0.01)
    assert rows["fma"]["slowdown"] == pytest.approx(1.0)
    assert res.verdict("triad") == "bandwidth-bound"
    assert res.verdict("fma") == "compute-bound"
    assert rows["triad"]["slowdown_lo"] < 2.0 < rows["triad"]["slowdown_hi"]
    with pytest.raises(KeyError):
        res.verdict("absent")


def test_the_rule():
    assert b.verdict(1.5, 1.2, 1.8) == "bandwidth-bound"
    assert b.verdict(1.2, 1.12, 1.28) == "mixed"
    assert b.verdict(1.02, 0.95, 1.1) == "compute-bound"
    assert b.verdict(1.02, 0.7, 1.5) == "undetermined"  # too wide to tell
    assert b.verdict(float("nan"), 1, 1) == "undetermined"


def test_few_samples_widen_the_interval():
    """Rounds that agree exactly leave the samples' error alone: a share p of n samples,
    log variance (1 - p) / (n p) per variant."""
    est, lo, hi = b._interval([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [0.5, 0.5], [100, 100])
    half = b.Z * math.sqrt(2 * 0.5 / (100 * 0.5))
    assert est == 2.0
    assert lo == pytest.approx(2.0 * math.exp(-half))
    assert hi == pytest.approx(2.0 * math.exp(half))


def test_heap_sites_live_during_a_routine():
    site = {"where": "main (p.c:10)", "bytes": 1, "peak_bytes": 1, "byte_s": 1.0}
    sites = [{**site, "live_pct": 100.0}, {**site, "live_pct": 80.0}, {**site, "live_pct": 30.0}]
    # a record without timelines: the bound of the totals
    got = b._live_sites({"heap_sites": sites, "routine_live": None}, "triad", 50.0)
    # live all along: all of it; 80 % live, routine 50 %: at least 30 of its 50 %
    assert [s["live_during_pct_min"] for s in got] == [100.0, 60.0]
    # with timelines: measured, of the routine's samples (site 2 live during 40 of its 50,
    # site 0 during all; a routine with samples but no site live: none)
    measured = {"triad": [50, [[2, 40], [0, 50]]]}
    got = b._live_sites({"heap_sites": sites, "routine_live": measured}, "triad", 50.0)
    assert [(s["live_pct"], s["live_during_pct"]) for s in got] == [(100.0, 100.0), (30.0, 80.0)]
    assert all("live_during_pct_min" not in s for s in got)
    assert b._live_sites({"heap_sites": sites, "routine_live": measured}, "fma", 50.0) == []


def test_written_and_read_back_as_each_runs_dataset(tmp_path):
    sites = [
        {"where": "main (p.c:10)", "bytes": 8, "peak_bytes": 8, "byte_s": 2.0, "live_pct": 100.0}
    ]
    res = b.summarize(["./p"], runs(3, sites), SETUP, ["a lower frequency cap: none"])
    doc = res.to_json()
    (tmp_path / "boundness.json").write_text(json.dumps(doc))
    (tmp_path / "baseline-1").mkdir()
    (tmp_path / "elsewhere").mkdir()
    back = boundness_of(tmp_path / "baseline-1")
    assert back.to_json() == doc
    assert back.live_sites["triad"][0]["live_during_pct_min"] == 100.0
    assert boundness_of(tmp_path / "elsewhere") is None  # no run of it
    assert read_boundness(tmp_path).verdict("triad") == "bandwidth-bound"
    assert any("3 rounds" in n for n in doc["notes"])


def test_last_level_cache_from_sysfs(tmp_path):
    for index, level, size in (("index0", 1, "48K"), ("index2", 2, "2048K"), ("index3", 3, "300M")):
        d = tmp_path / "cpu0" / "cache" / index
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    assert launch.last_level_cache(tmp_path)[0] == 300 << 20
    assert launch.last_level_cache(tmp_path / "none") == (launch.FALLBACK_LLC, None)


def test_stressor_takes_the_cores_the_program_leaves():
    found = {"cores": [0, 1, 2, 3], "llc_bytes": 1 << 20, "llc_source": None, "cpufreq": False}
    st = launch.stressor(found, 1)
    assert st["cores"] == [1, 2, 3] and not st["shares_cores"]
    assert st["bytes"] == 4 << 20
    assert launch.stressor(found, 4)["cores"] == [3]  # none free: one, sharing
    assert launch.stressor(found, 4)["shares_cores"]
    with pytest.raises(PerfweaveError, match="has 4 cores"):
        launch.stressor(found, 1, 5)
    lines = launch.not_available(found, 1)
    assert any("no cpufreq" in t for t in lines) and any("half-packed" in t for t in lines)

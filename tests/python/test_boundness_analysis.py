"""perfweave boundness' analysis on runs stated as literals (numbers known by construction):
the slowdowns and their verdicts by the stated rule, the samples' binomial error widening
the rounds' interval, the heap sites' bound of being live during a routine, the result
written and read back as the dataset of its runs, the control (a reference triad that the
stressor does or does not slow) and what it does to the verdicts, the caches read from a
sysfs tree, and the stressor's and the control's placement."""

import json
import math

import pytest

from perfweave.analysis import boundness as b
from perfweave.errors import PerfweaveError
from perfweave.launch import boundness as launch
from perfweave.launch.overhead import Run
from perfweave.readers.boundness import boundness_of, read_boundness


def facts(routines, cpu, samples=1000, heap_sites=(), control=((1e-3, 2e-3), 0.05)):
    """A run's facts: routines {name: cpu_s} (their share of samples: cpu_s / cpu);
    control: the probe's triads' seconds per pass (over 6 and 12 MiB) and its FMA
    chain's seconds."""
    return {
        "cpu_s": cpu,
        "sampled_s": cpu,
        "samples": samples,
        "threads": 1,
        "cpu_estimated": False,
        "routines": {k: [v, v, round(samples * v / cpu)] for k, v in routines.items()},
        "heap_sites": list(heap_sites),
        "corunner": "done seconds 1.0 bytes 5e9 bytes_per_s 5e9 threads 1 control_bytes "
        f"{6 << 20},{12 << 20} control_passes 85,42 control_triad_s "
        f"{control[0][0]},{control[0][1]} control_fma_s {control[1]}",
    }


def runs(rounds, heap_sites=(), bite=1.5, triad=2.0):
    """Baseline: triad 1 s, fma 1 s; beside the stressor: triad `triad` s (+/- 2 %), fma 1
    s; the control's triads over 6 and 12 MiB 1 and 2 ms a pass alone, beside the
    stressor the first 1.01 x, the second `bite` x (+/- 1 %), its FMA chain 50 ms in
    both."""
    out = []
    for i in range(rounds):
        wobble = 1 + 0.02 * (-1) ** i
        ctl = ((1.01e-3, 2e-3 * bite * (1 + 0.01 * (-1) ** i)), 0.05)
        out.append(
            Run("baseline", i, 2.0, 0, 0, facts({"triad": 1.0, "fma": 1.0}, 2.0, 20000, heap_sites))
        )
        out.append(
            Run(
                "stressor",
                i,
                3.0,
                0,
                0,
                facts({"triad": triad * wobble, "fma": 1.0}, 1 + triad, 20000, (), ctl),
            )
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
    assert rows["fma"]["reason"] == rows["triad"]["reason"] == ""
    with pytest.raises(KeyError):
        res.verdict("absent")
    # the control bit: its reference triad over 12 MiB 1.5 x, the one over 6 MiB and its
    # FMA chain not slowed
    ctl = res.control
    assert ctl["bites"] and ctl["reason"] == "" and ctl["rounds"] == 5
    assert [t["bytes"] for t in ctl["triads"]] == [6 << 20, 12 << 20]
    assert [t["verdict"] for t in ctl["triads"]] == ["compute-bound", "bandwidth-bound"]
    assert ctl["triads"][0]["slowdown"] == pytest.approx(1.01)
    assert ctl["triad_slowdown"] == pytest.approx(1.5, rel=0.01) and ctl["bytes"] == 12 << 20
    assert ctl["triad_lo"] <= ctl["triad_slowdown"] <= ctl["triad_hi"]
    assert ctl["fma_slowdown"] == pytest.approx(1.0)
    doc = res.to_json()
    assert doc["control"] == ctl
    assert doc["runs"][0]["control"] == {
        "bytes": [6 << 20, 12 << 20],
        "triad_s": [1e-3, 2e-3],
        "fma_s": 0.05,
    }
    assert doc["runs"][0]["stressor"] == {} and doc["runs"][-1]["stressor"]["bytes_per_s"] == 5e9


def test_a_control_that_does_not_bite_leaves_the_unslowed_undetermined():
    """The reference triad 1.03 x beside the stressor: the experiment had no power; the
    FMA chain, not slowed, is undetermined for that reason, not compute-bound; a routine
    slowed 2 x is still judged by its own interval, one slowed 1.2 x too."""
    res = b.summarize(["./p"], runs(5, bite=1.03), SETUP)
    rows = {r["routine"]: r for r in res.to_json()["routines"]}
    assert not res.control["bites"]
    assert res.control["triad_slowdown"] == pytest.approx(1.03, rel=0.01)
    reason = res.control["reason"]
    assert reason.startswith("the stressor did not load the memory system: no reference triad")
    assert "over 6 MiB to 12 MiB" in reason and "12 MiB, ran 1.03 x" in reason
    assert "\n" not in reason
    assert res.verdict("fma") == "undetermined" and rows["fma"]["reason"] == reason
    assert res.verdict("triad") == "bandwidth-bound" and rows["triad"]["reason"] == ""
    assert reason in res.notes
    assert b.summarize(["./p"], runs(5, bite=1.03, triad=1.2), SETUP).verdict("triad") == "mixed"
    # without a control (a result of runs whose stressor had no probe): the rule alone
    old = runs(5)
    for r in old:
        r.facts["corunner"] = "done seconds 1.0 bytes 5e9 bytes_per_s 5e9 threads 1"
    res = b.summarize(["./p"], old, SETUP)
    assert res.control is None and res.verdict("fma") == "compute-bound"
    assert any("no control ran" in n for n in res.notes)


def test_judged():
    ctl = {"bites": False, "reason": "no power"}
    assert b.judged(1.02, 0.95, 1.1, ctl) == ("undetermined", "no power")
    assert b.judged(1.02, 0.95, 1.1, {"bites": True, "reason": ""}) == ("compute-bound", "")
    assert b.judged(1.02, 0.7, 1.5, None) == ("undetermined", b.TOO_WIDE)
    assert b.judged(1.5, 1.2, 1.8, ctl) == ("bandwidth-bound", "")


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


def sysfs(root, caches):
    for index, level, size in caches:
        d = root / "cpu0" / "cache" / index
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    return root


def test_caches_from_sysfs(tmp_path):
    intel = sysfs(
        tmp_path / "i", (("index0", 1, "48K"), ("index2", 2, "2048K"), ("index3", 3, "300M"))
    )
    assert launch.last_level_cache(intel)[0] == 300 << 20
    assert launch.own_cache(intel) == 2 << 20
    assert launch.last_level_cache(tmp_path / "none") == (launch.FALLBACK_LLC, None)
    assert launch.own_cache(tmp_path / "none") == launch.FALLBACK_LLC // 16
    # the control's triads: arrays of the L2 each, sqrt(2) larger each time while the
    # three fit the last-level cache (the Intel test VM: 3 x 2 to 3 x 91 MiB; an AMD
    # CCX's 32 MiB L3 with 1 MiB L2s: 3 x 1 to 3 x 8 MiB)
    found = {"own_cache_bytes": launch.own_cache(intel), "llc_bytes": 300 << 20}
    mib = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91)
    assert launch.control_arrays(found) == [m << 20 for m in mib]
    amd = {"own_cache_bytes": 1 << 20, "llc_bytes": 32 << 20}
    assert launch.control_arrays(amd) == [m << 20 for m in (1, 2, 3, 4, 6, 8)]
    assert launch.control_arrays({"own_cache_bytes": 4 << 20, "llc_bytes": 16 << 20}) == [4 << 20]
    assert launch.control_arrays({"own_cache_bytes": 0, "llc_bytes": 0}) == [1 << 20]


def test_stressor_takes_the_cores_the_program_leaves():
    found = {
        "cores": [0, 1, 2, 3],
        "llc_bytes": 1 << 20,
        "llc_source": None,
        "own_cache_bytes": 1 << 18,
        "cpufreq": False,
    }
    st = launch.stressor(found, 1)
    assert st["cores"] == [1, 2, 3] and not st["shares_cores"]
    assert st["bytes"] == 4 << 20
    # the control probes on the core left to the program, alone and beside the stressor
    ctl = st["control"]
    assert ctl["core"] == 0 and ctl["bytes"] == [3 << 20]
    probe = ["--probe", str(3 << 20), "--probe-core", "0"]
    assert st["command"][-4:] == probe and ctl["command"][1:] == ["--threads", "0", *probe]
    alone, beside = launch.variants(st)
    assert alone.corunner == ctl["command"] and beside.corunner == st["command"]
    assert alone.words == beside.words
    assert launch.stressor(found, 1, None, 3 << 12)["bytes"] == 3 << 12
    assert launch.stressor(found, 4)["cores"] == [3]  # none free: one, sharing
    assert launch.stressor(found, 4)["shares_cores"]
    assert launch.stressor(found, 4)["control"]["core"] == 0  # a core the stressor leaves
    lone = launch.stressor({**found, "cores": [0]}, 1)  # one core: the probe not pinned
    assert lone["control"]["core"] is None and "--probe-core" not in lone["command"]
    with pytest.raises(PerfweaveError, match="has 4 cores"):
        launch.stressor(found, 1, 5)
    lines = launch.not_available(found, 1)
    assert any("no cpufreq" in t for t in lines) and any("half-packed" in t for t in lines)

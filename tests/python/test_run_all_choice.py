"""`perfweave run --all` (cli/run_all.py): the parts it turns on come from options.json's
"all" entries; the budget drops the costliest first; options on the line win; a part
whose source is absent is left out with the probe's reason. And the correlation per
interval (analysis/correlate.py) on models built from literals, whose numbers are known
by construction."""

import numpy as np
import pytest

from perfweave import options
from perfweave.analysis.correlate import correlate, intervals_of
from perfweave.cli import run_all
from perfweave.errors import PerfweaveError
from perfweave.model.io import IoProfile
from perfweave.model.samples import ProcessSamples
from perfweave.model.timeline import NodeTimeline


def _probe(available):
    def probe(name, cache):
        ok = available.get(name, True)
        return {"source": name, "available": ok, "detail": f"{name} here", "why": f"no {name}"}

    return probe


def _choose(given=(), budget=None, available=None):
    values = {o["name"]: o["default"] for o in options.spec()}
    record = run_all.choose(options.spec(), values, set(given), budget, _probe(available or {}))
    return values, {p["option"]: p for p in record["components"]}, record


def test_every_declared_part_is_turned_on_when_supported():
    values, parts, record = _choose()
    declared = [o for o in options.spec() if o.get("all")]
    assert set(parts) == {o["name"] for o in declared}
    for o in declared:
        assert values[o["name"]] == o["all"]["on"] and parts[o["name"]]["on"]
    assert values["trace"] is True and values["io"] is True
    expected = sum(o["all"]["cost_pct"] for o in declared)
    assert record["expected_overhead_pct"] == pytest.approx(expected)
    # the node timeline's probes are recorded (RAPL present or why not)
    assert set(parts["node_interval"]["found"]) >= {"rapl", "pcp", "nvml"}


def test_an_absent_source_leaves_its_part_out_with_the_reason():
    values, parts, _ = _choose(available={"papi": False})
    assert values["counters"] == "" and not parts["counters"]["on"]
    assert parts["counters"]["why"] == "papi: no papi"


def test_the_budget_drops_the_costliest_first_and_the_line_wins():
    declared = {o["name"]: o["all"] for o in options.spec() if o.get("all")}
    total = sum(a["cost_pct"] for a in declared.values())
    costliest = max(declared, key=lambda n: declared[n]["cost_pct"])
    budget = total - declared[costliest]["cost_pct"]
    values, parts, record = _choose(budget=budget)
    assert not parts[costliest]["on"] and "budget" in parts[costliest]["why"]
    assert values[costliest] == declared[costliest]["off"]
    assert record["expected_overhead_pct"] <= budget
    assert sum(p["on"] for p in parts.values()) == len(declared) - 1
    # given on the line: kept, whatever the budget
    values, parts, _ = _choose(given={costliest}, budget=0)
    assert parts[costliest]["why"] == "as given on the line"
    assert all(not p["on"] for n, p in parts.items() if n != costliest and p["cost_pct"] > 0)


def test_no_trace_on_the_line_wins_over_all():
    values, parts, _ = _choose(given={"trace"})
    default = next(o for o in options.spec() if o["name"] == "trace")["default"]
    assert values["trace"] == default and parts["trace"]["why"] == "as given on the line"


@pytest.mark.parametrize(
    "text, value", [("5%", 5.0), ("5", 5.0), (" 2.5 % ", 2.5), ("", None), ("0", 0.0)]
)
def test_budget_values(text, value):
    assert run_all.parse_budget(text) == value


@pytest.mark.parametrize("text", ["five", "-1", "5%%", "nan"])
def test_budget_errors(text):
    with pytest.raises(PerfweaveError):
        run_all.parse_budget(text)


def test_the_options_given_on_a_line():
    assert options.given(["--all", "--no-trace", "-o", "x", "--", "prog", "--io"]) == {
        "all",
        "trace",
        "output",
    }
    assert options.given(["--counters=perf::TASK-CLOCK", "--node-int", "5", "prog"]) == {
        "counters",
        "node_interval",
    }
    assert options.given(["-oexp", "--tr", "prog"]) == {"output"}  # --tr: ambiguous
    assert options.given([]) == set()


def _interval(rank, name, t0, t1):
    return {"rank": rank, "thread": 0, "name": name, "kind": "phase", "depth": 0}, t0, t1


def test_correlation_of_literals():
    ms = 1_000_000
    iv = intervals_of(
        [
            {"rank": 0, "thread": 0, "name": "a", "kind": "phase", "depth": 0,
             "t_begin": 0, "t_end": 100 * ms},
            {"rank": 0, "thread": 0, "name": "b", "kind": "phase", "depth": 0,
             "t_begin": 100 * ms, "t_end": 200 * ms},
        ]
    )  # fmt: skip
    # samples every 1 ms: 60 compute and 40 in MPI in a, 100 in MPI-IO in b
    acts = ["compute"] * 60 + ["mpi_coll"] * 40 + ["mpi_file"] * 100
    ps = ProcessSamples.from_literal(
        [{"frames": [], "t": (i + 1) * ms - 1, "activity": a, "counters": [10 * i]}
         for i, a in enumerate(acts)],
        counters=["perf::PAGE-FAULTS"], host="h",
    )  # fmt: skip
    io = IoProfile.from_literal(
        processes=[{"rank": 0, "host": "h"}],
        files=[("/f", 0, False)],
        records=[],
        segments=[
            {"process": 0, "rank": 0, "file": 0, "layer": "posix", "op": "write",
             "t0_ns": 150 * ms, "t1_ns": 160 * ms, "bytes": 4096},
            {"process": 0, "rank": 0, "file": 0, "layer": "posix", "op": "read",
             "t0_ns": 90 * ms, "t1_ns": 110 * ms, "bytes": 100},
        ],
    )  # fmt: skip
    tl = NodeTimeline(
        "h",
        {},
        [{"source": "rapl", "name": "package-0", "unit": "J", "kind": "counter"}],
        np.array([0, 200 * ms]),
        np.array([[0.0], [20.0]]),
    )
    res = correlate(iv, samples=[ps], io=io, timelines=[tl])
    a, b = res.per_rank
    assert a["wall_s"] == pytest.approx(0.1) and a["samples"] == 100
    assert a["compute_s"] == pytest.approx(0.06) and a["mpi_s"] == pytest.approx(0.04)
    assert b["io_s"] == pytest.approx(0.02)  # 10 ms write + 10 ms of the read
    assert a["io_s"] == pytest.approx(0.01)
    assert b["io_bytes_written"] == 4096 and b["io_bytes_read"] == 0
    assert a["io_bytes_read"] == 100
    assert a["energy_j"] == pytest.approx(10.0) and b["energy_j"] == pytest.approx(10.0)
    assert np.isnan(a["wait_s"])
    c = res.counters
    assert c["value"][c["name"] == "a"].tolist() == [990.0]
    j = res.to_json()
    assert [x["name"] for x in j["intervals"]] == ["a", "b"]
    assert j["intervals"][0]["counters"]["perf::PAGE-FAULTS"]["mean"] == 990.0
    assert "absent" in j["sources"]["wait_s"]


def test_a_budget_without_all_is_one_line_and_status_2(capsys, tmp_path):
    from perfweave.cli import main

    assert main(["run", "-o", str(tmp_path / "e"), "--budget", "5", "--", "true"]) == 2
    assert capsys.readouterr().err == "perfweave: error: --budget applies to --all only\n"
    assert main(["run", "--all", "--budget", "x", "--", "true"]) == 2
    assert "not a percentage" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()

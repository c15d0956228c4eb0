"""perfweave compare on two programs' runs whose differences are known by construction
(programs/compare_work.c): solve() does twice the work in B (the program's own clocks
say how long it took), only_here() runs in B only, and the MPI_Sendrecv of exchange()
moves three times the bytes in B (exact). Each side is run twice, for the test across
repeated experiments. The callpath table the exports share is checked against
`perfweave report --json` (the MPI profile's exact figures, the samples' call tree)."""

import json
import math
import re
import subprocess

import numpy as np
import pytest

import perfweave
from perfweave import api
from perfweave.analysis.compare import welch
from perfweave.analysis.io import pattern_of
from harness import PERFWEAVE, run_with_stdin_open, share_bound

RANKS = 3
STEPS = 10  # compare_work.c
COUNT_A, COUNT_B = 1000, 3000  # doubles per MPI_Sendrecv


def _pw(*args):
    """perfweave ARGS, its output captured."""
    return subprocess.run([PERFWEAVE, *args], capture_output=True, text=True, timeout=300)


def _clocks(stdout):
    """{rank: (solve_s, only_s)} of the program's lines."""
    out = {}
    for m in re.finditer(r"rank (\d+) solve_s ([\d.]+) only_s ([\d.]+)", stdout):
        out[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    assert len(out) == RANKS, stdout
    return out


@pytest.fixture(scope="module")
def runs(mpi, build, tmp_path_factory):
    """Two runs of A (factor 1, COUNT_A, no only_here) and two of B (factor 2, COUNT_B,
    only_here), each writing its rank's file in one directory: {"A": [(path, clocks)],
    "B": [...], "files": the directory}."""
    exe = build(mpi, "compare_work.c")
    tmp = tmp_path_factory.mktemp(f"compare-{mpi.name}")
    files = tmp / "files"  # one directory for both sides: the files' keys are their paths
    files.mkdir()
    out = {}
    for side, args in (("A", (1, COUNT_A, 0, files)), ("B", (2, COUNT_B, 1, files))):
        for k in range(2):
            exp = tmp / f"{side}{k}"
            cmd = [PERFWEAVE, "run", "-o", str(exp), "--io", "--", *mpi.launch(RANKS), str(exe)]
            proc = run_with_stdin_open(cmd + [str(a) for a in args], timeout=180)
            assert proc.returncode == 0, proc.stderr
            out.setdefault(side, []).append((exp, _clocks(proc.stdout)))
    out["files"] = files
    return out


def _row(df, key):
    rows = df[df["key"] == key]
    assert len(rows) == 1, (key, list(df["key"]))
    return rows.iloc[0]


def _sampled(path):
    """The experiment's samples (count) and sampled seconds."""
    s = perfweave.open(path).samples()
    return len(s), float(s["seconds"].sum())


def test_doubled_routine_and_a_routine_of_one_run(runs):
    (a, ca), (b, cb) = runs["A"][0], runs["B"][0]
    df = perfweave.compare(str(a), str(b), by="callpath", metric="time")
    assert {"key", "a", "b", "delta", "ratio", "p_value", "regression", "only_in"} <= set(df)

    def subtree(col, prefix):  # the exclusive rows of a subtree sum to its inclusive time
        rows = df[df["key"].str.startswith(prefix)]
        return float(rows[col].fillna(0).sum())

    for col, path, clocks in (("a", a, ca), ("b", b, cb)):
        truth = sum(s for s, _ in clocks.values())
        n, total = _sampled(path)
        bound = share_bound(100 * truth / total, n) / 100 * total
        assert abs(subtree(col, "main/solve") - truth) <= bound, (col, truth, bound)
    # the same from the routine's inclusive time
    inc = perfweave.compare(str(a), str(b), by="routine", metric="time", inclusive=True)
    solve = _row(inc, "solve")
    for col in ("a", "b"):
        assert solve[col] == pytest.approx(subtree(col, "main/solve"), rel=1e-12)
    spin = _row(df, "main/solve/spin")
    assert spin["regression"] and spin["only_in"] == "", dict(spin)
    assert spin["ratio"] > 1 + max(0.05, 3 * spin["sigma"])
    assert spin["p_value"] < 0.05, dict(spin)  # every rank's time doubled
    assert spin["test"] == "ranks"

    # only_here: only in B, not a 0 in A
    only = _row(df, "main/only_here/spin")
    assert only["only_in"] == "B" and math.isnan(only["a"]) and math.isnan(only["delta"])
    truth = sum(o for _, o in cb.values())
    n, total = _sampled(b)
    bound = share_bound(100 * truth / total, n) / 100 * total
    assert abs(subtree("b", "main/only_here") - truth) <= bound, (truth, bound)
    assert not df[df["key"].str.startswith("main/only_here")]["regression"].any()


def test_message_size_change_is_exact(runs):
    (a, _), (b, _) = runs["A"][0], runs["B"][0]
    for by in ("callsite", "mpi-call", "callpath"):
        df = perfweave.compare(str(a), str(b), by=by, metric="bytes_sent")
        rows = df[df["key"].str.contains("MPI_Sendrecv")]
        assert len(rows) == 1, (by, list(df["key"]))
        r = rows.iloc[0]
        assert r["a"] == RANKS * STEPS * COUNT_A * 8
        assert r["delta"] == RANKS * STEPS * (COUNT_B - COUNT_A) * 8
        assert r["ratio"] == COUNT_B / COUNT_A and r["regression"]
        if by == "callsite":  # the caller's function, file and line; no address
            assert re.fullmatch(r"MPI_Sendrecv at exchange \(compare_work\.c:\d+\)", r["key"])
    # the program's writes: STEPS of COUNT doubles per rank, each rank its file out.R
    files = perfweave.compare(str(a), str(b), by="file", metric="bytes_written")
    (pattern,) = pattern_of([str(runs["files"] / "out.0")])  # the report's: digits as #
    r = _row(files, f"{pattern} (posix)")
    assert r["a"] == RANKS * STEPS * COUNT_A * 8 and r["ratio"] == COUNT_B / COUNT_A
    assert r["a_ranks"] == r["b_ranks"] == RANKS
    visits = perfweave.compare(str(a), str(b), by="mpi-call", metric="visits")
    r = _row(visits, "MPI_Sendrecv")
    assert r["a"] == r["b"] == RANKS * STEPS and r["delta"] == 0 and not r["regression"]


def test_repeated_experiments(runs):
    a = [str(p) for p, _ in runs["A"]]
    b = [str(p) for p, _ in runs["B"]]
    res = api.compare(a, b, by="routine", metric="time", result=True)
    rows = {r["key"]: r for r in res.to_json()["comparisons"][0]["rows"]}
    spin = rows["spin"]
    assert spin["test"] == "experiments"
    # the side's value is the mean of its experiments' sums: recomputed from each alone
    single = [
        perfweave.compare(x, y, by="routine", metric="time").set_index("key") for x, y in zip(a, b)
    ]
    assert spin["a"] == pytest.approx(np.mean([s.loc["spin", "a"] for s in single]))
    assert spin["b"] == pytest.approx(np.mean([s.loc["spin", "b"] for s in single]))
    ta = [s.loc["spin", "a"] for s in single]
    tb = [s.loc["spin", "b"] for s in single]
    assert spin["sigma"] == pytest.approx(np.std(ta, ddof=1) / np.mean(ta))
    # the test is across the experiments' values (two a side: too few for a small p
    # with Welch's degrees of freedom near 1; tests/python checks welch() itself)
    assert spin["p_value"] == pytest.approx(welch(ta, tb), rel=1e-9)
    assert spin["regression"] == (spin["ratio"] > 1 + max(0.05, 3 * spin["sigma"]))


def test_callpath_table_sums_to_the_report(runs):
    """analysis/callpaths.py's per-rank values against `perfweave report --json`: the
    MPI metrics exactly, the sampled time as the call tree's shares."""
    from perfweave.analysis.callpaths import callpath_metrics
    from perfweave.readers.experiment import open_experiment

    path = runs["B"][0][0]
    cm = callpath_metrics(open_experiment(path))
    res = _pw("report", "--json", "--top", "1000", str(path))
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    m = rep["mpi_profile"]
    sites = m["callsites"]
    assert list(cm.ranks) == list(range(RANKS))
    assert cm.metrics["visits"].values.sum() == sum(s["calls"] for s in sites)
    assert cm.metrics["bytes_sent"].values.sum() == sum(s["bytes_sent"] for s in sites)
    assert cm.metrics["bytes_recv"].values.sum() == sum(s["bytes_recv"] for s in sites)
    for j, r in enumerate(cm.ranks):
        per_rank = sum(s["per_rank_time_s"].get(str(r), 0.0) for s in sites)
        assert cm.metrics["mpi_time"].values[:, j].sum() == pytest.approx(per_rank, rel=1e-12)
    # MPI calls are leaves named after their function, under the sampled path
    paths = cm.paths()
    i = paths.index(("main", "exchange", "MPI_Sendrecv"))
    assert cm.metrics["visits"].values[i].tolist() == [STEPS] * RANKS
    # sampled time: every call-tree node's shares of the samples (the report's %)
    time = cm.metrics["time"].values
    total = time.sum()
    inc = cm.inclusive("time")
    tree = rep["samples"]["call_tree"]
    node_path = {}
    for n in tree:
        node_path[n["id"]] = (node_path[n["parent"]] if n["parent"] is not None else ()) + (
            n["name"],
        )
    for n in tree:
        k = paths.index(node_path[n["id"]])
        assert 100 * time[k].sum() / total == pytest.approx(n["exclusive_pct"], abs=1e-9)
        assert 100 * inc[k].sum() / total == pytest.approx(n["inclusive_pct"], abs=1e-9)


def test_text_json_and_html(runs, tmp_path):
    (a, _), (b, _) = runs["A"][0], runs["B"][0]
    page = tmp_path / "cmp.html"
    res = _pw("compare", "--json", "--html", str(page), str(a), str(b))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["format"] == "perfweave-compare" and doc["by"] == "callpath"
    split = [s["split"]["pct"] for s in doc["sides"]]
    assert all(set(s) >= {"compute", "MPI", "I/O"} for s in split)
    keys = [r["key"] for r in doc["comparisons"][0]["rows"]]
    assert "main/solve/spin" in keys and "main/only_here/spin" in keys
    html = page.read_text()
    assert "main/solve/spin" in html and "only in B" in html
    # three sides: each against the baseline; B's second run also has only_here
    b2 = runs["B"][1][0]
    three = perfweave.compare(str(a), str(b), str(b2), by="callpath")
    assert sorted(set(three["side"])) == ["B", "C"]
    only = three[three["key"] == "main/only_here/spin"].set_index("side")
    assert only.loc["B", "only_in"] == "B" and only.loc["C", "only_in"] == "C"
    spin = three[three["key"] == "main/solve/spin"].set_index("side")
    assert spin.loc["B", "a"] == spin.loc["C", "a"]  # one baseline
    text = _pw("compare", str(a), str(b))
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if "main/solve/spin " in x + " ")
    assert "REGRESSION" in line

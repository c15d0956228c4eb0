"""perfweave.open on experiments of real runs: the DataFrames against ground truth built
into the programs (a split of wall time between two functions that the program
measures itself, one rank working twice as long as the others before a barrier) and
against `perfweave report --json` of the same experiment (the same numbers, since both
come from the same analysis)."""

import subprocess

import pytest

import perfweave
from harness import PERFWEAVE, reported, share_bound

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def test_seventy_thirty_as_dataframes(build, run_pw):
    prog = build(None, "burn7030.c")
    r = run_pw([prog, 2], SAMPLE)
    heavy_s, light_s, cpu_s = reported(r.proc, "heavy", "light", "cpu")
    heavy_pct, light_pct = (100 * x / (heavy_s + light_s) for x in (heavy_s, light_s))
    exp = perfweave.open(r.exp)
    s = exp.samples()
    # a sample per 2 ms of the program's CPU time at least (test_sampling.py)
    assert len(s) >= 0.7 * cpu_s / 0.002 and (s["leaf"] == "spin").mean() > 0.9
    inc = exp.functions(inclusive=True).set_index("name")
    # shares of wall time against the program's own measure (70/30 on an idle core)
    assert abs(inc.loc["heavy", "pct"] - heavy_pct) <= share_bound(heavy_pct, len(s))
    assert abs(inc.loc["light", "pct"] - light_pct) <= share_bound(light_pct, len(s))
    tree = exp.call_tree().set_index("path")
    assert abs(tree.loc["main/heavy", "inclusive_pct"] - heavy_pct) <= share_bound(
        heavy_pct, len(s)
    )
    assert (
        tree.loc["main/heavy/spin", "exclusive_pct"]
        > heavy_pct - share_bound(heavy_pct, len(s)) - 6
    )
    assert tree.loc["main", "compute_pct"] > 99
    # a share is of the samples' seconds (the time each stands for), not of their count
    in_heavy = s["stack"].str.startswith("main;heavy;spin")
    assert s.loc[in_heavy, "seconds"].sum() / s["seconds"].sum() == pytest.approx(
        tree.loc["main/heavy/spin", "inclusive_pct"] / 100, abs=1e-9
    )
    # seconds per node: the root stands for the whole run (2 s and the last call's end,
    # less one interval or so before the first sample), heavy for its measured time
    pr = exp.call_tree_per_rank().groupby("node")["seconds"].sum()  # all activities
    root = pr.loc[int(tree.loc["main", "id"])]
    assert abs(root - (heavy_s + light_s)) < 0.05, (root, heavy_s + light_s)
    heavy = pr.loc[int(tree.loc["main/heavy", "id"])]
    assert abs(heavy - heavy_s) < share_bound(heavy_pct, len(s)) / 100 * root, (heavy, heavy_s)
    # the program's lines, but for the dynamic linker binding fprintf and getrusage after
    # the loop (ld.so's dl-lookup.c: a sample there, when the process lost its core
    # during the binding on a busy machine, stands for the wait)
    lines = exp.lines()
    own = lines["file"] == "burn7030.c"
    assert (lines["line"] > 0).all() and lines.loc[own, "pct"].sum() > 95, lines
    assert set(lines.loc[~own, "file"]) <= {"dl-lookup.c", "dl-runtime.c"}, lines
    # the same numbers as the JSON report of the command line
    sm = r.report()["samples"]
    assert len(s) == sm["samples"]
    assert exp.call_tree()["inclusive_pct"].tolist() == pytest.approx(
        [n["inclusive_pct"] for n in sm["call_tree"]]
    )
    assert exp.call_tree()["name"].tolist() == [n["name"] for n in sm["call_tree"]]
    assert exp.functions()["pct"].tolist() == pytest.approx([f["pct"] for f in sm["functions"]])
    assert exp.lines()["name"].tolist() == [f["name"] for f in sm["lines"]]


def test_mpi_run_as_dataframes(mpi, build, run_pw):
    prog = build(mpi, "imbalance.c")
    r = run_pw(mpi.launch(3) + [prog], SAMPLE + ["--trace"])
    res = subprocess.run(
        [PERFWEAVE, "analyze", str(r.exp)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    rep = r.report()
    exp = perfweave.open(r.exp)
    # samples: rank 1 works 1.6 s, ranks 0 and 2 0.8 s, of each process's ~2 s sampled
    # life (more with a slow MPI start-up on a busy machine): rank 1's share twice theirs
    tree = exp.call_tree()
    work_id = int(tree.loc[tree["name"] == "work", "id"].iloc[0])
    pr = exp.call_tree_per_rank()
    work = pr[pr["node"] == work_id].groupby("rank")["pct"].sum()
    assert sorted(work.index) == [0, 1, 2]
    assert work[1] > 1.6 * max(work[0], work[2]) and work[1] - max(work[0], work[2]) > 20
    # the per-rank table is what the tree's min/mean/max summarise
    [jwork] = [n for n in rep["samples"]["call_tree"] if n["id"] == work_id]
    assert (work.min(), work.mean(), work.max()) == pytest.approx(
        (jwork["per_rank_pct"]["min"], jwork["per_rank_pct"]["mean"], jwork["per_rank_pct"]["max"])
    )
    # seconds: estimated from each process's samples (samples taken late on a busy
    # machine make them rough: the ratio is checked, not the values)
    w = pr[pr["node"] == work_id].groupby("rank")["seconds"].sum()
    assert w[1] > 1.5 * max(w[0], w[2]), w
    # the call sites: the same as the JSON report; the per-rank table sums to them
    sites = exp.mpi_callsites()
    js = rep["mpi_profile"]["callsites"]
    assert sites["id"].tolist() == [c["id"] for c in js]
    assert sites["time_s"].tolist() == pytest.approx([c["time_s"] for c in js])
    assert sites["calls"].tolist() == [c["calls"] for c in js]
    per = exp.mpi_callsites(per_rank=True).groupby("id")["time_s"].sum()
    assert per.reindex(sites["id"]).tolist() == pytest.approx(sites["time_s"].tolist())
    [barrier] = sites[sites["function"] == "MPI_Barrier"].to_dict("records")
    assert barrier["calls"] == 3 * 4 and barrier["file"].endswith("imbalance.c")
    ranks = exp.mpi_ranks().set_index("rank")
    assert ranks["mpi_s"].tolist() == pytest.approx(
        [p["mpi_s"] for p in rep["mpi_profile"]["per_rank"]]
    )
    # wait states: ranks 0 and 2 wait 4 x 0.2 s for rank 1 at the barrier (less when a
    # rank busy-polling on the shared cores leaves a barrier late: the tests of
    # tests/runtime/test_waitstates.py checks the values themselves; here: who waits)
    ws = exp.wait_states()
    bw = ws[ws["metric"] == "mpi_barrier_wait"].groupby("rank")["value"].sum()
    assert 0.3 < bw[0] < 1.0 and 0.3 < bw[2] < 1.0 and bw.get(1, 0) < 0.05, bw
    assert rep["wait_states"]["patterns"][0]["id"] == "mpi_barrier_wait"
    assert bw.sum() == pytest.approx(rep["wait_states"]["patterns"][0]["time_s"])
    # the node timeline: a counter's increase over the run is the report's total
    tl = exp.timeline()
    node = rep["node_timeline"]["nodes"][0]
    counted = [s for s in node["series"] if s["kind"] == "counter" and s["total"]]
    assert counted
    for s in counted[:5]:
        v = tl[(tl["source"] == s["source"]) & (tl["series"] == s["name"])]["value"].dropna()
        assert v.iloc[-1] - v.iloc[0] == pytest.approx(s["total"]), s

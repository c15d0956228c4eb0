"""perfweave.open on experiments of real runs: the DataFrames against ground truth built
into the programs (a split of wall time between two functions that the program
measures itself, one rank working twice as long as the others before a barrier) and
against `perfweave report --json` of the same experiment (the same numbers, since both
come from the same analysis)."""

import os
import subprocess

import pytest

import perfweave
from harness import PERFWEAVE, outside_share, reported, sampled_life, share_bound
from perfweave.readers.samples import read_samples

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def test_seventy_thirty_as_dataframes(build, run_pw):
    prog = build(None, "burn7030.c")
    r = run_pw([prog, 2], SAMPLE)
    heavy_s, light_s, cpu_s = reported(r.proc, "heavy", "light", "cpu")
    life, _ = sampled_life(r.exp)
    # shares of the sampler's life by the program's clock (70/30 of the loop on an idle
    # core); what that clock did not cover: its start-up, binding and calling fprintf and
    # getrusage after the loop, its exit
    heavy_pct, light_pct = (100 * x / life for x in (heavy_s, light_s))
    outside = outside_share(r.exp, heavy_s + light_s)
    exp = perfweave.open(r.exp)
    s = exp.samples()
    # a sample per 2 ms of the program's CPU time at least (test_sampling.py), the loop's
    # time at spin and the clock reads it makes (now)
    assert len(s) >= 0.7 * cpu_s / 0.002
    in_loop = s.loc[s["leaf"].isin(["spin", "now"]), "seconds"].sum() / s["seconds"].sum()
    assert 100 * in_loop >= 100 - outside - share_bound(100 - outside, len(s)), (in_loop, outside)
    inc = exp.functions(inclusive=True).set_index("name")
    # shares of wall time against the program's own measure
    assert abs(inc.loc["heavy", "pct"] - heavy_pct) <= share_bound(heavy_pct, len(s))
    assert abs(inc.loc["light", "pct"] - light_pct) <= share_bound(light_pct, len(s))
    tree = exp.call_tree().set_index("path")
    assert abs(tree.loc["main/heavy", "inclusive_pct"] - heavy_pct) <= share_bound(
        heavy_pct, len(s)
    )
    # heavy's time at its leaves: spin and the clock reads spin makes
    leaves = tree.loc[["main/heavy/spin", "main/heavy/spin/now"], "exclusive_pct"].sum()
    assert leaves > heavy_pct - share_bound(heavy_pct, len(s)), tree
    # computing but for what the program does outside its loop (printing is I/O)
    assert tree.loc["main", "compute_pct"] >= 100 - outside - share_bound(100 - outside, len(s))
    # a share is of the samples' seconds (the time each stands for), not of their count
    in_heavy = s["stack"].str.startswith("main;heavy;spin")
    assert s.loc[in_heavy, "seconds"].sum() / s["seconds"].sum() == pytest.approx(
        tree.loc["main/heavy/spin", "inclusive_pct"] / 100, abs=1e-9
    )
    # seconds per node: the root (main) stands for the loop and what main does after it,
    # at most the sampler's life; the time before the first sample, which stands for one
    # interval (it has no previous one), is nobody's
    pr = exp.call_tree_per_rank().groupby("node")["seconds"].sum()  # all activities
    root = pr.loc[int(tree.loc["main", "id"])]
    interval = 0.002 * 1.5  # the longest interval between two samples of a running thread
    first = s["time_s"].min()
    assert heavy_s + light_s - first - interval < root < life + interval, (root, first, life)
    heavy = pr.loc[int(tree.loc["main/heavy", "id"])]
    assert abs(heavy - heavy_s) < share_bound(heavy_pct, len(s)) / 100 * root, (heavy, heavy_s)
    # the program's lines, but for the samples with no frame of the program's: libc's
    # (printing, its start and exit, a stack the unwinder did not follow out of it), the
    # loader's (binding fprintf and getrusage after the loop) or the vdso's; they take at
    # most the time the program's clock did not cover. A sample there, when the process
    # lost its core on a busy machine, stands for the wait
    lines = exp.lines()
    own = lines["file"] == "burn7030.c"
    assert (lines.loc[own, "line"] > 0).all(), lines
    assert lines.loc[~own, "pct"].sum() <= outside + share_bound(outside, len(s)), (lines, outside)
    [p] = read_samples(r.exp)
    prog_obj = p.objects.index(str(prog))
    depth = p.records["depth"]
    programless = [
        i for i in range(len(p.records)) if prog_obj not in p.records["object"][i, : depth[i]]
    ]
    innermost = {os.path.basename(p.objects[p.records["object"][i, 0]]) for i in programless}
    assert innermost <= {"libc.so.6", "ld-linux-x86-64.so.2", "[vdso]"}, innermost
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

"""perfweave.open (perfweave/api.py) on experiments written by hand, whose tables are
worked out below: samples of two ranks with known stacks and activities, and an MPI
profile with one call site. Modules are paths that do not exist, so places are named
module+offset (app+0x101), as the symbolizer names code it cannot read."""

import json

import numpy as np
import pandas as pd
import pytest

import perfweave
from perfweave.errors import NoData, PerfweaveError
from perfweave._format import ACTIVITIES
from perfweave.readers.samples import SAMPLE_FRAMES, SAMPLE_DTYPE, SAMPLES_VERSION

S = 1_000_000_000
APP = "/nonexistent/app"
RECORDED = ACTIVITIES  # the activities the runtime records (format.h)
MAIN, HEAVY, LIGHT = 0x301, 0x101, 0x201  # return addresses in app
# rank 0: 70 samples main -> heavy computing, 30 main -> light in a collective;
# rank 1: 40 main -> heavy, 60 main -> light, all computing. 1 s sampled per rank.
#   heavy: inclusive 110 of 200 samples = 55 %; per rank 70 / 40 %: mean 55, max 70,
#          imbalance (70 - 55) / 70, worst rank 0
#   light: 90 of 200 = 45 %, of which mpi_coll 30 / 200 = 15 %
#   main: 100 % inclusive, 0 % exclusive
PLAN = {0: [(HEAVY, 0, 70), (LIGHT, 2, 30)], 1: [(HEAVY, 0, 40), (LIGHT, 0, 60)]}
FUNCS = {
    "functions": ["MPI_Init", "MPI_Barrier", "MPI_Finalize"],
    "families": ["other", "coll", "other"],
}


def write_samples(exp, rank, plan, counters=()):
    rec = np.zeros(sum(n for *_, n in plan), SAMPLE_DTYPE)
    i = 0
    for leaf, activity, n in plan:
        for _ in range(n):
            rec[i]["t"] = S + i * S // len(rec)
            rec[i]["activity"] = activity
            rec[i]["depth"] = 2
            rec[i]["object"][:2] = 0
            rec[i]["object"][2:] = -1
            rec[i]["offset"][:2] = (leaf, MAIN)
            rec[i]["counters"] = -1
            if counters:  # cumulative: 10 per heavy sample, 1 per light
                rec[i]["counters"][0] = (rec[i - 1]["counters"][0] if i else 0) + (
                    10 if leaf == HEAVY else 1
                )
            i += 1
    d = exp / "samples"
    d.mkdir(exist_ok=True)
    rec.tofile(d / f"rank-{rank}.samples")
    meta = {
        "format": "perfweave-samples",
        "version": SAMPLES_VERSION,
        "rank": rank,
        "pid": 100 + rank,
        "host": "node01",
        "frames": SAMPLE_FRAMES,
        "counters": list(counters),
        "samples": len(rec),
        "t_start": S - S // 100,
        "t_end": 2 * S - S // 100,
        "activities": RECORDED,
        "objects": [[APP, ""]],
        "threads": [
            {
                "tid": 100 + rank,
                "taken": len(rec),
                "kept": len(rec),
                "thinned": 0,
                "interval_ns": S // 100,
            }
        ],
    }
    (d / f"rank-{rank}.json").write_text(json.dumps(meta))


def write_profile(exp, pwprof):
    ranks = [
        dict(
            rank=r,
            pid=100 + r,
            app_ns=10 * S,
            mpi_ns=m,
            mpi_calls=4,
            nthreads=1,
            table_capacity=4096,
        )
        for r, m in ((0, S), (1, 3 * S))
    ]
    sites = [
        dict(
            rank=r, fn=1, object=0, offset=0x401, count=4, total_ns=t, min_ns=t // 8, max_ns=t // 2
        )
        for r, t in ((0, S), (1, 3 * S))
    ]
    pwprof(
        exp / "profile.pwprof",
        dict(FUNCS, world_size=2, hosts=["node01"], objects=[APP], buildids=[""]),
        ranks=ranks,
        sites=sites,
    )


@pytest.fixture
def exp(experiment_dir, pwprof):
    path = experiment_dir()
    write_profile(path, pwprof)
    for rank, plan in PLAN.items():
        write_samples(path, rank, plan)
    return perfweave.open(path)


def node(df, path):
    [row] = df[df["path"] == path].to_dict("records")
    return row


def test_call_tree(exp):
    t = exp.call_tree()
    heavy, light, main = (f"app+{HEAVY:#x}", f"app+{LIGHT:#x}", f"app+{MAIN:#x}")
    assert t["path"].tolist() == [main, f"{main}/{heavy}", f"{main}/{light}"]  # depth first
    assert t["depth"].tolist() == [0, 1, 1] and t["parent"].isna().tolist() == [True, False, False]
    m, h, li = (node(t, p) for p in t["path"])
    assert m["inclusive_pct"] == pytest.approx(100) and m["exclusive_pct"] == 0
    assert h["inclusive_pct"] == pytest.approx(55) and h["exclusive_pct"] == pytest.approx(55)
    assert (h["rank_min_pct"], h["rank_mean_pct"], h["rank_max_pct"]) == pytest.approx((40, 55, 70))
    assert h["imbalance"] == pytest.approx(15 / 70) and h["worst_rank"] == 0
    assert li["mpi_coll_pct"] == pytest.approx(15) and li["compute_pct"] == pytest.approx(30)
    assert li["worst_rank"] == 1
    # one column per activity the analysis names, present or not
    assert {f"{s}_pct" for s in RECORDED} <= set(t.columns)
    assert h["sleep_pct"] == 0


def test_call_tree_per_rank(exp):
    t = exp.call_tree()
    pr = exp.call_tree_per_rank()
    heavy_id = int(t.loc[t["name"] == f"app+{HEAVY:#x}", "id"].iloc[0])
    light_id = int(t.loc[t["name"] == f"app+{LIGHT:#x}", "id"].iloc[0])
    rows = {(r["node"], r["rank"], r["activity"]): r for r in pr.to_dict("records")}
    assert rows[(heavy_id, 0, "compute")]["samples"] == 70
    assert rows[(heavy_id, 1, "compute")]["pct"] == pytest.approx(40)
    assert rows[(light_id, 0, "mpi_coll")]["exclusive_samples"] == 30
    assert (light_id, 0, "compute") not in rows  # no samples: no row
    # seconds: 100 samples over the process's 1 s sampled span
    assert rows[(heavy_id, 0, "compute")]["seconds"] == pytest.approx(0.7)
    # summing the long table gives back the tree's shares
    share = pr.groupby("node")["samples"].sum() / 200 * 100
    assert share.loc[heavy_id] == pytest.approx(node(t, t["path"][1])["inclusive_pct"])


def test_functions_lines_and_samples(exp):
    f = exp.functions().set_index("name")
    assert f.loc[f"app+{HEAVY:#x}", "pct"] == pytest.approx(55)
    inc = exp.functions(inclusive=True).set_index("name")
    assert inc.loc[f"app+{MAIN:#x}", "pct"] == pytest.approx(100)
    lines = exp.lines()
    assert set(lines["line"]) == {0}  # no debug information: no lines
    s = exp.samples()
    assert len(s) == 200 and s["rank"].value_counts().to_dict() == {0: 100, 1: 100}
    assert (s["leaf"] == f"app+{HEAVY:#x}").sum() == 110
    assert (s["activity"] == "mpi_coll").sum() == 30
    assert s["stack"].iloc[0] == f"app+{MAIN:#x};app+{HEAVY:#x}"
    assert s["time_s"].between(0, 1.01).all()


def test_counters_per_node_and_sample(experiment_dir, pwprof):
    path = experiment_dir()
    write_profile(path, pwprof)
    write_samples(path, 0, PLAN[0], counters=("perf::PAGE-FAULTS",))
    e = perfweave.open(path)
    t = e.call_tree().set_index("name")
    # 70 heavy samples x 10 + 30 light samples x 1 (the first sample's count since 0)
    assert t.loc[f"app+{HEAVY:#x}", "perf::PAGE-FAULTS_inclusive"] == 700
    assert t.loc[f"app+{LIGHT:#x}", "perf::PAGE-FAULTS_exclusive"] == 30
    assert t.loc[f"app+{MAIN:#x}", "perf::PAGE-FAULTS_exclusive"] == 0
    assert e.functions().set_index("name").loc[f"app+{HEAVY:#x}", "perf::PAGE-FAULTS"] == 700
    assert e.samples()["perf::PAGE-FAULTS"].sum() == 730


def test_mpi_tables(exp):
    c = exp.mpi_callsites()
    assert len(c) == 1 and c.loc[0, "function"] == "MPI_Barrier"
    assert c.loc[0, "calls"] == 8 and c.loc[0, "time_s"] == pytest.approx(4)
    pr = exp.mpi_callsites(per_rank=True).set_index("rank")
    assert pr.loc[1, "time_s"] == pytest.approx(3)
    f = exp.mpi_functions().set_index("name")
    assert f.loc["MPI_Barrier", "app_pct"] == pytest.approx(20)
    assert f.loc["MPI_Barrier", "rank_max_pct"] == pytest.approx(30)
    r = exp.mpi_ranks().set_index("rank")
    assert r.loc[1, "mpi_pct"] == pytest.approx(30) and r.loc[0, "state"] == "complete"


def test_tables_agree_with_the_json_report(exp):
    rep = exp.report()
    sm = rep["samples"]
    assert exp.call_tree()["inclusive_pct"].tolist() == [
        n["inclusive_pct"] for n in sm["call_tree"]
    ]
    assert exp.functions()["pct"].tolist() == [r["pct"] for r in sm["functions"]]
    assert exp.mpi_callsites()["time_s"].tolist() == [
        c["time_s"] for c in rep["mpi_profile"]["callsites"]
    ]


def test_missing_data_is_one_clear_error(experiment_dir, pwprof, tmp_path):
    path = experiment_dir()
    pwprof(
        path / "procs" / "node01.4242.pwprof",
        {"functions": [], "families": [], "world_size": 1},
        ranks=[{"rank": -1, "pid": 4242, "state": 0}],
    )
    e = perfweave.open(path)
    for table, option in (
        (e.call_tree, "--sample"),
        (e.samples, "--sample"),
        (e.mpi_callsites, "MPI"),
        (e.wait_states, "perfweave analyze"),
        (e.timeline, "--node-interval"),
        (lambda: e.table("io", "files"), "--no-io"),
        (lambda: e.table("mathlib", "routines"), "BLAS"),
    ):
        with pytest.raises(NoData) as err:
            table()
        assert option in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(
        PerfweaveError, match="kinds with tables: boundness, example, gpu, heap, io, mathlib"
    ):
        e.table("nothing", "rows")
    with pytest.raises(PerfweaveError, match="no such experiment"):
        perfweave.open(tmp_path / "nowhere")


def test_wait_states_long_format(exp):
    d = exp.path / "analysis"
    d.mkdir()
    (d / "waitstates.json").write_text(
        json.dumps(
            {
                "format": "perfweave-waitstates",
                "version": 1,
                "metrics": [
                    {
                        "id": "mpi_latesender",
                        "name": "Late Sender",
                        "parent": "mpi_p2p",
                        "unit": "s",
                        "total": 1.5,
                        "pct": 3.0,
                        "values": [[1, 0, 0.5], [1, 1, 1.0]],
                    }
                ],
                "callpaths": [
                    {
                        "id": 1,
                        "name": "main > MPI_Recv @ a.c:3",
                        "function": "MPI_Recv",
                        "where": "a.c:3",
                    }
                ],
            }
        )
    )
    w = exp.wait_states()
    assert w["value"].sum() == pytest.approx(1.5)
    assert set(w["callpath_name"]) == {"main > MPI_Recv @ a.c:3"}
    assert isinstance(w, pd.DataFrame) and w["rank"].tolist() == [0, 1]

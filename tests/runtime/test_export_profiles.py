"""perfweave export --format caliper|cube on a real run (docs/interop.md, "Caliper
json-split" and "CUBE"), read by the real readers from the registry: llnl-hatchet's
GraphFrame.from_caliper and pycubexr. tests/runtime/programs/export_work.c makes known
calls and bytes (11 MPI_Send and 11 MPI_Recv over 2 ranks, 245 764 bytes each way) and a
Late Sender of its own clock's measure. Both files must hold the call-path table
(analysis/callpaths.py) value for value, and its totals must be perfweave report's."""

import subprocess

import hatchet
import numpy as np
import pycubexr
import pytest

import perfweave as perfweave_api
from harness import PERFWEAVE, reported
from perfweave.analysis.callpaths import callpath_metrics
from perfweave.interop.caliper import node_paths
from perfweave.readers.experiment import open_experiment

MSGS, COUNT = 5, 4096
# rank 0: 1 token + MSGS x COUNT doubles; rank 1: MSGS x COUNT / 2 doubles
SENDS = 1 + 2 * MSGS
BYTES = 4 + MSGS * COUNT * 8 + MSGS * COUNT // 2 * 8


def perfweave(*args):
    res = subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{args}:\n{res.stdout}\n{res.stderr}"
    return res


@pytest.fixture
def work(mpi, build, run_pw):
    run = run_pw(mpi.launch(2) + [build(mpi, "export_work.c")], options=["--trace"])
    perfweave("analyze", run.exp)
    return run


def table_values(exp):
    t = callpath_metrics(open_experiment(exp))
    return t, {p: i for i, p in enumerate(t.paths())}


def test_caliper_export_read_by_hatchet(work):
    perfweave("export", work.exp, "--format", "caliper")
    gf = hatchet.GraphFrame.from_caliper(str(work.exp / "export" / "caliper.json"))
    t, index = table_values(work.exp)
    rank_col = {int(r): j for j, r in enumerate(t.ranks.tolist())}
    inc = t.inclusive("time")
    df = gf.dataframe.reset_index()
    assert len(df) == len(t.names) * len(t.ranks)
    columns = {
        "time": t.metrics["time"].values,
        "time (inc)": inc,
        "sum#mpi.time": t.metrics["mpi_time"].values,
        "sum#mpi.calls": t.metrics["visits"].values,
        "sum#mpi.send.size": t.metrics["bytes_sent"].values,
        "sum#mpi.recv.size": t.metrics["bytes_recv"].values,
    }
    paths = node_paths(gf)
    for row in df.to_dict("records"):
        i = index[paths[row["node"]]]
        j = rank_col[int(row["rank"])]
        for c, v in columns.items():
            assert row[c] == pytest.approx(v[i, j], abs=1e-12), (c, row["name"])
    # the totals are perfweave report's, and the program's by construction
    rep = work.report()["mpi_profile"]
    by_fn = df.groupby("name")[["sum#mpi.calls", "sum#mpi.send.size", "sum#mpi.recv.size"]].sum()
    by_time = df.groupby("name")["sum#mpi.time"].sum()
    for f in rep["functions"]:
        assert by_fn.loc[f["name"], "sum#mpi.calls"] == f["calls"]
        assert by_fn.loc[f["name"], "sum#mpi.send.size"] == f["bytes_sent"]
        assert by_fn.loc[f["name"], "sum#mpi.recv.size"] == f["bytes_recv"]
        assert by_time[f["name"]] == pytest.approx(f["time_s"], rel=1e-12)
    assert df["sum#mpi.time"].sum() == pytest.approx(rep["total_mpi_s"], rel=1e-12)
    assert by_fn.loc["MPI_Send", "sum#mpi.calls"] == SENDS
    assert by_fn.loc["MPI_Send", "sum#mpi.send.size"] == BYTES
    assert by_fn.loc["MPI_Recv", "sum#mpi.recv.size"] == BYTES
    # the roots' inclusive time is every sampled second
    roots = df[[len(paths[n]) == 1 for n in df["node"]]]
    assert roots["time (inc)"].sum() == pytest.approx(df["time"].sum(), rel=1e-9)
    assert gf.metadata["mpi.world.size"] == 2 and "export_work" in gf.metadata["command"]


def test_cube_export_read_by_pycubexr(work):
    perfweave("export", work.exp, "--format", "cube")
    again = subprocess.run(
        [PERFWEAVE, "export", str(work.exp), "--format", "cube"], capture_output=True, text=True
    )
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "already exists (--force replaces it)" in again.stderr
    t, index = table_values(work.exp)
    ws = open_experiment(work.exp).waitstates
    with pycubexr.CubexParser(str(work.exp / "export" / "profile.cubex")) as cube:
        groups = cube._anchor_result.system_tree_nodes[0].all_location_groups()
        col = [list(t.ranks).index(int(g.rank)) for g in groups]  # location -> column

        # the table has roots besides main (MPI_Init's path...): the file puts them under
        # one root named after the program, which pycubexr (as CUBE) needs
        top = cube.get_root_cnodes()[0]
        extra = len([p for p in index if len(p) == 1]) > 1
        program = open_experiment(work.exp).meta["program"].rsplit("/", 1)[-1]
        assert not extra or cube.get_region(top).name == program

        def path(cn):
            out = []
            while cn is not None:
                out.append(cube.get_region(cn).name)
                cn = cn.parent
            return tuple(reversed(out))[1:] if extra else tuple(reversed(out))

        names = {"time": "time", "mpi": "mpi_time", "visits": "visits"}
        names.update(bytes_sent="bytes_sent", bytes_received="bytes_recv")
        for uniq, metric in names.items():
            mv = cube.get_metric_values(cube.get_metric_by_name(uniq))
            got = np.zeros_like(t.metrics[metric].values)
            for cn in cube.all_cnodes():
                if extra and cn is top:
                    assert not mv.cnode_values(cn).any()
                    continue
                got[index[path(cn)]][col] = mv.cnode_values(cn)
            np.testing.assert_allclose(got, t.metrics[metric].values, rtol=0, atol=0)
        # the Late Sender: where the analysis found it, as much, and the program's wait
        ls = cube.get_metric_values(cube.get_metric_by_name("mpi_latesender"))
        at = {path(cn): ls.cnode_values(cn) for cn in cube.all_cnodes()}
        assert sum(v.sum() for v in at.values()) == pytest.approx(
            ws.values_of("mpi_latesender")["value"].sum(), abs=1e-12
        )
        main_recv = at[("main", "MPI_Recv")][col.index(list(t.ranks).index(1))]
        send_enter, recv_enter = reported(work.proc, "send_enter", "recv_enter")
        # the trace's enter times are within the wrappers' cost (microseconds) of the
        # program's readings right before its calls (test_waitstates' bound)
        expected = send_enter - recv_enter
        assert abs(main_recv - expected) <= max(0.05 * expected, 0.002)
        # every call path is there; the calls and bytes are the program's
        assert {path(cn) for cn in cube.all_cnodes()} - {()} == set(index)
        visits = cube.get_metric_values(cube.get_metric_by_name("visits"))
        sent = cube.get_metric_values(cube.get_metric_by_name("bytes_sent"))
        sends = [cn for cn in cube.all_cnodes() if cube.get_region(cn).name == "MPI_Send"]
        assert sum(int(visits.cnode_values(cn).sum()) for cn in sends) == SENDS
        assert sum(int(sent.cnode_values(cn).sum()) for cn in sends) == BYTES
        # POP useful time on the root: each rank's time outside MPI as the report has it,
        # at least the spinning the program did outside MPI by its own clock
        useful = cube.get_metric_values(cube.get_metric_by_name("pop_useful")).cnode_values(top)
        per_rank = {r["rank"]: r for r in work.report()["mpi_profile"]["per_rank"]}
        for loc, g in enumerate(groups):
            r = per_rank[int(g.rank)]
            assert useful[loc] == pytest.approx(r["app_s"] - r["mpi_s"], abs=2e-9)
            assert useful[loc] >= 0.1 * (int(g.rank) + 1) + (0.2 if g.rank == "0" else 0)


def test_hatchet_difference_and_thicket_of_two_runs(mpi, build, run_pw):
    """Two runs, compute() only in B (SCALE 0 and 2): Hatchet's gf_a - gf_b is perfweave
    compare's delta (B - A, negated) on every node of both trees, and a node of one tree
    only is one side's in both; Thicket reads both files with their metadata."""
    import math

    import thicket

    prog = build(mpi, "export_work.c")
    runs = [run_pw(mpi.launch(2) + [prog, scale]) for scale in ("0", "2")]
    files = []
    for r in runs:
        perfweave("export", r.exp, "--format", "caliper")
        files.append(str(r.exp / "export" / "caliper.json"))
    ga, gb = (hatchet.GraphFrame.from_caliper(f) for f in files)
    in_a, in_b = (set(node_paths(g).values()) for g in (ga, gb))
    assert ("main", "compute", "spin") in in_b - in_a
    diff = ga - gb
    paths = node_paths(diff)
    per_node = diff.dataframe.reset_index().groupby("node")["time"]
    got = {paths[n]: (float(v.sum()), bool(v.isna().all())) for n, v in per_node}
    cmp = perfweave_api.compare(runs[0].exp, runs[1].exp, by="callpath", metric="time")
    rows = {tuple(k.split("/")): r for k, r in zip(cmp["key"], cmp.to_dict("records"))}
    tables = [table_values(r.exp) for r in runs]
    checked = 0
    for path, (value, missing) in got.items():
        row = rows.get(path)
        if path in in_a and path in in_b:
            if row is None:  # no time on either side: no key of compare's
                expected = 0.0
            elif row["only_in"]:  # time on one side only
                expected = row["a"] if row["only_in"] == "A" else -row["b"]
            else:
                expected = -row["delta"]
            assert value == pytest.approx(expected, abs=1e-9), path
            checked += 1
        elif path in in_b:  # Hatchet's difference has nothing where A lacks the node
            assert missing
            assert row is None or row["only_in"] == "B"
        else:  # where B lacks it, A's values
            t, index = tables[0]
            assert value == pytest.approx(t.metrics["time"].values[index[path]].sum(), abs=1e-9)
            assert row is None or row["only_in"] == "A"
    assert checked >= 8 and not math.isnan(sum(v for v, m in got.values() if not m))

    th = thicket.Thicket.from_caliper(files, disable_tqdm=True)
    assert len(th.profile) == 2
    meta = th.metadata.reset_index()
    assert sorted(meta["command"].str.split().str[-1]) == ["0", "2"]
    assert (meta["mpi.world.size"] == 2).all()
    assert set(meta["perfweave.export"]) == {"caliper json-split"}
    # its table holds every node of each profile, with that profile's values
    df = th.dataframe.reset_index()
    for f, prof in zip(files, th.profile):
        mine = df[df["profile"] == prof]
        gf = hatchet.GraphFrame.from_caliper(f)
        assert mine["sum#mpi.calls"].sum() == gf.dataframe["sum#mpi.calls"].sum()
        assert mine.loc[mine["name"] == "MPI_Send", "sum#mpi.send.size"].sum() == BYTES

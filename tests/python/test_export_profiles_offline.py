"""The Caliper json-split and CUBE writers (interop/caliper.py, interop/cube.py) on
literal call-path tables, read by the real readers: llnl-hatchet (GraphFrame.from_caliper
and its arithmetic) and pycubexr. The runs are in tests/runtime/test_export_profiles.py."""

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import hatchet
import numpy as np
import pycubexr
import pytest

from perfweave.analysis.callpaths import CallpathMetrics, Metric
from perfweave.interop import callpath_export
from perfweave.interop.caliper import document, node_paths
from perfweave.interop.cube import TABLE_METRICS, CubeMetric, cube_file

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")


def literal(paths, ranks, time, visits=None):
    t = CallpathMetrics.from_literal(
        paths, ranks, time=time, visits=visits or [[0] * len(ranks)] * len(paths)
    )
    zero = np.zeros_like(t.metrics["time"].values)
    for m in ("mpi_time", "bytes_sent", "bytes_recv"):
        t.metrics[m] = Metric(m, "x", False, zero + 0.0)
    t.metrics["mpi_time"].values[:] = t.metrics["time"].values / 4
    t.metrics["bytes_sent"].values[:] = t.metrics["visits"].values * 1000
    return t


# two roots, siblings whose names sort otherwise than given, a process without MPI
A = literal(
    ["main/solve/MPI_Recv", "main/init", "main/Zeta", "main/solve", "[unknown caller]/MPI_Send"],
    [0, 1, -1],
    time=[[0.5, 0.25, 0], [1, 2, 3], [0.125, 0, 0], [2, 2, 2], [0, 0.375, 0]],
    visits=[[3, 4, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [7, 9, 0]],
)
# B: a node between A's siblings, one of A's missing
B = literal(
    ["main/solve/MPI_Recv", "main/init", "main/fft", "main/solve"],
    [0, 1, -1],
    time=[[0.75, 0.25, 0], [1, 1, 1], [4, 4, 4], [2, 2.5, 2]],
    visits=[[3, 4, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
)


def write_caliper(table, path):
    path.write_text(json.dumps(document(table, {"command": "prog", "mpi.world.size": 2})))
    return str(path)


@pytest.mark.parametrize("ordering", [True, False])
def test_caliper_document_read_by_hatchet(tmp_path, ordering):
    gf = hatchet.GraphFrame.from_caliper(
        write_caliper(A, tmp_path / "a.json"), node_ordering=ordering
    )
    assert gf.metadata == {"command": "prog", "mpi.world.size": 2}
    assert "time (inc)" in gf.inc_metrics and "time" in gf.exc_metrics
    paths = node_paths(gf)
    index = {p: i for i, p in enumerate(A.paths())}
    rank_col = {0: 0, 1: 1, 2: 2}  # the process without MPI: after the last rank
    inc = A.inclusive("time")
    df = gf.dataframe.reset_index()
    assert len(df) == len(A.names) * 3
    for row in df.to_dict("records"):
        i, j = index[paths[row["node"]]], rank_col[row["rank"]]
        assert row["time"] == A.metrics["time"].values[i, j]
        assert row["time (inc)"] == pytest.approx(inc[i, j], abs=1e-15)
        assert row["sum#mpi.time"] == A.metrics["mpi_time"].values[i, j]
        assert row["sum#mpi.calls"] == A.metrics["visits"].values[i, j]
        assert row["sum#mpi.send.size"] == A.metrics["bytes_sent"].values[i, j]


def test_hatchet_difference_joins_nodes_by_name(tmp_path):
    """gf_a - gf_b: Hatchet merges the children of the two trees walking both in node
    order comparing names, so the writer numbers them in name order: nodes of both
    trees get their difference, whatever the other tree has beside them."""
    ga = hatchet.GraphFrame.from_caliper(write_caliper(A, tmp_path / "a.json"))
    gb = hatchet.GraphFrame.from_caliper(write_caliper(B, tmp_path / "b.json"))
    diff = ga - gb
    paths = node_paths(diff)
    ia = {p: i for i, p in enumerate(A.paths())}
    ib = {p: i for i, p in enumerate(B.paths())}
    assert set(paths.values()) == set(ia) | set(ib)
    seen = 0
    for row in diff.dataframe.reset_index().to_dict("records"):
        p = paths[row["node"]]
        if p in ia and p in ib:
            expected = (
                A.metrics["time"].values[ia[p], row["rank"]]
                - B.metrics["time"].values[ib[p], row["rank"]]
            )
            assert row["time"] == pytest.approx(expected, abs=1e-15), p
            seen += 1
    assert seen == 4 * 3


def cube_of(table, hosts, extra=()):
    metrics = [CubeMetric(*TABLE_METRICS[m], table.metrics[m].values) for m in TABLE_METRICS]
    metrics += list(extra)
    return cube_file(table, metrics, hosts, {"command": "prog"}, "prog")


def read_cube(data, tmp_path):
    path = tmp_path / "x.cubex"
    path.write_bytes(data)
    return path


def test_cube_file_read_by_pycubexr_value_for_value(tmp_path):
    # ranks on two hosts, interleaved: the file lists locations host by host
    useful = np.array([3.0, 1.0, 2.0])
    extra = [CubeMetric("pop_useful", "POP useful time", "DOUBLE", "sec", "d", root=useful)]
    path = read_cube(cube_of(A, ["n1", "n2", "n1"], extra), tmp_path)
    with pycubexr.CubexParser(path) as cube:
        groups = cube._anchor_result.system_tree_nodes[0].all_location_groups()
        assert [g.rank for g in groups] == ["0", "2", "1"]
        nodes = cube._anchor_result.system_tree_nodes[0]._system_tree_node_children
        assert [n.name for n in nodes] == ["n1", "n2"]
        col = [0, 2, 1]
        top = cube.get_root_cnodes()[0]
        assert cube.get_region(top).name == "prog"  # A has two roots: one over them

        def path_of(cn):
            out = []
            while cn is not None:
                out.append(cube.get_region(cn).name)
                cn = cn.parent
            return tuple(reversed(out))[1:]

        index = {p: i for i, p in enumerate(A.paths())}
        assert {path_of(cn) for cn in cube.all_cnodes()} == set(index) | {()}
        for name, (uniq, *_rest) in TABLE_METRICS.items():
            m = cube.get_metric_by_name(uniq)
            assert m.metric_type == "EXCLUSIVE"
            mv = cube.get_metric_values(m)
            got = np.zeros_like(A.metrics[name].values)
            for cn in cube.all_cnodes():
                if cn is top:
                    assert not mv.cnode_values(cn).any()
                else:
                    got[index[path_of(cn)], col] = mv.cnode_values(cn)
            assert np.array_equal(got, A.metrics[name].values), name
        assert cube.get_metric_by_name("visits").data_type == "UINT64"
        mv = cube.get_metric_values(cube.get_metric_by_name("pop_useful"))
        assert np.array_equal(mv.cnode_values(top), useful[col])
        # CUBE's own conversion: inclusive time on the root is every sampled second
        tm = cube.get_metric_values(cube.get_metric_by_name("time"))
        total = tm.cnode_values(top, convert_to_inclusive=True)
        assert np.allclose(total, A.metrics["time"].values.sum(axis=0)[col])


def test_cube_layout_as_cubew_writes_it(tmp_path):
    """The index and data files byte for byte as CubeW 4.6 writes a sparse metric (read
    in its cubew_metric.c): marker, endianness 1, version 0, format 1, rows, row
    positions; the data rows with a value only, one value per location."""
    t = literal(
        ["main", "main/alpha", "main/beta/MPI_Recv"], [0, 1], time=[[1.5, 2.5], [0.25, 0.5], [0, 0]]
    )
    with tarfile.open(fileobj=io.BytesIO(cube_of(t, ["h", "h"]))) as tar:
        assert tar.getnames()[0] == "anchor.xml"
        index = tar.extractfile("0.index").read()
        data = tar.extractfile("0.data").read()
        visits = tar.extractfile("2.index").read()
    assert index == b"CUBEX.INDEX" + bytes(
        [1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    )
    assert data == b"CUBEX.DATA" + np.array([1.5, 2.5, 0.25, 0.5], "<f8").tobytes()
    # no value at all: the root's row (pycubexr needs one)
    assert visits.endswith(bytes([1, 1, 0, 0, 0, 0, 0, 0, 0]))


def test_one_root_is_the_root(tmp_path):
    t = literal(["main/a", "main/b"], [0], time=[[1], [2]])
    with pycubexr.CubexParser(read_cube(cube_of(t, ["h"]), tmp_path)) as cube:
        assert cube.get_region(cube.get_root_cnodes()[0]).name == "main"
        assert len(cube.all_cnodes()) == 3


def test_column_ranks_put_processes_without_mpi_after_the_ranks():
    assert callpath_export.column_ranks(A).tolist() == [0, 1, 2]
    t = literal(["main"], [-1, -1], time=[[1, 2]])
    assert callpath_export.column_ranks(t).tolist() == [0, 1]


@pytest.mark.parametrize("fmt", ["caliper", "cube"])
def test_export_of_no_experiment_is_one_error_line(tmp_path, fmt):
    res = subprocess.run(
        [PERFWEAVE, "export", str(tmp_path / "nope"), "--format", fmt],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfweave: error:") and "nope" in lines[0]


def test_wait_states_go_to_the_call_paths_that_end_with_their_functions():
    """Trace call paths (labels as the analysis writes them: the program, user functions
    by name, the MPI call) onto A's nodes: main > solve > MPI_Recv to main/solve/MPI_Recv;
    a bare MPI_Send to the one node ending with it; the program's own to the root, and
    a path the table lacks (main > fft) to the root too, with a note."""
    from perfweave.interop.cube import wait_state_metrics
    from perfweave.model.waitstates import WaitStatesResult

    cps = [
        {"id": 0, "labels": ("program",)},
        {"id": 1, "parent": 0, "labels": ("program", "N:main")},
        {"id": 2, "parent": 1, "labels": ("program", "N:main", "N:solve")},
        {"id": 3, "parent": 2, "labels": ("program", "N:main", "N:solve", "M:MPI_Recv@")},
        {"id": 4, "parent": 0, "labels": ("program", "M:MPI_Send@")},
        {"id": 5, "parent": 1, "labels": ("program", "N:main", "N:fft")},
    ]
    ms = [{"id": "mpi_latesender", "name": "Late Sender", "total": 0.75, "pct": 1.0}]
    ms.append({"id": "time", "name": "Time", "total": 3.5, "pct": 1.0})
    values = [
        ("mpi_latesender", 3, 1, 0.5),
        ("mpi_latesender", 4, 0, 0.25),
        ("time", 0, 0, 1.0),
        ("time", 5, 1, 2.0),
        ("time", 3, 7, 0.5),  # a rank the profile lacks
    ]
    ws = WaitStatesResult.from_literal(ms, cps, values)
    notes = []
    ls, tm = wait_state_metrics(ws, A, notes, taken={"time"})
    index = {p: i for i, p in enumerate(A.paths())}
    assert (ls.uniq, tm.uniq) == ("mpi_latesender", "trace_time")

    def dense(m):
        v = np.zeros((len(A.names), len(A.ranks)))
        if m.entries is not None:
            np.add.at(v, m.entries[:2], m.entries[2])
        return v

    expected = np.zeros((len(A.names), len(A.ranks)))
    expected[index[("main", "solve", "MPI_Recv")], 1] = 0.5
    expected[index[("[unknown caller]", "MPI_Send")], 0] = 0.25
    assert np.array_equal(dense(ls), expected) and ls.root is None
    assert not dense(tm).any() and tm.root.tolist() == [1.0, 2.0, 0.0]
    assert len(notes) == 2 and "on the call tree's root" in notes[0] and "lacks" in notes[1]

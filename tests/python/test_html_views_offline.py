"""The HTML report's views from data stated here (report/sections/wait_states.py cube,
source.py hot_sources): numbers known by construction."""

from perfweave.model.waitstates import WaitStatesResult
from perfweave.report.section import View
from perfweave.report.sections.source import SECTION as SOURCE, hot_sources
from perfweave.report.sections.wait_states import cube, cube_lines, cube_sums

# Time 10 s = Execution = Computation 6 + MPI 4; MPI 4 = p2p 3 (of it Late Sender 2) + 1
# at a barrier. Call paths: 0 program > 1 main > 2 MPI_Recv, 3 MPI_Barrier.
METRICS = [
    ("time", None, 10.0),
    ("execution", "time", 10.0),
    ("computation", "execution", 6.0),
    ("mpi", "execution", 4.0),
    ("mpi_point2point", "mpi", 3.0),
    ("mpi_latesender", "mpi_point2point", 2.0),
    ("mpi_barrier_wait", "mpi", 1.0),
    ("mpi_latereceiver", "mpi_point2point", 0.0),
    ("visits", None, 7),
]
STORED = [
    ("computation", 1, 0, 3.0),
    ("computation", 1, 1, 3.0),
    ("mpi_point2point", 2, 1, 3.0),
    ("mpi_latesender", 2, 1, 2.0),
    ("mpi_barrier_wait", 3, 0, 1.0),
]
# the "sum" metrics' rows, as the analysis stores them: their children's
MPI = [("mpi", 2, 1, 3.0), ("mpi", 3, 0, 1.0)]
UP = [(m, p, r, v) for m in ("execution", "time") for _, p, r, v in STORED[:2] + MPI]
VALUES = STORED + MPI + UP


def result():
    depth = {"time": 0, "visits": 0}
    ms = []
    for mid, parent, total in METRICS:
        depth[mid] = depth[parent] + 1 if parent else 0
        ms.append(
            {
                "id": mid,
                "name": mid.title(),
                "parent": parent,
                "unit": "count" if mid == "visits" else "s",
                "depth": depth[mid],
                "total": total,
                "pct": 10.0 * total,
            }
        )
    paths = [
        {"id": 0, "parent": None, "name": "program"},
        {"id": 1, "parent": 0, "name": "main"},
        {"id": 2, "parent": 1, "name": "main > MPI_Recv"},
        {"id": 3, "parent": 1, "name": "main > MPI_Barrier"},
    ]
    return WaitStatesResult.from_literal(
        ms, paths, VALUES, ranks=[{"rank": 0, "time_s": 5.0}, {"rank": 1, "time_s": 5.0}]
    )


def test_cube_holds_every_value_and_sums_up_the_call_tree():
    res = result()
    names = dict(zip(res.callpaths["id"].tolist(), res.callpaths["name"].tolist()))
    cb = cube(res, names)
    assert [m["id"] for m in cb["metrics"]] == [
        "time",
        "execution",
        "computation",
        "mpi",
        "mpi_point2point",
        "mpi_latesender",
        "mpi_barrier_wait",
    ]  # no zero metric, no metric outside Time
    assert cb["total_s"] == 10.0 and cb["ranks"] == [0, 1] and cb["cut"] == 0
    by = {m["id"]: m for m in cb["metrics"]}
    assert by["mpi_point2point"]["exclusive_s"] == 1.0 and by["mpi"]["exclusive_s"] == 0.0
    assert by["mpi_latesender"]["pct"] == 20.0
    assert cb["values"]["mpi_latesender"] == [[2, 1, 2.0]]
    assert [c["id"] for c in cb["callpaths"]] == [0, 1, 2, 3]  # the ancestors too
    s = cube_sums(cb)
    assert s["computation"][0] == (6.0, 0.0, {0: 3.0, 1: 3.0})
    assert s["computation"][1] == (6.0, 6.0, {0: 3.0, 1: 3.0})
    assert s["mpi_barrier_wait"][3] == (1.0, 1.0, {0: 1.0})
    assert s["time"][0] == (10.0, 0.0, {0: 4.0, 1: 6.0})
    text = "\n".join(cube_lines(cb, None))
    assert "Mpi_Latesender: 2.000s (20.00 %), exclusive 2.000s (20.00 %)" in text
    assert "2.000s (20.00 %), exclusive 2.000s (20.00 %) at main > MPI_Recv" in text
    assert "ranks      1 2.000s" in text


def test_cube_keeps_the_largest_call_paths_past_its_bound():
    res = result()
    names = dict(zip(res.callpaths["id"].tolist(), res.callpaths["name"].tolist()))
    # values per call path: 1 has 6 (18 s), 2 has 5 (14 s), 3 has 4 (4 s)
    cb = cube(res, names, most=12)
    kept = {(p, r) for rows in cb["values"].values() for p, r, _ in rows}
    assert cb["cut"] == 4 == len(VALUES) - sum(len(v) for v in cb["values"].values())
    assert (1, 0) in kept and (3, 0) not in kept  # path 1 has 6 s, path 3 1 s


def test_source_view_of_hot_lines(tmp_path):
    src = tmp_path / "k.c"
    src.write_text("".join(f"line {i}\n" for i in range(1, 31)))
    rows = [
        {"name": "f (k.c:10)", "file": str(src), "line": 10, "pct": 40.0},
        {"name": "g (k.c:12)", "file": str(src), "line": 12, "pct": 20.0},
        {"name": "h (gone.c:5)", "file": str(tmp_path / "gone.c"), "line": 5, "pct": 10.0},
        {"name": "i (k.c:25)", "file": str(src), "line": 25, "pct": 5.0},
        {"name": "?", "pct": 3.0},
    ]
    files = hot_sources(rows)
    assert [f["file"] for f in files] == [str(src), str(tmp_path / "gone.c")]
    k, gone = files
    # 10 and 12 share one snippet (7..15), 25 has its own (22..28)
    assert [[n for n, _, _ in s] for s in k["snippets"]] == [
        list(range(7, 16)),
        list(range(22, 29)),
    ]
    shares = {n: p for s in k["snippets"] for n, _, p in s if p is not None}
    assert shares == {10: 40.0, 12: 20.0, 25: 5.0}
    assert all(t == f"line {n}" for s in k["snippets"] for n, t, _ in s)
    assert not gone["readable"] and "No such file" in gone["reason"]
    assert hot_sources(rows, top=1)[0]["snippets"] == [k["snippets"][0][:7]]
    text = SOURCE.text({"source": files}, View(max_rows=None, width=None))
    assert "   40.0 %     10  line 10" in text
    assert f"  {tmp_path / 'gone.c'}: source not readable (No such file or directory)" in text
    assert SOURCE.text({"source": files}, View()) == []  # only in --full


def test_merged_bars_keep_every_call():
    """Calls closer than a step merge into one bar named after its longest call; the
    bars' call counts add up to the calls."""
    import numpy as np

    from perfweave.report.sections.trace_interval import _merge

    fn = np.array([1, 2, 1, 3, 3])
    t0 = np.array([0, 12, 20, 100, 150])
    t1 = np.array([10, 18, 60, 110, 400])
    f, a, b, n = _merge(fn, t0, t1, 5)
    assert (f.tolist(), a.tolist(), b.tolist(), n.tolist()) == (
        [1, 3, 3],
        [0, 100, 150],
        [60, 110, 400],
        [3, 1, 1],
    )
    assert n.sum() == len(fn)

"""The text report's fitting to a terminal (report/text.py): names shortened in the
middle, tables that shrink their name columns, a report with very long names (an MPI
library version of 2,000 characters, a C++ module path) that stays within 100 columns
while --json and --full keep every name whole."""

import json

import pytest

from perfweave.cli import main
from perfweave.report.widgets import shorten, text_table

S = 1_000_000_000


@pytest.mark.parametrize(
    "text, width, expected",
    [
        ("abcdefghij", 10, "abcdefghij"),  # fits: as is
        ("abcdefghij", 5, "ab…ij"),  # both ends kept, 5 characters
        ("abcdefghij", 6, "abc…ij"),  # the odd one goes to the head
        ("abcdefghij", 2, "a…"),
        ("abcdefghij", 1, "a"),
        ("a\tb\n  c", 20, "a b c"),  # whitespace runs are one space
        ("abcdefghij", None, "abcdefghij"),  # no limit
    ],
)
def test_shorten(text, width, expected):
    assert shorten(text, width) == expected


def test_shorten_keeps_both_ends_of_a_path():
    path = "/opt/spack/linux-x86_64/gcc-12.2.0/" + "x" * 200 + "/lib/libmpi.so.40"
    out = shorten(path, 40)
    assert len(out) == 40
    assert out.startswith("/opt/spack/linux-x86") and out.endswith("/lib/libmpi.so.40")


@pytest.mark.parametrize(
    "text, width, expected",
    [
        # a C++ name's argument list folds first: the name and its file:line stay whole
        ("alloc_a(unsigned long, int) (sites.cpp:28)", 30, "alloc_a(…) (sites.cpp:28)"),
        # the longest list first, the rest as long as it fits
        ("solver::Grid<3>::halo(std::vector<double>&, int)", 30, "solver::Grid<3>::halo(…)"),
        ("std::map<int, std::vector<double> >::find(int const&)", 20, "std::map<…>::find(…)"),
        # an operator's brackets are not a list
        ("operator<(A const&, A const&)", 15, "operator<(…)"),
    ],
)
def test_shorten_folds_cxx_lists_before_cutting(text, width, expected):
    assert shorten(text, width) == expected


def test_table_shrinks_name_columns_to_the_width():
    long = "std::vector<double> solver::Grid<3>::exchange_halo(" + "int, " * 40 + ")"
    rows = [[1, long, "1.000s"], [2, "main", "0.500s"]]
    lines = text_table(rows, ["id", "function", "time"], [">", "<", ">"], width=60)
    assert max(map(len, lines)) <= 60
    assert "…" in lines[1] and lines[1].rstrip().endswith("1.000s")
    assert lines[2].split() == ["2", "main", "0.500s"]  # short rows as they were
    wide = text_table(rows, ["id", "function", "time"], [">", "<", ">"], width=None)
    assert long in wide[1]


def test_table_drops_optional_columns_first():
    rows = [["site-" + "a" * 30, "1", "2", "3"]]
    lines = text_table(
        rows, ["where", "n", "mean", "max"], ["<", ">", ">", ">"], width=45, drop=(2,)
    )
    assert lines[0].split() == ["where", "n", "max"] and "…" not in lines[1]


@pytest.fixture
def long_names_exp(experiment_dir, pwprof):
    """2 ranks, 7 MPI functions with one call site each in a module with a long path,
    and an MPI library version of 2,000 characters (MPICH's is over 1,000)."""
    lib = "MPICH Version:\t4.0.2 MPICH configure:\t" + "--with-option=value " * 100
    module = "/very/long/install/prefix/" + "deep/" * 40 + "libsolver.so"
    fns = [
        "MPI_Init",
        "MPI_Send",
        "MPI_Recv",
        "MPI_Allreduce",
        "MPI_Bcast",
        "MPI_Barrier",
        "MPI_Reduce",
    ]
    exp = experiment_dir("long", command=["mpiexec", "-n", "2", "/path/" + "x" * 300])
    ranks = [
        dict(
            rank=r,
            host=0,
            pid=10 + r,
            app_ns=10 * S,
            mpi_ns=3 * S,
            mpi_calls=7,
            t_init_leave=S // 10,
            table_capacity=64,
        )
        for r in (0, 1)
    ]
    sites = [
        dict(
            rank=r,
            fn=f,
            object=0,
            offset=0x100 * f,
            count=1,
            total_ns=(f + 1) * S // 10,
            min_ns=1,
            max_ns=(f + 1) * S // 10,
        )
        for r in (0, 1)
        for f in range(7)
    ]
    pwprof(
        exp / "profile.pwprof",
        {
            "functions": fns,
            "families": ["other", "p2p", "p2p", "coll", "coll", "sync", "coll"],
            "objects": [module],
            "hosts": ["node-" + "n" * 150],
            "world_size": 2,
            "mpi_library": lib,
            "mpi_flavor": "mpich",
        },
        ranks,
        sites,
    )
    return exp, lib, module


def test_long_names_fit_and_stay_whole_in_json(long_names_exp, capsys):
    exp, lib, module = long_names_exp
    assert main(["report", str(exp)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    # the MPI line: library and version only (issue 22); the full string is in the JSON
    [mpi_line] = [ln for ln in lines if ln.startswith("  MPI  ")]
    assert mpi_line == "  MPI        MPICH 4.0.2 (perfweave runtime: mpich)"
    # 6 functions and call sites besides MPI_Init (not listed): 4 rows of each, "2 more"
    assert "  (2 more functions; --max-rows N or --full, or --top N)" in lines
    assert "  (2 more call sites; --max-rows N or --full, or --top N)" in lines

    assert main(["report", "--json", str(exp)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mpi_profile"]["mpi_library"] == lib
    assert len(data["mpi_profile"]["functions"]) == 6
    assert any(
        module in c.get("module", "") or module in json.dumps(c)
        for c in data["mpi_profile"]["callsites"]
    )

    assert main(["report", "--full", str(exp)]) == 0
    full = capsys.readouterr().out
    assert "  MPI        MPICH 4.0.2 (perfweave runtime: mpich)" in full.splitlines()
    assert sum(ln.startswith("  MPI_") for ln in full.splitlines()) >= 6

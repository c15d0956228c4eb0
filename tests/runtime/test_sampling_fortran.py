"""Call-stack sampling of a Fortran MPI program (use mpi), built as Fortran codes are
(gfortran -g -O1 -fno-omit-frame-pointer): the report names its procedures as written in
the source (module procedure burn::heavy, external subroutine light, the main program
as "program burn7030", gfortran's MAIN__, the call tree's only root: gfortran's main is
left out) with file:line in the .f90 file, and splits the time 70 % / 30 % between them
as the program does."""
from harness import site_lines

FFLAGS = ("-O1", "-fno-omit-frame-pointer", "-fno-inline")
SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def by_name(rows):
    return {r["name"]: r for r in rows}


def test_fortran_procedures_with_file_and_line(mpi, build, run_pw):
    prog = build(mpi, "burn7030.f90", FFLAGS)
    r = run_pw(mpi.launch(2) + [prog, 2], SAMPLE)
    assert r.proc.stdout == "done\n"
    sm = r.report()["sampling"]
    inc = by_name(sm["inclusive"])
    assert {"burn::heavy", "light", "burn::spin", "program burn7030"} <= set(inc)
    assert "MAIN__" not in inc and "main" not in inc
    assert not any("_MOD_" in name for name in inc)             # no gfortran symbols
    # 70 / 30 of the program's own time (heavy + light; MPI_Init and MPI_Finalize under
    # the program are the rest); >= 600 samples: binomial sd < 1.9 points; bound 5 points
    own = inc["burn::heavy"]["pct"] + inc["light"]["pct"]
    assert own * sm["samples"] / 100 >= 600
    assert inc["program burn7030"]["pct"] >= own
    assert abs(100 * inc["burn::heavy"]["pct"] / own - 70) <= 5, inc["burn::heavy"]
    assert abs(100 * inc["light"]["pct"] / own - 30) <= 5, inc["light"]
    assert by_name(sm["functions"])["burn::spin"]["pct"] > 0.85 * own     # self time
    # source lines in the .f90 file: the spin loop's line leads
    line = site_lines("burn7030.f90")["spin"]
    top = sm["lines"][0]["name"]
    assert top.startswith("burn::spin (burn7030.f90:") and \
        abs(int(top.rsplit(":", 1)[1].rstrip(")")) - line) <= 2, top
    # the call tree: program burn7030 -> burn::heavy -> burn::spin, per rank, one root
    assert [n["name"] for n in sm["call_tree"] if n["parent"] is None] == ["program burn7030"]
    path = {}
    for n in sm["call_tree"]:
        path[n["id"]] = (path[n["parent"]] if n["parent"] is not None else ()) + (n["name"],)
    nodes = {path[n["id"]][-3:]: n for n in sm["call_tree"]}
    heavy = nodes[("program burn7030", "burn::heavy", "burn::spin")]
    assert abs(100 * heavy["inclusive_pct"] / own - 70) <= 5
    assert heavy["per_rank_pct"]["min"] > 0 and heavy["imbalance"] < 0.2
    text = r.text_report()
    assert "burn::heavy" in text and "burn7030.f90:" in text

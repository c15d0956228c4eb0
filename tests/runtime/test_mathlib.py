"""The mathlib module (runtime/modules/mathlib.c): BLAS, LAPACK, CBLAS and FFTW calls
counted by routine with flops, under both libblas.so.3 alternatives (Debian's reference
BLAS/LAPACK and OpenBLAS, chosen by LD_LIBRARY_PATH). Each program's calls are known by
construction (tests/runtime/programs/ml_*): the user calls and flops must be exact and the
same under both libraries; the calls one library makes into another (the reference
LAPACK's dgemm_ inside dgetrf_) are internal, and only where the library makes them."""

import json
import os

import numpy as np
import pytest

from harness import bare, site_lines
from perfweave import _format

LIB = "/usr/lib/x86_64-linux-gnu"
ALTERNATIVES = {"reference": f"{LIB}/lapack:{LIB}/blas", "openblas": f"{LIB}/openblas-pthread"}
RANKS = 2


@pytest.fixture(params=sorted(ALTERNATIVES))
def blas(request, monkeypatch):
    for d in ALTERNATIVES[request.param].split(":"):
        assert os.path.isdir(d), f"{d} is missing (scripts/install-deps.sh installs it)"
    monkeypatch.setenv("LD_LIBRARY_PATH", ALTERNATIVES[request.param])
    return request.param


def per_routine(ml, process):
    c = ml.calls[ml.calls["process"] == process]
    out = {}
    for r, n, f in zip(c["routine"], c["count"], c["flops"]):
        calls, flops = out.get(r, (0, 0.0))
        out[r] = (calls + int(n), flops + float(f))
    return out


def internal(ml, process, routine):
    i = ml.internal
    return int(i["calls"][(i["process"] == process) & (i["routine"] == routine)].sum())


def test_blas_lapack_user_calls_and_flops(mpi, build, run_pw, blas):
    prog = build(mpi, "ml_blas.f90", ("-llapack", "-lblas"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    assert sorted(r.proc.stdout.split("\n"))[1:] == [
        f"rank {k} c11 600.0 info 0" for k in range(RANKS)
    ]
    ml = r.open().mathlib
    assert [p.rank for p in ml.processes] == list(range(RANKS)) and not ml.notes
    # the writer writes the keys format/mathlib.h declares, in its order
    doc = json.loads((r.exp / "mathlib" / "rank-0.json").read_text())
    assert list(doc) == list(_format.JSON["mathlib"])
    lines = site_lines("ml_blas.f90")
    for k in range(RANKS):
        got = per_routine(ml, k)
        assert got == {"dgemm_": (3, 36_000_000.0), "dgetrf_": (1, 18_000_000.0)}
        dgemm_inside = internal(ml, k, "dgemm_")
        if blas == "reference":
            assert dgemm_inside > 0  # dgetrf_ -> dgemm_ through the PLT
        else:
            assert dgemm_inside == 0  # OpenBLAS calls its own kernels
    c = ml.calls
    libs = set(c["library"])
    want = "/blas/" if blas == "reference" else "openblas"
    assert any(want in lib for lib in libs if "libblas" in lib), libs
    g = c[c["routine"] == "dgemm_"]
    assert set(g["chars"]) == {"NN"} and set(map(tuple, g[["b0", "b1", "b2"]].tolist())) == {
        (9, 8, 7)
    }  # 300, 200, 100: floor(log2) + 1
    assert (g["dim0_sum"] == 900).all()
    # the report names the call site's line and the routine's share
    rep = r.report()["mathlib"]
    sites = {s["routine"]: s["where"] for s in rep["callsites"]}
    assert sites == {
        "dgemm_": f"ml_blas.f90:{lines['gemm']}",
        "dgetrf_": f"ml_blas.f90:{lines['getrf']}",
    }
    assert rep["calls"] == 4 * RANKS and rep["flops"] == 54_000_000.0 * RANKS
    # the Python API's tables of the analysis: the report's rows, the program's counts
    exp = r.open()
    routines = exp.table("mathlib", "routines").set_index("routine")
    assert routines.loc["dgemm_", "calls"] == 3 * RANKS
    assert routines.loc["dgetrf_", "flops"] == 18_000_000.0 * RANKS
    for name in ("routines", "callsites", "size_classes"):
        df = exp.table("mathlib", name)
        assert len(df) == len(rep[name]) and list(df.columns) == list(rep[name][0]), name
    ref = [a for a in rep["advice"] if a["rule"] == "reference_library"]
    assert bool(ref) == (blas == "reference")
    assert "Math libraries" in r.text_report()


def test_cblas_and_threads(mpi, build, run_pw, blas):
    prog = build(mpi, "ml_cblas.c", ("-lblas", "-pthread"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    assert r.proc.stdout.count("c00 64.0 y99 5049.0 5049.0") == RANKS
    ml = r.open().mathlib
    for k in range(RANKS):
        got = per_routine(ml, k)
        assert got == {"cblas_dgemm": (5, 5 * 2.0 * 64**3), "daxpy_": (200, 200 * 2.0 * 100)}
        # the reference CBLAS calls dgemm_: internal, never a user call
        assert internal(ml, k, "dgemm_") == (5 if blas == "reference" else 0)
        assert ml.processes[k].threads == 3  # main (cblas) and the two axpy threads
    c = ml.calls
    assert set(c["chars"][c["routine"] == "cblas_dgemm"]) == {"RNT"}


def fftw_check(ml, planner, executes):
    for k in range(RANKS):
        p = ml.plans[ml.plans["process"] == k]
        assert len(p) == 2  # two plan creations
        assert list(p["routine"]) == [planner, planner]
        assert [tuple(x) for x in p[["n0", "n1", "n2"]].tolist()] == [(16, 16, 16), (32, 32, 32)]
        assert list(p["executes"]) == [3, 1]  # by plan, whatever the addresses
        assert list(p["flops"]) == [3 * 5 * 16**3 * 12, 5 * 32**3 * 15]
        assert not p["live"].any() and (p["kind"] == "c2c").all() and (p["sign"] == -1).all()
        got = per_routine(ml, k)
        assert sum(got[e][0] for e in executes) == 4
        assert got[planner][0] == 2


def test_fftw_plans_c(mpi, build, run_pw):
    prog = build(mpi, "ml_fftw.c", ("-lfftw3",))
    r = run_pw(mpi.launch(RANKS) + [prog])
    ml = r.open().mathlib
    fftw_check(ml, "fftw_plan_dft_3d", ["fftw_execute"])
    # fftw_plan_dft_3d -> fftw_plan_many_dft through the PLT: internal
    assert internal(ml, 0, "fftw_plan_many_dft") > 0
    rep = r.report()["mathlib"]
    assert rep["plans_created"] == 2 * RANKS and rep["plan_executes"] == 4 * RANKS


def test_fftw_plans_legacy_fortran(mpi, build, run_pw):
    prog = build(mpi, "ml_fftw_legacy.f90", ("-I/usr/include", "-lfftw3"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    fftw_check(r.open().mathlib, "dfftw_plan_dft_3d_", ["dfftw_execute_", "dfftw_execute_dft_"])


def test_fftw_plans_f2003(mpi, build, run_pw):
    prog = build(mpi, "ml_fftw_f03.f90", ("-I/usr/include", "-lfftw3"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    fftw_check(r.open().mathlib, "fftw_plan_dft_3d", ["fftw_execute_dft"])


def test_off_and_program_unchanged(mpi, build, run_pw):
    """--no-mathlib: no files; the program's output is the same with and without."""
    prog = build(mpi, "ml_blas.f90", ("-llapack", "-lblas"))
    ref = sorted(bare(mpi.launch(RANKS) + [prog]).stdout.split("\n"))
    r = run_pw(mpi.launch(RANKS) + [prog], ["--no-mathlib"])
    assert sorted(r.proc.stdout.split("\n")) == ref
    assert not (r.exp / "mathlib").exists() and not r.open().mathlib


def test_no_math_library_no_file(build, run_pw):
    prog = build(None, "serial.c")
    r = run_pw([prog])
    assert not (r.exp / "mathlib").exists()
    assert not np.any(r.open().mathlib.calls["count"])


def by_pid(ml):
    """{pid: (process index, its routines' (calls, flops))}."""
    return {p.pid: (i, per_routine(ml, i)) for i, p in enumerate(ml.processes)}


def test_forked_child_does_not_repeat_the_parent(build, run_pw):
    """A forked child inherits the parent's tables: its dump must hold its own calls only
    (3 dgemm_, 1 execute of the inherited plan), never the parent's 7 again."""
    prog = build(None, "ml_fork.c", ("-lblas", "-lfftw3"))
    r = run_pw([prog])
    assert r.proc.stdout == "c00 32.0 child 0\n"
    ml = r.open().mathlib
    assert len(ml.processes) == 2, ml.processes
    flops = 2.0 * 32**3
    got = sorted(by_pid(ml).values(), key=lambda x: -x[1]["dgemm_"][0])
    (parent, mine), (child, theirs) = got
    assert mine["dgemm_"] == (7, 7 * flops) and mine["fftw_execute"][0] == 2
    assert theirs == {"dgemm_": (3, 3 * flops), "fftw_execute": (1, 5 * 64 * 6.0)}
    plans = ml.plans
    assert plans["executes"][plans["process"] == parent].tolist() == [2]
    # the child's plan: the parent's, executed once there, its planning not repeated
    p = plans[plans["process"] == child]
    assert p["executes"].tolist() == [1] and p["plan_ns"].tolist() == [0]
    assert ml.processes[child].t_start > ml.processes[parent].t_start


def test_forked_child_of_a_rank_has_its_own_files(mpi, build, run_pw):
    """A child of an MPI rank is no rank (the core unsets it at fork): it writes its own
    calls under its pid (mathlib/HOST.PID.*), never the rank's files (mathlib/rank-R.*),
    and each rank's counts are its own."""
    prog = build(mpi, "ml_fork.c", ("-DWITH_MPI", "-lblas", "-lfftw3"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    assert r.proc.stdout.count("c00 32.0 child 0\n") == RANKS
    ml = r.open().mathlib
    ranks = [i for i, p in enumerate(ml.processes) if p.rank >= 0]
    children = [i for i, p in enumerate(ml.processes) if p.rank < 0]
    assert sorted(ml.processes[i].rank for i in ranks) == list(range(RANKS))
    assert len(children) == RANKS
    for i in ranks:
        got = per_routine(ml, i)
        assert got["dgemm_"] == (7, 7 * 2.0 * 32**3) and got["fftw_execute"][0] == 2
    for i in children:
        got = per_routine(ml, i)
        assert got["dgemm_"] == (3, 3 * 2.0 * 32**3) and got["fftw_execute"][0] == 1


def test_site_bound_folds_new_sites_into_the_routines_overflow(build, run_pw):
    """--mathlib-max-sites 2 (the core's keyed call-site tables, runtime/core/keyed.c):
    each of two threads makes ddot_ calls of six size classes from one line (class
    n = 2^k, k + 1 calls: tests/runtime/programs/ml_bound.c); a thread keeps its first two
    sites (n = 1 and 2) and folds the 3 + 4 + 5 + 6 calls of the others into ddot_'s
    overflow site (no call site, no size class), counted as dropped; the merge adds the
    two threads' sites of the same (class, line)."""
    prog = build(None, "ml_bound.c", ("-lblas", "-lpthread"))
    r = run_pw([prog], ["--mathlib-max-sites", "2"])
    per_thread = sum((1 << k) * (k + 1) for k in range(6))
    assert r.proc.stdout == f"sums {per_thread} {per_thread}\n"
    ml = r.open().mathlib
    (p,) = ml.processes
    assert (p.threads, p.dropped) == (2, 2 * 18)
    (doc,) = [json.loads(f.read_text()) for f in (r.exp / "mathlib").glob("*.json")]
    assert doc["max_sites"] == 2
    c = ml.calls
    assert set(c["routine"]) == {"ddot_"} and c["count"].sum() == 2 * 21
    line = site_lines("ml_bound.c")["dot"]
    kept = c[c["offset"] != 0]
    assert sorted(zip(kept["b0"], kept["count"], kept["dim0_sum"])) == [(1, 2, 2), (2, 4, 8)]
    assert {s["where"] for s in r.report()["mathlib"]["callsites"]} >= {f"ml_bound.c:{line}"}
    over = c[c["offset"] == 0]
    folded = sum((1 << k) * (k + 1) for k in range(2, 6))  # their n, summed
    assert over[["object", "b0", "b1", "b2", "chars", "count", "dim0_sum"]].tolist() == [
        ("", 0, 0, 0, "", 36, 2 * folded)
    ]
    assert over["flops"].tolist() == [2.0 * 2 * folded]  # 2n per ddot_

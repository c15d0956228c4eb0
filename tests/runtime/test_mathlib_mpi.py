"""The mathlib module's MPI math libraries: FFTW's MPI interface (fftw_mpi_*) and
ScaLAPACK (PBLAS p?gemm_, p?gesv_), whose work is shared by the processes of a
communicator or BLACS grid. Each process counts the global operation's flops divided by
the processes sharing it (mathlib.spec: P), so that the processes' flops sum to the
operation's. The programs' calls are known by construction (tests/runtime/programs/ml_*).

Debian builds libfftw3-mpi against its default MPI (Open MPI) only: its test runs under
the MPI the library links (its ldd), once; ScaLAPACK is built for both
(libscalapack-openmpi, libscalapack-mpich) and tested under both."""

import math
import subprocess

import pytest

from harness import FLAVORS, site_lines
from test_mathlib import internal, per_routine

LIB = "/usr/lib/x86_64-linux-gnu"


def linked_mpi(library):
    """The MPI a shared library was built against (its ldd), None if neither."""
    out = subprocess.run(["ldd", library], capture_output=True, text=True).stdout
    if "libmpi.so.40" in out:
        return "openmpi"
    if "libmpich.so" in out:
        return "mpich"
    return None


def test_fftw_mpi_plan(build, run_pw):
    """A 64 x 64 MPI DFT on 2 ranks, executed 3 times: per rank 1 plan, 3 executes of it,
    each of 5 N log2 N / 2 flops (N = 4096, the global size)."""
    lib = f"{LIB}/libfftw3_mpi.so"
    built_for = linked_mpi(lib)
    assert built_for is not None, f"{lib} (libfftw3-mpi-dev) is missing or links no MPI"
    mpi = FLAVORS[built_for]
    ranks = 2
    prog = build(mpi, "ml_fftw_mpi.c", ("-lfftw3_mpi", "-lfftw3"))
    r = run_pw(mpi.launch(ranks) + [prog])
    assert sorted(r.proc.stdout.splitlines()) == ["rank 0 rows 32 dc 12288.0", "rank 1 rows 32"]
    ml = r.open().mathlib
    assert [p.rank for p in ml.processes] == list(range(ranks)) and not ml.notes
    n = 64 * 64
    per_execute = 5 * n * math.log2(n) / ranks
    for k in range(ranks):
        p = ml.plans[ml.plans["process"] == k]
        assert list(p["routine"]) == ["fftw_mpi_plan_dft_2d"]
        assert [tuple(x) for x in p[["n0", "n1", "n2"]].tolist()] == [(64, 64, 0)]
        assert list(p["procs"]) == [ranks] and list(p["size"]) == [n]
        assert list(p["executes"]) == [3] and list(p["flops"]) == [3 * per_execute]
        assert not p["live"].any() and list(p["kind"]) == ["c2c"] and list(p["sign"]) == [-1]
        got = per_routine(ml, k)
        assert got == {
            "fftw_mpi_plan_dft_2d": (1, 0.0),
            "fftw_execute": (2, 2 * per_execute),
            "fftw_mpi_execute_dft": (1, per_execute),
            "fftw_destroy_plan": (1, 0.0),
        }
        # fftw_mpi_plan_dft_2d -> fftw_mpi_plan_many_dft through the PLT: internal
        assert internal(ml, k, "fftw_mpi_plan_many_dft") >= 1
    # the processes' flops sum to the global transforms'
    assert ml.plans["flops"].sum() == 3 * 5 * n * math.log2(n)
    lines = site_lines("ml_fftw_mpi.c")
    sites = {s["routine"]: s["where"] for s in r.report()["mathlib"]["callsites"]}
    assert sites["fftw_mpi_plan_dft_2d"] == f"ml_fftw_mpi.c:{lines['plan']}"
    assert sites["fftw_mpi_execute_dft"] == f"ml_fftw_mpi.c:{lines['mpi_execute']}"


def test_scalapack_pdgemm_pdgesv(mpi, build, run_pw):
    """4 ranks as a 2 x 2 BLACS grid: 2 pdgemm_ (200 x 150 x 100) and 1 pdgesv_ (n = 200,
    one right-hand side) per rank, each counting the global flops / 4; ScaLAPACK's own
    BLAS calls (dgemm_ through the PLT) are internal, never user calls."""
    lib = f"{LIB}/libscalapack-{mpi.name}.so"
    assert linked_mpi(lib) == mpi.name, f"{lib} (libscalapack-{mpi.name}-dev) is missing"
    ranks = 4
    prog = build(mpi, "ml_scalapack.c", (f"-lscalapack-{mpi.name}",))
    r = run_pw(mpi.launch(ranks) + [prog])
    assert sorted(r.proc.stdout.splitlines()) == [
        f"rank {k} grid {k // 2} {k % 2} info 0" for k in range(ranks)
    ]
    ml = r.open().mathlib
    assert [p.rank for p in ml.processes] == list(range(ranks)) and not ml.notes
    m, n, k_, ns = 200, 150, 100, 200
    gemm = 2.0 * m * n * k_ / ranks
    gesv = (2.0 / 3 * ns * ns * ns + 2 * ns * ns * 1) / ranks
    for k in range(ranks):
        got = per_routine(ml, k)
        assert set(got) == {"pdgemm_", "pdgesv_"}, got
        assert got["pdgemm_"] == (2, 2 * gemm)
        assert got["pdgesv_"][0] == 1 and got["pdgesv_"][1] == pytest.approx(gesv, rel=1e-12)
        assert internal(ml, k, "dgemm_") > 0  # PBLAS -> dgemm_ through the PLT
    c = ml.calls
    g = c[c["routine"] == "pdgemm_"]
    assert set(g["chars"]) == {"NN"}
    assert set(map(tuple, g[["b0", "b1", "b2"]].tolist())) == {(8, 8, 7)}  # 200 150 100
    assert c["flops"][c["routine"] == "pdgemm_"].sum() == 2 * 2.0 * m * n * k_
    lines = site_lines("ml_scalapack.c")
    sites = {s["routine"]: s["where"] for s in r.report()["mathlib"]["callsites"]}
    assert sites == {
        "pdgemm_": f"ml_scalapack.c:{lines['gemm']}",
        "pdgesv_": f"ml_scalapack.c:{lines['gesv']}",
    }

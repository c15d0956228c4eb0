"""The math libraries in the samples (analysis/samples.py MATHLIB) on hand-made sample
records: by the library's object, through perfweave's wrapper frames, a library's own
threads, a statically linked routine by its name; the samples' view in the math section
(per routine and caller, static detection), the dims histogram, and MKL_VERBOSE logs
(readers/mkl_verbose.py, `perfweave report --mkl-verbose`)."""

import subprocess
import sys

import pytest

from perfweave.analysis import samples
from perfweave.analysis.mathlib import analyze, is_math_function, routine_key
from perfweave.model.mathlib import MathLib
from perfweave.model.samples import ProcessSamples
from perfweave.readers import mkl_verbose
from perfweave.report.section import View
from perfweave.report.sections.mathlib import SECTION
from perfweave.symbols import Location

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
BLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
LAPACK = "/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3"
GOMP = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
PW = "/opt/pw/lib/libperfweave.so"
APP = "/home/u/app"
OBJECTS = [LIBC, BLAS, LAPACK, GOMP, PW, APP]
NAMES = {
    LIBC: {0x10: "start_thread", 0x20: "sched_yield", 0x30: "__GI___lll_lock_wait"},
    BLAS: {0x100: "dgemm_kernel_HASWELL", 0x200: "dgemm_", 0x300: ""},
    LAPACK: {0x400: "dgetrf_"},
    GOMP: {0x500: "gomp_thread_start"},
    PW: {0x600: "dgemm_"},  # the wrapper
    APP: {
        0x1000: "solve",
        0x1100: "main",
        0x1200: "dgemm_",  # the static BLAS's, in the executable
        0x1300: "dgemm_kernel",
        0x1400: "dscale_rows",  # the program's: no routine of a library
    },
}
LINES = {(APP, 0x1000): 211, (APP, 0x1100): 40}


class Sym:
    def resolve(self, module, offsets):
        return [
            Location(
                module, o, NAMES.get(module, {}).get(o, ""), "solver.f90", LINES.get((module, o), 0)
            )
            for o in offsets
        ]


def process(rows):
    """One process's samples, each thread's 1 ms apart (every sample weighs 1 ms)."""
    seen = {}
    out = []
    for f, t, a in rows:
        seen[t] = seen.get(t, 0) + 1
        out.append({"frames": f, "thread": t, "activity": a, "t": seen[t] * 1_000_000})
    return ProcessSamples.from_literal(out, objects=OBJECTS, threads=3)


def test_math_library_samples_routine_and_caller():
    main = [(APP, 0x1000), (APP, 0x1100)]
    rows = (
        # 4 in dgemm_'s kernel called through perfweave's wrapper from solve:211
        [([(BLAS, 0x100), (BLAS, 0x200), (PW, 0x600)] + main, 0, "compute")] * 4
        # 2 in dgemm_ called by dgetrf_ (the reference LAPACK through the wrapper): dgetrf_
        + [([(BLAS, 0x200), (PW, 0x600), (LAPACK, 0x400), (PW, 0x600)] + main, 0, "compute")] * 2
        # 1 on a lock inside the library, 1 in libc's sched_yield from it: the library's
        + [([(LIBC, 0x30), (BLAS, 0x300)] + main, 0, "compute")]
        # 2 of the library's own thread (start_thread -> unnamed -> sched_yield)
        + [([(LIBC, 0x20), (BLAS, 0x300), (LIBC, 0x10)], 1, "compute")] * 2
        # an OpenMP worker running the library's region
        + [([(BLAS, 0x100), (GOMP, 0x500), (LIBC, 0x10)], 2, "compute")]
        # the program's own work, a routine of its own with a BLAS-like name, and MPI
        + [(main, 0, "compute")] * 3
        + [([(APP, 0x1400)] + main, 0, "compute")]
        + [([(BLAS, 0x100), (PW, 0x600)] + main, 0, "mpi_p2p")]  # stays MPI
    )
    p = process(rows)
    acts = [samples.ACTIVITIES[a] for a in samples.classify([p], Sym())[0]]
    assert acts == ["mathlib"] * 10 + ["compute"] * 4 + ["mpi_p2p"]
    res = samples.analyze([p], symbolizer=Sym())
    assert res.app_activity_pct["mathlib"] == pytest.approx(100 * 10 / 15)
    assert res.time_split["math libraries"] == pytest.approx(100 * 10 / 15)
    assert res.time_split["compute"] == pytest.approx(100 * 4 / 15)
    m = {r["routine"]: r for r in res.mathlib["routines"]}
    assert set(m) == {"dgemm_", "dgetrf_", "libblas.so.3", "dgemm_kernel_HASWELL"}
    g = m["dgemm_"]
    assert g["pct"] == pytest.approx(100 * 4 / 15) and not g["static"] and g["object"] == BLAS
    assert [(c["name"], c["routine_pct"]) for c in g["callers"]] == [
        ("solve (solver.f90:211)", 100)
    ]
    assert m["dgetrf_"]["object"] == LAPACK and m["dgetrf_"]["pct"] == pytest.approx(100 * 2 / 15)
    assert m["dgetrf_"]["callers"][0]["name"] == "solve (solver.f90:211)"
    # an unnamed frame: the library's name; its thread's two samples, one from solve
    lib = {c["name"]: c["pct"] for c in m["libblas.so.3"]["callers"]}
    assert lib == {
        "[threads of the library]": pytest.approx(100 * 2 / 15),
        "solve (solver.f90:211)": pytest.approx(100 / 15),
    }
    # the OpenMP worker in the library's region: the library's thread
    k = m["dgemm_kernel_HASWELL"]["callers"]
    assert [c["name"] for c in k] == ["[threads of the library]"]
    assert sum(r["math_pct"] for r in m.values()) == pytest.approx(100)


def test_statically_linked_routine_by_name():
    main = [(APP, 0x1000), (APP, 0x1100)]
    p = process(
        [([(APP, 0x1300), (APP, 0x1200)] + main, 0, "compute")] * 3 + [(main, 0, "compute")]
    )
    res = samples.analyze([p], symbolizer=Sym())
    [r] = res.mathlib["routines"]
    assert (r["routine"], r["object"], r["static"]) == ("dgemm_", APP, True)
    assert r["pct"] == 75 and r["callers"][0]["name"] == "solve (solver.f90:211)"
    # the math section: no call seen by the wrappers -> said statically linked
    ml = analyze(MathLib.from_literal([]), sampled=res.mathlib)
    [st] = ml.static
    assert st["routine"] == "dgemm_" and "linked statically into app" in st["text"]
    assert [a["rule"] for a in ml.advice] == ["static_library"]
    # seen by the wrappers: not static
    seen = MathLib.from_literal(
        [{"rank": 0, "t_end": 1, "calls": [{"routine": "dgemm_", "count": 5}]}]
    )
    ml = analyze(seen, sampled=res.mathlib)
    assert not ml.static and ml.sampled["routines"][0]["calls"] == 5
    text = SECTION.text({"mathlib": ml.to_json()}, View(width=100, max_rows=10))
    assert all(len(line) <= 100 for line in text)
    assert any("75.0 % of the app time in math libraries" in line for line in text)


def test_names():
    for name in (
        "dgemm_",
        "dgemm_kernel_HASWELL",
        "cblas_zgemm",
        "dgetrf_",
        "fftw_execute",
        "dfftw_execute_",
        "dgemm_nn",
        "daxpy_k",
        "dgemv_n_HASWELL",
        "dgemm",
        "mkl_blas_avx2_dgemm",
        "LAPACKE_dgesv",
        "idamax_",
        "ddot_",
    ):
        assert is_math_function(name), name
    for name in ("solve", "main", "dscale_rows_of", "daxpy_like", "dump", "zero", "scopy2"):
        assert not is_math_function(name), name
    assert {routine_key(n) for n in ("dgemm_", "DGEMM", "cblas_dgemm", "dgemm_64_")} == {"dgemm"}


def test_dims_histogram():
    ml = MathLib.from_literal(
        [
            {
                "rank": 0,
                "t_end": 1,
                "calls": [
                    {"routine": "dgemm_", "dims": (8, 8, 8), "count": 30, "total_ns": 30},
                    {"routine": "dgemm_", "dims": (300, 8, 9), "count": 10, "total_ns": 70},
                ],
            }
        ]
    )
    h = analyze(ml).dims_hist
    got = [
        (int(d), int(b), int(lo), int(hi), int(c))
        for d, b, lo, hi, c in zip(h["dim"], h["bucket"], h["lo"], h["hi"], h["calls"])
    ]
    assert got == [(0, 4, 8, 15, 30), (0, 9, 256, 511, 10), (1, 4, 8, 15, 40), (2, 4, 8, 15, 40)]
    assert h["pct"].tolist() == [75, 25, 100, 100]


GEMM = (
    "MKL_VERBOSE DGEMM(N,N,1000,1000,1000,0x7ffd1e0c2e78,0x2b1b3c0e9080,1000,0x2b1b3cee8080,"
    "1000,0x7ffd1e0c2e80,0x2b1b3dce7080,1000) 43.21ms CNR:OFF Dyn:1 FastMM:1 TID:0 NThr:8"
)
LOG = f"""\
MKL_VERBOSE oneMKL 2024.0 Product build 20231011 for Intel(R) 64 architecture
[1,0]<stdout>:{GEMM}
MKL_VERBOSE DGEMM(N,T,10,10,10,0x1,0x2,10,0x3,10,0x4,0x5,10) 1.50us CNR:OFF Dyn:1 TID:1  NThr:1
the program's own line
MKL_VERBOSE DGETRF(300,300,0x7f,300,0x55,0) 2.5ms CNR:OFF Dyn:1 FastMM:1 TID:0 NThr:8
MKL_VERBOSE FFT(dcfi64) 0.1s CNR:OFF Dyn:1 FastMM:1 TID:0 NThr:2
MKL_VERBOSE BEGIN mkl_sparse_d_mv(...)
"""


def test_mkl_verbose_log(tmp_path):
    path = tmp_path / "run.log"
    path.write_text(LOG)
    mk = mkl_verbose.read(path)
    assert mk.lines == 7 and mk.skipped == 2  # the version line, the BEGIN line
    s = mk.summary()
    assert s["calls"] == 4 and s["time_s"] == pytest.approx(0.04321 + 1.5e-6 + 0.0025 + 0.1)
    r = {x["routine"]: x for x in s["routines"]}
    assert r["dgemm"]["calls"] == 2 and r["dgemm"]["time_s"] == pytest.approx(0.0432115)
    assert r["dgemm"]["threads"] == 8 and r["fft"]["threads"] == 2
    assert [x["routine"] for x in s["routines"]] == ["fft", "dgemm", "dgetrf"]
    res = analyze(MathLib.from_literal([]), mkl_verbose=mk)
    text = SECTION.text({"mathlib": res.to_json()}, View(width=100, max_rows=10))
    assert any(line.split()[:2] == ["dgemm", "2"] for line in text), text


def test_mkl_verbose_cli_errors(tmp_path):
    """A log that cannot be read or holds no call: one line, exit status 2."""
    exp = tmp_path / "exp"
    exp.mkdir()
    empty = tmp_path / "empty.log"
    empty.write_text("hello\n")
    for log, why in ((tmp_path / "missing.log", "No such file"), (empty, "no MKL_VERBOSE call")):
        r = subprocess.run(
            [sys.executable, "-m", "perfweave", "report", "--mkl-verbose", str(log), str(exp)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr

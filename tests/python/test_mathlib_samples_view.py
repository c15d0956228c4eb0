"""The math libraries in the samples (analysis/samples/ MATHLIB) on hand-made sample
records: by the library's object, through perfweave's wrapper frames, a library's own
threads, a statically linked routine by its name, the kernels of optimised libraries
counted for the routine they serve; the samples' view in the math section (per routine
and caller, static detection), the dims histogram, and MKL_VERBOSE logs
(readers/mkl_verbose.py, `perfweave report --mkl-verbose`)."""

import subprocess
import sys

import pytest

from perfweave.analysis import samples
from perfweave.analysis.mathlib import analyze, routine_key
from perfweave.analysis.samples.names import is_math_function, served_routine
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
    BLAS: {
        0x100: "dgemm_kernel_HASWELL",
        0x110: "dgemm_kernel_ZEN",
        0x120: "dgemm_itcopy_SKYLAKEX",
        0x130: "blas_thread_server",
        0x200: "dgemm_",
        0x300: "",
    },
    LAPACK: {0x400: "dgetrf_"},
    GOMP: {0x500: "gomp_thread_start"},
    PW: {0x600: "dgemm_", 0x610: "dgetrf_"},  # the wrappers
    APP: {
        0x1000: "solve",
        0x1100: "main",
        0x1200: "dgemm_",  # the static BLAS's, in the executable
        0x1300: "dgemm_kernel",
        0x1400: "dscale_rows",  # the program's: no routine of a library
        0x1500: "blas_thread_server",  # a static OpenBLAS's
        0x1600: "dgemm_kernel_HASWELL",
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
    """One process's samples, each thread's 1 ms apart (every sample weighs 1 ms) unless
    a row gives its time (ms) as a fourth item."""
    seen = {}
    out = []
    for f, t, a, *at in rows:
        seen[t] = at[0] if at else seen.get(t, 0) + 1
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
    assert set(m) == {"dgemm_", "dgetrf_", "libblas.so.3"}
    # the library's own thread and the OpenMP worker in the library's region, sampled
    # while the main thread was in the wrapped dgemm_ (1 ms apart), serve it too
    g = m["dgemm_"]
    assert g["pct"] == pytest.approx(100 * 7 / 15) and not g["static"] and g["object"] == BLAS
    assert [(c["name"], c["pct"]) for c in g["callers"]] == [
        ("solve (solver.f90:211)", pytest.approx(100 * 4 / 15)),
        ("[threads of the library]", pytest.approx(100 * 3 / 15)),
    ]
    assert g["unwrapped_pct"] == 0
    assert m["dgetrf_"]["object"] == LAPACK and m["dgetrf_"]["pct"] == pytest.approx(100 * 2 / 15)
    assert m["dgetrf_"]["callers"][0]["name"] == "solve (solver.f90:211)"
    # an unnamed frame that serves no routine by its name: the library's name; solve
    # reaches it without the wrapper
    lib = m["libblas.so.3"]
    assert [c["name"] for c in lib["callers"]] == ["solve (solver.f90:211)"]
    assert lib["pct"] == lib["unwrapped_pct"] == pytest.approx(100 / 15)
    assert sum(r["math_pct"] for r in m.values()) == pytest.approx(100)
    # the wrappers saw both routines: nothing is said static (nor is the library's name)
    seen = MathLib.from_literal(
        [{"rank": 0, "t_end": 1, "calls": [{"routine": "dgemm_"}, {"routine": "dgetrf_"}]}]
    )
    assert not analyze(seen, sampled=res.mathlib).static


def test_kernels_serve_the_wrapped_routine():
    """OpenBLAS's kernels (named after the processor) count for the routine the thread's
    wrapped call is, else for the one a thread of the process calls at that moment, else
    for the one they are named after; only a routine the samples show called without the
    wrappers, and never seen by them in any thread, is said to be so."""
    main = [(APP, 0x1000), (APP, 0x1100)]
    waiting = [(LIBC, 0x20), (BLAS, 0x130), (LIBC, 0x10)]
    p = process(
        # dgetrf_ through its wrapper, its stack continued from the wrapper past a kernel
        # without unwind tables: dgetrf_'s, though the kernel is a gemm's
        [([(BLAS, 0x110), (PW, 0x610)] + main, 0, "compute", t) for t in (1, 2)]
        # a stack that ends in the kernel (no wrapper kept it): the kernel's routine
        + [([(BLAS, 0x110)], 0, "compute", 3)]
        # the library's worker, at 1 and 2 ms: the main thread is in dgetrf_
        + [([(BLAS, 0x120), (BLAS, 0x130), (LIBC, 0x10)], 1, "compute", t) for t in (1, 2)]
        # another, waiting at 7 and 8 ms, with nothing called near it: its own routine;
        # at 9 ms in a kernel whose stack ends there: a thread of the library's all the
        # same (its other stacks start in the library), the kernel's routine
        + [(waiting, 2, "compute", t) for t in (7, 8)]
        + [([(BLAS, 0x110)], 2, "compute", 9)]
        # the program calling dgemm_ without the wrapper (not through the PLT)
        + [([(BLAS, 0x100), (BLAS, 0x200)] + main, 0, "compute", t) for t in (4, 5)]
    )
    res = samples.analyze([p], symbolizer=Sym())
    m = {r["routine"]: r for r in res.mathlib["routines"]}
    assert {k: r["pct"] for k, r in m.items()} == {
        "dgetrf_": pytest.approx(100 * 4 / 10),
        "dgemm_": pytest.approx(100 * 4 / 10),
        "blas_thread_server": pytest.approx(100 * 2 / 10),
    }
    assert {c["name"]: c["pct"] for c in m["dgetrf_"]["callers"]} == {
        "solve (solver.f90:211)": pytest.approx(100 * 2 / 10),
        "[threads of the library]": pytest.approx(100 * 2 / 10),
    }
    assert {c["name"]: c["pct"] for c in m["dgemm_"]["callers"]} == {
        "solve (solver.f90:211)": pytest.approx(100 * 2 / 10),
        "[stack ends in the library]": pytest.approx(100 / 10),
        "[threads of the library]": pytest.approx(100 / 10),
    }
    assert m["dgetrf_"]["unwrapped_pct"] == 0
    assert m["dgemm_"]["unwrapped_pct"] == pytest.approx(100 * 2 / 10)
    # the wrappers saw dgetrf_ only: dgemm_ was called without them
    calls = [{"routine": "dgetrf_", "count": 2}]
    seen = MathLib.from_literal([{"rank": 0, "t_end": 1, "calls": calls}])
    [st] = analyze(seen, sampled=res.mathlib).static
    assert st["routine"] == "dgemm_" and "calls it without the wrappers" in st["text"]
    # ... unless they saw it in any thread, as a library's internal call too
    inner = MathLib.from_literal(
        [{"rank": 0, "t_end": 1, "calls": calls, "internal": {"dgemm_": 40}}]
    )
    assert not analyze(inner, sampled=res.mathlib).static
    # the same samples without the direct calls: nothing to claim (a kernel's stack that
    # ends in the library, and a worker, show no caller)
    p.records = p.records[:-2]
    res = samples.analyze([p], symbolizer=Sym())
    assert res.mathlib["routines"][0]["routine"] == "dgetrf_"
    assert not analyze(seen, sampled=res.mathlib).static


def test_static_openblas_kernels_and_workers():
    """A static OpenBLAS: the kernel's stack that ends in the executable and the worker's
    samples during the call count for dgemm_, which is said linked statically; the
    worker's own routine, at other times, is not."""
    main = [(APP, 0x1000), (APP, 0x1100)]
    worker = [(LIBC, 0x20), (APP, 0x1500), (LIBC, 0x10)]
    p = process(
        # dgemm_ from solve, then two samples whose stacks end in its kernel
        [([(APP, 0x1600), (APP, 0x1200)] + main, 0, "compute", 1)]
        + [([(APP, 0x1600)], 0, "compute", t) for t in (2, 3)]
        # the worker: 1 ms from the call seen at 1 ms, then 2 ms from it
        + [(worker, 1, "compute", t) for t in (1, 2, 3)]
    )
    res = samples.analyze([p], symbolizer=Sym())
    m = {r["routine"]: r for r in res.mathlib["routines"]}
    assert {k: (r["pct"], r["static"]) for k, r in m.items()} == {
        "dgemm_": (pytest.approx(100 * 5 / 6), True),
        "blas_thread_server": (pytest.approx(100 / 6), True),
    }
    ml = analyze(MathLib.from_literal([]), sampled=res.mathlib)
    assert [(st["routine"], st["pct"]) for st in ml.static] == [
        ("dgemm_", pytest.approx(100 * 5 / 6))
    ]
    assert "linked statically into app" in ml.static[0]["text"]


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


# the processors OpenBLAS 0.3.21 (Debian 12) builds its x86-64 kernels for: the suffix of
# each kernel's name (nm -D libopenblas.so.0), chosen at run time (OPENBLAS_CORETYPE)
CORES = (
    "ATOM BARCELONA BOBCAT BULLDOZER COOPERLAKE CORE2 DUNNINGTON EXCAVATOR HASWELL NANO "
    "NEHALEM OPTERON OPTERON_SSE3 PENRYN PILEDRIVER PRESCOTT SANDYBRIDGE SKYLAKEX "
    "STEAMROLLER ZEN SAPPHIRERAPIDS"
).split()


def test_served_routine_of_each_library():
    # OpenBLAS: kernels, copies and drivers, whatever the processor
    for core in CORES:
        for kernel, routine in (
            ("dgemm_kernel", "dgemm_"),
            ("dgemm_beta", "dgemm_"),
            ("dgemm_itcopy", "dgemm_"),
            ("dgemm_oncopy", "dgemm_"),
            ("dgemm_small_kernel_nn", "dgemm_"),
            ("zgemm_kernel_n", "zgemm_"),
            ("dtrsm_kernel_LN", "dtrsm_"),
            ("dtrsm_iunncopy", "dtrsm_"),
            ("dgemv_n", "dgemv_"),
            ("dgemv_t", "dgemv_"),
            ("daxpy_k", "daxpy_"),
            ("ddot_k", "ddot_"),
            ("idamax_k", "idamax_"),
            ("dsymv_L", "dsymv_"),
        ):
            assert served_routine(f"{kernel}_{core}") == routine, (kernel, core)
            # a static library's, in the executable
            assert is_math_function(f"{kernel}_{core}"), (kernel, core)
    for name, routine in (
        ("dgemm_nn", "dgemm_"),
        ("dgemm_tn", "dgemm_"),
        ("dgemm_thread_nt", "dgemm_"),
        ("dsyrk_UN", "dsyrk_"),
        ("dtrsm_LNUU", "dtrsm_"),
        ("dgetrf_single", "dgetrf_"),
        ("dpotrf_U_parallel", "dpotrf_"),
        ("dlaswp_plus", "dlaswp_"),
        ("daxpy_k", "daxpy_"),
        # the interface serves itself
        ("dgemm_", "dgemm_"),
        ("dgemm_64_", "dgemm_64_"),
        ("DGEMM", "DGEMM"),
        ("cblas_dgemm", "cblas_dgemm"),
        ("LAPACKE_dgesv_work", "LAPACKE_dgesv_work"),
        ("fftw_execute", "fftw_execute"),
        ("dfftw_execute_", "dfftw_execute_"),
        # MKL
        ("mkl_blas_avx2_dgemm_kernel_0", "dgemm_"),
        ("mkl_blas_avx512_xdgemm", "dgemm_"),
        ("mkl_blas_avx2_dgemm_dcopy_down12_ea", "dgemm_"),
        ("mkl_lapack_dgetrf", "dgetrf_"),
        # BLIS
        ("bli_dgemm_haswell_asm_6x8", "dgemm_"),
        ("bli_dgemmsup_rv_haswell_asm_6x8m", "dgemm_"),
        ("bli_daxpyv_zen_int10", "daxpy_"),
        ("bli_damaxv_zen_int", "idamax_"),
        # serving any routine
        ("blas_thread_server", None),
        ("exec_blas", None),
        ("mkl_serv_allocate", None),
        ("bli_dpackm_haswell_asm_6xk", None),
        ("bli_thrcomm_barrier", None),
        ("libopenblas.so.0", None),
    ):
        assert served_routine(name) == routine, name


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

"""The math-library analysis (analysis/mathlib.py) on models built from literals: shares,
rates and advice with numbers known by construction."""

import pytest

from perfweave.analysis.mathlib import analyze
from perfweave.model.mathlib import MathLib
from perfweave.report.sections.mathlib import SECTION
from perfweave.report.section import View


def test_routines_rates_and_advice():
    ml = MathLib.from_literal(
        [
            {
                "rank": 0,
                "t_end": 10_000_000_000,  # 10 s of process life
                "calls": [
                    # 2000 small gemms (8^3) from one site: 1 s, 2 GF of flops... small
                    {
                        "routine": "dgemm_",
                        "dims": (8, 8, 8),
                        "chars": "NN",
                        "count": 2000,
                        "total_ns": 1_000_000_000,
                        "flops": 2000 * 2.0 * 8**3,
                        "bytes": 2000 * 8.0 * 256,
                        "library": "/usr/lib/x/blas/libblas.so.3",
                    },
                    {
                        "routine": "dgetrf_",
                        "dims": (300, 300),
                        "count": 1,
                        "total_ns": 1_000_000_000,
                        "flops": 18e6,
                        "library": "/usr/lib/x/openblas-pthread/liblapack.so.3",
                    },
                ],
                "plans": [{"routine": "fftw_plan_dft_1d", "dims": (64,), "executes": 1}] * 12,
                "internal": {"dscal_": 5},
            }
        ]
    )
    r = analyze(ml)
    assert r.calls == 2001 and r.internal_calls == 5
    assert r.time_s == pytest.approx(2.0) and r.pct_of_process == pytest.approx(20.0)
    rows = {x: i for i, x in enumerate(r.routines["routine"])}
    g = r.routines[rows["dgemm_"]]
    assert g["pct"] == pytest.approx(50.0) and g["gflops"] == pytest.approx(2000 * 1024 / 1e9)
    assert r.routines[rows["dscal_"]]["internal"] == 5 and r.routines[rows["dscal_"]]["calls"] == 0
    z = r.size_classes[r.size_classes["routine"] == "dgemm_"][0]
    assert z["dims"] == "8x8x8" and (z["b0"], z["b1"], z["b2"]) == (4, 4, 4)
    rules = {a["rule"] for a in r.advice}
    assert rules == {"small_gemm", "fftw_plan_reuse", "reference_library"}
    # ranked in the report's Advice section by the share of the processes' 10 s they
    # concern: 1 s of small gemms and 1 s answered by the reference BLAS are 10 % each
    from perfweave.analysis.advice import advise

    ranked = {a["rule"]: a for a in advise({"mpi_profile": {"mpi": False}, "mathlib": r.to_json()})}
    assert ranked["small_gemm"]["section"] == "mathlib"
    assert ranked["small_gemm"]["severity"] == pytest.approx(10.0)
    assert ranked["reference_library"]["severity"] == pytest.approx(10.0)
    assert ranked["small_gemm"]["evidence"]["dims"] == "8x8x8"
    data = {"mathlib": r.to_json()}
    text = SECTION.text(data, View(width=100, max_rows=10))
    assert all(len(line) <= 100 for line in text)
    assert any("20.0 % of the processes' time" in line for line in text)

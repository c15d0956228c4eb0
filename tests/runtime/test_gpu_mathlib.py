"""cuBLAS and cuFFT in the math-library profile (runtime/mathlib/mathlib.spec's cublas and
cufft lines) against fake libcublas and libcufft built by the test
(programs/fake_cublas.c, fake_cufft.c): programs/gpu_mathlib.c makes calls of known sizes
on every rank, under both MPIs; counts, sizes, characters, flops and plans must be exact,
read through perfweave.open() and the report's mathlib section."""

import os

import pytest

RANKS = 2
DGEMM = 10 * 2.0 * 64 * 32 * 16
SGEMM = 2 * 2.0 * 100 * 200 * 300
ZGEMM = 8.0 * 8 * 8 * 8
BATCHED = 2.0 * 32**3 * 100
N3 = 64**3  # 5 N log2 N per Z2Z transform, log2 N = 18
FFT3 = 5 * 5.0 * N3 * 18
FFTMANY = 3 * 2.5 * 1024 * 10 * 8  # R2C: half, times the batch of 8


@pytest.fixture
def fakes(build, build_dir, monkeypatch):
    """A directory with libcublas.so and libcufft.so (the fakes), on LD_LIBRARY_PATH."""
    d = build_dir / "cuda_fakes"
    d.mkdir(exist_ok=True)
    for name in ("cublas", "cufft"):
        lib = build(None, f"fake_{name}.c", ("-shared", "-fPIC"))
        link = d / f"lib{name}.so"
        if not link.exists():
            link.symlink_to(lib)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{d}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    return d


def test_cublas_gemm_and_cufft_plans(mpi, build, run_pw, fakes):
    prog = build(mpi, "gpu_mathlib.c", (f"-L{fakes}", "-lcublas", "-lcufft"))
    r = run_pw(mpi.launch(RANKS) + [prog])
    assert sorted(r.proc.stdout.splitlines()) == [
        f"rank {k} plans 1 2 refused 4" for k in range(RANKS)
    ]
    ml = r.open().mathlib
    assert [p.rank for p in ml.processes] == list(range(RANKS)) and not ml.notes
    c = ml.calls
    for k in range(RANKS):
        mine = c[c["process"] == k]
        got = {}
        for row in mine:
            calls, flops = got.get(row["routine"], (0, 0.0))
            got[row["routine"]] = (calls + int(row["count"]), flops + float(row["flops"]))
        assert got == {
            "cublasDgemm_v2": (10, DGEMM),
            "cublasSgemm_v2": (2, SGEMM),
            "cublasZgemm_v2": (1, ZGEMM),
            "cublasDgemmStridedBatched": (1, BATCHED),
            "cufftPlan3d": (1, 0.0),
            "cufftPlanMany": (1, 0.0),
            "cufftPlan1d": (1, 0.0),  # the call, refused: no plan
            "cufftExecZ2Z": (5, FFT3),
            "cufftExecR2C": (3, FFTMANY),
            "cufftDestroy": (2, 0.0),
        }
        d = mine[mine["routine"] == "cublasDgemm_v2"]
        # the operations as letters, the dims' size class and their sums (10 calls)
        assert set(d["chars"]) == {"NT"}
        assert set(map(tuple, d[["b0", "b1", "b2"]].tolist())) == {(7, 6, 5)}
        assert int(d["dim0_sum"].sum()) == 640
        z = mine[mine["routine"] == "cublasZgemm_v2"]
        assert set(z["chars"]) == {"CN"}
        # bytes: 8 bytes per double of A, B and C read and C written (m k + k n + 2 m n)
        assert float(d["bytes"].sum()) == 10 * 8.0 * (64 * 16 + 16 * 32 + 2 * 64 * 32)
        p = ml.plans[ml.plans["process"] == k]
        assert list(p["routine"]) == ["cufftPlan3d", "cufftPlanMany"]
        assert list(p["kind"]) == ["c2c", "r2c"]
        assert [tuple(x) for x in p[["n0", "n1", "n2"]].tolist()] == [(64, 64, 64), (1024, 0, 0)]
        assert list(p["howmany"]) == [1, 8]
        assert list(p["executes"]) == [5, 3] and list(p["flops"]) == [FFT3, FFTMANY]
        assert not p["live"].any()
    rep = r.report()["mathlib"]
    assert rep["plans_created"] == 2 * RANKS and rep["plan_executes"] == 8 * RANKS
    total = DGEMM + SGEMM + ZGEMM + BATCHED + FFT3 + FFTMANY
    assert rep["flops"] == pytest.approx(total * RANKS, rel=1e-12)
    text = r.text_report()
    assert "cublasDgemm_v2" in text and "cufftPlan3d" in text

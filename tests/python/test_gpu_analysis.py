"""The gpu module's model, analysis and report section on data built in memory
(model/gpu.py from_literal): figures known by construction."""

import pytest

from perfweave.analysis.gpu import analyze, demangle
from perfweave.model.gpu import Gpu
from perfweave.report.sections.gpu import SECTION


def gpu_literal():
    return Gpu.from_literal(
        [
            {
                "rank": 1, "t_start_ns": 0, "t_end_ns": 1_000_000_000, "records": 9,
                "kernels": [["_Z7stencilPKdPdi", 0, 1, 7, 64, 1, 1, 256, 1, 1, 4, 400_000_000,
                             50_000_000, 150_000_000]],
                "copies": [["HtoD", "pageable", "device", 0, 1, 7, 2, 2_000_000_000,
                            500_000_000]],
                "syncs": [["stream_synchronize", 1, 7, 3, 250_000_000, 100_000_000]],
                "apis": [["runtime", "cudaLaunchKernel", 4, 1000]],
                "busy": [[0, 600_000_000, 100, 900_000_000]],
            },
            {"rank": 0, "status": "no-cupti", "note": "CUDA was loaded but no CUPTI"},
        ]
    )  # fmt: skip


def test_gpu_analysis_figures():
    g = analyze(gpu_literal())
    assert (g.processes, g.active, g.launches, g.copy_bytes) == (2, 1, 4, 2_000_000_000)
    assert g.lines == ["rank 0: CUDA was loaded but no CUPTI"]
    (k,) = g.kernels
    assert k["name"] == "stencil(double const*, double*, int)"
    assert (k["grid"], k["block"], k["launches"]) == ("64x1x1", "256x1x1", 4)
    assert k["mean_s"] == pytest.approx(0.1)
    (c,) = g.copies
    assert c["rate_gbs"] == pytest.approx(4.0)  # 2 GB in 0.5 s
    (d,) = g.devices
    assert (d["busy_pct"], d["idle_pct"]) == (pytest.approx(60.0), pytest.approx(40.0))
    r1 = g.per_rank[g.per_rank["rank"] == 1][0]
    assert r1["gpu_wait_pct"] == pytest.approx(25.0)
    # advice: the host waited 25 % of the 1 s (>= 10 %), the device idle 40 % (< 50 %),
    # every copy pageable while copies take 50 % of the time
    assert [a["rule"] for a in g.advice] == ["gpu_host_wait", "gpu_pageable_copies"]
    assert g.advice[0]["severity"] == pytest.approx(25.0)
    assert demangle("not_mangled") == "not_mangled" and demangle("_Zbad") == "_Zbad"


def test_gpu_section_text():
    class View:
        width, max_rows = 120, 20

    data = {"gpu": analyze(gpu_literal()).to_json()}
    text = "\n".join(SECTION.text(data, View()))
    assert "GPU activity (CUDA, through CUPTI)" in text
    assert "stencil(double const*, double*, int)" in text
    assert "rank 0: CUDA was loaded but no CUPTI" in text
    assert SECTION.text({}, View()) == []

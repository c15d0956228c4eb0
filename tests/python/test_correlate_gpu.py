"""GPU energy and mean power per interval (analysis/correlate.py) from a node timeline
built in memory: one GPU with an energy counter, one with power readings only (their
trapezoid integral), numbers known by construction."""

import numpy as np
import pytest

from perfweave.analysis.correlate import correlate, intervals_of
from perfweave.model.timeline import NodeTimeline

MS = 1_000_000


def timeline(series, values, t_ms):
    return NodeTimeline("h", {}, series, np.array(t_ms) * MS, np.array(values, float))


def rows(*spans):
    return intervals_of(
        [
            dict(
                rank=0, thread=0, name=f"p{i}", kind="phase", depth=0, t_begin=b * MS, t_end=e * MS
            )
            for i, (b, e) in enumerate(spans)
        ]
    )


def test_energy_counter_and_integrated_power():
    series = [
        {"source": "nvml", "name": "gpu0.energy_j", "unit": "J", "kind": "counter"},
        {"source": "nvml", "name": "gpu0.power_w", "unit": "W", "kind": "gauge"},
        {"source": "nvml", "name": "gpu1.power_w", "unit": "W", "kind": "gauge"},
    ]
    # gpu0: 100 W by its counter (its power gauge, 999, is not used: the counter is);
    # gpu1: no counter, 50 W then 150 W (trapezoids: 100 W mean over 100..200 ms)
    tl = timeline(
        series,
        [[0.0, 999, 50], [10.0, 999, 50], [20.0, 999, 150], [30.0, 999, 150]],
        [0, 100, 200, 300],
    )
    res = correlate(rows((0, 100), (100, 200), (50, 250), (250, 400)), timelines=[tl])
    a, b, c, d = res.per_rank
    assert a["gpu_energy_j"] == pytest.approx(10.0 + 5.0)
    assert a["gpu_power_w"] == pytest.approx(150.0)
    assert b["gpu_energy_j"] == pytest.approx(10.0 + 10.0)
    assert b["gpu_power_w"] == pytest.approx(200.0)
    # 50..250 ms: gpu0 20 J; gpu1 2.5 (50..100) + 10 (100..200) + 7.5 (200..250)
    assert c["gpu_energy_j"] == pytest.approx(20.0 + 20.0)
    # past the last tick (300 ms) nothing is known: the power over the 50 ms covered
    assert d["gpu_energy_j"] == pytest.approx(5.0 + 7.5)
    assert d["gpu_power_w"] == pytest.approx(250.0)
    assert "energy counters" in res.sources["gpu_energy_j"]
    assert "power readings integrated" in res.sources["gpu_energy_j"]


def test_no_gpu_series_says_why():
    tl = NodeTimeline(
        "h",
        {"absent": {"nvml": "libnvidia-ml.so.1 not found (no NVIDIA driver)"}},
        [{"source": "net", "name": "lo.rx_bytes", "unit": "bytes", "kind": "counter"}],
        np.array([0, 100 * MS]),
        np.array([[0.0], [1.0]]),
    )
    res = correlate(rows((0, 100)), timelines=[tl])
    assert np.isnan(res.per_rank["gpu_energy_j"][0]) and np.isnan(res.per_rank["gpu_power_w"][0])
    assert res.sources["gpu_power_w"] == "absent: h: libnvidia-ml.so.1 not found (no NVIDIA driver)"
    res = correlate(rows((0, 100)), timelines=[])
    assert "--node-interval 0" in res.sources["gpu_energy_j"]

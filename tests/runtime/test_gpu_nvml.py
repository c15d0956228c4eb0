"""GPUs in the node timeline (NVML) against a fake libnvidia-ml.so.1 built by the test
(programs/fake_nvml.c): two GPUs whose power, energy, utilisation, memory and clocks are
known by construction; the timeline read through perfweave.open(), the power per phase
through analysis/correlate.py on the run's own timeline and the phase the program timed
with its own clock, and through the report's correlation section of a run --all."""

import re

import pytest

from harness import FLAVORS
from perfweave.analysis.correlate import correlate, intervals_of

GIB = 1 << 30
WATTS = (150.0, 250.0)  # fake_nvml.c: 150 + 100 i W per GPU


@pytest.fixture
def fake_nvml(build, tmp_path, monkeypatch):
    """LD_LIBRARY_PATH holds the fake as libnvidia-ml.so.1 (the name the runtime opens)."""
    lib = build(None, "fake_nvml.c", ("-shared", "-fPIC"))
    d = tmp_path / "nvml"
    d.mkdir()
    (d / "libnvidia-ml.so.1").symlink_to(lib)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(d))
    return d


def phases(stdout):
    """{rank: (begin ns, end ns)} of the program's own phase."""
    return {
        int(r): (int(b), int(e))
        for r, b, e in re.findall(r"^phase (\d+) (\d+) (\d+)$", stdout, re.M)
    }


def series(tl, name):
    return tl.values[:, tl.index("nvml", name)]


def check_readings(tl, watts):
    for i in range(2):
        # gauges: every tick's reading is the fake's, exactly
        assert set(series(tl, f"gpu{i}.power_w")) == {watts[i]}
        assert set(series(tl, f"gpu{i}.util_pct")) == {40.0 + i}
        assert set(series(tl, f"gpu{i}.mem_util_pct")) == {20.0 + i}
        assert set(series(tl, f"gpu{i}.mem_used_bytes")) == {float((1 + i) * GIB)}
        assert set(series(tl, f"gpu{i}.sm_clock_mhz")) == {1410.0 + i}
        assert set(series(tl, f"gpu{i}.mem_clock_mhz")) == {1593.0 + i}
        # the energy counter grows at the GPU's power: over the whole series within 2 %
        # (the counter is read a few microseconds after the tick's time, truncated to mJ)
        e = series(tl, f"gpu{i}.energy_j")
        dur = (tl.t[-1] - tl.t[0]) / 1e9
        assert (e[-1] - e[0]) / dur == pytest.approx(WATTS[i], rel=0.02)
        assert tl.series[tl.index("nvml", f"gpu{i}.energy_j")]["kind"] == "counter"


@pytest.mark.parametrize("flavor", sorted(FLAVORS))
def test_nvml_readings_and_power_per_phase(build, run_pw, fake_nvml, flavor):
    mpi = FLAVORS[flavor]
    prog = build(mpi, "gpu_phase.c")
    r = run_pw(mpi.launch(2) + [prog], ["--node-interval", "20"])
    exp = r.open()
    [tl] = exp.timelines
    assert "nvml" not in tl.absent and "nvml:power_instant" not in tl.absent
    # the instantaneous reading is the one shown, not nvmlDeviceGetPowerUsage's 999 W
    check_readings(tl, WATTS)
    # per phase: the GPUs' energy over the phase each rank timed, and its mean power
    ph = phases(r.proc.stdout)
    assert sorted(ph) == [0, 1]
    rows = [
        dict(rank=k, thread=0, name="sleep", kind="region", depth=0, t_begin=b, t_end=e)
        for k, (b, e) in ph.items()
    ]
    res = correlate(intervals_of(rows), timelines=exp.timelines)
    for row in res.per_rank:
        wall = row["wall_s"]
        assert wall == pytest.approx(0.4, abs=0.2)
        assert row["gpu_energy_j"] == pytest.approx(sum(WATTS) * wall, rel=0.02)
        assert row["gpu_power_w"] == pytest.approx(sum(WATTS), rel=0.02)
    assert "energy counters" in res.sources["gpu_energy_j"]


def test_power_usage_where_the_driver_lacks_the_instant_field(
    build, run_pw, fake_nvml, monkeypatch
):
    monkeypatch.setenv("FAKE_NVML_NO_INSTANT", "1")
    prog = build(None, "gpu_phase.c", ("-DNO_MPI",))
    r = run_pw([prog], ["--node-interval", "20"])
    [tl] = r.open().timelines
    # fake_nvml.c's nvmlDeviceGetPowerUsage without the field: 120 + 100 i W, said so
    check_readings(tl, (120.0, 220.0))
    assert "nvmlDeviceGetPowerUsage" in tl.absent["nvml:power_instant"]


def test_the_report_gives_gpu_power_per_phase(build, run_pw, fake_nvml):
    prog = build(FLAVORS["mpich"], "gpu_phase.c")
    r = run_pw(FLAVORS["mpich"].launch(2) + [prog], ["--all", "--node-interval", "20"])
    corr = r.report()["correlation"]
    assert "NVML energy counters" in corr["sources"]["gpu_energy_j"]
    # every phase the timeline covers: the mean power of the two GPUs, 400 W, within 3 %
    # (a phase of a few milliseconds, MPI_Init's, is shorter than a tick: left out)
    for iv in corr["intervals"]:
        if iv["wall_s"]["mean"] > 0.05 and iv["gpu_power_w"] is not None:
            assert iv["gpu_power_w"]["mean"] == pytest.approx(sum(WATTS), rel=0.03), iv["name"]
    assert sum(iv["gpu_power_w"] is not None for iv in corr["intervals"]) >= 1
    text = r.text_report()
    assert "GPU power (node, mean)" in text

"""perfweave pop's factors from a profile without a trace (analysis/pop.py from_profile,
docs/pop.md "Without a trace"): rank records written by hand, the factors by arithmetic."""

import pytest

from perfweave.analysis.pop import NEEDS_TRACE, from_profile
from perfweave.readers.profile import read_profile

MS = 1_000_000


def ranks(**per_rank):
    """Two ranks' records: each keyword a pair (rank 0's, rank 1's)."""
    rows = [{"rank": k, "nthreads": 1, "t_init_enter": 1} for k in (0, 1)]
    for key, (a, b) in per_rank.items():
        rows[0][key], rows[1][key] = a, b
    return rows


def test_region_factors(tmp_path, pwprof):
    """Useful = region - MPI in it: 80 and 40 ms; runtime the longest region, 100 ms:
    LB = 60/80, CommE = 80/100; SerE and TE n/a."""
    rows = ranks(
        region_intervals=(2, 2),
        region_ns=(100 * MS, 90 * MS),
        region_mpi_ns=(20 * MS, 50 * MS),
        app_ns=(300 * MS, 300 * MS),
        mpi_ns=(150 * MS, 150 * MS),
    )
    p = pwprof(tmp_path / "profile.pwprof", {"world_size": 2}, rows)
    res = from_profile(read_profile(p), "EXP").to_json()
    assert res["region"] == {"marked": True, "runtime_s": 0.1, "intervals": {}}
    assert res["useful"]["seconds"] == [0.08, 0.04]
    assert res["multiplicative"]["load_balance"] == pytest.approx(0.75)
    assert res["multiplicative"]["communication_efficiency"] == pytest.approx(0.8)
    assert res["additive"]["load_balance"] == pytest.approx(1 - 0.02 / 0.1)
    for ideal in ("replay", "critical_path"):
        assert res["ideal"][ideal]["t_ideal_s"] is None
        assert res["ideal"][ideal]["note"] == NEEDS_TRACE
        assert "serialisation_efficiency" not in res["ideal"][ideal]["multiplicative"]


def test_whole_run_without_region(tmp_path, pwprof):
    """No region (or a profile before version 5): useful = app - MPI; the runtime from
    the first MPI_Init return to the last MPI_Finalize entry on rank 0's clock (rank 1's
    clock is 5 ms ahead: t_rank0 = t_local - offset)."""
    rows = ranks(
        t_init_leave=(10 * MS, 17 * MS),
        t_fini_enter=(110 * MS, 125 * MS),
        offset_init_ns=(0, 5 * MS),
        offset_fini_ns=(0, 5 * MS),
        app_ns=(100 * MS, 108 * MS),
        mpi_ns=(30 * MS, 58 * MS),
    )
    p = pwprof(tmp_path / "profile.pwprof", {"world_size": 2}, rows)
    res = from_profile(read_profile(p)).to_json()
    assert not res["region"]["marked"]
    assert res["region"]["runtime_s"] == pytest.approx(0.110)  # 10 .. 120 ms
    assert res["useful"]["seconds"] == [0.07, 0.05]
    assert res["multiplicative"]["communication_efficiency"] == pytest.approx(0.07 / 0.11)


def test_rank_without_region_among_marked(tmp_path, pwprof):
    """A rank that marked no region while others did: its whole run, with a note."""
    rows = ranks(
        region_intervals=(1, 0),
        region_ns=(50 * MS, 0),
        region_mpi_ns=(10 * MS, 0),
        app_ns=(200 * MS, 60 * MS),
        mpi_ns=(100 * MS, 30 * MS),
    )
    p = pwprof(tmp_path / "profile.pwprof", {"world_size": 2}, rows)
    res = from_profile(read_profile(p)).to_json()
    assert res["useful"]["seconds"] == [0.04, 0.03]
    assert res["region"]["runtime_s"] == pytest.approx(0.06)
    assert any("marked no MPI_Pcontrol region" in n for n in res["notes"])

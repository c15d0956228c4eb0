"""analysis.timebins.activity_over_time on hand-made sample arrays whose fractions per
bin are counted by hand below."""

import numpy as np
import pytest

from perfweave.analysis.timebins import activity_over_time, from_samples
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE

S = 1_000_000_000
NAMES = ["compute", "mpi_coll", "sleep", "io"]


def test_exact_fractions_per_rank_and_bin():
    # run [10 s, 14 s], 4 bins of 1 s; rank 0 (two processes: counted together) and rank 3
    t_r0a = np.array([10.1, 10.2, 10.3, 10.9, 11.5, 12.5, 12.6, 13.99]) * S
    a_r0a = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    t_r0b = np.array([11.2, 14.0, 9.0, 14.5]) * S  # 14.0: last bin; 9 and 14.5: outside
    a_r0b = np.array([1, 3, 0, 0])
    t_r3 = np.array([10.5, 11.5, 11.6, 11.7, 11.8]) * S
    a_r3 = np.array([1, 0, 0, 0, 1])
    res = activity_over_time(
        [t_r0a, t_r0b, t_r3],
        [a_r0a, a_r0b, a_r3],
        [0, 0, 3],
        10 * S,
        14 * S,
        NAMES,
        nbins=4,
        min_per_bin=1,
    )
    assert res["ranks"] == [0, 3]
    assert res["edges_s"] == [0.0, 1.0, 2.0, 3.0, 4.0] and res["bin_s"] == 1.0
    assert res["activities"] == ["compute", "mpi_coll", "sleep", "io"]
    assert res["samples"] == [[4, 2, 2, 2], [1, 4, 0, 0]]
    f0, f3 = res["fractions"]
    # rank 0: bin 0 = 3 compute + 1 coll; bin 1 = 2 coll; bin 2 = 2 sleep; bin 3 = 2 io
    assert f0 == [
        [0.75, 0.0, 0.0, 0.0],
        [0.25, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
    # rank 3: bin 0 = 1 coll; bin 1 = 3 compute + 1 coll; no samples after
    assert f3 == [
        [0.0, 0.75, None, None],
        [1.0, 0.25, None, None],
        [0.0, 0.0, None, None],
        [0.0, 0.0, None, None],
    ]
    # the mean over the ranks that have samples in the bin
    assert res["mean"] == [
        [0.375, 0.375, 0.0, 0.0],
        [0.625, 0.625, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
    # phases: mpi_coll leads bins 0 and 1 (62.5 % each), then sleep, then io
    assert [(p["start_s"], p["end_s"], p["activity"], p["pct"]) for p in res["phases"]] == [
        (0.0, 2.0, "mpi_coll", 62.5),
        (2.0, 3.0, "sleep", 100.0),
        (3.0, 4.0, "io", 100.0),
    ]


def test_activities_without_samples_are_left_out_and_short_runs_get_fewer_bins():
    t = np.arange(40) * S // 10  # 40 samples over 4 s
    a = np.where(np.arange(40) < 20, 0, 2)  # compute then sleep
    res = activity_over_time([t, t], [a, a], [0, 1], 0, 4 * S, NAMES)
    assert res["activities"] == ["compute", "sleep"]
    assert len(res["edges_s"]) == 40 // 5 + 1  # 5 samples per bin at least
    assert [p["activity"] for p in res["phases"]] == ["compute", "sleep"]
    assert res["phases"][0]["end_s"] == pytest.approx(2.0)
    one = activity_over_time([t[:3]], [a[:3]], [0], 0, 4 * S, NAMES)
    assert len(one["edges_s"]) == 2  # never fewer than one bin


def _proc(rank, host, t_start, t_end, times, activities):
    rec = np.zeros(len(times), SAMPLE_DTYPE)
    rec["t"] = times
    rec["activity"] = activities
    return ProcessSamples(
        f"rank-{rank}", {"rank": rank, "host": host, "t_start": t_start, "t_end": t_end}, rec, []
    )


def test_from_samples_aligns_each_node_at_its_first_start():
    # node a's clock reads 100 s at the start, node b's 5000 s; each rank computes
    # 1 s then sleeps 1 s
    procs = []
    for rank, host, base in ((0, "a", 100 * S), (1, "a", 100 * S + S // 10), (2, "b", 5000 * S)):
        t = base + np.arange(1, 200) * S // 100
        procs.append(_proc(rank, host, base, base + 2 * S, t, np.where(t - base < S, 0, 2)))
    res = from_samples(procs, NAMES)
    assert res["edges_s"][-1] == pytest.approx(2.1)  # rank 1 ends 2.1 s after a's start
    assert [p["activity"] for p in res["phases"]] == ["compute", "sleep"]
    assert abs(res["phases"][0]["end_s"] - 1.0) <= res["bin_s"] + 0.1


def test_a_late_sample_fills_the_bins_of_the_wait_it_stands_for():
    """Rank 0 sampled at 10 ms (compute, 10 ms since its start), next at 180 ms after
    waiting 170 ms for a core (MPI, where it was descheduled), then at 190 and 200 ms
    (MPI): counted, the bins in between have no sample; with the samples' durations each
    bin gets the time the spans cover in it. Bins of 50 ms: [0, 50) holds 10 ms compute
    and 40 ms MPI, the others MPI only."""
    ms = 1_000_000
    args = (
        [np.array([10, 180, 190, 200]) * ms],
        [np.array([0, 1, 1, 1])],
        [0],
        0,
        200 * ms,
        ["compute", "mpi"],
    )
    counted = activity_over_time(*args, nbins=4, min_per_bin=1)
    assert counted["fractions"][0][1] == [0.0, None, None, 1.0]
    timed = activity_over_time(
        *args, nbins=4, min_per_bin=1, durations=[np.array([10, 170, 10, 10]) * ms]
    )
    assert timed["fractions"][0][0] == [0.2, 0.0, 0.0, 0.0]
    assert timed["fractions"][0][1] == [0.8, 1.0, 1.0, 1.0]
    assert timed["samples"] == counted["samples"] == [[1, 0, 0, 3]]


def test_mean_over_the_ranks_whose_spans_cover_the_bin():
    """Rank 1's one sample at 13.9 s stands for its wait since 10.1 s (durations): it
    covers bins 0-3 with no sample in 1 and 2. The mean of a bin is over the ranks that
    cover it, so each bin's activities sum to 1 (they reached 2 when rank 1 was
    counted in the shares but not in the divisor)."""
    t_r0 = (10.5 + 0.5 * np.arange(8)) * S  # every 0.5 s, all computing
    t_r1 = np.array([10.05, 13.9]) * S
    res = activity_over_time(
        [t_r0, t_r1],
        [np.zeros(8, int), np.array([0, 1])],
        [0, 1],
        10 * S,
        14 * S,
        NAMES,
        nbins=4,
        min_per_bin=1,
        durations=[np.full(8, 0.5 * S), np.array([0.05, 3.8]) * S],
    )
    assert res["samples"][1] == [1, 0, 0, 1]
    mean = np.array(res["mean"], float)
    assert np.allclose(mean.sum(axis=0), 1.0)
    # bins 1 and 2: rank 0 all compute, rank 1 all waiting in the collective
    assert mean[:, 1].tolist() == pytest.approx([0.5, 0.5])
    assert mean[:, 2].tolist() == pytest.approx([0.5, 0.5])

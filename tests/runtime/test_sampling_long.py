"""Bounded memory whatever the run length: the same sleeping program (a loop of 5 ms
sleeps, so that a 20 s test costs the shared machine nothing) run for 1 s and for 20 s
under --sample keeps the same bound of samples per thread, writes a samples file of the
same bound, holds the same resident memory, and the 20 s run's samples still cover the
whole run evenly.

The interval and capacity are set (2 ms, 200 samples) so that both runs fill the buffer:
with the defaults (10 ms, 2000) a 1 s run takes ~100 samples and even 20 s only reach
the capacity; the thinning under test is the same code whatever the numbers."""

import numpy as np

from harness import reported
from perfweave.readers.samples import SAMPLE_DTYPE, read_samples

CAP = 200
OPTS = [
    "--sample",
    "--sample-interval-ms",
    "2",
    "--sample-capacity",
    str(CAP),
    "--node-interval",
    "0",
]  # the node sampler's memory is not under test here
SAMPLE_BYTES = 304  # the runtime's in-memory sample (samples.c)


def test_twenty_seconds_keep_what_one_second_keeps(build, run_pw):
    prog = build(None, "sleep_loop.c")
    runs = {}
    for seconds in (1, 20):
        r = run_pw([prog, seconds], OPTS, timeout=120)
        [p] = read_samples(r.exp)
        [t] = p.meta["threads"]
        [f] = (r.exp / "samples").glob("*.samples")
        runs[seconds] = (r, p, t, f.stat().st_size)
        # the buffer, never more: between half of it and all of it, in memory and on disk
        assert CAP // 2 <= t["kept"] <= CAP, t
        assert CAP // 2 * SAMPLE_DTYPE.itemsize <= f.stat().st_size <= CAP * SAMPLE_DTYPE.itemsize
        assert f.stat().st_size == t["kept"] * SAMPLE_DTYPE.itemsize
        assert t["taken"] > CAP and t["thinned"] >= 1  # the buffer did fill
        # sampled asleep (usleep is wrapped: state sleep), and the sleeps kept their length
        activities = p.meta["activities"]
        asleep = np.mean(p.records["activity"] == activities.index("sleep"))
        assert asleep > 0.9, asleep
    (_, _, t1, _), (_, p20, t20, _) = runs[1], runs[20]
    assert t20["taken"] > 2 * t1["taken"] and t20["thinned"] > t1["thinned"]
    # the 20 s run: the whole run, evenly. The kept samples are ~interval_ns apart (the
    # final interval, after every doubling), each drawn in 0.5-1.5x of it, and taken when
    # the process runs: as late as the program saw its own wake-ups come (late_max)
    iv = t20["interval_ns"] / 1e9
    [late] = reported(runs[20][0].proc, "late_max")
    ts = np.sort(p20.records["t"] - p20.meta["t_start"]) / 1e9
    end = (p20.meta["t_end"] - p20.meta["t_start"]) / 1e9
    assert 19.5 < end < 22
    assert ts[0] < 0.05  # the first sample is always kept
    assert end - ts[-1] < 2 * iv + late + 0.1, (end, ts[-1], iv, late)
    assert np.diff(ts).max() < 2 * iv + late, (np.diff(ts).max(), iv, late)
    quarters = np.histogram(ts, bins=4, range=(0, end))[0] / len(ts)
    assert (abs(quarters - 0.25) < 0.08).all(), quarters
    # resident memory: the sampler holds the same buffer (CAP x 304 bytes) in both runs;
    # sampling every 2 ms without a bound, the 20 s run would hold ~10000 samples (~3 MB).
    # Other differences between two runs are ~100 kB here (measured without --sample too).
    rss = {s: int(r.proc.stdout.split()[1]) for s, (r, *_) in runs.items()}
    unbounded_kb = (end / 0.002 - CAP) * SAMPLE_BYTES / 1024
    assert abs(rss[20] - rss[1]) < 512 < unbounded_kb / 2, rss

"""Bounded memory whatever the run length: the same sleeping program (a loop of 5 ms
sleeps, so that a 20 s test costs the shared machine nothing) run for 1 s and for 20 s
under --sample keeps the same bound of samples per thread, writes a samples file of the
same bound, holds the same resident memory, and the 20 s run's samples still cover the
whole run evenly.

The interval and capacity are set (2 ms, 200 samples) so that both runs fill the buffer:
with the defaults (10 ms, 2000) a 1 s run takes ~100 samples and even 20 s only reach
the capacity; the thinning under test is the same code whatever the numbers."""

import numpy as np

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
    # the process runs: later by as much as the program's own wake-ups came late meanwhile
    # (a kept gap spans many samples taken, one per interval of the time, whose delays
    # add up: 0.52 s for a final interval of 0.128 s seen beside two busy loops)
    iv = t20["interval_ns"] / 1e9
    lines = runs[20][0].proc.stderr.splitlines()
    late = np.array([[float(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("late ")])
    late = late.reshape(-1, 2)
    at = late[:, 0] - p20.meta["t_start"] / 1e9
    cum = np.concatenate([[0.0], np.cumsum(late[:, 1])])

    def late_in(a, b):  # the wake-ups' lateness from a to one sleep after b
        return cum[np.searchsorted(at, b + 0.006)] - cum[np.searchsorted(at, a)]

    ts = np.sort(p20.records["t"] - p20.meta["t_start"]) / 1e9
    end = (p20.meta["t_end"] - p20.meta["t_start"]) / 1e9
    assert 19.5 < end < 22
    assert ts[0] < 0.05  # the first sample is always kept
    assert end - ts[-1] < 2 * iv + late_in(ts[-1], end) + 0.1, (end, ts[-1], iv)
    gaps = [(b - a, late_in(a, b), a) for a, b in zip(ts[:-1], ts[1:])]
    assert all(g < 2 * iv + lat for g, lat, _ in gaps), (max(gaps), iv)
    quarters = np.histogram(ts, bins=4, range=(0, end))[0] / len(ts)
    assert (abs(quarters - 0.25) < 0.08).all(), quarters
    # resident memory: the sampler holds the same buffer (CAP x 304 bytes) in both runs;
    # sampling every 2 ms without a bound, the 20 s run would hold ~10000 samples (~3 MB).
    # Other differences between two runs are ~100 kB here (measured without --sample too).
    rss = {s: int(r.proc.stdout.split()[1]) for s, (r, *_) in runs.items()}
    unbounded_kb = (end / 0.002 - CAP) * SAMPLE_BYTES / 1024
    assert abs(rss[20] - rss[1]) < 512 < unbounded_kb / 2, rss

"""Activity over time per rank, from the samples: the run cut into equal time bins and,
for each rank and bin, the share of the rank's samples (all its threads) in each
activity (compute, an MPI family, sleep, ...: whatever names the caller gives), as in
MAP's activity strip. JSON-ready; schema in docs/samples.md ("Activity over time")."""

import numpy as np

MAX_BINS = 100
MIN_SAMPLES_PER_BIN = 5  # a rank's samples per bin, on average, below which bins merge


def activity_over_time(
    times,
    activities,
    ranks,
    t0,
    t1,
    names,
    nbins=MAX_BINS,
    min_per_bin=MIN_SAMPLES_PER_BIN,
    durations=None,
):
    """times[j], activities[j]: sample times (ns, on one clock) and activity indexes into
    names (the activities' names) of process j, whose rank is ranks[j]; the run is
    [t0, t1] (ns). Samples outside it are not counted. Processes of the same rank are
    counted together.
    At most nbins bins, fewer when the ranks have fewer than min_per_bin samples per bin
    on average (a short run). Activities that no sample has are left out.
    durations[j] (ns per sample, optional): the wall time each sample stands for, the
    span (t - duration, t] (analysis/samples/__init__.py _seconds); a bin's shares are then of
    the time these spans cover in it, so a thread that waited for a core, whose one late
    sample stands for the whole wait, still fills the bins of that wait."""
    t0, t1 = int(t0), int(t1)
    order = sorted(set(ranks))
    row = {r: i for i, r in enumerate(order)}
    nst = len(names)
    per_rank = np.zeros(len(order))
    for t, r in zip(times, ranks):
        per_rank[row[r]] += np.count_nonzero((np.asarray(t) >= t0) & (np.asarray(t) <= t1))
    typical = float(np.median(per_rank)) if len(order) else 0.0
    nbins = int(max(1, min(nbins, typical // max(min_per_bin, 1))))
    span = max(t1 - t0, 1)
    counts = np.zeros((len(order), nst, nbins), np.int64)
    for t, a, r in zip(times, activities, ranks):
        t = np.asarray(t, np.int64)
        a = np.clip(np.asarray(a, np.int64), 0, nst - 1)
        inside = (t >= t0) & (t <= t1)
        b = np.minimum((t[inside] - t0) * nbins // span, nbins - 1)
        np.add.at(counts[row[r]], (a[inside], b), 1)
    seen = [s for s in range(nst) if counts[:, s].any()]
    counts = counts[:, seen]
    in_bin = counts.sum(axis=1)  # (ranks, bins)
    share = counts
    if durations is not None:
        share = np.zeros((len(order), nst, nbins))
        edges_ns = t0 + np.arange(nbins + 1) * (span / nbins)
        for t, a, r, d in zip(times, activities, ranks, durations):
            _cover(
                share[row[r]],
                edges_ns,
                np.asarray(t, np.int64),
                np.clip(np.asarray(a, np.int64), 0, nst - 1),
                np.asarray(d, float),
            )
        share = share[:, seen]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = share / share.sum(axis=1)[:, None, :]  # nan: no sample
        present = share.sum(axis=1) > 0  # a rank covers the bin
        mean = np.nansum(frac, axis=0) / np.maximum(present.sum(axis=0), 1)
    mean[:, ~present.any(axis=0)] = np.nan
    edges = [span * k / nbins / 1e9 for k in range(nbins + 1)]  # s since t0
    names = [names[s] for s in seen]
    return {
        "bin_s": span / nbins / 1e9,
        "edges_s": edges,
        "activities": names,
        "ranks": order,
        "samples": in_bin.tolist(),
        "fractions": [[_list(frac[i, s]) for s in range(len(seen))] for i in range(len(order))],
        "mean": [_list(mean[s]) for s in range(len(seen))],
        "phases": _phases(mean, names, edges),
    }


def _cover(out, edges, t, a, d, chunk=8192):
    """Add to out[activity, bin] the ns of each sample's span (t - d, t] in each bin:
    the span's coverage up to each edge, differenced (chunks bound the edges x samples
    matrix)."""
    start = t - d
    for k in range(0, len(t), chunk):
        s, ln, act = start[k : k + chunk], d[k : k + chunk], a[k : k + chunk]
        upto = np.clip(edges[:, None] - s[None, :], 0, ln[None, :])  # (edges, samples)
        per_bin = np.diff(upto, axis=0)  # (bins, samples)
        for x in np.unique(act):
            out[x] += per_bin[:, act == x].sum(axis=1)


def _list(a):
    return [None if not np.isfinite(v) else round(float(v), 4) for v in a]


def _phases(mean, names, edges):
    """Adjacent bins with the same dominant activity (mean over ranks) merged: start,
    end (s), that activity and its mean share over the merged bins (%)."""
    out = []
    for b in range(mean.shape[1] if len(names) else 0):
        col = mean[:, b]
        if not np.isfinite(col).any():
            continue
        a = int(np.nanargmax(col))
        if out and out[-1]["activity"] == names[a] and out[-1]["end_s"] == edges[b]:
            out[-1]["end_s"] = edges[b + 1]
            out[-1]["_sum"] += col[a]
            out[-1]["_n"] += 1
        else:
            out.append(
                {
                    "start_s": edges[b],
                    "end_s": edges[b + 1],
                    "activity": names[a],
                    "_sum": col[a],
                    "_n": 1,
                }
            )
    for p in out:
        p["pct"] = round(100 * float(p.pop("_sum")) / p.pop("_n"), 2)
    return out


def from_samples(procs, names, activities=None, seconds=None):
    """activity_over_time of read_samples' processes (names: the activities' names);
    activities[j] (per sample) replaces process j's recorded activities where given;
    seconds[j]: the wall time each sample of process j stands for (durations).
    CLOCK_MONOTONIC is one clock per node only: the processes of a node are aligned at
    the node's first start (t_start), so times are seconds since it and nodes line up at
    their starts."""
    base = {}
    for p in procs:
        host = p.meta.get("host", "")
        base[host] = min(base.get(host, p.meta.get("t_start", 0)), p.meta.get("t_start", 0))
    times, acts, ranks, t1 = [], [], [], 0
    for j, p in enumerate(procs):
        t = p.records["t"].astype(np.int64) - base[p.meta.get("host", "")]
        times.append(t)
        acts.append(p.records["activity"] if activities is None else activities[j])
        ranks.append(p.rank)
        end = p.meta.get("t_end", 0) - base[p.meta.get("host", "")]
        t1 = max(t1, end, int(t.max()) if len(t) else 0)
    t0 = min([0] + [int(t.min()) for t in times if len(t)])
    durations = None if seconds is None else [np.asarray(x, float) * 1e9 for x in seconds]
    return activity_over_time(times, acts, ranks, t0, t1, names, durations=durations)

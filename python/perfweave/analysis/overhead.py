"""What perfweave (or another tool) costs a program: the figures of `perfweave overhead`
from the runs that launch/overhead.py made (docs/overhead.md).

experiment_facts(path) -> dict: what one mode's experiment holds (bytes raw and
compressed, per top-level entry, trace records, the per-routine time of the profile);
summarize(variants, runs, calibration) -> OverheadResult, whose to_json() is the JSON
document (stable keys, docs/overhead.md).

Intervals: a paired bootstrap over rounds. The rounds are interleaved (bare, A, B, ...),
so round i's bare and mode runs saw the same state of the machine; a resample draws n
rounds with replacement and takes the ratio of the mode's mean wall time to the bare
mean (or their difference) over the same rounds; the 2.5th and 97.5th percentiles of
10 000 resamples bound the 95 % interval.
"""

import os
import zlib
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from perfweave.model.profile import BRACKET

FORMAT = "perfweave-overhead"
VERSION = 1
RESAMPLES = 10000
LEVEL = 0.95
COMPUTATION = "(outside MPI)"
MIB = 1024 * 1024


def _compressor():
    """zstd where the zstandard package is installed, else gzip's deflate (zlib)."""
    try:
        import zstandard

        c = zstandard.ZstdCompressor(level=3)
        return "zstd", c.compress
    except ImportError:
        return "gzip", lambda data: zlib.compress(data, 6)


def _files(path):
    for root, _, names in os.walk(path):
        for name in names:
            p = os.path.join(root, name)
            if os.path.isfile(p) and not os.path.islink(p):
                yield p


def experiment_facts(path):
    """One experiment's sizes and profile: raw_bytes (the files' sizes), allocated_bytes
    (their blocks on disk: a file the runtime sized ahead and left sparse counts only what
    it wrote), compressed_bytes, compression,
    by_entry {top-level file or directory: bytes}, ranks, trace_bytes (the events files),
    trace_events (records read from them, readers/trace.py), samples_bytes (the samples
    files), samples (the records read from them, readers/samples.py), routine_ns {MPI
    function or COMPUTATION: ns summed over ranks} (None without an MPI profile)."""
    name, compress = _compressor()
    raw = packed = allocated = 0
    by_entry = {}
    for p in _files(path):
        with open(p, "rb") as f:
            data = f.read()
            allocated += os.fstat(f.fileno()).st_blocks * 512
        raw += len(data)
        packed += len(compress(data))
        top = os.path.relpath(p, path).split(os.sep)[0]
        by_entry[top] = by_entry.get(top, 0) + len(data)
    facts = {
        "raw_bytes": raw,
        "allocated_bytes": allocated,
        "compressed_bytes": packed,
        "compression": name,
        "by_entry": by_entry,
        "ranks": 0,
        "trace_bytes": 0,
        "trace_events": 0,
        "samples": 0,
        "samples_bytes": 0,
        "routine_ns": None,
    }
    facts.update(_trace(path))
    facts.update(_samples(path))
    facts.update(_profile(path))
    return facts


def _samples(path):
    from perfweave.readers.samples import read_samples

    d = os.path.join(path, "samples")
    if not os.path.isdir(d):
        return {}
    n = sum(len(p.records) for p in read_samples(path))
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".samples"))
    return {"samples": n, "samples_bytes": size}


def _trace(path):
    from perfweave.readers import trace as rt

    if not rt.trace_dir(path).is_dir():
        return {}
    ranks = rt.list_ranks(path)
    events = sum(len(rt.read_rank(path, r).records) for r in ranks)
    size = sum(p.stat().st_size for p in rt.trace_dir(path).glob("*.events"))
    return {"trace_bytes": size, "trace_events": events, "ranks": len(ranks)}


def _profile(path):
    from perfweave.errors import PerfweaveError
    from perfweave.readers.experiment import open_experiment

    try:
        profile = open_experiment(path).profile
    except PerfweaveError:
        return {}
    if not profile.mpi:
        return {"ranks": len(profile.ranks)}
    ranks = profile.ranks[profile.ranks["rank"] >= 0]
    fns = [i for i in profile.function_ids("mpi") if profile.functions[i] not in BRACKET]
    sites = profile.sites[np.isin(profile.sites["fn"], fns)]
    sites = sites[np.isin(sites["rank"], ranks["rank"])]
    per_fn = np.bincount(sites["fn"], sites["total_ns"], minlength=len(profile.functions))
    routine = {profile.functions[i]: float(per_fn[i]) for i in np.flatnonzero(per_fn)}
    routine[COMPUTATION] = max(float(ranks["app_ns"].sum()) - float(per_fn.sum()), 0.0)
    return {"ranks": len(ranks), "routine_ns": routine}


def shares(routine_ns):
    """{routine: fraction of the time summed over ranks}."""
    total = sum(routine_ns.values())
    return {k: v / total for k, v in routine_ns.items()} if total > 0 else {}


def tvd(p, q):
    """Total variation distance of two share vectors (dicts): half the L1 distance,
    0 for the same shares, 1 for disjoint ones."""
    keys = set(p) | set(q)
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)


def _mean_shares(list_of_shares):
    keys = sorted({k for s in list_of_shares for k in s})
    n = len(list_of_shares)
    return {k: sum(s.get(k, 0.0) for s in list_of_shares) / n for k in keys}


def bootstrap(mode, bare, stat, resamples=RESAMPLES, seed=0):
    """(estimate, lo, hi) of stat(mode_means, bare_means) over paired resamples of the
    rounds (mode[i] and bare[i] from round i); stat works on arrays of means."""
    mode, bare = np.asarray(mode, float), np.asarray(bare, float)
    estimate = float(stat(mode.mean(), bare.mean()))
    if len(mode) < 2:
        return estimate, estimate, estimate
    idx = np.random.default_rng(seed).integers(0, len(mode), (resamples, len(mode)))
    values = stat(mode[idx].mean(axis=1), bare[idx].mean(axis=1))
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return estimate, float(lo), float(hi)


def _ratio(a, b):
    return a / b


def _diff(a, b):
    return a - b


def spread(values):
    """The runs' own relative spread: standard deviation / mean (0 for one run)."""
    v = np.asarray(values, float)
    return float(v.std(ddof=1) / v.mean()) if len(v) > 1 and v.mean() > 0 else 0.0


def document_head(fmt, version, command, rounds, method):
    """The keys a document of interleaved rounds begins with (perfweave overhead's, the
    placement sweep's): its format and version, the command, the rounds, their order and
    the intervals' method (a paired bootstrap, `bootstrap`)."""
    return {
        "format": fmt,
        "version": version,
        "command": command,
        "rounds": rounds,
        "order": "interleaved",
        "interval": {"method": method, "resamples": RESAMPLES, "level": LEVEL},
    }


@dataclass
class OverheadResult:
    """bare: the bare runs' figures; variants: one dict per mode or tool (to_json's
    "variants"); perturbation: the reference mode, the distance between its own runs and
    the mean shares per mode."""

    command: list
    rounds: int
    bare: dict
    variants: list
    perturbation: dict
    peak_rss_source: str = "VmHWM of the program's processes, /proc sampled"
    notes: list = field(default_factory=list)

    def to_json(self):
        return {
            **document_head(
                FORMAT,
                VERSION,
                self.command,
                self.rounds,
                "paired bootstrap over rounds, ratio (difference) of means",
            ),
            "peak_rss_source": self.peak_rss_source,
            "bare": self.bare,
            "variants": self.variants,
            "perturbation": self.perturbation,
            "notes": self.notes,
        }


def _by_variant(runs):
    out = {}
    for r in sorted(runs, key=lambda r: r.round):
        out.setdefault(r.variant, []).append(r)
    return out


def _median(values):
    return float(np.median(values)) if len(values) else 0.0


def _bytes(facts):
    """A mode's experiment sizes (medians over its runs): the JSON's "bytes"."""
    if not facts:
        return None
    raw = _median([f["raw_bytes"] for f in facts])
    ranks = max(f["ranks"] for f in facts)
    events = _median([f["trace_events"] for f in facts])
    trace = _median([f["trace_bytes"] for f in facts])
    samples = _median([f.get("samples", 0) for f in facts])
    sbytes = _median([f.get("samples_bytes", 0) for f in facts])
    entries = sorted({k for f in facts for k in f["by_entry"]})
    return {
        "raw": int(raw),
        "allocated": int(_median([f["allocated_bytes"] for f in facts])),
        "compressed": int(_median([f["compressed_bytes"] for f in facts])),
        "compression": facts[0]["compression"],
        "ranks": ranks,
        "per_rank": raw / ranks if ranks else None,
        "by_entry": {k: int(_median([f["by_entry"].get(k, 0) for f in facts])) for k in entries},
        "trace_bytes": int(trace),
        "trace_events": int(events),
        "bytes_per_event": trace / events if events else None,
        "samples": int(samples),
        "samples_bytes": int(sbytes),
        "bytes_per_sample": sbytes / samples if samples else None,
    }


def _calibration(variant, calibration):
    out = {}
    for (name, module), values in calibration.items():
        if name != variant or variant == "bare":
            continue
        bare = calibration[("bare", module)]
        added, lo, hi = bootstrap(values, bare, _diff)
        out[module] = {
            "bare_ns": _median(bare),
            "ns": _median(values),
            "added_ns": added,
            "added_interval_ns": [lo, hi],
        }
    return out


def summarize(command, variants, runs, calibration):
    """The figures of each variant against bare: an OverheadResult. variants: the
    launch/overhead.py Variants (bare first); runs: their Runs, interleaved rounds;
    calibration: {(variant, module): [ns per call per round]}."""
    by = _by_variant(runs)
    bare_runs = by["bare"]
    bare_wall = [r.wall_s for r in bare_runs]
    bare_rss = [r.peak_rss_kib / 1024 for r in bare_runs]
    noise = spread(bare_wall)
    bare = {
        "wall_s": float(np.mean(bare_wall)),
        "wall_s_runs": bare_wall,
        "spread": noise,
        "peak_rss_mib": float(np.mean(bare_rss)),
        "min_mem_available_mib": min(r.min_available_kib for r in bare_runs) / 1024,
    }
    out = []
    share_runs = {}
    for v in variants[1:]:
        rs = by[v.name]
        wall = [r.wall_s for r in rs]
        rss = [r.peak_rss_kib / 1024 for r in rs]
        ratio, lo, hi = bootstrap(wall, bare_wall, _ratio)
        added, alo, ahi = bootstrap(wall, bare_wall, _diff)
        radd, rlo, rhi = bootstrap(rss, bare_rss, _diff)
        facts = [r.facts for r in rs if r.facts]
        routine = [shares(f["routine_ns"]) for f in facts if f.get("routine_ns")]
        if routine and all(routine):
            share_runs[v.name] = routine
        out.append(
            {
                "name": v.name,
                "kind": v.kind,
                "words": v.words,
                "wall_s": float(np.mean(wall)),
                "wall_s_runs": wall,
                "ratio": ratio,
                "ratio_interval": [lo, hi],
                # the interval reaches into the bare runs' own spread around 1
                "resolvable": not (lo <= 1 + noise and hi >= 1 - noise),
                "added_s": added,
                "added_interval_s": [alo, ahi],
                "peak_rss_mib": float(np.mean(rss)),
                "peak_rss_added_mib": radd,
                "peak_rss_added_interval_mib": [rlo, rhi],
                "min_mem_available_mib": min(r.min_available_kib for r in rs) / 1024,
                "bytes": _bytes(facts),
                "ns_per_call": _calibration(v.name, calibration),
                "tvd_to_reference": None,
            }
        )
    perturbation = _perturbation(out, share_runs)
    notes = []
    if len(bare_runs) < 5:
        # n rounds give at most C(2n-1, n) distinct resamples: 3 for n = 2, 10 for n = 3
        notes.append(
            f"{len(bare_runs)} rounds: the bootstrap draws from few distinct resamples, "
            "its intervals are rough (use -n 5 or more)"
        )
    return OverheadResult(list(command), len(bare_runs), bare, out, perturbation, notes=notes)


def _perturbation(out, share_runs):
    """The mode with profiles that cost least (lowest wall ratio) is the reference: each
    other mode's mean shares are compared with its mean shares (total variation
    distance); the mean distance between the reference's own runs is the noise floor."""
    if not share_runs:
        return {"reference": None, "within_reference_tvd": None, "shares": {}}
    ratio = {v["name"]: v["ratio"] for v in out}
    ref = min(share_runs, key=lambda n: ratio[n])
    mean = {n: _mean_shares(s) for n, s in share_runs.items()}
    pairs = list(combinations(share_runs[ref], 2))
    within = float(np.mean([tvd(a, b) for a, b in pairs])) if pairs else None
    for v in out:
        if v["name"] in mean:
            v["tvd_to_reference"] = tvd(mean[v["name"]], mean[ref])
    return {"reference": ref, "within_reference_tvd": within, "shares": mean}

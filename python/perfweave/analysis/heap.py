"""The heap module's analysis (runtime/modules/heap.c, `perfweave run --heap`): the
allocation sites ranked by byte-seconds live, symbolised (function, file:line of the first
frame outside the C, C++ and Fortran runtimes' allocators), and the allocations per log2
size range (count, bytes, peak live, byte-seconds): what AUTO_HBW_LOG and its script gave,
and what a placement by size range (AUTO_HBW_SIZE) would move. `analyze` takes the model
(model/heap.py, ExperimentDir.heap) and returns a HeapResult whose `to_json()` is the report
section's data and whose tables are `perfweave.open(path).table("heap", NAME)` DataFrames.
With --heap-sample-bytes the counts, bytes and byte-seconds are estimates (`estimated`).

When each site's objects were live (docs/heap.md "When a site's objects were live"): a
record of version 3 keeps per site a timeline of fixed-width buckets (live_bits), and with
the run's samples (their CLOCK_MONOTONIC times, on the timelines' axis: readers/heap.py;
HeapProfile.sample_t)
`analyze` counts per site the samples taken while it was live (live_pct of the samples),
and `routines_live` per routine the samples taken while each site was live (of the
routine's samples). A sample is counted live when its bucket is marked: a marked bucket
is one during which some of the site's objects may have been live, so the counts err only
within a bucket plus the clock's tick of an interval's ends (`live_resolution_ms`)."""

import os
from dataclasses import dataclass

import numpy as np

from perfweave._format import HEAP_FNS, HEAP_LIVE_BUCKETS, HEAP_RANGES
from perfweave.model.table import records, table
from perfweave.symbols import Symbolizer

RECORDED_BY = "record it with `perfweave run --heap`"

# objects whose frames are the allocator's own, not the program's site: C++ operator new,
# the Fortran runtime's allocation helpers, the C library, perfweave
RUNTIME_OBJECTS = ("libc.so", "libc-", "libstdc++", "libgfortran", "libperfweave", "ld-linux")


@dataclass
class HeapResult:
    """The allocation sites of every process, merged by symbolised call path.

    sites: one row per call path, most byte-seconds first: where (the site: function and
    file:line), function, file, line, path (its frames, innermost first, " < "), allocator
    (the function called), processes, count, frees, bytes, min_bytes, max_bytes,
    peak_bytes (the most live at once in one process), byte_s, byte_s_pct (of all), live_s
    (seconds while some of its objects were live, summed over processes), live_pct and
    live_pct_of: with timelines and samples ("samples"), the share of its processes'
    samples taken while its objects were live (live_samples: those samples); otherwise
    ("time") the share of the time its processes were measured, what a uniform sampler's
    samples would give (NaN for killed processes, whose end is not known).
    ranges: one row per log2 size group with allocations: range ("1 MiB-2 MiB"), lo, hi
    (bytes, hi excluded), count, bytes, peak_bytes (the most live at once in one process),
    byte_s, byte_s_pct.
    per_process: rank, host, pid, state, sample_bytes, sites, count, bytes, peak_bytes,
    byte_s, untracked (allocations whose lifetime was not tracked), unseen_frees,
    dropped_sites, unwinds (call paths unwound), backtraces (of them by libgcc's
    backtrace(): the .eh_frame rules could not), tick_res_ns (the lifetimes' clock's tick;
    0: the time-stamp counter), recorders (threads that recorded), peak_bound_bytes (with
    several, how far the process's, its sites' and size ranges' peaks may lie from the
    true ones: recorders x the bytes a thread keeps unpublished; 0: exact).
    With --place (docs/placement.md) the sites also have placed_count, placed_bytes,
    fallback_count, fallback_bytes and rule (the rule that matched, "" none); placement: one
    row per rule, over the processes: rule ("size=1M:5M", "site=FUNCTION", "site=FILE:LINE"),
    policy (asked), processes, count, bytes, fallback_count, fallback_bytes (matched, but the
    default allocator's: past the cap, the arena's end or, align_fallback_count and
    align_fallback_bytes of them, an alignment the arenas do not take), peak_bytes (the
    most placed at once in one process), verified_processes (those whose arenas were read
    back at their end: not a killed one), read_policy and read_nodes (get_mempolicy on the
    arena), resident (bytes of its present pages), on_tier (of them on the tier's nodes,
    move_pages), sampled_pages and sampled_on_tier (get_mempolicy MPOL_F_NODE), numa_policy
    and numa_maps_bytes (numa_maps: bytes on the tier's nodes), huge_bytes (smaps
    AnonHugePages and hugetlb pages), verified_bytes (on_tier with tier nodes, huge_bytes
    when the tier is emulated alone); tier: nodes, emulated, cap."""

    processes: int
    estimated: bool  # counts sampled (--heap-sample-bytes): estimates
    sample_bytes: int
    count: int
    bytes: int
    byte_s: float
    peak_bytes: int
    sites: np.ndarray
    ranges: np.ndarray
    per_process: np.ndarray
    notes: list
    placement: np.ndarray = None
    tier: dict = None
    # the live timelines: timelines (some process has them), samples (taken in processes
    # with them), resolution_ms (bucket plus the clock's tick, the widest of the processes)
    live: dict = None
    row_site: np.ndarray = None  # per row of the model's sites: its row of `sites`

    def to_json(self):
        return {
            "processes": self.processes,
            "estimated": self.estimated,
            "sample_bytes": self.sample_bytes,
            "count": self.count,
            "bytes": self.bytes,
            "byte_s": self.byte_s,
            "peak_bytes": self.peak_bytes,
            "sites": records(self.sites),
            "ranges": records(self.ranges),
            "per_process": records(self.per_process),
            "notes": list(self.notes),
            "live": dict(self.live or {}),
            **(
                {"placement": records(self.placement), "tier": dict(self.tier)}
                if self.placement is not None and len(self.placement)
                else {}
            ),
        }


def size_label(n):
    """A power of two's size, short: 512 B, 64 KiB, 2 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{int(n)} {unit}"
        n /= 1024
    return str(n)


def _locations(heap, symbolizer):
    """(object, offset) -> Location for every frame of every site."""
    s = heap.sites
    keep = np.arange(s["object"].shape[1])[None, :] < s["depth"][:, None]
    obj, off = s["object"][keep], s["offset"][keep]
    out = {}
    for o in np.unique(obj[obj >= 0]):
        offs = np.unique(off[obj == o])
        for x, loc in zip(offs, symbolizer.resolve(heap.objects[o], offs)):
            out[(int(o), int(x))] = loc
    return out


def _frame_text(locs, o, x):
    loc = locs.get((int(o), int(x)))
    return loc.short() if loc else f"{int(x):#x}"


def _is_runtime(heap, o):
    return o >= 0 and os.path.basename(heap.objects[o]).startswith(RUNTIME_OBJECTS)


def _site_rows(heap, locs):
    s = heap.sites
    keys, info = [], []
    for r in s:
        d = int(r["depth"])
        if d == 0:
            keys.append("(sites past --heap-max-sites)")
            info.append(("(other sites)", "", "", 0))
            continue
        frames = [_frame_text(locs, r["object"][k], r["offset"][k]) for k in range(d)]
        k = next((k for k in range(d) if not _is_runtime(heap, int(r["object"][k]))), 0)
        loc = locs.get((int(r["object"][k]), int(r["offset"][k])))
        where = frames[k]
        keys.append(HEAP_FNS[int(r["fn"])] + ": " + " < ".join(frames))
        info.append(
            (where, loc.function if loc else "", loc.file if loc else "", loc.line if loc else 0)
        )
    return keys, info


def analyze(heap, symbolizer=None):
    """The HeapResult of a HeapProfile."""
    s, p = heap.sites, heap.processes
    locs = _locations(heap, symbolizer or Symbolizer()) if len(s) else {}
    keys, info = _site_rows(heap, locs)
    uniq, inv = np.unique(np.array(keys, object), return_inverse=True) if keys else ([], [])
    inv = np.asarray(inv, np.int64)
    n = len(uniq)
    total_bs = float(s["byte_s"].sum())

    def by(col, how=np.add):
        out = np.zeros(n, np.float64 if s[col].dtype.kind == "f" else np.int64)
        if how is np.maximum:
            out[:] = np.iinfo(np.int64).min if out.dtype.kind == "i" else -np.inf
        elif how is np.minimum:
            out[:] = np.iinfo(np.int64).max
        how.at(out, inv, s[col])
        return out

    first = np.zeros(n, np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    bs = by("byte_s")
    live_s = by("live_s")
    span = np.zeros(n)
    np.add.at(span, inv, p["duration_s"][s["process"]] if len(p) else 0.0)
    time_pct = np.divide(live_s * 100, span, out=np.full(n, np.nan), where=span > 0)
    # every process of the site has a timeline and samples: the share of its samples
    num, den, counted, counted_samples = _sample_shares(heap, inv, n)
    counted &= den > 0
    nproc = np.array([len(np.unique(s["process"][inv == i])) for i in range(n)], np.int64)
    sites = table(
        {
            "where": [info[i][0] for i in first],
            "function": [info[i][1] for i in first],
            "file": [info[i][2] for i in first],
            "line": [info[i][3] for i in first],
            "path": [str(k).split(": ", 1)[-1] for k in uniq],
            "allocator": [HEAP_FNS[int(s["fn"][i])] for i in first],
            "processes": nproc,
            "count": by("count"),
            "frees": by("frees"),
            "bytes": by("bytes"),
            "min_bytes": by("min", np.minimum),
            "max_bytes": by("max", np.maximum),
            "peak_bytes": by("peak", np.maximum),
            "byte_s": bs,
            "byte_s_pct": bs * 100 / total_bs if total_bs else bs * 0,
            "live_s": live_s,
            "live_pct": np.where(counted, 100 * num / np.maximum(den, 1), time_pct),
            "live_pct_of": np.where(counted, "samples", "time").astype(object),
            "live_samples": np.where(counted, den, 0).astype(np.int64),
            "placed_count": by("placed_count"),
            "placed_bytes": by("placed_bytes"),
            "fallback_count": by("fallback_count"),
            "fallback_bytes": by("fallback_bytes"),
            "rule": _site_rules(heap, inv, n),
        },
        n,
    )
    order = np.argsort(-sites["byte_s"], kind="stable")
    sites = sites[order]
    row_site = np.empty(n, np.int64)
    row_site[order] = np.arange(n)
    ranges = _ranges(heap)
    per_process = table(
        {
            "rank": p["rank"],
            "host": p["host"],
            "pid": p["pid"],
            "state": p["state"],
            "sample_bytes": p["sample_bytes"],
            "sites": np.bincount(s["process"], minlength=len(p))[: len(p)],
            "count": np.bincount(s["process"], s["count"], len(p)).astype(np.int64),
            "bytes": np.bincount(s["process"], s["bytes"], len(p)).astype(np.int64),
            "peak_bytes": p["peak_live_bytes"],
            "byte_s": np.bincount(s["process"], s["byte_s"], len(p)),
            "untracked": p["untracked"],
            "unseen_frees": p["unseen_frees"],
            "dropped_sites": p["dropped_sites"],
            "unwinds": p["unwinds"],
            "backtraces": p["backtraces"],
            "tick_res_ns": p["tick_res_ns"],
            "recorders": p["recorders"],
            "peak_bound_bytes": np.where(
                p["recorders"] > 1, p["recorders"] * p["publish_bytes"], 0
            ),
        },
        len(p),
    )
    return HeapResult(
        processes=len(p),
        estimated=heap.estimated,
        sample_bytes=int(p["sample_bytes"].max()) if len(p) else 0,
        count=int(s["count"].sum()),
        bytes=int(s["bytes"].sum()),
        byte_s=total_bs,
        peak_bytes=int(p["peak_live_bytes"].max()) if len(p) else 0,
        sites=sites,
        ranges=ranges,
        per_process=per_process,
        notes=list(heap.notes),
        placement=_placement(heap.placement, p),
        tier=_tier(p),
        live=_live_summary(p, counted_samples),
        row_site=row_site[inv] if n else np.zeros(0, np.int64),
    )


def _bucket_bits(live_bits):
    """(rows, HEAP_LIVE_BUCKETS) 0/1 of the rows' live_bits (bit j % 64 of word j // 64)."""
    b = np.ascontiguousarray(live_bits, "<u8").view(np.uint8).reshape(len(live_bits), -1)
    return np.unpackbits(b, axis=1, bitorder="little")[:, :HEAP_LIVE_BUCKETS]


def live_units(heap, site_of_row):
    """The sites' timelines per (process, site), site_of_row giving each row of
    heap.sites its site (rows of one process merged into one site: their buckets ORed,
    so that a sample counts once): (process, site, bits) arrays, bits (units,
    HEAP_LIVE_BUCKETS) 0/1."""
    s = heap.sites
    key = s["process"] * (int(site_of_row.max(initial=0)) + 1) + site_of_row
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = np.asarray(inv, np.int64).reshape(-1)
    words = np.zeros((len(first), s["live_bits"].shape[1]), np.uint64)
    np.bitwise_or.at(words, inv, s["live_bits"])
    return s["process"][first], site_of_row[first], _bucket_bits(words)


def live_counts(heap, units, process, t_ns, group, ngroups):
    """(ngroups, units): per group the samples (process: each one's index of
    heap.processes, -1 none; t_ns: its CLOCK_MONOTONIC ns; group: 0..ngroups-1) taken in a
    unit's process (live_units) while its site was live (the sample's bucket marked).
    Processes without timelines count none."""
    p = heap.processes
    unit_process, _, bits = units
    out = np.zeros((ngroups, len(unit_process)))
    process = np.asarray(process, np.int64)
    for k in np.unique(process[process >= 0]):
        width = float(p["live_bucket_ns"][k])
        rows = np.nonzero(unit_process == k)[0]
        if not width > 0 or not len(rows):
            continue
        m = process == k
        rel = (np.asarray(t_ns)[m] - int(p["live_origin_ns"][k])).astype(np.float64)
        b = np.floor(rel / width).astype(np.int64)
        ok = (b >= 0) & (b < HEAP_LIVE_BUCKETS)
        per_bucket = np.zeros((ngroups, HEAP_LIVE_BUCKETS))
        np.add.at(per_bucket, (np.asarray(group)[m][ok], b[ok]), 1.0)
        out[:, rows] = per_bucket @ bits[rows].T
    return out


def _timed(heap):
    """Per process: whether it has timelines."""
    return heap.processes["live_bucket_ns"] > 0


def _sample_shares(heap, site_of_row, n):
    """Per site (n of them, site_of_row: each row's): the samples taken while it was live
    in its processes, and those processes' samples (0 where one has no timeline or no
    samples: `all_counted` False); the samples of the processes with timelines."""
    num, den, counted = np.zeros(n), np.zeros(n), np.zeros(n, bool)
    procs = [(k, t) for k, t in heap.sample_t.items() if len(t)]
    if not procs or not len(heap.sites):
        return num, den, counted, 0
    units = live_units(heap, site_of_row)
    process = np.concatenate([np.full(len(t), k) for k, t in procs])
    t = np.concatenate([t for _, t in procs])
    hits = live_counts(heap, units, process, t, np.zeros(len(t), np.int64), 1)[0]
    per_proc = np.bincount(process, minlength=len(heap.processes)) * _timed(heap)
    taken = per_proc[units[0]]
    np.add.at(num, units[1], hits)
    np.add.at(den, units[1], taken)
    counted[:] = True
    np.logical_and.at(counted, units[1], taken > 0)
    return num, den, counted, int(per_proc.sum())


def _live_summary(p, taken):
    """The timelines of processes p: whether any has them, the samples counted (in the
    processes with them), the resolution (bucket and clock tick; the widest), intervals left
    unmarked at a dump."""
    timed = p["live_bucket_ns"] > 0
    res = (p["live_bucket_ns"] + p["live_slack_ns"])[timed]
    return {
        "timelines": bool(timed.any()),
        "samples": taken,
        "resolution_ms": float(res.max(initial=0.0)) / 1e6,
        "unclosed": int(p["live_unclosed"].sum()),
    }


def routines_live(heap, result, samples, metas):
    """Which sites were live during each routine's samples: one row per (routine, site)
    with some, by routine, most first. A routine is a function anywhere on a sample's
    stack in the samples table `samples` (analysis.samples SamplesResult.samples:
    process, time_s, stack), whose processes' descriptions are metas {process name:
    meta}. Columns: routine, samples (its samples in processes with timelines), site (the
    row of result.sites), where, live_samples (of them, those taken while the site was
    live in their process), live_pct. No rows without timelines."""
    cols = ("routine", "samples", "site", "where", "live_samples", "live_pct")
    if not len(samples) or not _timed(heap).any() or result.row_site is None:
        return table({c: [] for c in cols}, 0)
    names, pinv = np.unique(np.asarray(samples["process"], str), return_inverse=True)
    pinv = pinv.reshape(-1)
    k = np.array([heap.process_of(metas.get(n, {})) for n in names], np.int64)
    t0 = np.array([float(metas.get(n, {}).get("t_start", 0)) for n in names])
    process = k[pinv]
    t = np.round(t0[pinv] + np.asarray(samples["time_s"], np.float64) * 1e9).astype(np.int64)
    stacks, group = np.unique(np.asarray(samples["stack"], str), return_inverse=True)
    group = group.reshape(-1)
    units = live_units(heap, result.row_site)
    per_unit = live_counts(heap, units, process, t, group, len(stacks))
    per_site = np.zeros((len(result.sites), len(stacks)))
    np.add.at(per_site, units[1], per_unit.T)
    timed = (process >= 0) & _timed(heap)[np.maximum(process, 0)]
    counted = np.bincount(group[timed], minlength=len(stacks))
    per = {}
    for u, stack in enumerate(stacks.tolist()):
        if not counted[u]:
            continue
        for name in set(stack.split(";")) - {""}:
            n, live = per.get(name, (0, 0.0))
            per[name] = (n + int(counted[u]), live + per_site[:, u])
    rows = []
    for name in sorted(per):
        n, live = per[name]
        live = np.rint(live).astype(np.int64)
        for i in np.nonzero(live)[0][np.argsort(-live[np.nonzero(live)[0]], kind="stable")]:
            rows.append(
                (name, n, int(i), result.sites["where"][i], int(live[i]), 100 * live[i] / n)
            )
    return table({c: [r[k] for r in rows] for k, c in enumerate(cols)}, len(rows))


def rule_label(kind, text, lo, hi):
    """A --place rule as written: size=1M:5M, site=FUNCTION, site=FILE:LINE."""
    if kind == "size":
        return f"size={_short(lo)}:{_short(hi)}"
    return f"site={text}"


def _short(n):
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _site_rules(heap, inv, n):
    """Each merged site's rule label ("" when none matched)."""
    out = [""] * n
    s, pl = heap.sites, heap.placement
    labels = {
        (int(r["process"]), int(r["rule"])): rule_label(r["kind"], r["text"], r["lo"], r["hi"])
        for r in pl
    }
    for i in np.nonzero(s["rule"] >= 0)[0]:
        out[inv[i]] = labels.get((int(s["process"][i]), int(s["rule"][i])), "")
    return out


def _placement(pl, p):
    """One row per rule (by its label and asked policy), summed over the processes (p)."""
    labels = [rule_label(r["kind"], r["text"], r["lo"], r["hi"]) for r in pl]
    keys = [f"{lab}\0{r['policy']}" for lab, r in zip(labels, pl)]
    uniq, first, inv = (
        np.unique(np.array(keys, object), return_index=True, return_inverse=True)
        if keys
        else ([], np.zeros(0, np.int64), np.zeros(0, np.int64))
    )
    order = np.argsort(pl["rule"][first], kind="stable") if len(first) else first
    first = first[order]
    n = len(uniq)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    inv = rank[np.asarray(inv, np.int64)] if n else np.zeros(0, np.int64)

    def by(col, how=np.add, where=None):
        out = np.zeros(n, np.int64)
        v = pl[col].astype(np.int64)
        how.at(out, inv, v if where is None else np.where(where, v, 0))
        return out

    verified = pl["verified"]
    tiered = np.array([bool(p["tier_nodes"][i]) for i in pl["process"]], bool)

    def joined(col):
        return [
            ",".join(sorted({str(v) for v in pl[col][(inv == i) & verified] if str(v)}))
            for i in range(n)
        ]

    on_tier = by("on_tier", where=verified)
    huge = by("huge_bytes", where=verified)
    has_nodes = np.zeros(n, bool)
    np.logical_or.at(has_nodes, inv, tiered)
    return table(
        {
            "rule": [labels[i] for i in first],
            "policy": [pl["policy"][i] for i in first],
            "processes": np.bincount(inv, minlength=n)[:n],
            "count": by("count"),
            "bytes": by("bytes"),
            "fallback_count": by("fallback_count"),
            "fallback_bytes": by("fallback_bytes"),
            "align_fallback_count": by("align_fallback_count"),
            "align_fallback_bytes": by("align_fallback_bytes"),
            "peak_bytes": by("peak", np.maximum),
            "verified_processes": np.bincount(inv, verified, n).astype(np.int64)[:n],
            "read_policy": joined("read_policy"),
            "read_nodes": joined("read_nodes"),
            "resident": by("resident", where=verified),
            "on_tier": on_tier,
            "sampled_pages": by("sampled", where=verified),
            "sampled_on_tier": by("sampled_on_tier", where=verified),
            "numa_policy": joined("numa_policy"),
            "numa_maps_bytes": by("numa_maps_bytes", where=verified),
            "huge_bytes": huge,
            "verified_bytes": np.where(has_nodes, on_tier, huge),
        },
        n,
    )


def _tier(p):
    """The fast tier of the processes that placed: nodes, emulated, cap."""
    nodes = sorted({str(x) for x in p["tier_nodes"] if str(x)}) if len(p) else []
    emulated = (
        sorted({str(x) for x in p["emulate"] if str(x) not in ("", "none")}) if len(p) else []
    )
    return {
        "nodes": ";".join(nodes),
        "emulated": ",".join(emulated),
        "cap": int(p["place_cap"].max()) if len(p) else 0,
    }


def _ranges(heap):
    s, r = heap.sites, heap.ranges
    count = s["hist_count"].sum(axis=0) if len(s) else np.zeros(HEAP_RANGES, np.int64)
    nbytes = s["hist_bytes"].sum(axis=0) if len(s) else np.zeros(HEAP_RANGES, np.int64)
    peak = np.zeros(HEAP_RANGES, np.int64)
    bs = np.zeros(HEAP_RANGES)
    if len(r):
        np.maximum.at(peak, r["range"], r["peak"])
        np.add.at(bs, r["range"], r["byte_s"])
    g = np.nonzero((count > 0) | (bs > 0))[0]
    lo = np.where(g > 0, 2.0 ** (g - 1), 0).astype(np.int64)
    hi = (2.0**g).astype(np.int64)
    total = bs.sum()
    return table(
        {
            "range": [f"{size_label(a)}-{size_label(b)}" for a, b in zip(lo, hi)],
            "lo": lo,
            "hi": hi,
            "count": count[g],
            "bytes": nbytes[g],
            "peak_bytes": peak[g],
            "byte_s": bs[g],
            "byte_s_pct": bs[g] * 100 / total if total else bs[g] * 0,
        },
        len(g),
    )

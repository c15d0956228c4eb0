"""Reader of the heap module's records (heap/*.pwheap; docs/format.md "Heap profile"):
the model of model/heap.py. A record is read as it is, whether its process ended (the
header's state) or was killed (state -1: "killed", the counts up to then; a killed
process's count and bytes are summed from its histograms, which it kept current, and its
objects still live have no lifetime). A record of a run with --place (version 2) has the
placement part after its sites: its rules (what each placed, and what was read back at the
end) and each site's placements. A record of version 3 has the threads' records between its
sites and its placement part: the size groups' byte-ticks of threads that recorded while
others did, added to the header's; and the fallbacks for their alignment in its rules. A
record of version 4 has each site's live timeline (when some of its objects were live, in
fixed-width time buckets). A file that cannot be read is left out with a note."""

import numpy as np

from perfweave._format import (
    FILES,
    HEAP_EMULATE,
    HEAP_LIVE_BUCKETS,
    HEAP_MAGIC_NUMBER,
    HEAP_MAX_RULES,
    HEAP_POLICIES,
    HEAP_RANGES,
    HEAP_RULE_KINDS,
    RECORDS,
    STATES,
)
from perfweave.model.heap import (
    PLACEMENT_DTYPE,
    PROCESS_DTYPE,
    RANGE_DTYPE,
    SITE_DTYPE,
    HeapProfile,
)
from perfweave.readers.dataset import Dataset
from perfweave.readers.samples import read_samples

VERSION = FILES["heap"].version
# 1: no placement part (its header's end is zero in the file); 2: no threads' records, no
# aligned fallbacks in the rules; 3: no live timelines (their header fields zero)
VERSIONS = (1, 2, 3, VERSION)
PAGE = 4096
HEADER, OBJECT, SITE, THREAD, RULE, PLACED, LIVE = (
    RECORDS[k]
    for k in (
        "heap_header",
        "heap_object",
        "heap_site",
        "heap_thread",
        "heap_rule",
        "heap_placed",
        "heap_live",
    )
)

# version 2's heap_rule: the same fields without the last ones, align_fallback_* (zero then)
_RULE_V3 = ("align_fallback_count", "align_fallback_bytes")
RULE_V2 = np.dtype(
    {
        "names": [k for k in RULE.names if k not in _RULE_V3],
        "formats": [RULE.fields[k][0] for k in RULE.names if k not in _RULE_V3],
        "offsets": [RULE.fields[k][1] for k in RULE.names if k not in _RULE_V3],
        "itemsize": min(RULE.fields[k][1] for k in _RULE_V3),
    }
)


def _page(n):
    return (n + PAGE - 1) // PAGE * PAGE


def _ticks(lo, hi):
    return lo.astype(np.float64) + hi.astype(np.float64) * 2.0**64


_SUMMED = (
    "frees",
    "peak",
    "byte_s",
    "live_s",
    "hist_count",
    "hist_bytes",
    "placed_count",
    "placed_bytes",
    "fallback_count",
    "fallback_bytes",
)


def _one_per_site(s, path_hash):
    """A process's records of one call path (path_hash) as one row: the site's own record
    (its live bytes, peak and live span) and the records of the threads that recorded at
    once (their sums; docs/format.md), in the order of their first records."""
    _, first, inv = np.unique(path_hash, return_index=True, return_inverse=True)
    if len(first) == len(s):
        return s
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    at = rank[np.asarray(inv).ravel()]
    out = s[first[order]].copy()
    for k in _SUMMED:
        out[k] = 0
        np.add.at(out[k], at, s[k])
    np.minimum.at(out["min"], at, s["min"])
    np.bitwise_or.at(out["live_bits"], at, s["live_bits"])
    np.maximum.at(out["max"], at, s["max"])
    return out


def read_heap(path):
    """The HeapProfile of experiment path (an empty one without heap/)."""
    out = HeapProfile()
    d = path / "heap"
    if not d.is_dir():
        return out
    objects, procs, sites, ranges, placement = {}, [], [], [], []
    for f in sorted(d.glob("*.pwheap")):
        try:
            _read_one(f, len(procs), objects, procs, sites, ranges, placement, out.notes)
        except (OSError, ValueError) as e:
            out.notes.append(f"heap profile: {f.name}: {e}; left out")
    out.processes = np.array(procs, PROCESS_DTYPE) if procs else out.processes
    out.sites = np.concatenate(sites) if sites else out.sites
    out.ranges = np.concatenate(ranges) if ranges else out.ranges
    out.placement = np.concatenate(placement) if placement else out.placement
    out.objects = list(objects)
    if (out.processes["live_bucket_ns"] > 0).any():
        out.sample_t = _sample_times(path, out)
    return out


def _sample_times(path, heap):
    """{heap process index: the CLOCK_MONOTONIC ns of its samples} of the processes with
    timelines (samples/: a process's by its pid, and host where two have one pid)."""
    try:
        samples = read_samples(path)
    except (OSError, ValueError) as e:
        heap.notes.append(f"heap profile: samples not read ({e}): live % of the time")
        return {}
    out = {}
    for q in samples:
        k = heap.process_of(q.meta)
        if k >= 0 and heap.processes["live_bucket_ns"][k] > 0:
            out[k] = np.asarray(q.records["t"], np.int64)
    return out


def _text(a):
    return a.tobytes().split(b"\0")[0].decode(errors="replace")


def _name(names, i):
    return names[i] if 0 <= i < len(names) else str(i)


def _nodes(mask):
    return ",".join(str(n) for n in range(64) if int(mask) >> n & 1)


def _placement(raw, h, at, index, recs):
    """The placement part at `at`: the rules' rows and each site's (placed count, bytes,
    fallback count, bytes, rule), by site index."""
    nrules = int(h["nrules"])
    if not 0 <= nrules <= HEAP_MAX_RULES:
        raise ValueError(f"{nrules} placement rules")
    rule = RULE if int(h["version"]) >= 3 else RULE_V2
    placed_at = at + _page(rule.itemsize * HEAP_MAX_RULES)
    end = placed_at + PLACED.itemsize * int(h["nsites"])
    if len(raw) < end:
        raise ValueError("cut short in its placement part")
    rules = raw[at : at + rule.itemsize * nrules].view(rule)
    out = np.zeros(nrules, PLACEMENT_DTYPE)
    out["process"] = index
    out["rule"] = np.arange(nrules)
    for k in ("lo", "hi", "count", "bytes", "fallback_count", "fallback_bytes", "frees"):
        out[k] = rules[k]
    for k in ("peak", "arena_used", "resident", "on_tier", "sampled", "sampled_on_tier"):
        out[k] = rules[k]
    for k in ("numa_maps_lines", "numa_maps_bytes", "huge_bytes", "hugetlb", "verified"):
        out[k] = rules[k]
    for k in _RULE_V3:
        out[k] = rules[k] if k in rules.dtype.names else 0
    for i, r in enumerate(rules):
        out[i]["kind"] = _name(HEAP_RULE_KINDS, int(r["kind"]))
        out[i]["text"] = _text(r["text"])
        out[i]["policy"] = _name(HEAP_POLICIES, int(r["policy"]))
        out[i]["read_policy"] = _name(HEAP_POLICIES, int(r["read_policy"])) if r["verified"] else ""
        out[i]["read_nodes"] = _nodes(r["read_nodes"]) if r["verified"] else ""
        out[i]["numa_policy"] = _text(r["numa_policy"])
    return out, raw[placed_at:end].view(PLACED)


def _timelines(raw, h, nsites, name, notes):
    """The sites' live timelines (version 4; docs/format.md "Heap profile") and the
    process's (live_origin_ns, live_bucket_ns, live_slack_ns, live_unclosed): bucket j from
    tick_start + j 2^live_log2 ticks, on CLOCK_MONOTONIC's axis (the coarse clock's ns are
    its ns, quantised down to its tick; the time-stamp counter's ticks convert from
    t_start). None and zeros without them (an older record, or one killed while widening
    its buckets: mixed widths)."""
    at, unclosed = int(h["live_at"]), int(h["live_unclosed"])
    if int(h["version"]) < 4 or at <= 0:
        return None, (0, 0.0, 0.0, 0)
    if int(h["live_folding"]):
        notes.append(
            f"heap profile: {name}: killed while widening its live timelines' buckets: "
            "its timelines left out"
        )
        return None, (0, 0.0, 0.0, unclosed)
    if int(h["live_buckets"]) != HEAP_LIVE_BUCKETS or len(raw) < at + LIVE.itemsize * nsites:
        raise ValueError("live timelines of another size, or cut short")
    nspt = float(h["ns_per_tick"]) or 1.0
    coarse = int(h["tick_res_ns"]) > 0
    origin = int(h["tick_start"]) if coarse else int(h["t_start"])
    width = 2.0 ** int(h["live_log2"]) * nspt
    bits = raw[at : at + LIVE.itemsize * nsites].view(LIVE)["bits"]
    return bits, (origin, width, float(h["live_slack"]) * nspt, unclosed)


def _read_one(f, index, objects, procs, sites, ranges, placement, notes):
    raw = np.fromfile(f, np.uint8)
    if len(raw) < HEADER.itemsize:
        raise ValueError("shorter than its header")
    h = raw[: HEADER.itemsize].view(HEADER)[0]
    if int(h["magic"]) != HEAP_MAGIC_NUMBER:
        raise ValueError("not a heap record (or its process died before it was made)")
    if int(h["version"]) not in VERSIONS:
        raise ValueError(f"version {int(h['version'])}, this perfweave reads {VERSION}")
    hdr_len = _page(HEADER.itemsize)
    obj_len = _page(OBJECT.itemsize * int(h["max_objects"]))
    nobj, nsites = int(h["nobjects"]), int(h["nsites"])
    end = hdr_len + obj_len + SITE.itemsize * nsites
    if len(raw) < end or not 0 <= nobj <= int(h["max_objects"]):
        raise ValueError("cut short")
    objs = raw[hdr_len : hdr_len + OBJECT.itemsize * nobj].view(OBJECT)
    recs = raw[hdr_len + obj_len : end].view(SITE)
    placed = None
    at = hdr_len + obj_len + _page(SITE.itemsize * int(h["max_sites"]))
    threads = np.zeros(0, THREAD)
    if int(h["version"]) >= 3:
        nthreads = int(h["nthreads"])
        if not 0 <= nthreads <= int(h["max_threads"]) or len(raw) < at + THREAD.itemsize * nthreads:
            raise ValueError("cut short in its threads' records")
        threads = raw[at : at + THREAD.itemsize * nthreads].view(THREAD)
        at += _page(THREAD.itemsize * int(h["max_threads"]))
    if int(h["version"]) >= 2 and int(h["nrules"]) > 0:
        rules, placed = _placement(raw, h, at, index, recs)
        placement.append(rules)
    live_bits, live = _timelines(raw, h, nsites, f.name, notes)
    used = recs["path_hash"] != 0
    recs = recs[used]
    remap = np.array(
        [
            objects.setdefault(p.tobytes().split(b"\0")[0].decode(), len(objects))
            for p in objs["path"]
        ]
        + [-1],
        np.int64,
    )
    nspt = float(h["ns_per_tick"]) or 1.0
    state = int(h["state"])
    s = np.zeros(len(recs), SITE_DTYPE)
    s["process"] = index
    for k in ("fn", "depth", "frees", "min", "max", "peak", "hist_count", "hist_bytes"):
        s[k] = recs[k]
    s["object"] = np.where(recs["object"] >= 0, remap[recs["object"]], -1)
    s["offset"] = recs["offset"]
    s["byte_s"] = _ticks(recs["byte_ticks_lo"], recs["byte_ticks_hi"]) * nspt / 1e9
    s["live_s"] = recs["live_ticks"] * nspt / 1e9
    s["rule"] = -1
    if live_bits is not None:
        s["live_bits"] = live_bits[used]
    if placed is not None:
        p = placed[used]
        for k in ("count", "bytes"):
            s["placed_" + k] = p[k]
        for k in ("fallback_count", "fallback_bytes", "rule"):
            s[k] = p[k]
    s = _one_per_site(s, recs["path_hash"])
    s["count"] = s["hist_count"].sum(axis=1)
    s["bytes"] = s["hist_bytes"].sum(axis=1)
    s["min"] = np.where(s["count"] > 0, s["min"], 0)
    # a site's largest object was live once: its peak is at least that, where several
    # threads' unpublished changes (under 64 KiB each) kept the shared count below it
    s["peak"] = np.where(s["count"] > 0, np.maximum(s["peak"], s["max"]), s["peak"])
    dropped = int(s["count"][s["depth"] == 0].sum())  # site 0: the sites past max_sites
    sites.append(s[s["count"] > 0])
    r = np.zeros(HEAP_RANGES, RANGE_DTYPE)
    r["process"] = index
    r["range"] = np.arange(HEAP_RANGES)
    r["peak"] = h["range_peak"]
    ticks = _ticks(h["range_ticks_lo"], h["range_ticks_hi"])
    ticks += _ticks(threads["range_ticks_lo"], threads["range_ticks_hi"]).sum(axis=0)
    r["byte_s"] = ticks * nspt / 1e9
    ranges.append(r)
    host = f.name.rsplit(".", 2)[0]
    procs.append(
        (
            int(h["rank"]),
            int(h["pid"]),
            int(h["parent_pid"]),
            host,
            STATES[state] if 0 <= state < len(STATES) else "killed",
            int(h["sample_bytes"]),
            max(int(h["t_end"]) - int(h["t_start"]), 0) / 1e9,
            dropped,
            int(h["untracked"]),
            int(h["unseen_frees"]),
            int(h["bootstrap"]),
            int(h["unwinds"]),
            int(h["backtraces"]),
            int(h["tick_res_ns"]),
            int(h["live_bytes"]),
            int(h["peak_live_bytes"]),
            _nodes(h["tier_nodes"]),
            _name(HEAP_EMULATE, int(h["place_emulate"])),
            int(h["place_cap"]),
            int(h["place_peak"]),
            int(h["publish_bytes"]),
            max(int(h["recorders"]), 1),
            *live,
        )
    )


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "heap", "heap", read_heap, "the allocation sites per process (perfweave run --heap)"
)

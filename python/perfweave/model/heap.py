"""The heap module's data (runtime/modules/heap.c, `perfweave run --heap`): per measured
process its header (how it ended, what was dropped, its peak), and per allocation site
(a call path of up to HEAP_DEPTH frames, each an (object, offset)) the allocations'
count, bytes, sizes, log2 size histogram, peak bytes live and byte-seconds live. The
model every layer above the reader works on: readers/heap.py builds it from the files,
`from_literal` from plain values (tests), analysis/heap.py reads it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import HEAP_DEPTH, HEAP_LIVE_BUCKETS, HEAP_RANGES

# one row per process (rank -1: none; state a format.h PW_STATES name, "killed" for a
# process whose record was never ended; sample_bytes 0: every allocation recorded)
PROCESS_DTYPE = np.dtype(
    [
        ("rank", "<i8"),
        ("pid", "<i8"),
        ("parent_pid", "<i8"),
        ("host", "O"),
        ("state", "O"),
        ("sample_bytes", "<i8"),
        ("duration_s", "<f8"),
        ("dropped_sites", "<i8"),
        ("untracked", "<i8"),
        ("unseen_frees", "<i8"),
        ("bootstrap", "<i8"),
        ("unwinds", "<i8"),
        ("backtraces", "<i8"),  # of the unwinds, those by backtrace() (heap_unwind.c could not)
        ("tick_res_ns", "<i8"),  # the lifetimes' clock's tick (0: the time-stamp counter)
        ("live_bytes", "<i8"),
        ("peak_live_bytes", "<i8"),
        # --place (heap_place.c): the fast tier's nodes ("0,1"; "" none), its emulation
        # (HEAP_EMULATE: "none", "hugepage"), the cap (0: none) and the most placed at once
        ("tier_nodes", "O"),
        ("emulate", "O"),
        ("place_cap", "<i8"),
        ("place_peak", "<i8"),
        # several threads recording: each publishes its live-bytes changes once they reach
        # publish_bytes, so the peaks are within recorders x publish_bytes (exact with one)
        ("publish_bytes", "<i8"),
        ("recorders", "<i8"),
        # the sites' live timelines (docs/heap.md "When a site's objects were live"):
        # bucket j of a site's live_bits covers CLOCK_MONOTONIC ns [live_origin_ns + j
        # live_bucket_ns, ... + (j + 1) live_bucket_ns); live_bucket_ns 0: no timeline
        # (a record of version 2 or older); live_slack_ns: what a closing interval was
        # extended by (the lifetimes' clock's tick); live_unclosed: intervals open at a
        # dump that could not mark them
        ("live_origin_ns", "<i8"),
        ("live_bucket_ns", "<f8"),
        ("live_slack_ns", "<f8"),
        ("live_unclosed", "<i8"),
    ]
)
# one row per (process, site); object -1: offset is an address no loaded object held
SITE_DTYPE = np.dtype(
    [
        ("process", "<i8"),  # index of HeapProfile.processes
        ("fn", "<i8"),  # index of _format.HEAP_FNS
        ("depth", "<i8"),
        ("object", "<i8", (HEAP_DEPTH,)),  # index of HeapProfile.objects
        ("offset", "<i8", (HEAP_DEPTH,)),
        ("count", "<i8"),
        ("frees", "<i8"),
        ("bytes", "<i8"),
        ("min", "<i8"),
        ("max", "<i8"),
        ("peak", "<i8"),
        ("byte_s", "<f8"),
        ("live_s", "<f8"),  # seconds while some of the site's objects were live
        ("hist_count", "<i8", (HEAP_RANGES,)),
        ("hist_bytes", "<i8", (HEAP_RANGES,)),
        # --place: its allocations placed in the fast tier's arenas and those a rule matched
        # that went to the default allocator (past the cap or the arena); rule: the index of
        # PLACEMENT_DTYPE's rule that matched (-1: none)
        ("placed_count", "<i8"),
        ("placed_bytes", "<i8"),
        ("fallback_count", "<i8"),
        ("fallback_bytes", "<i8"),
        ("rule", "<i8"),
        # bit j % 64 of live_bits[j // 64]: some of its objects may have been live during
        # its process's timeline bucket j (PROCESS_DTYPE live_*)
        ("live_bits", "<u8", (HEAP_LIVE_BUCKETS // 64,)),
    ]
)
# one row per (process, --place rule): the rule (kind a HEAP_RULE_KINDS name; text its
# value: "1M:5M", a function or FILE:LINE), its placements and, read back at the end
# (verified), its arena's policy and nodes (read_policy a HEAP_POLICIES name, read_nodes
# "0,1"), its present pages (resident) and those on the tier's nodes (on_tier: move_pages),
# sample pages' nodes (get_mempolicy), numa_maps' policy and bytes on the tier's nodes, and
# its huge pages (smaps); align_fallback_*: the fallbacks of aligned allocations (posix_memalign,
# ...) whose alignment the arenas do not take (past HEAP_MAX_ALIGN, or not a power of two)
PLACEMENT_DTYPE = np.dtype(
    [
        ("process", "<i8"),
        ("rule", "<i8"),
        ("kind", "O"),
        ("text", "O"),
        ("lo", "<i8"),
        ("hi", "<i8"),
        ("policy", "O"),
        ("count", "<i8"),
        ("bytes", "<i8"),
        ("fallback_count", "<i8"),
        ("fallback_bytes", "<i8"),
        ("frees", "<i8"),
        ("peak", "<i8"),
        ("arena_used", "<i8"),
        ("hugetlb", "?"),
        ("verified", "?"),
        ("read_policy", "O"),
        ("read_nodes", "O"),
        ("resident", "<i8"),
        ("on_tier", "<i8"),
        ("sampled", "<i8"),
        ("sampled_on_tier", "<i8"),
        ("numa_maps_lines", "<i8"),
        ("numa_policy", "O"),
        ("numa_maps_bytes", "<i8"),
        ("huge_bytes", "<i8"),
        ("align_fallback_count", "<i8"),  # of the fallbacks, those for their alignment
        ("align_fallback_bytes", "<i8"),
    ]
)
# one row per (process, log2 size group): peak bytes live and byte-seconds of the group
RANGE_DTYPE = np.dtype([("process", "<i8"), ("range", "<i8"), ("peak", "<i8"), ("byte_s", "<f8")])


@dataclass
class HeapProfile:
    """Every measured process's allocation sites; objects: the loaded objects' paths
    that sites' frames name; notes: what could not be read."""

    processes: np.ndarray = field(default_factory=lambda: np.zeros(0, PROCESS_DTYPE))
    sites: np.ndarray = field(default_factory=lambda: np.zeros(0, SITE_DTYPE))
    ranges: np.ndarray = field(default_factory=lambda: np.zeros(0, RANGE_DTYPE))
    placement: np.ndarray = field(default_factory=lambda: np.zeros(0, PLACEMENT_DTYPE))
    objects: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    # {process index: CLOCK_MONOTONIC ns of the samples taken in it (samples/, every
    # thread)}: what the sites' live timelines count (processes with timelines only)
    sample_t: dict = field(default_factory=dict)

    def __bool__(self):
        """Whether the run recorded any of the module's data."""
        return bool(len(self.processes))

    def process_of(self, meta):
        """The index of `processes` of a samples description (samples/NAME.json: its pid,
        and its host where two processes have that pid); -1: none."""
        p = self.processes
        m = p["pid"] == int(meta.get("pid", -1))
        if m.sum() > 1:
            m &= p["host"] == meta.get("host")
        k = np.nonzero(m)[0]
        return int(k[0]) if len(k) else -1

    @property
    def estimated(self):
        """Whether the counts are estimates (a process sampled its allocations)."""
        return bool((self.processes["sample_bytes"] > 0).any())

    @classmethod
    def from_literal(
        cls, processes, sites, objects=(), ranges=(), notes=(), placement=(), sample_t=None
    ):
        """A HeapProfile of plain values: processes and sites, dicts of PROCESS_DTYPE's
        and SITE_DTYPE's fields (missing ones zero; a site's frames as `frames`, a list of
        (object index, offset), its sizes as `sizes`, a list of (size, count) making its
        histogram, count, bytes, min and max unless given, its timeline as `live`, a list
        of its marked buckets); sample_t: {process index: sample times (ns)}."""
        p = _rows(
            processes,
            PROCESS_DTYPE,
            {"host": "h", "state": "complete", "rank": -1, "tier_nodes": "", "emulate": "none"},
        )
        s = np.zeros(len(sites), SITE_DTYPE)
        for i, d in enumerate(sites):
            d = dict(d)
            frames = d.pop("frames", [])
            sizes = d.pop("sizes", [])
            for j in d.pop("live", []):
                s[i]["live_bits"][j // 64] |= np.uint64(1) << np.uint64(j % 64)
            s[i]["object"] = -1
            s[i]["rule"] = -1
            for k, (o, off) in enumerate(frames):
                s[i]["object"][k], s[i]["offset"][k] = o, off
            s[i]["depth"] = len(frames)
            for size, n in sizes:
                g = min(int(size).bit_length(), HEAP_RANGES - 1)
                s[i]["hist_count"][g] += n
                s[i]["hist_bytes"][g] += size * n
            if sizes:
                s[i]["count"] = sum(n for _, n in sizes)
                s[i]["bytes"] = sum(z * n for z, n in sizes)
                s[i]["min"] = min(z for z, _ in sizes)
                s[i]["max"] = max(z for z, _ in sizes)
            for k, v in d.items():
                s[i][k] = v
        pl = _rows(
            placement,
            PLACEMENT_DTYPE,
            {"kind": "size", "text": "", "policy": "bind", "read_policy": "bind"}
            | {"read_nodes": "", "numa_policy": "", "verified": True},
        )
        r = _rows(ranges, RANGE_DTYPE, {})
        t = {k: np.asarray(v, np.int64) for k, v in (sample_t or {}).items()}
        return cls(p, s, r, pl, list(objects), list(notes), t)


def _rows(dicts, dtype, defaults):
    out = np.zeros(len(dicts), dtype)
    for i, d in enumerate(dicts):
        for k, v in {**defaults, **d}.items():
            out[i][k] = v
    return out

"""The placement sweep (`perfweave placement sweep`, docs/placement.md "Sweep"): which
heap allocations, placed in the fast tier, make the program faster.

One `--heap` run gives the allocation profile (analysis/heap.py HeapResult); `targets`
picks from it what the sweep places: nothing (all-slow), everything (all-fast), each
log2 size group of the ones that together hold >= 95 % of the byte-seconds live (plus
the ranges the user gave) and the top sites by byte-seconds. launch/sweep.py runs
them interleaved and repeated (launch/overhead.py's Runner); `summarize` turns the runs
into a SweepResult: per target its bytes, peak and count from the profile, the bytes its
runs placed in the fast tier and the runtime verified there, whether its peak fits the
cap, the median time, the spread, the speedup against all-slow with a paired bootstrap
interval (analysis/overhead.py `bootstrap`), its share of the all-fast speedup and a
verdict (VERDICT_RULE). `SweepResult.to_json()` is sweep.json (docs/format.md
"Placement sweep"), `from_json` reads it back for the report and `perfweave.open()`.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis.overhead import LEVEL, bootstrap, document_head, spread
from perfweave.analysis.heap import analyze, size_label
from perfweave import units
from perfweave.errors import PerfweaveError
from perfweave.model.table import records, table
from perfweave.readers.experiment import open_experiment

FORMAT = "perfweave-placement-sweep"
VERSION = 1
COVERAGE = 0.95  # the byte-seconds the automatic size groups hold together, at least
SLOW, FAST = "slow", "fast"  # the two reference variants' names
VERDICT_RULE = (
    f"helps: the speedup's {LEVEL:.0%} interval lies above 1; hurts: below 1; no effect: it holds 1"
)
INF = -1  # a range's hi without bound ("inf")
# --time: what a run's time is
CLOCKS = {
    "wall": "the command's wall seconds (its experiment's wall_seconds)",
    "cpu": "user + system CPU seconds of the run's processes (getrusage of the waited "
    "children: perfweave's start and finish included, alike in every variant)",
}


def parse_size(text):
    """Bytes of a size (units.parse_size: '4096', '64K', '2.5G', '16GiB'); 'inf' -> INF.
    PerfweaveError for anything else."""
    if text.strip().lower() in ("inf", "max"):
        return INF
    n = units.parse_size(text)
    if n is None:
        raise PerfweaveError(f"bad size {text!r} (e.g. {units.EXAMPLES}, inf)")
    return n


def parse_ranges(text):
    """--ranges: 'auto', or a comma-separated list of LO:HI (sizes as parse_size, HI
    excluded, 'inf' for no bound) that may hold 'auto' too. (auto, [(lo, hi), ...])."""
    auto, out = False, []
    for item in (x.strip() for x in text.split(",")):
        if item.lower() == "auto":
            auto = True
            continue
        lo, sep, hi = item.partition(":")
        if not sep:
            raise PerfweaveError(f"--ranges: bad range {item!r} (LO:HI, e.g. 1M:5M, or auto)")
        a, b = parse_size(lo), parse_size(hi)
        if a == INF or (b != INF and b <= a):
            raise PerfweaveError(f"--ranges: empty range {item!r} (LO must be below HI)")
        out.append((a, b))
    if not auto and not out:
        raise PerfweaveError("--ranges: no range given (auto or LO:HI,...)")
    return auto, out


def range_label(lo, hi):
    return f"{_size(lo)}-{_size(hi) if hi != INF else 'inf'}"


def _size(n):
    """size_label's, for sizes that need not be powers of two."""
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m} {unit}"
    return size_label(n) if n and n & (n - 1) == 0 else f"{n} B"


@dataclass
class Target:
    """What one variant of the sweep places in the fast tier. name: the variant's name
    (its experiments are runs/NAME-R, R = round + 1); kind: none (all-slow), all (all-fast),
    range or site; label: what the table shows; lo, hi: a range's bytes (hi excluded,
    INF: no bound); file, line: a site's; given: a range of --ranges; count, bytes,
    peak_bytes, byte_s_pct: the profile's allocations of it; exact: whether they are
    exact (a range that is not a union of log2 groups has them summed over the groups
    it covers whole)."""

    name: str
    kind: str
    label: str
    lo: int = 0
    hi: int = 0
    file: str = ""
    line: int = 0
    given: bool = False
    count: int = 0
    bytes: int = 0
    peak_bytes: int = 0
    byte_s_pct: float = 0.0
    exact: bool = True


def _groups_in(ranges, lo, hi):
    """The profile's log2 groups inside [lo, hi); whether they cover it exactly."""
    top = np.inf if hi == INF else hi
    inside = (ranges["lo"] >= lo) & (ranges["hi"] <= top)
    partial = (ranges["hi"] > lo) & (ranges["lo"] < top) & ~inside
    return inside, not partial.any()


def targets(heap, auto=True, given=(), sites=3, coverage=COVERAGE, placeable=None, notes=None):
    """The sweep's Targets from a HeapResult: all-slow, all-fast, the log2 groups with
    the most byte-seconds until they hold `coverage` of them (auto), the given ranges
    (lo, hi) and the `sites` sites with the most byte-seconds that have a file:line and
    that placeable(file, line) accepts (a site a --place rule can name), the others
    passed over with a line in notes (a list)."""
    r = heap.ranges
    out = [
        Target(SLOW, "none", "all-slow (nothing placed)"),
        Target(
            FAST,
            "all",
            "all-fast (every size)",
            hi=INF,
            count=heap.count,
            bytes=heap.bytes,
            peak_bytes=heap.peak_bytes,
            byte_s_pct=100.0,
        ),
    ]
    chosen = []
    if auto and len(r):
        order = np.argsort(-r["byte_s"], kind="stable")
        held = np.cumsum(r["byte_s_pct"][order])
        n = int(np.searchsorted(held, coverage * 100 - 1e-9)) + 1
        chosen = [(int(r["lo"][i]), int(r["hi"][i]), False) for i in order[:n]]
    for lo, hi in given:
        if not any(c[:2] == (lo, hi) for c in chosen):
            chosen.append((lo, hi, True))
    for k, (lo, hi, was_given) in enumerate(chosen):
        inside, exact = _groups_in(r, lo, hi)
        out.append(
            Target(
                f"range{k + 1}",
                "range",
                range_label(lo, hi),
                lo,
                hi,
                given=was_given,
                count=int(r["count"][inside].sum()),
                bytes=int(r["bytes"][inside].sum()),
                peak_bytes=int(r["peak_bytes"][inside].sum()),
                byte_s_pct=float(r["byte_s_pct"][inside].sum()),
                exact=exact,
            )
        )
    s = heap.sites
    named = s[(s["line"] > 0) & (s["file"] != "")] if len(s) else s
    chosen_sites = []
    for row in named:
        if len(chosen_sites) == sites:
            break
        if placeable is None or placeable(str(row["file"]), int(row["line"])):
            chosen_sites.append(row)
        elif notes is not None:
            notes.append(
                f"site {row['where']} passed over: --place site=FILE:LINE finds no code "
                "at that line in the program (a library's line?)"
            )
    for k, row in enumerate(chosen_sites):
        out.append(
            Target(
                f"site{k + 1}",
                "site",
                row["where"],
                file=str(row["file"]),
                line=int(row["line"]),
                count=int(row["count"]),
                bytes=int(row["bytes"]),
                peak_bytes=int(row["peak_bytes"]),
                byte_s_pct=float(row["byte_s_pct"]),
            )
        )
    return out


@dataclass
class SweepResult:
    """A sweep's figures. rows: one per target (all-slow, all-fast, then ranges and
    sites by speedup, highest first): name, kind, label, rank (1: the range or site with
    the highest speedup; 0 for all-slow and all-fast), lo, hi, file, line, given, count,
    bytes, peak_bytes, byte_s_pct, exact, placed_bytes (median over its runs of the
    bytes placed in the fast tier), verified_bytes (of those, the bytes the runtime read
    back as being there), fits_cap (its peak within --cap; True without a cap), median_s,
    spread (standard deviation / mean of its times), speedup (all-slow's mean time over
    its mean), speedup_lo, speedup_hi (the interval), share (of the all-fast speedup:
    (slow - it) / (slow - fast), medians; NaN when all-fast is not faster), verdict.
    runs: variant, round, wall_s (the perfweave run command's), command_s (the measured
    command's wall seconds), cpu_s (CPU seconds of its processes), placed_bytes,
    verified_bytes, experiment (relative to the sweep directory)."""

    command: list
    rounds: int
    clock: str  # what a run's time is: CLOCKS
    emulation: str  # "hugepage": the tiers were emulated; "" for real tiers
    cap: int  # bytes, 0: none
    coverage: float
    profile: str  # the --heap run's experiment, relative to the sweep directory
    rows: np.ndarray
    runs: np.ndarray
    notes: list = field(default_factory=list)
    # under emulation, how the arenas got their huge pages: "hugetlb" (reserved before the
    # runs) or "madvise" (transparent huge pages); "" for real tiers
    huge_pages: str = ""
    hugetlb_reserved: int = 0  # huge pages the sweep reserved for its runs, given back after

    def to_json(self):
        return {
            **document_head(
                FORMAT,
                VERSION,
                self.command,
                self.rounds,
                "paired bootstrap over rounds, ratio of all-slow's mean time to the variant's",
            ),
            "time": self.clock,
            "time_is": CLOCKS[self.clock],
            "verdict_rule": VERDICT_RULE,
            "emulation": self.emulation,
            "huge_pages": self.huge_pages,
            "hugetlb_reserved": self.hugetlb_reserved,
            "cap": self.cap,
            "coverage": self.coverage,
            "profile": self.profile,
            "rows": [_plain(r) for r in records(self.rows)],
            "runs": records(self.runs),
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, doc):
        """The SweepResult of a sweep.json document; PerfweaveError for another file."""
        if doc.get("format") != FORMAT:
            raise PerfweaveError("not a placement sweep (sweep.json of another format)")
        if doc.get("version", 0) > VERSION:
            raise PerfweaveError(
                f"sweep.json version {doc['version']} is newer than this perfweave's ({VERSION})"
            )
        rows = [{k: (math.nan if v is None else v) for k, v in r.items()} for r in doc["rows"]]
        return cls(
            doc["command"],
            doc["rounds"],
            doc["time"],
            doc["emulation"],
            doc["cap"],
            doc["coverage"],
            doc["profile"],
            _table(rows, ROW_COLUMNS),
            _table(doc["runs"], RUN_COLUMNS),
            list(doc.get("notes", [])),
            doc.get("huge_pages", "madvise" if doc["emulation"] else ""),
            doc.get("hugetlb_reserved", 0),
        )


ROW_COLUMNS = [
    "name", "kind", "label", "rank", "lo", "hi", "file", "line", "given", "count", "bytes",
    "peak_bytes", "byte_s_pct", "exact", "placed_bytes", "verified_bytes", "fits_cap",
    "median_s", "spread", "speedup", "speedup_lo", "speedup_hi", "share", "verdict",
]  # fmt: skip
RUN_COLUMNS = [
    "variant", "round", "wall_s", "command_s", "cpu_s", "placed_bytes", "verified_bytes",
    "experiment",
]  # fmt: skip


def _table(rows, columns):
    return table({c: [r[c] for r in rows] for c in columns}, len(rows))


def _plain(row):
    """A row for JSON: NaN as null."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def run_facts(path):
    """What the sweep reads in one run's experiment (launch/overhead.py Runner's measure):
    command_s, the command's wall seconds as perfweave run timed it (experiment.json
    wall_seconds: from its start to its end, without perfweave's own start and finish);
    placed_bytes, the bytes its processes placed in the fast tier (every --place rule,
    summed); verified_bytes, of those, the bytes the runtime read back there at their end
    (analysis/heap.py HeapResult.placement: on the tier's nodes, or on huge pages when the
    tier is emulated)."""
    exp = open_experiment(path)
    out = {"command_s": exp.meta.get("wall_seconds"), "placed_bytes": 0, "verified_bytes": 0}
    rules = getattr(analyze(exp.heap, _Unnamed()), "placement", None)
    if rules is not None and len(rules):
        # a rule's arena is read back whole (its block headers and rounding too): what it
        # verifies of the placed blocks is at most their bytes
        out["placed_bytes"] = int(rules["bytes"].sum())
        out["verified_bytes"] = int(np.minimum(rules["verified_bytes"], rules["bytes"]).sum())
    return out


class _Unnamed:
    """A symbolizer that names no frame: run_facts reads a run's placement, not its sites'
    names (addr2line would cost a run half a second)."""

    def resolve(self, obj, offsets):
        return [None] * len(offsets)


def _seconds(run, clock="wall"):
    """A run's time (CLOCKS): its CPU seconds, or its command's wall seconds (run_facts;
    without them, the whole perfweave run's)."""
    if clock == "cpu":
        return run.cpu_s
    t = run.facts.get("command_s")
    return float(t) if t is not None else run.wall_s


def verdict(lo, hi):
    """VERDICT_RULE."""
    return "helps" if lo > 1 else "hurts" if hi < 1 else "no effect"


def summarize(
    command,
    targets,
    runs,
    cap=0,
    emulation="",
    profile="",
    coverage=COVERAGE,
    clock="wall",
    notes=(),
    huge_pages="",
    hugetlb_reserved=0,
):
    """The SweepResult of the Targets' Runs (launch/overhead.py Run, interleaved rounds;
    facts: run_facts'); cap: bytes
    (0: none); emulation: how the tiers were emulated ("" for real ones); clock: the
    runs' time (CLOCKS); notes: lines to keep (targets'); huge_pages, hugetlb_reserved:
    SweepResult's."""
    by = {}
    for r in sorted(runs, key=lambda r: r.round):
        by.setdefault(r.variant, []).append(r)
    slow = np.array([_seconds(r, clock) for r in by[SLOW]])
    fast = np.array([_seconds(r, clock) for r in by[FAST]])
    gain = np.median(slow) - np.median(fast)
    rows = []
    for t in targets:
        rs = by[t.name]
        wall = np.array([_seconds(r, clock) for r in rs])
        speedup, lo, hi = bootstrap(slow, wall, lambda a, b: a / b)
        placed = [r.facts.get("placed_bytes", 0) for r in rs]
        verified = [r.facts.get("verified_bytes", 0) for r in rs]
        share = (np.median(slow) - np.median(wall)) / gain if gain > 0 else math.nan
        rows.append(
            {
                "name": t.name,
                "kind": t.kind,
                "label": t.label,
                "rank": 0,
                "lo": t.lo,
                "hi": t.hi,
                "file": t.file,
                "line": t.line,
                "given": t.given,
                "count": t.count,
                "bytes": t.bytes,
                "peak_bytes": t.peak_bytes,
                "byte_s_pct": t.byte_s_pct,
                "exact": t.exact,
                "placed_bytes": int(np.median(placed)),
                "verified_bytes": int(np.median(verified)),
                "fits_cap": not cap or t.peak_bytes <= cap,
                "median_s": float(np.median(wall)),
                "spread": spread(wall),
                "speedup": speedup,
                "speedup_lo": lo,
                "speedup_hi": hi,
                "share": float(share) if t.name != SLOW else 0.0,
                "verdict": "baseline" if t.name == SLOW else verdict(lo, hi),
            }
        )
    head, rest = rows[:2], sorted(rows[2:], key=lambda r: -r["speedup"])
    for k, r in enumerate(rest):
        r["rank"] = k + 1
    run_rows = [
        {
            "variant": r.variant,
            "round": r.round,
            "wall_s": r.wall_s,
            "command_s": _seconds(r),
            "cpu_s": r.cpu_s,
            "placed_bytes": int(r.facts.get("placed_bytes", 0)),
            "verified_bytes": int(r.facts.get("verified_bytes", 0)),
            "experiment": r.experiment,
        }
        for r in runs
    ]
    notes = list(notes)
    if len(slow) < 5:
        notes.append(
            f"{len(slow)} rounds: the bootstrap draws from few distinct resamples, its "
            "intervals are rough (-r 5 or more for finer ones)"
        )
    if not gain > 0:
        notes.append("all-fast was not faster than all-slow: no share of its speedup")
    if any(not t.exact for t in targets):
        notes.append(
            "a given range that is not a union of log2 size groups: its count, bytes and "
            "peak are those of the groups it covers whole"
        )
    return SweepResult(
        list(command),
        len(slow),
        clock,
        emulation,
        cap,
        coverage,
        profile,
        _table(head + rest, ROW_COLUMNS),
        _table(run_rows, RUN_COLUMNS),
        notes,
        huge_pages,
        hugetlb_reserved,
    )

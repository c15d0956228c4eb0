"""The heap module's section (runtime/modules/heap.c, `perfweave run --heap`): the
allocation sites by byte-seconds live and the allocations per log2 size range (the
AUTO_HBW_LOG view: which sizes hold the bytes, for how long); with --place, what each rule
placed and what was read back of where its memory went. Absent from the report when the
run recorded no heap profile."""

from perfweave._format import HEAP_MAX_ALIGN
from perfweave.analysis.heap import analyze
from perfweave.report.section import Section
from perfweave.report.widgets import byte_size, cut_rows, escape, html_table, more_rows, text_table
from perfweave.report.widgets import wrap_line


class HeapSection(Section):
    name = "heap"

    def collect(self, experiment, report, top):
        heap = experiment.heap
        if not heap and not heap.notes:
            return {}
        return {"heap": analyze(heap).to_json()}

    def text(self, data, view):
        h = data.get("heap")
        if not h:
            return []
        est = " (estimates: one allocation per " + byte_size(h["sample_bytes"]) + " sampled)"
        out = ["", "Heap allocations (--heap)" + (est if h["estimated"] else "")]
        out.append(
            f"  {h['count']:,} allocations, {byte_size(h['bytes'])} in "
            f"{h['processes']} process{'es' * (h['processes'] != 1)}; "
            f"{h['byte_s']:.4g} byte-seconds live; peak {byte_size(h['peak_bytes'])} live"
        )
        out += [f"  {line}" for line in _bound_lines(h)]
        shown, more = cut_rows(h["sites"], view.max_rows)
        out += ["", "  Sites by byte-seconds live"]
        # min and max go first where the width is short
        out += text_table(
            [_site_row(s) for s in shown], SITE_COLUMNS, width=view.width, drop=(4, 5)
        )
        out += more_rows(more, "sites")
        out += wrap_line("live %", _live_line(h), view.width)
        out += ["", "  Allocations per size range"]
        out += text_table([_range_row(r) for r in h["ranges"]], RANGE_COLUMNS, width=view.width)
        if h.get("placement"):
            out += ["", "  " + _tier_line(h)]
            out += text_table(
                [_rule_row(r) for r in h["placement"]], RULE_COLUMNS, width=view.width
            )
            out += [f"  {line}" for line in _align_lines(h)]
            out += ["", "  Read back at the end (get_mempolicy, move_pages, numa_maps, smaps)"]
            out += text_table(
                [_read_row(r) for r in h["placement"]], READ_COLUMNS, width=view.width
            )
            out += [f"  {line}" for line in _read_back_lines(h)]
            placed = _placed_sites(h)
            if placed:
                out += ["", "  Sites placed"]
                out += text_table(placed, PLACED_COLUMNS, width=view.width)
        out += [f"  note: {n}" for n in h["notes"]]
        return out

    def html(self, data, page):
        h = data.get("heap")
        if not h:
            return []
        return (
            [
                "<h2>Heap allocations" + (" (estimates)" if h["estimated"] else "") + "</h2>",
                "<h3>Sites by byte-seconds live</h3>",
                html_table([_site_row(s) for s in h["sites"]], SITE_COLUMNS),
                f"<p class=note>{escape(_live_line(h))}</p>",
                "<h3>Allocations per size range</h3>",
                html_table([_range_row(r) for r in h["ranges"]], RANGE_COLUMNS),
            ]
            + _placement_html(h)
            + [f"<p class=note>{escape(n)}</p>" for n in _bound_lines(h) + h["notes"]]
        )


def _bound_lines(h):
    """How far the peaks may be off where several threads recorded (docs/heap.md)."""
    bound = max((p.get("peak_bound_bytes", 0) for p in h["per_process"]), default=0)
    if not bound:
        return []
    return [
        f"peaks within {byte_size(bound)} of the true ones (threads recording at once "
        "publish their live-bytes changes in steps: docs/heap.md)"
    ]


SITE_COLUMNS = [
    "site",
    "allocator",
    "count",
    "bytes",
    "min",
    "max",
    "peak",
    "byte-s",
    "%",
    "live %",
]
RANGE_COLUMNS = ["size range", "count", "bytes", "peak", "byte-s", "%"]


def _site_row(s):
    return [
        s["where"],
        s["allocator"],
        f"{s['count']:,}",
        byte_size(s["bytes"]),
        byte_size(s["min_bytes"]),
        byte_size(s["max_bytes"]),
        byte_size(s["peak_bytes"]),
        f"{s['byte_s']:.4g}",
        f"{s['byte_s_pct']:.1f}",
        _live_pct(s),
    ]


def _live_pct(s):
    """The share of the samples taken while the site was live, or (marked t) of the
    time (no timelines or no samples)."""
    v = s.get("live_pct")
    if v is None or v != v:
        return "-"
    return f"{v:.1f}" if s.get("live_pct_of") == "samples" else f"{v:.1f} t"


def _live_line(h):
    """What the live % column is."""
    live = h.get("live") or {}
    if live.get("timelines") and live.get("samples"):
        return (
            f"the share of its processes' samples ({live['samples']:,} in all) taken while "
            f"some of the site's objects were live (timelines of "
            f"{live['resolution_ms']:.1f} ms resolution); t: of the time"
        )
    why = "no samples (--no-sample)" if live.get("timelines") else "no live timelines"
    return f"t: the share of the time some of the site's objects were live ({why})"


def _range_row(r):
    return [
        r["range"],
        f"{r['count']:,}",
        byte_size(r["bytes"]),
        byte_size(r["peak_bytes"]),
        f"{r['byte_s']:.4g}",
        f"{r['byte_s_pct']:.1f}",
    ]


RULE_COLUMNS = ["rule", "count", "placed", "peak", "fallback", "fallback bytes", "verified"]
READ_COLUMNS = ["rule", "asked", "read back", "numa_maps", "resident", "on tier", "huge pages"]
PLACED_COLUMNS = ["site", "rule", "placed", "placed bytes", "fallback", "fallback bytes"]


def _tier_line(h):
    t = h["tier"]
    if t["emulated"]:  # no fast tier: the arenas' page size stands for one
        where = f"emulated by {t['emulated']} arenas" + (
            f" on nodes {t['nodes']}" if t["nodes"] else ""
        )
    else:
        where = f"nodes {t['nodes']}" if t["nodes"] else "no nodes"
    cap = f"; cap {byte_size(t['cap'])}" if t["cap"] else ""
    return f"Placement (--place): fast tier {where}{cap}"


def _rule_row(r):
    return [
        r["rule"],
        f"{r['count']:,}",
        byte_size(r["bytes"]),
        byte_size(r["peak_bytes"]),
        f"{r['fallback_count']:,}",
        byte_size(r["fallback_bytes"]),
        byte_size(r["verified_bytes"]) if r["verified_processes"] else "-",
    ]


def _read_row(r):
    read = f"{r['read_policy']} {r['read_nodes']}".strip() if r["verified_processes"] else "-"
    return [
        r["rule"],
        r["policy"],
        read,
        r["numa_policy"] or "-",
        byte_size(r["resident"]),
        byte_size(r["on_tier"]),
        byte_size(r["huge_bytes"]),
    ]


def _align_lines(h):
    """The fallbacks for their alignment, per rule."""
    return [
        f"{r['rule']}: {r['align_fallback_count']:,} fallbacks"
        f" ({byte_size(r['align_fallback_bytes'])}) for their alignment"
        f" (past {byte_size(HEAP_MAX_ALIGN)} or not a power of two)"
        for r in h["placement"]
        if r.get("align_fallback_count")
    ]


def _read_back_lines(h):
    """What the read-back covers: the processes not read (killed)."""
    out = []
    for r in h["placement"]:
        if r["verified_processes"] < r["processes"]:
            missing = r["processes"] - r["verified_processes"]
            out.append(f"{r['rule']}: {missing} process(es) not read back (killed)")
    return out


def _placed_sites(h):
    return [
        [
            s["where"],
            s["rule"],
            f"{s['placed_count']:,}",
            byte_size(s["placed_bytes"]),
            f"{s['fallback_count']:,}",
            byte_size(s["fallback_bytes"]),
        ]
        for s in h["sites"]
        if s.get("placed_count") or s.get("fallback_count")
    ]


def _placement_html(h):
    if not h.get("placement"):
        return []
    out = [
        f"<h3>{escape(_tier_line(h))}</h3>",
        html_table([_rule_row(r) for r in h["placement"]], RULE_COLUMNS),
        "<h3>Read back at the end (get_mempolicy, move_pages, numa_maps, smaps)</h3>",
        html_table([_read_row(r) for r in h["placement"]], READ_COLUMNS),
    ]
    out += [f"<p class=note>{escape(line)}</p>" for line in _align_lines(h) + _read_back_lines(h)]
    placed = _placed_sites(h)
    if placed:
        out += ["<h3>Sites placed</h3>", html_table(placed, PLACED_COLUMNS)]
    return out


SECTION = HeapSection()

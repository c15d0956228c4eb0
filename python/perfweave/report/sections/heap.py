"""The heap module's section (runtime/modules/heap.c, `perfweave run --heap`): the
allocation sites by byte-seconds live and the allocations per log2 size range (the
AUTO_HBW_LOG view: which sizes hold the bytes, for how long). Absent from the report when
the run recorded no heap profile."""

from perfweave.analysis.heap import analyze
from perfweave.report.section import Section
from perfweave.report.widgets import byte_size, cut_rows, escape, html_table, more_rows, text_table


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
        shown, more = cut_rows(h["sites"], view.max_rows)
        out += ["", "  Sites by byte-seconds live"]
        out += text_table([_site_row(s) for s in shown], SITE_COLUMNS, width=view.width)
        out += more_rows(more, "sites")
        out += ["", "  Allocations per size range"]
        out += text_table([_range_row(r) for r in h["ranges"]], RANGE_COLUMNS, width=view.width)
        out += [f"  note: {n}" for n in h["notes"]]
        return out

    def html(self, data, page):
        h = data.get("heap")
        if not h:
            return []
        return [
            "<h2>Heap allocations" + (" (estimates)" if h["estimated"] else "") + "</h2>",
            "<h3>Sites by byte-seconds live</h3>",
            html_table([_site_row(s) for s in h["sites"]], SITE_COLUMNS),
            "<h3>Allocations per size range</h3>",
            html_table([_range_row(r) for r in h["ranges"]], RANGE_COLUMNS),
        ] + [f"<p class=note>{escape(n)}</p>" for n in h["notes"]]


SITE_COLUMNS = ["site", "allocator", "count", "bytes", "min", "max", "peak", "byte-s", "%"]
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
    ]


def _range_row(r):
    return [
        r["range"],
        f"{r['count']:,}",
        byte_size(r["bytes"]),
        byte_size(r["peak_bytes"]),
        f"{r['byte_s']:.4g}",
        f"{r['byte_s_pct']:.1f}",
    ]


SECTION = HeapSection()

"""`perfweave placement sweep`'s table, from sweep.json's document
(analysis/sweep.py SweepResult.to_json()): text(doc) -> lines, printed by the sweep
and by `perfweave report SWEEP_DIR`; html(doc) -> the page of `perfweave report --html`."""

from perfweave.report.widgets import byte_size, escape, html_table, text_table

COLUMNS = [
    "range or site", "bytes", "peak", "count", "placed (verified)", "fits cap", "median",
    "spread", "speedup", "95 % interval", "share", "verdict",
]  # fmt: skip


def _pct(x):
    return "-" if x is None else f"{100 * x:.0f} %"


def _row(r, cap):
    placed = "-" if r["kind"] == "none" else byte_size(r["placed_bytes"])
    if r["kind"] != "none":
        placed += f" ({byte_size(r['verified_bytes'])})"
    exact = "" if r["exact"] else "~"
    none = r["kind"] == "none"  # all-slow: nothing placed
    return [
        ("#%d " % r["rank"] if r["rank"] else "") + r["label"] + (" (given)" if r["given"] else ""),
        "-" if none else exact + byte_size(r["bytes"]),
        "-" if none else exact + byte_size(r["peak_bytes"]),
        "-" if none else f"{exact}{r['count']:,}",
        placed,
        ("yes" if r["fits_cap"] else "no") if cap else "-",
        f"{r['median_s']:.3f} s",
        f"{100 * r['spread']:.1f} %",
        f"{r['speedup']:.3f}",
        f"[{r['speedup_lo']:.3f}, {r['speedup_hi']:.3f}]",
        "-" if r["kind"] == "none" else _pct(r["share"]),
        r["verdict"],
    ]


def tiers(doc):
    """The line that says what the fast and slow tiers were."""
    if doc["emulation"] == "hugepage":
        n, how = doc.get("hugetlb_reserved", 0), "madvise"  # older documents: madvise
        if doc.get("huge_pages") == "hugetlb":
            how = f"hugetlb, {n} reserved by the sweep and given back after" if n else "hugetlb"
        return (
            f"tiers emulated: fast = perfweave's arenas on huge pages (2 MiB, {how}), "
            "slow = the C library's normal pages (one NUMA node)"
        )
    return "tiers: the fast tier's NUMA nodes (perfweave run --place) against the default"


def _head(doc):
    cap = doc["cap"]
    return [
        f"{doc['rounds']} rounds, interleaved; {tiers(doc)}",
        f"time: {doc['time_is']}",
        f"speedup: all-slow's mean time over the variant's; "
        f"{doc['interval']['level']:.0%} intervals: {doc['interval']['method']}",
        f"verdict: {doc['verdict_rule']}"
        + (f"; cap {byte_size(cap)} (fits: the peak within it)" if cap else ""),
    ]


def _foot(doc):
    out = ["~: the log2 size groups the range covers whole"]
    return (out if any(not r["exact"] for r in doc["rows"]) else []) + [
        f"note: {n}" for n in doc["notes"]
    ]


def text(doc):
    lines = [f"perfweave placement sweep: {' '.join(doc['command'])}"]
    lines += [f"  {x}" for x in _head(doc)] + [""]
    lines += text_table([_row(r, doc["cap"]) for r in doc["rows"]], COLUMNS, width=None)
    return lines + [f"  {x}" for x in _foot(doc)]


def html(doc):
    title = escape(f"perfweave placement sweep: {' '.join(doc['command'])}")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f'<html><head><meta charset="utf-8"><title>{title}</title></head><body>',
            f"<h1>{title}</h1>",
            *[f"<p>{escape(x)}</p>" for x in _head(doc)],
            html_table([_row(r, doc["cap"]) for r in doc["rows"]], COLUMNS),
            *[f"<p class=note>{escape(x)}</p>" for x in _foot(doc)],
            "</body></html>",
            "",
        ]
    )

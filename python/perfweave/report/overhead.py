"""`perfweave overhead`'s text and figure, from the JSON document of
analysis/overhead.py (OverheadResult.to_json()).

text(doc) -> lines; plot(doc, path) writes the figure in the style of the Fugaku
study's (one bar per variant with its 95 % interval, in three panels: run time, memory,
data size): with matplotlib where it is installed (any format it writes), else as the
SVG that svg(doc) writes here without a plotting library.
"""

from perfweave.errors import PerfweaveError
from perfweave.report.widgets import byte_size, escape


def _ms(s):
    return f"{s * 1e3:.1f} ms"


def text(doc):
    bare = doc["bare"]
    lines = [
        f"perfweave overhead: {' '.join(doc['command'])}",
        f"  {doc['rounds']} rounds, interleaved; 95 % intervals: {doc['interval']['method']}",
        f"  bare: {_ms(bare['wall_s'])} (spread {100 * bare['spread']:.1f} %), peak RSS "
        f"{bare['peak_rss_mib']:.1f} MiB per process, MemAvailable >= "
        f"{bare['min_mem_available_mib']:.0f} MiB",
        "",
        f"  {'variant':24s} {'wall ratio':>10s} {'95 % interval':>17s} {'added':>10s} "
        f"{'RSS added':>10s} {'data':>10s} {'B/event':>8s} {'TVD':>6s}",
    ]
    for v in doc["variants"]:
        lo, hi = v["ratio_interval"]
        b = v["bytes"] or {}
        per_event = b.get("bytes_per_event")
        t = v["tvd_to_reference"]
        ratio = f"{v['ratio']:.3f}" if v["resolvable"] else "n.r."
        lines.append(
            f"  {v['name'][:24]:24s} {ratio:>10s} {f'[{lo:.3f}, {hi:.3f}]':>17s} "
            f"{_ms(v['added_s']):>10s} {v['peak_rss_added_mib']:+8.1f}Mi "
            f"{byte_size(b['raw']) if b else '-':>10s} "
            f"{f'{per_event:.1f}' if per_event else '-':>8s} "
            f"{f'{t:.3f}' if t is not None else '-':>6s}"
        )
    if any(not v["resolvable"] for v in doc["variants"]):
        lines.append(
            "  n.r.: not resolvable, the interval reaches the bare runs' own spread around 1"
        )
    cal = [(v["name"], m, c) for v in doc["variants"] for m, c in v["ns_per_call"].items()]
    if cal:
        lines += ["", "  ns per wrapped call (calibration loop, bare and wrapped interleaved):"]
        for name, module, c in cal:
            lo, hi = c["added_interval_ns"]
            lines.append(
                f"    {name[:24]:24s} {module:5s} bare {c['bare_ns']:8.1f} ns  "
                f"added {c['added_ns']:8.1f} ns  [{lo:.1f}, {hi:.1f}]"
            )
    for v in doc["variants"]:
        b = v["bytes"]
        if b:
            lines.append(
                f"  {v['name']}: {byte_size(b['raw'])} raw ({byte_size(b['allocated'])} on "
                f"disk), {byte_size(b['compressed'])} "
                f"{b['compression']}, {byte_size(b['per_rank'] or 0)} per rank"
                + (
                    f", {b['trace_events']} trace events, {b['bytes_per_event']:.1f} B/event"
                    if b["trace_events"]
                    else ""
                )
                + (
                    f", {b['samples']} samples, {b['bytes_per_sample']:.1f} B/sample"
                    if b["samples"]
                    else ""
                )
            )
    p = doc["perturbation"]
    if p["reference"]:
        within = p["within_reference_tvd"]
        lines.append(
            f"  perturbation: total variation distance of the per-routine time shares to "
            f"{p['reference']} (its own runs differ by "
            f"{'-' if within is None else f'{within:.3f}'})"
        )
    lines.append(f"  peak RSS: {doc['peak_rss_source']}")
    lines += [f"  note: {n}" for n in doc["notes"]]
    return lines


_W, _H, _PAD = 260, 220, 40


def _panel(x0, title, bars, unit):
    """One panel: bars [(label, value, lo, hi)], an error bar where lo/hi are given."""
    top = max([b[3] if b[3] is not None else b[1] for b in bars] + [1e-12])
    scale = (_H - 2 * _PAD) / top
    out = [
        f'<text x="{x0 + _W / 2}" y="18" text-anchor="middle" font-weight="bold">'
        f"{escape(title)}</text>",
        f'<line x1="{x0 + _PAD}" y1="{_H - _PAD}" x2="{x0 + _W - 10}" y2="{_H - _PAD}" '
        'stroke="black"/>',
        f'<text x="{x0 + 4}" y="{_PAD - 8}" font-size="10">{escape(unit)}; max {top:.3g}</text>',
    ]
    width = (_W - _PAD - 10) / max(len(bars), 1)
    for i, (label, value, lo, hi) in enumerate(bars):
        x = x0 + _PAD + i * width + width * 0.15
        h = max(value, 0) * scale
        out.append(
            f'<rect x="{x:.1f}" y="{_H - _PAD - h:.1f}" width="{width * 0.7:.1f}" '
            f'height="{h:.1f}" fill="#4878a8"/>'
        )
        if lo is not None:
            cx = x + width * 0.35
            y1, y2 = _H - _PAD - max(lo, 0) * scale, _H - _PAD - max(hi, 0) * scale
            out.append(
                f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}" stroke="black"/>'
            )
        out.append(
            f'<text x="{x + width * 0.35:.1f}" y="{_H - _PAD + 12}" font-size="9" '
            f'text-anchor="middle">{escape(label[:14])}</text>'
        )
        # the value above its bar: the data sizes of modes differ by orders of magnitude
        out.append(
            f'<text x="{x + width * 0.35:.1f}" y="{_H - _PAD - h - 3:.1f}" font-size="9" '
            f'text-anchor="middle">{value:.3g}</text>'
        )
    return out


def panels(doc):
    """The figure's three panels: (title, unit, [(label, value, lo, hi)]): wall time per
    variant (bare included) with its 95 % interval, peak resident set per process with
    the interval of what it adds, experiment bytes (lo, hi None: no interval)."""
    bare = doc["bare"]
    vs = doc["variants"]
    runtime = [("bare", bare["wall_s"], None, None)] + [
        (
            v["name"],
            v["wall_s"],
            bare["wall_s"] * v["ratio_interval"][0],
            bare["wall_s"] * v["ratio_interval"][1],
        )
        for v in vs
    ]
    memory = [("bare", bare["peak_rss_mib"], None, None)] + [
        (
            v["name"],
            v["peak_rss_mib"],
            bare["peak_rss_mib"] + v["peak_rss_added_interval_mib"][0],
            bare["peak_rss_mib"] + v["peak_rss_added_interval_mib"][1],
        )
        for v in vs
    ]
    data = [(v["name"], (v["bytes"] or {}).get("raw", 0) / 1024, None, None) for v in vs]
    return [
        ("run time", "s", runtime),
        ("peak RSS per process", "MiB", memory),
        ("data size", "KiB", data),
    ]


def svg(doc):
    """The figure as SVG text, drawn here."""
    parts = []
    for i, (title, unit, bars) in enumerate(panels(doc)):
        parts += _panel(i * _W, title, bars, unit)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{3 * _W}" height="{_H}" '
        'font-family="sans-serif" font-size="12">\n' + "\n".join(parts) + "\n</svg>\n"
    )


def plot(doc, path):
    """Write the figure to path: matplotlib's where it is importable, else the SVG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if not str(path).lower().endswith(".svg"):
            raise PerfweaveError(
                f"--plot {path}: without matplotlib only an SVG figure is written (name it .svg)"
            ) from None
        with open(path, "w") as f:
            f.write(svg(doc))
        return
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (title, unit, bars) in zip(axes, panels(doc)):
        values = [b[1] for b in bars]
        err = [
            [b[1] - b[2] if b[2] is not None else 0 for b in bars],
            [b[3] - b[1] if b[3] is not None else 0 for b in bars],
        ]
        ax.bar(range(len(bars)), values, yerr=err, capsize=4, color="#4878a8")
        ax.set_xticks(range(len(bars)), [b[0][:14] for b in bars], rotation=30, ha="right")
        ax.set_title(title)
        ax.set_ylabel(unit)
        if title == "data size" and min(values, default=0) > 0:
            ax.set_yscale("log")  # modes' data differ by orders of magnitude
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

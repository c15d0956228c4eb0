"""The source of the hottest lines: the samples' lines with the most self time (the
samples section's table), each shown with CONTEXT lines of source around it and every
shown line's share of the samples, file by file; a file that cannot be read here is
named with the reason."""

from perfweave.report.section import Section
from perfweave.report.widgets import escape, shorten

TOP = 8  # hottest lines shown
CONTEXT = 3  # lines of source before and after each
MAX_BYTES = 16 << 20  # a larger "source" file is not read


class Source(Section):
    name = "source"
    needs = ("samples",)

    def collect(self, experiment, report, top):
        sm = report.get("samples")
        if not sm or sm.get("error"):
            return {}
        files = hot_sources(sm.get("lines") or [])
        return {"source": files} if files else {}

    def text(self, data, view):
        files = data.get("source")
        if not files or not view.full:
            return []
        out = ["", f"Source of the hottest lines (% of the samples, ±{CONTEXT} lines)"]
        for f in files:
            if not f["readable"]:
                out.append(f"  {f['file']}: source not readable ({f['reason']})")
                continue
            out.append(f"  {f['file']}")
            for snip in f["snippets"]:
                for no, text, pct in snip:
                    share = f"{pct:5.1f} %" if pct is not None else " " * 7
                    line = f"  {share} {no:>6}  {text}"
                    out.append(line if view.width is None else shorten(line, view.width))
                out.append("")
        return out

    def html(self, data, page):
        files = data.get("source")
        if not files:
            return []
        parts = [
            "<h2>Source of the hottest lines</h2>",
            f"<p>The sampled lines with the most self time, ±{CONTEXT} lines around each; "
            "the first column is the line's share of all samples.</p>",
            "<style>table.src td { font: 12px/1.3 monospace; border: 0; padding: 0 8px; "
            "white-space: pre; text-align: left; } table.src tr.hot { background: #fde0dc; }"
            " table.src td.pct, table.src td.no { text-align: right; color: #555; }</style>",
        ]
        for f in files:
            if not f["readable"]:
                parts.append(
                    f"<p><b>{escape(f['file'])}</b>: source not readable "
                    f"({escape(f['reason'])})</p>"
                )
                continue
            rows = []
            for i, snip in enumerate(f["snippets"]):
                if i:
                    rows.append('<tr class="gap"><td></td><td class="no">…</td><td></td></tr>')
                for no, text, pct in snip:
                    rows.append(
                        f'<tr{" class=hot" if pct is not None else ""} data-line="{no}">'
                        f'<td class="pct">{"" if pct is None else f"{pct:.1f} %"}</td>'
                        f'<td class="no">{no}</td><td>{escape(text)}</td></tr>'
                    )
            parts.append(
                f"<p><b>{escape(f['file'])}</b></p>"
                f'<table class="src" data-file="{escape(f["file"])}">{"".join(rows)}</table>'
            )
        return parts


def hot_sources(lines, top=TOP, context=CONTEXT):
    """[{"file", "readable", "reason" (when not), "snippets": [[[line number, text,
    % of the samples or None], ...], ...]}] of the `top` hottest of the samples' lines
    (rows with file, line and pct), files in the order of their hottest line; a line of
    the table shown in a snippet carries its share, hot or not."""
    rows = [r for r in lines if r.get("file") and r.get("line")]
    share = {}
    for r in rows:
        key = (r["file"], r["line"])
        share[key] = share.get(key, 0.0) + r["pct"]
    picked = []
    for r in rows:
        if (r["file"], r["line"]) not in picked:
            picked.append((r["file"], r["line"]))
        if len(picked) == top:
            break
    out = []
    for path in dict.fromkeys(f for f, _ in picked):
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_BYTES + 1)
        except OSError as e:
            out.append({"file": path, "readable": False, "reason": e.strerror or str(e)})
            continue
        if len(raw) > MAX_BYTES or b"\0" in raw:
            out.append({"file": path, "readable": False, "reason": "not a text file"})
            continue
        text = raw.decode("utf-8", "replace").splitlines()
        wanted = sorted(ln for f, ln in picked if f == path)
        if wanted[-1] > len(text):
            out.append(
                {
                    "file": path,
                    "readable": False,
                    "reason": f"has {len(text)} lines, not line {wanted[-1]}: changed since",
                }
            )
            continue
        spans = []
        for ln in wanted:
            a, b = max(ln - context, 1), min(ln + context, len(text))
            if spans and a <= spans[-1][1] + 2:  # no gap of a single line
                spans[-1][1] = max(spans[-1][1], b)
            else:
                spans.append([a, b])
        out.append(
            {
                "file": path,
                "readable": True,
                "snippets": [
                    [[n, text[n - 1].expandtabs(4), share.get((path, n))] for n in range(a, b + 1)]
                    for a, b in spans
                ],
            }
        )
    return out


SECTION = Source()

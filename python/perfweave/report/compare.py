"""The text and the HTML page of `perfweave compare` (docs/compare.md), from its JSON
document (analysis/compare.py CompareResult.to_json): the split of each side's app time
and its POP factors side by side, then per compared side its keys by the size of their
change."""

from perfweave.analysis.pop import FACTORS
from perfweave.report.widgets import byte_size, escape, html_table, text_table, WIDTH


def _value(v, unit):
    if v is None:
        return "-"
    if unit == "bytes":
        return byte_size(v)
    if unit == "count":
        return f"{v:,.0f}"
    return f"{v:.6f}"


def _delta(v, unit):
    if v is None:
        return "-"
    return ("+" if v >= 0 else "-") + _value(abs(v), unit)


def _ratio(v):
    if v is None:
        return "-"
    return v if isinstance(v, str) else f"{v:.3f}"


def _p(v):
    return "-" if v is None else f"{v:.3g}"


def _flag(r):
    if r["only_in"]:
        return f"only in {r['only_in']}"
    return "REGRESSION" if r["regression"] else ""


def _heads(doc):
    """The split and POP rows, one column per side."""
    sides = doc["sides"]
    parts = ["compute", "MPI", "I/O"]  # always; the others where a side has some
    for s in sides:
        parts += [k for k, v in s["split"]["pct"].items() if k not in parts and v]
    rows = [["app time (s, all ranks)"] + [f"{s['split']['app_s']:.3f}" for s in sides]]
    rows += [[f"{k} %"] + [f"{s['split']['pct'].get(k, 0):.1f}" for s in sides] for k in parts]
    pop = []
    if all(s.get("pop") for s in sides):
        for key, name, depth in FACTORS:
            vals = [s["pop"].get(key) for s in sides]
            if any(isinstance(v, (int, float)) for v in vals):
                pop.append(
                    ["  " * depth + name]
                    + [f"{100 * v:.1f}%" if isinstance(v, (int, float)) else "-" for v in vals]
                )
    return rows, pop


def _rows(c, unit, limit):
    shown = c["rows"] if limit is None else c["rows"][:limit]
    return [
        [
            r["key"],
            _value(r["a"], unit),
            _value(r["b"], unit),
            _delta(r["delta"], unit),
            _ratio(r["ratio"]),
            _p(r["p_value"]),
            _flag(r),
        ]
        for r in shown
    ]


def _what(doc):
    """The metric, its unit, and whether its values include the callees'."""
    return f"{doc['metric']} ({doc['unit']}{', inclusive' if doc.get('inclusive') else ''})"


HEADER = ["key", "A", "B", "delta", "B/A", "p (Welch)", ""]


def render(doc, top=20, width=WIDTH):
    """The lines of the text."""
    sides = doc["sides"]
    names = [s["label"] for s in sides]
    out = [f"perfweave compare: {_what(doc)} by {doc['by']}"]
    for s in sides:
        out.append(f"  {s['label']}: {', '.join(s['experiments'])}")
    split, pop = _heads(doc)
    out += ["", "Time split (% of the app time)"]
    out += text_table(split, [""] + names, width=width)
    if pop:
        out += ["", "POP factors"] + text_table(pop, [""] + names, width=width)
    for c in doc["comparisons"]:
        header = [f"{doc['by']}", names[0], c["label"], "delta", f"{c['label']}/{names[0]}"]
        header += HEADER[5:]
        out += [
            "",
            f"{c['label']} against {names[0]}: {len(c['rows'])} keys, "
            f"{c['regressions']} flagged (ratio above 1 + max(5 %, 3 sigma))",
        ]
        out += text_table(_rows(c, doc["unit"], top), header, width=width)
        if top is not None and len(c["rows"]) > top:
            out.append(f"  ... {len(c['rows']) - top} more (--top N, --top 0 for all)")
    for n in doc["notes"]:
        out.append(f"note: {n}")
    return out


STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child{text-align:left}
tr.regression td{background:#fdd}tr.only td{background:#eef}"""


def html(doc):
    """The HTML page, standalone."""
    sides = doc["sides"]
    names = [s["label"] for s in sides]
    split, pop = _heads(doc)
    body = [f"<h1>perfweave compare: {escape(_what(doc))} by {escape(doc['by'])}</h1><ul>"]
    body += [f"<li>{escape(s['label'])}: {escape(', '.join(s['experiments']))}</li>" for s in sides]
    body.append("</ul><h2>Time split (% of the app time)</h2>")
    body.append(html_table(split, [""] + names))
    if pop:
        body += ["<h2>POP factors</h2>", html_table(pop, [""] + names)]
    for c in doc["comparisons"]:
        body.append(
            f"<h2>{escape(c['label'])} against {escape(names[0])}: {c['regressions']} flagged</h2>"
        )
        head = "".join(f"<th>{escape(h)}</th>" for h in HEADER[:5] + HEADER[5:])
        rows = []
        for r, cells in zip(c["rows"], _rows(c, doc["unit"], None)):
            cls = "regression" if r["regression"] else ("only" if r["only_in"] else "")
            rows.append(
                f'<tr class="{cls}">' + "".join(f"<td>{escape(x)}</td>" for x in cells) + "</tr>"
            )
        body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    body += [f"<p>note: {escape(n)}</p>" for n in doc["notes"]]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>perfweave compare</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )

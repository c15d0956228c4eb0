"""The pieces the report's sections draw with, text and HTML: tables, lines shortened to
the terminal's width, "N more" rows, sizes, escaping, the activities' names and colours.
The sections (report/sections/) and the renderers (report/text.py, report/html.py)
import them; this imports no part of the report."""

import html
import json
import re
import textwrap

from perfweave.analysis.samples.classification import ACTIVITIES

WIDTH = 100  # columns of the terminal the default report fits
MAX_ROWS = 4  # rows per table by default (--max-rows)
ELLIPSIS = "…"
MORE = "--max-rows N or --full"


def shorten(text, width):
    """text at most width characters: first a C++ name's argument and template lists
    folded to an ellipsis, outermost first ("solver::Grid<…>::halo(…) (grid.cpp:42)":
    the name and the file:line after it are what tell two apart), then, if still too
    long, cut in the middle with an ellipsis where the middle was: both ends of a path, a
    symbol or a version string. Whitespace runs become one space. width None: text as
    is."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if width is None or len(text) <= width:
        return text
    text = _fold_lists(text, width)
    if len(text) <= width:
        return text
    if width < 2:
        return text[: max(width, 0)]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _fold_lists(text, width):
    """text with the bracketed lists that follow a name ("f(int, char*)", "Grid<3>")
    folded to "(…)" / "<…>", the longest first, until it fits width; a list after a
    space (a location "(file.c:3)") and operator names' brackets are kept."""
    while len(text) > width:
        best = None  # (length, start, end) of the longest foldable list
        stack = []
        names = {  # the characters of operator names ("operator<<", "operator()")
            i
            for m in re.finditer(r"operator\s*(\(\)|\[\]|[^\w\s(]+)", text)
            for i in range(*m.span(1))
        }
        for i, c in enumerate(text):
            if i in names:
                continue
            if c in "(<":
                stack.append((i, bool(re.search(r"[\w\]>)<=!*&|^%/+~-]$", text[:i]))))
            elif c in ")>" and stack:
                start, foldable = stack.pop()
                if foldable and i - start > 2 and (best is None or i - start > best[0]):
                    best = (i - start, start, i)
        if best is None:
            return text
        _, start, end = best
        text = text[: start + 1] + ELLIPSIS + text[end:]
    return text


def more_rows(n, what, how=MORE):
    return [f"  ({n} more {what}; {how})"] if n > 0 else []


def cut_rows(rows, limit):
    """rows[:limit] and how many were left out (limit None: all)."""
    if limit is None or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def byte_size(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def text_table(rows, header, align=None, width=WIDTH, drop=()):
    """Lines of a table, two spaces in front. When it is wider than width (None: no
    limit), the columns in drop (indices, the first dropped first) go, then columns
    aligned left ("<": names, places) shrink, the widest first, and their cells are
    shortened in the middle."""
    rows = [[str(c) for c in r] for r in rows]
    header = [str(h) for h in header]
    align = list(align or ["<"] + [">"] * (len(header) - 1))

    def widths_of():
        return [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def over():
        return 2 + sum(widths) + 2 * (len(widths) - 1) - width

    widths = widths_of()
    if width is not None:
        for i in sorted(drop, key=list(drop).index):
            if over() <= 0:
                break
            k = i - sum(1 for j in drop[: list(drop).index(i)] if j < i)
            for r in [header] + rows:
                del r[k]
            del align[k]
            widths = widths_of()
        over = over()
        names = [i for i, a in enumerate(align) if a == "<"]
        while over > 0:
            floor = {i: min(widths[i], max(len(header[i]), 20)) for i in names}
            i = max(names, key=lambda k: widths[k] - floor[k], default=None)
            if i is None or widths[i] <= floor[i]:
                break
            cut = min(over, widths[i] - floor[i])
            widths[i] -= cut
            over -= cut
        for r in rows:
            for i in names:
                r[i] = shorten(r[i], widths[i])
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    out = ["  " + fmt.format(*header).rstrip()]
    out += ["  " + fmt.format(*r).rstrip() for r in rows]
    return out


def fit_line(line, width, keep=0, head=None):
    """One line shortened in the middle to width; head and keep: characters at its
    start (default: its indent) and at its end (a suffix that says what the line is)
    kept as they are."""
    if width is None or len(line) <= width:
        return line
    head = len(line) - len(line.lstrip()) if head is None else head
    end = len(line) - keep
    return line[:head] + shorten(line[head:end], width - head - keep) + line[end:]


def wrap_words(text, width, indent=2):
    """text in lines of at most width, broken between words only (never inside one, nor
    at a hyphen of "point-to-point"), the lines after the first indented; width None:
    text as one line."""
    if width is None or len(text) <= width:
        return [text]
    lead = len(text) - len(text.lstrip())
    return textwrap.wrap(
        text,
        width,
        initial_indent=" " * lead,
        subsequent_indent=" " * (lead + indent),
        break_long_words=False,
        break_on_hyphens=False,
    )


def wrap_line(label, text, width, indent=13):
    """A header line ("  note       text"), wrapped under its text."""
    return textwrap.wrap(
        text,
        (width or 10**6),
        initial_indent=f"  {label:<{indent - 3}} ",
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    ) or [""]


def activity_name(name):
    """An activity's name as the report shows it, text and HTML alike (ACTIVITIES)."""
    return {
        "io": "I/O",
        "alloc": "allocation",
        "thread_sync": "thread sync",
        "omp_sync": "OpenMP sync",
        "mathlib": "math libraries",
    }.get(name, name.replace("_", " "))


def family_activity(family):
    """The activity of a thread inside an MPI call of family (format.h PW_ACTIVITIES)."""
    return f"mpi_{family}"


# ---- HTML ----

# The charts' colours, given to the activities in the order of ACTIVITIES (format.h
# PW_ACTIVITIES, then those the samples' classification adds); an activity named later
# (a newer file's) takes SPARE_COLOURS in turn, in the page's script (templates/samples.js).
PALETTE = (
    "#5aa02c",  # compute
    "#ff7f0e",  # io
    "#bcbd22",  # alloc
    "#7f3f98",  # thread_sync
    "#ad494a",  # omp_sync
    "#2ca089",  # mathlib
    "#1f77b4",  # mpi_p2p
    "#d62728",  # mpi_coll
    "#9467bd",  # mpi_rma
    "#e377c2",  # mpi_sync
    "#8c564b",  # mpi_file
    "#17becf",  # mpi_other
    "#b0b0b0",  # sleep
    "#6b6b6b",  # wait
)
SPARE_COLOURS = ("#ffbb78", "#98df8a", "#aec7e8", "#c5b0d5", "#c49c94", "#dbdb8d")
ACTIVITY_COLOURS = dict(zip(ACTIVITIES, PALETTE + SPARE_COLOURS))


def escape(x):
    return html.escape(str(x), quote=True)


def json_for_script(obj):
    return (
        json.dumps(obj, allow_nan=False)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )


def html_table(rows, header, cls=""):
    h = "".join(f"<th>{escape(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


def svg_bars(el, labels, series, values, unit, fmt=str):
    """A chart of horizontal bars drawn here as SVG (no script): one bar per label, its
    series stacked left to right, each in its activity's colour (ACTIVITY_COLOURS), with
    a legend above and a tooltip per segment. series: [(name, activity)]; values[i][j]:
    label i's value of series j (in unit; fmt writes one); the x axis from 0 to the
    longest bar."""
    bar, gap, gutter, width, top = 14, 3, 150, 860, 22
    total = max([sum(v) for v in values] + [0]) or 1
    scale = (width - gutter - 40) / total
    out = []
    x = gutter
    for name, act in series:  # the legend
        out.append(
            f'<rect x="{x}" y="4" width="11" height="11" fill="{ACTIVITY_COLOURS.get(act, "#999")}"'
            f' stroke="#888"/><text x="{x + 15}" y="14">{escape(name)}</text>'
        )
        x += 30 + 7 * len(name)
    for i, (lab, row) in enumerate(zip(labels, values)):
        y = top + i * (bar + gap)
        out.append(
            f'<text x="{gutter - 6}" y="{y + bar - 3}" text-anchor="end">{escape(lab)}</text>'
        )
        x = gutter
        for (name, act), v in zip(series, row):
            if v <= 0:
                continue
            w = v * scale
            out.append(
                f'<rect x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{bar}" '
                f'fill="{ACTIVITY_COLOURS.get(act, "#999")}" data-activity="{escape(act)}">'
                f"<title>{escape(lab)}: {escape(name)} {escape(fmt(v))}</title></rect>"
            )
            x += w
    y = top + len(labels) * (bar + gap)
    for q in (0, 0.25, 0.5, 0.75, 1):  # the x axis
        x = gutter + q * total * scale
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 2}" y2="{y}" stroke="#ccc"/>'
            f'<text x="{x:.1f}" y="{y + 13}" text-anchor="middle">{escape(fmt(q * total))}</text>'
        )
    out.append(f'<text x="{width - 4}" y="{y + 28}" text-anchor="end">{escape(unit)}</text>')
    return (
        f'<svg id="{el}" class=bars width="{width}" height="{y + 34}" '
        f'viewBox="0 0 {width} {y + 34}" xmlns="http://www.w3.org/2000/svg">{"".join(out)}</svg>'
    )


def more_html(n, what, how):
    """The HTML of an "N more" line (more_rows): what the page left out and where it is."""
    return [f"<p class=more>({n} more {escape(what)}; {escape(how)})</p>"] if n > 0 else []

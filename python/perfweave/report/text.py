"""Plain-text rendering of report data (report/data.py), made for a terminal: no line
wider than WIDTH (long names shortened in the middle, "…"; their full text is in
--json), at most max_rows rows per table, with "N more" where rows were cut.
`perfweave report --full` shows every row and every name whole."""

from perfweave.report import sections
from perfweave.report.section import View
from perfweave.report.widgets import MAX_ROWS, WIDTH, fit_line

__all__ = ["MAX_ROWS", "WIDTH", "render"]


def render(data, max_rows=MAX_ROWS, width=WIDTH, rows=None):
    """The report as text: every section's lines (report/sections/). max_rows: rows per
    table (None: all); width: the widest line (None: no limit, names whole); rows: rows of
    the function and call-site tables (default max_rows: `--top N` given explicitly)."""
    view = View(max_rows=max_rows, width=width, rows=rows)
    return _join(sections.text(data, view), width)


def _join(lines, width):
    """The report's text. Every line fits width: a line no section shortened (a table
    with too many numeric columns) is shortened here, the last resort."""
    return "\n".join(fit_line(line, width) for line in lines) + "\n"

"""Message sizes of the MPI profile (its histograms): calls, bytes and time per size
range of each function, most time first; in the HTML also each function's histogram of
calls per size range, in its family's colour. Its data is the MPI profile's."""

from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import (
    MORE,
    byte_size,
    cut_rows,
    escape,
    family_activity,
    html_table,
    more_rows,
    svg_bars,
    text_table,
)

COLUMNS = ["function", "size", "calls", "bytes", "time"]
TITLE = "Message sizes (bytes per call; p2p, collectives, one-sided; most time first)"
CHARTS = 8  # functions with a histogram in the HTML, most time first


class MessageSizes(Section):
    def text(self, data, view):
        sizes = _sizes(data["mpi_profile"])
        if not sizes:
            return []
        shown, more = cut_rows(sizes, view.max_rows)
        out = ["", TITLE] + text_table([_row(s) for s in shown], COLUMNS, width=view.width)
        return out + more_rows(more, "sizes", MORE)

    def html(self, data, page):
        m = data["mpi_profile"]
        sizes = _sizes(m)
        if not sizes:
            return []
        out = [f"<h2>{escape(TITLE)}</h2>", html_table([_row(s) for s in sizes], COLUMNS)]
        family = {f["name"]: f["family"] for f in m["functions"]}
        by_fn = {}
        for s in sizes:  # functions in order of their largest size range's time
            by_fn.setdefault(s["function"], []).append(s)
        for k, (fn, rows) in enumerate(list(by_fn.items())[:CHARTS]):
            rows.sort(key=lambda s: s["bucket"])
            out += [
                f"<h3>{escape(fn)}: calls per message size</h3>",
                svg_bars(
                    f"pw-sizes-{k}",
                    [_range(s) for s in rows],
                    [(fn, family_activity(family.get(fn, "other")))],
                    [[s["calls"]] for s in rows],
                    "calls",
                    lambda v: f"{v:.0f}",
                ),
            ]
        return out


def _sizes(m):
    """The size ranges with calls, most time first."""
    sizes = [s for s in m["message_sizes"] if s["calls"]] if m["mpi"] else []
    return sorted(sizes, key=lambda s: -s["time_s"])


def _row(s):
    return [s["function"], _range(s), s["calls"], byte_size(s["bytes"]), _t(s["time_s"])]


def _range(s):
    if not s["bucket"]:
        return "0"
    if s["max_bytes"] is None:
        return f">={byte_size(s['min_bytes'])}"
    return f"{byte_size(s['min_bytes'])}-{byte_size(s['max_bytes'])}"


SECTION = MessageSizes()

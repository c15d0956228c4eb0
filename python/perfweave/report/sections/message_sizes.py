"""Message sizes of the MPI profile (its histograms): calls, bytes and time per size
range of each function, most time first. Its data is the MPI profile's."""

from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.text import MORE, _b, _cut, _more, _table


class MessageSizes(Section):
    def text(self, data, view):
        m = data["mpi_profile"]
        sizes = [s for s in m["message_sizes"] if s["calls"]] if m["mpi"] else []
        if not sizes:
            return []
        out = ["", "Message sizes (bytes per call; p2p, collectives, one-sided; most time first)"]
        sizes.sort(key=lambda s: -s["time_s"])
        shown, more = _cut(sizes, view.max_rows)
        out += _table(
            [
                [s["function"], _range(s), s["calls"], _b(s["bytes"]), _t(s["time_s"])]
                for s in shown
            ],
            ["function", "size", "calls", "bytes", "time"],
            width=view.width,
        )
        return out + _more(more, "sizes", MORE)


def _range(s):
    if not s["bucket"]:
        return "0"
    if s["max_bytes"] is None:
        return f">={_b(s['min_bytes'])}"
    return f"{_b(s['min_bytes'])}-{_b(s['max_bytes'])}"


SECTION = MessageSizes()

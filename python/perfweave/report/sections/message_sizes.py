"""Message sizes of the MPI profile (its histograms): calls, bytes and time per size
range of each function, most time first. Its data is the MPI profile's."""

from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import MORE, byte_size, cut_rows, more_rows, text_table


class MessageSizes(Section):
    def text(self, data, view):
        m = data["mpi_profile"]
        sizes = [s for s in m["message_sizes"] if s["calls"]] if m["mpi"] else []
        if not sizes:
            return []
        out = ["", "Message sizes (bytes per call; p2p, collectives, one-sided; most time first)"]
        sizes.sort(key=lambda s: -s["time_s"])
        shown, more = cut_rows(sizes, view.max_rows)
        out += text_table(
            [
                [s["function"], _range(s), s["calls"], byte_size(s["bytes"]), _t(s["time_s"])]
                for s in shown
            ],
            ["function", "size", "calls", "bytes", "time"],
            width=view.width,
        )
        return out + more_rows(more, "sizes", MORE)


def _range(s):
    if not s["bucket"]:
        return "0"
    if s["max_bytes"] is None:
        return f">={byte_size(s['min_bytes'])}"
    return f"{byte_size(s['min_bytes'])}-{byte_size(s['max_bytes'])}"


SECTION = MessageSizes()

"""The communication matrix's section (analysis/comm_matrix.py; the profile's "comms" rows,
no --trace needed): per communicator its point-to-point pairs, most bytes first, and its
collectives' calls and bytes; in the HTML a heat map of the bytes each world rank sent to
each other, the ranks grouped by host. The report's JSON holds the whole matrix. Absent
for a run without MPI calls or a profile older than version 6. Above --full-profile-ranks
(the compact profile alone) its summary of the matrix: the top pairs by bytes and each
rank's point-to-point totals, saying what it does not hold."""

import numpy as np

from perfweave.analysis.comm_matrix import analyze, from_compact, world_matrix
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import (
    byte_size,
    cut_rows,
    escape,
    html_table,
    more_rows,
    text_table,
    wrap_words,
)

# ranks: those that recorded calls on it / its size
COMM_COLUMNS = ["communicator", "ranks", "p2p messages", "p2p bytes", "coll calls", "coll bytes"]
PAIR_COLUMNS = ["communicator", "sender", "receiver", "messages", "bytes", "send", "recv"]
COLL_COLUMNS = ["communicator", "collective", "ranks", "calls", "sent", "received", "time"]
CPAIR_COLUMNS = ["communicator", "sender", "receiver", "messages", "bytes"]
CRANK_COLUMNS = ["rank", "sent", "messages sent", "received", "messages received"]


class CommMatrix(Section):
    name = "comm_matrix"

    def collect(self, experiment, report, top):
        p = experiment.profile
        if not len(p.ranks) and not len(p.comms):  # the compact profile alone
            c = from_compact(experiment.compact)
            return {self.name: c} if c else {}
        if not p.mpi or not len(p.comms):
            return {}
        return {self.name: analyze(p)}

    def text(self, data, view):
        m = data.get(self.name)
        if not m:
            return []
        if m.get("compact"):
            return _compact_text(m, view)
        comms = m["communicators"]
        out = [""] + wrap_words(_title(m), view.width)
        names = {c["id"]: c["name"] for c in comms}
        pairs = sorted(m["p2p"], key=lambda p: (-p["bytes"], -p["messages"]))
        shown, more = cut_rows(pairs, view.rows)
        out += text_table([_pair_row(p, names, m["hosts"]) for p in shown], PAIR_COLUMNS,
                          width=view.width, drop=(0,))  # fmt: skip
        if not view.full:  # a terminal's worth: the rest with --full or --json
            pairs = f"{more} more pairs; " if more else ""
            return out + [f"  ({pairs}communicators and collectives: --full or --json)"]
        out += more_rows(more, "pairs", "perfweave report --json has them all")
        out += ["  communicators"]
        out += text_table([_comm_row(c) for c in comms], COMM_COLUMNS, width=view.width)
        colls = _collectives(m)
        if colls:
            out += ["  collectives (bytes by each collective's size formula, summed over ranks)"]
            out += text_table([_coll_row(c, names) for c in colls], COLL_COLUMNS,
                              width=view.width)  # fmt: skip
        return out

    def html(self, data, page):
        m = data.get(self.name)
        if not m:
            return []
        if m.get("compact"):
            return [
                f"<h2>{escape(_compact_title(m))}</h2>",
                f"<p>Not available: {escape(m['missing'])}.</p>",
                html_table([_cpair_row(p) for p in m["pairs"]], CPAIR_COLUMNS),
                "<h3>Point-to-point totals per rank</h3>",
                html_table([_crank_row(r) for r in m["ranks"]], CRANK_COLUMNS),
            ]
        names = {c["id"]: c["name"] for c in m["communicators"]}
        pairs = sorted(m["p2p"], key=lambda p: (-p["bytes"], -p["messages"]))
        return [
            f"<h2>{escape(_title(m))}</h2>",
            html_table([_comm_row(c) for c in m["communicators"]], COMM_COLUMNS),
            "<h3>Bytes sent, sender (row) to receiver (column), every communicator</h3>",
            heat_map(m),
            "<h3>Point-to-point pairs</h3>",
            html_table([_pair_row(p, names, m["hosts"]) for p in pairs], PAIR_COLUMNS),
            "<h3>Collectives</h3>",
            html_table([_coll_row(c, names) for c in _collectives(m)], COLL_COLUMNS),
        ]


def _title(m):
    comms = m["communicators"]
    return (
        f"Communication matrix: {len(comms)} communicator(s), "
        f"{sum(c['p2p_messages'] for c in comms)} point-to-point messages "
        f"({byte_size(sum(c['p2p_bytes'] for c in comms))}), "
        f"{sum(c['coll_calls'] for c in comms)} collective calls"
    )


def _comm_row(c):
    return [
        c["name"],
        f"{len(c['members'])}/{c['size']}",
        c["p2p_messages"],
        byte_size(c["p2p_bytes"]),
        c["coll_calls"],
        byte_size(c["coll_bytes"]),
    ]


def _rank(r, hosts):
    return "unknown" if r < 0 else f"{r} ({hosts.get(str(r), '?')})"


def _pair_row(p, names, hosts):
    return [
        names[p["comm"]],
        _rank(p["sender"], hosts),
        _rank(p["receiver"], hosts),
        p["messages"],
        byte_size(p["bytes"]),
        _t(p["send_s"]),
        _t(p["recv_s"]),
    ]


def _collectives(m):
    """Per communicator and collective: ranks, calls, bytes sent and received, time
    (summed over its ranks), most time first."""
    out = {}
    for c in m["collectives"]:
        o = out.setdefault((c["comm"], c["function"]), dict.fromkeys(
            ("ranks", "calls", "bytes_sent", "bytes_recv", "time_s"), 0))  # fmt: skip
        o["ranks"] += 1
        for k in ("calls", "bytes_sent", "bytes_recv", "time_s"):
            o[k] += c[k]
    rows = [{"comm": k[0], "function": k[1], **v} for k, v in out.items()]
    return sorted(rows, key=lambda r: -r["time_s"])


def _coll_row(c, names):
    return [
        names[c["comm"]],
        c["function"],
        c["ranks"],
        c["calls"],
        byte_size(c["bytes_sent"]),
        byte_size(c["bytes_recv"]),
        _t(c["time_s"]),
    ]


# Ranks up to which the heat map has a row and column per rank; above, one per host.
HEAT_RANKS = 64


def heat_map(m):
    """The world ranks' bytes matrix as a table whose cells' shade grows with their
    bytes, hosts named in the headers and a thicker line where the host changes; above
    HEAT_RANKS ranks one row and column per host (its ranks' sums)."""
    b, msgs = world_matrix(m, "bytes"), world_matrix(m, "messages")
    n = len(b)
    host = [m["hosts"].get(str(r), "?") for r in range(n)]
    if n > HEAT_RANKS:
        names = sorted(set(host))
        at = np.array([names.index(h) for h in host])
        per = np.zeros((len(names), len(names)), np.int64)
        np.add.at(per, (at[:, None], at[None, :]), b)
        count = np.zeros_like(per)
        np.add.at(count, (at[:, None], at[None, :]), msgs)
        b, msgs, labels, host = per, count, names, names
    else:
        labels = [f"{r} ({h})" for r, h in enumerate(host)]
    k = len(b)
    top = b.max() if k else 0
    edge = [i > 0 and host[i] != host[i - 1] for i in range(k)]

    def line(i, side):
        return f"border-{side}:3px solid #333;" if edge[i] else ""

    head = "".join(f'<th style="{line(i, "left")}">{escape(labels[i])}</th>' for i in range(k))
    body = []
    for s in range(k):
        cells = []
        for d in range(k):
            shade = b[s, d] / top if top else 0
            style = f"background:rgba(200,40,40,{shade:.3f});{line(d, 'left')}{line(s, 'top')}"
            tip = f"{labels[s]} -> {labels[d]}: {int(msgs[s, d])} messages, {byte_size(b[s, d])}"
            text = byte_size(b[s, d]) if b[s, d] else ""
            cells.append(f'<td style="{style}" title="{escape(tip)}">{text}</td>')
        th = f'<th style="{line(s, "top")}">{escape(labels[s])}</th>'
        body.append(f"<tr>{th}{''.join(cells)}</tr>")
    return (
        '<table class="heat"><thead><tr><th>sender \\ receiver</th>'
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


SECTION = CommMatrix()


def _compact_title(m):
    sent = sum(r["sent_bytes"] for r in m["ranks"])
    msgs = sum(r["sent_messages"] for r in m["ranks"])
    return (
        f"Communication matrix (compact profile, {m['world_size']} ranks): {msgs} "
        f"point-to-point messages sent ({byte_size(sent)}), the top {len(m['pairs'])} "
        f"pairs by bytes (at most {m['top_pairs']})"
    )


def _cpair_row(p):
    return [p["comm_name"], p["sender"], p["receiver"], p["messages"], byte_size(p["bytes"])]


def _crank_row(r):
    return [
        r["rank"],
        byte_size(r["sent_bytes"]),
        r["sent_messages"],
        byte_size(r["recv_bytes"]),
        r["recv_messages"],
    ]


def _compact_text(m, view):
    out = [""] + wrap_words(_compact_title(m), view.width)
    shown, more = cut_rows(m["pairs"], view.rows)
    out += text_table([_cpair_row(p) for p in shown], CPAIR_COLUMNS, width=view.width)
    out += more_rows(more, "pairs", "perfweave report --json has them all")
    if view.full:
        out += ["  point-to-point totals per rank"]
        shown, more = cut_rows(m["ranks"], view.rows)
        out += text_table([_crank_row(r) for r in shown], CRANK_COLUMNS, width=view.width)
        out += more_rows(more, "ranks", "perfweave report --json has them all")
    out += wrap_words(f"  Not available: {m['missing']}.", view.width)
    return out

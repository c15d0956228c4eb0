"""The I/O profile's section (runtime/modules/io.c, `perfweave run --io`; analysis/io.py):
the I/O share of the wall time split into open/close, read/write and metadata, files (or
file patterns) with their layers, rates and imbalance, ranks, and call sites. Its advice
items go to the report's advice (analysis/advice.py reads them from this section's data).
Absent when the run recorded no I/O profile."""

from perfweave.analysis.io import analyze
from perfweave.report.html import _e, _table as _html_table
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.text import _cut, _more, _table


class IoSection(Section):
    name = "io"

    def collect(self, experiment, report, top):
        io = experiment.io
        if not io and not io.notes:
            return {}
        return {"io": analyze(io).to_json()}

    def text(self, data, view):
        d = data.get("io")
        if not d:
            return []
        out = ["", "I/O profile (--io)", _share_line(d)]
        if d["mpiio_s"]:
            out.append(f"  MPI-IO calls: {_t(d['mpiio_s'])} (their POSIX calls count above too)")
        if d["killed"]:
            out.append(f"  {d['killed']} process(es) killed: their counts up to the kill")
        shown, more = _cut(d["files"], view.max_rows)
        out += _table([_file_row(f) for f in shown], FILE_COLUMNS, width=view.width)
        out += _more(more, "file patterns")
        shown, more = _cut(d["callsites"], view.max_rows)
        if shown:
            out += ["  call sites"]
            out += _table([_site_row(c) for c in shown], SITE_COLUMNS, width=view.width)
            out += _more(more, "call sites")
        out += [f"  note: {n}" for n in d["notes"]]
        return out

    def html(self, data, page):
        d = data.get("io")
        if not d:
            return []
        return [
            "<h2>I/O profile</h2>",
            f"<p>{_e(_share_line(d).strip())}</p>",
            _html_table([_file_row(f) for f in d["files"]], FILE_COLUMNS),
            "<h3>I/O call sites</h3>",
            _html_table([_site_row(c) for c in d["callsites"]], SITE_COLUMNS),
        ] + [f"<p class=note>{_e(n)}</p>" for n in d["notes"]]


def _share_line(d):
    parts = [
        ("open/close", d["open_close_s"]),
        ("read/write", d["read_write_s"]),
        ("metadata", d["meta_s"]),
    ]
    total = sum(v for _, v in parts) or 1.0
    split = ", ".join(f"{name} {100 * v / total:.0f} %" for name, v in parts)
    return f"  I/O {_t(d['io_s'])} = {d['io_pct']:.1f} % of the wall time ({split})"


FILE_COLUMNS = [
    "file",
    "layer",
    "fs",
    "ranks",
    "opens",
    "bytes",
    "time",
    "open/close",
    "MB/s",
    "imbal",
]
SITE_COLUMNS = ["file", "op", "where", "calls", "bytes", "time"]


def _file_row(f):
    rate = max(f["read_mbs"], f["write_mbs"])
    oc = f"{100 * (f['open_s'] + f['close_s']) / f['time_s']:.0f} %" if f["time_s"] else "-"
    return [
        f["pattern"],
        f["layer"],
        f["fs"] + (" (mem)" if f["memory"] else ""),
        f["ranks"],
        f"{f['opens']:,}",
        f"{f['bytes_read'] + f['bytes_written']:,}",
        _t(f["time_s"]),
        oc,
        f"{rate:.1f}",
        f"{f['imbalance']:.2f}",
    ]


def _site_row(c):
    return [
        c["pattern"],
        f"{c['layer']} {c['op']}",
        c["where"],
        f"{c['calls']:,}",
        f"{c['bytes']:,}",
        _t(c["time_s"]),
    ]


SECTION = IoSection()

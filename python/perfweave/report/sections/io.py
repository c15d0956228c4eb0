"""The I/O profile's section (runtime/modules/io.c, `perfweave run --io`; analysis/io.py):
the I/O share of the wall time split into open/close, read/write and metadata, files (or
file patterns) with their layers, rates and imbalance, ranks, call sites, and the read
and write MB/s per time slice (a node timeline's slices where the run has one). Its advice
items go to the report's advice (analysis/advice.py reads them from this section's data);
the small-writes item takes the wait-state analysis's waits where there is one. Absent
when the run recorded no I/O profile."""

from perfweave.analysis.io import analyze, over_time
from perfweave.errors import FormatError
from perfweave.report.widgets import cut_rows, escape, html_table, more_rows, text_table
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

QUIET_PCT = 1.0  # I/O under this % of the wall time: one line in the default report


class IoSection(Section):
    name = "io"

    def collect(self, experiment, report, top):
        io = experiment.io
        if not io and not io.notes:
            return {}
        notes = []
        try:
            waitstates = experiment.waitstates
        except FormatError as e:  # the I/O profile stands without it
            waitstates, notes = None, [f"wait states not used: {e}"]
        try:
            timelines = experiment.timelines
        except FormatError as e:
            timelines, notes = (), notes + [f"node timeline not used: {e}"]
        d = analyze(io, waitstates=waitstates, timelines=timelines).to_json()
        d["notes"] += notes
        return {"io": d}

    def text(self, data, view):
        d = data.get("io")
        if not d:
            return []
        if not view.full and d["io_pct"] < QUIET_PCT:  # on by default: one line when idle
            return [
                "",
                f"I/O profile: {_t(d['io_s'])}, {d['io_pct']:.1f} % of the wall time (under "
                f"{QUIET_PCT:g} %: its tables with --full or --json)",
                *[f"  note: {n}" for n in d["notes"]],
            ]
        out = ["", "I/O profile (--io)", _share_line(d)]
        out += [f"  {line}" for line in _more_lines(d)]
        shown, more = cut_rows(d["files"], view.max_rows)
        out += text_table([_file_row(f) for f in shown], FILE_COLUMNS, width=view.width)
        out += more_rows(more, "file patterns")
        out += [f"  {line}" for line in _forms_lines(shown)]
        shown, more = cut_rows(d["callsites"], view.max_rows)
        if shown:
            out += ["  call sites"]
            out += text_table([_site_row(c) for c in shown], SITE_COLUMNS, width=view.width)
            out += more_rows(more, "call sites")
        for g in d.get("over_time", []):
            out += [f"  {_over_time_title(g)}"]
            out += text_table([_slice_row(x) for x in g["slices"]], SLICE_COLUMNS, width=view.width)
        out += [f"  note: {n}" for n in d["notes"]]
        return out

    def html(self, data, page):
        d = data.get("io")
        if not d:
            return []
        out = [
            "<h2>I/O profile</h2>",
            f"<p>{escape(_share_line(d).strip())}</p>",
            *[f"<p>{escape(line)}</p>" for line in _more_lines(d)],
            html_table([_file_row(f) for f in d["files"]], FILE_COLUMNS),
            *[f"<p>{escape(line)}</p>" for line in _forms_lines(d["files"])],
            "<h3>I/O call sites</h3>",
            html_table([_site_row(c) for c in d["callsites"]], SITE_COLUMNS),
        ]
        # the rates over time in finer slices than the report's table (too long for
        # the report's JSON: from the files), on the node timeline's clock where there is one
        for g in _chart_groups(page.experiment) or d.get("over_time", []):
            edges = [x["t0_s"] for x in g["slices"]] + [g["slices"][-1]["t1_s"]]
            chart = {
                "t": [(a + b) / 2 for a, b in zip(edges, edges[1:])],
                "names": ["read", "write"],
                "units": ["MB/s", "MB/s"],
                "values": [
                    [x["read_mbs"] for x in g["slices"]],
                    [x["write_mbs"] for x in g["slices"]],
                ],
            }
            xlabel = (
                "seconds since the node timeline's first tick"
                if g["clock"] == "node timeline"
                else "seconds since the processes' start"
            )
            out += [
                f"<h3>{escape(_over_time_title(g))}</h3>",
                page.plot(chart, "MB/s", xlabel=xlabel),
            ]
        for g in d.get("over_time", []):  # the text's slices, as a table
            out += [
                f"<h3>{escape(_over_time_title(g))}: per slice</h3>",
                html_table([_slice_row(x) for x in g["slices"]], SLICE_COLUMNS),
            ]
        return out + [f"<p class=note>{escape(n)}</p>" for n in d["notes"]]


def _more_lines(d):
    """The MPI-IO calls' time and the processes killed, when there are."""
    out = []
    if d["mpiio_s"]:
        out.append(f"MPI-IO calls: {_t(d['mpiio_s'])} (their POSIX calls count above too)")
    if d["killed"]:
        out.append(f"{d['killed']} process(es) killed: their counts up to the kill")
    return out


CHART_SLICES = 200  # per chart of the rates over time


def _chart_groups(experiment):
    """over_time in up to CHART_SLICES slices; [] when the files cannot give them."""
    try:
        timelines = experiment.timelines
    except FormatError:
        timelines = ()
    try:
        return over_time(experiment.io, timelines, slices=CHART_SLICES)
    except FormatError:
        return []


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
SLICE_COLUMNS = ["time slice", "read MB/s", "write MB/s", "read bytes", "write bytes"]


def _over_time_title(g):
    if g["clock"] == "node timeline":
        return (
            f"read and write over time, {g['host']} ({g['processes']} processes; the node "
            "timeline's slices)"
        )
    return f"read and write over time ({g['processes']} processes, from their start)"


def _slice_row(x):
    return [
        f"{x['t0_s']:.2f}-{x['t1_s']:.2f} s",
        f"{x['read_mbs']:.2f}",
        f"{x['write_mbs']:.2f}",
        f"{x['read_bytes']:,.0f}",
        f"{x['write_bytes']:,.0f}",
    ]


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


FORM_WORDS = {"indep": "independent", "coll": "collective", "split": "split", "nb": "nonblocking"}


def _forms_lines(files):
    """One line per MPI-IO file pattern: its opens, reads and writes by form."""
    out = []
    for f in files:
        forms = f.get("forms") or {}
        parts = []
        for what in ("opens", "reads", "writes"):
            d = forms.get(what) or {}
            if d:
                split = ", ".join(f"{n:,} {FORM_WORDS.get(k, k)}" for k, n in d.items())
                parts.append(f"{what} {split}")
        if forms.get("views"):
            parts.append(f"{forms['views']:,} views")
        if parts:
            out.append(f"MPI-IO {f['pattern']}: {'; '.join(parts)}")
    return out


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

"""The compact profile's MPI section (analysis/compact.py): shown when it is the
experiment's only MPI profile (a job above --full-profile-ranks); otherwise the MPI
profile section shows the same calls rank by rank."""

from perfweave.analysis.compact import analyze
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

from perfweave.report.widgets import (
    byte_size,
    cut_rows,
    escape,
    html_table,
    more_rows,
    text_table,
    wrap_line,
)

SITE_COLUMNS = ["function", "call site", "ranks", "time", "min", "mean", "max", "max rank",
                "max/mean", "p90", "calls p90", "sent p90"]  # fmt: skip
FUNCTION_COLUMNS = ["function", "sites", "calls", "time", "sent", "received"]


class CompactSection(Section):
    name = "compact"

    def collect(self, experiment, report, top):
        if len(experiment.profile.ranks):
            return {}  # the MPI profile section shows the full profile (and reads no compact)
        p = experiment.compact
        if p is None:
            return {}
        return {"compact": analyze(p, top=top)}

    def text(self, data, view):
        c = data.get("compact")
        if not c:
            return []
        out = [
            "",
            f"MPI profile (compact: {c['ranks']} ranks, rank statistics per call site)",
            *(f"  {line}" for line in _summary(c)),
            "",
            "MPI functions by time",
        ]
        shown, more = cut_rows(c["functions"], view.rows)
        out += text_table([_frow(f) for f in shown], FUNCTION_COLUMNS, width=view.width)
        out += more_rows(more, "functions")
        out += ["", _sites_title(c)]
        shown, more = cut_rows(c["callsites"], view.rows)
        out += text_table(
            [_srow(s) for s in shown],
            SITE_COLUMNS,
            align=["<", "<"] + [">"] * (len(SITE_COLUMNS) - 2),
            width=view.width,
            drop=(11, 10, 9, 5),  # the calls' and bytes' p90, the time's, then min
        )
        out += more_rows(more + c["callsite_count"] - len(c["callsites"]), "call sites")
        out += wrap_line("missing", c["missing"], view.width)
        return out

    def html(self, data, page):
        c = data.get("compact")
        if not c:
            return []
        return [
            f"<h2>MPI profile (compact, {c['ranks']} ranks)</h2>",
            *(f"<p>{escape(line)}</p>" for line in _summary(c)),
            "<h3>MPI functions by time</h3>",
            html_table([_frow(f) for f in c["functions"]], FUNCTION_COLUMNS),
            f"<h3>{escape(_sites_title(c))}</h3>",
            html_table([_srow(s) for s in c["callsites"]], SITE_COLUMNS),
            f"<p class=note>not available: {escape(c['missing'])}</p>",
        ]


def _summary(c):
    r = c["rank_mpi_s"]
    return [
        f"MPI time {_t(c['mpi_s'])} of {_t(c['app_s'])} app time summed over ranks "
        f"({c['mpi_pct']:.1f} %)",
        f"MPI time per rank: min {_t(r['min'])} (rank {r['argmin']}), "
        f"mean {_t(r['mean'])}, max {_t(r['max'])} (rank {r['argmax']})",
    ]


def _sites_title(c):
    return (
        "MPI call sites by time (over the ranks that called each; p90s, per rank, from "
        f"sketches, within {100 * c['sketch_relative_error']:.1f} %)"
    )


def _frow(f):
    return [f["name"], f["callsites"], f"{f['calls']:,}", _t(f["time_s"]),
            byte_size(f["bytes_sent"]), byte_size(f["bytes_recv"])]  # fmt: skip


def _srow(s):
    return [s["function"], s["where"], s["ranks"], _t(s["time_s"]), _t(s["min_s"]),
            _t(s["mean_s"]), _t(s["max_s"]), s["argmax"], f"{s['imbalance']:.2f}",
            _t(s["p90_s"]), _p90(s["calls_p90"], f"{s['calls_p90']:,.0f}"),
            _p90(s["sent_p90"], byte_size(s["sent_p90"]))]  # fmt: skip


def _p90(v, shown):
    # a version-1 file has no sketch of calls and bytes
    return "-" if v != v else shown


SECTION = CompactSection()

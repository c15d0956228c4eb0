"""The example module's section (runtime/modules/example.c, `perfweave run --example`):
its wrapped function's calls and time, in all and per process. The template of a
module's report section: collect puts the typed result of the module's analysis
(analysis/example.py, of its model ExperimentDir.example) into the report dict, text and
html draw from that dict alone. Absent from the
report (no key, no lines) when the run recorded none of the module's data."""

from perfweave.analysis.example import analyze
from perfweave.report.widgets import cut_rows, escape, html_table, more_rows, text_table
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t


class ExampleSection(Section):
    name = "example"

    def collect(self, experiment, report, top):
        ex = experiment.example
        if not ex and not ex.notes:
            return {}
        return {"example": analyze(ex).to_json()}

    def text(self, data, view):
        ex = data.get("example")
        if not ex:
            return []
        out = ["", f"Example module ({ex['function']} calls, --example)", f"  {_summary(ex)}"]
        shown, more = cut_rows(ex["per_process"], view.max_rows)
        out += text_table([_row(p) for p in shown], COLUMNS, width=view.width)
        out += more_rows(more, "processes")
        out += [f"  note: {n}" for n in ex["notes"]]
        return out

    def html(self, data, page):
        ex = data.get("example")
        if not ex:
            return []
        rows = [_row(p) for p in ex["per_process"]]
        return [
            f"<h2>Example module: {escape(ex['function'])} calls</h2>",
            f"<p>{escape(_summary(ex))}</p>",
            html_table(rows, COLUMNS),
        ] + [f"<p class=note>{escape(n)}</p>" for n in ex["notes"]]


def _summary(ex):
    """The calls in all: how many, in how many threads of how many ranks, how long."""
    if ex["calls"]:
        who = (
            f"{ex['ranks']} rank{'s' * (ex['ranks'] != 1)}"
            if ex["ranks"]
            else f"{ex['processes']} process{'es' * (ex['processes'] != 1)}"
        )
        return (
            f"{ex['calls']:,} calls in {ex['threads']} thread"
            f"{'s' * (ex['threads'] != 1)} of {who}: {_t(ex['time_s'])} "
            f"({_t(ex['mean_call_s'])} per call, longest "
            f"{_t(ex['longest_call_s'])})"
        )
    if ex["processes"]:
        return f"no {ex['function']} call in {ex['processes']} processes"
    return "no readable data"


# a process's row of the text and HTML tables
COLUMNS = ["process", "threads", "calls", "time", "longest", "end"]


def _row(p):
    return [
        _who(p),
        p["threads"],
        f"{p['calls']:,}",
        _t(p["time_s"]),
        _t(p["longest_call_s"]),
        p["state"],
    ]


def _who(p):
    return f"rank {p['rank']}" if p["rank"] >= 0 else f"{p['host']}:{p['pid']}"


SECTION = ExampleSection()

"""The POP factors (perfweave pop, docs/pop.md) of an experiment with traces: the
multiplicative factors with the ideal-network replay's ideal runtime, else (a replay
that would deadlock) the critical path of useful computation's."""

from perfweave.analysis.pop import FACTORS
from perfweave.errors import PerfweaveError
from perfweave.readers.trace import trace_dir
from perfweave.report.section import Section
from perfweave.report.widgets import html_table, text_table


class Pop(Section):
    name = "pop"

    def collect(self, experiment, report, top):
        if not trace_dir(experiment.path).is_dir():
            return {}
        from perfweave.analysis import eventgraph, pop

        try:
            graph = eventgraph.load_graph(experiment.path)
            res = pop.analyze(graph, experiment.path, what_if={})
        except PerfweaveError as e:  # the rest of the report stands without it
            return {"pop": {"error": str(e)}}
        return {"pop": res.to_json()}

    def text(self, data, view):
        doc = data.get("pop")
        if not doc:
            return []
        if doc.get("error"):
            return ["", f"POP metrics: not shown ({doc['error']})"]
        rows = _rows(doc)
        if not rows:
            return []
        if view.max_rows is not None:  # a line, by POP's initials: the report fits a terminal
            v = factors(doc)
            pct = lambda k: f"{100 * v[k]:.1f}%"  # noqa: E731
            return (
                [
                    "",
                    f"POP (perfweave pop; --full: more): PE {pct('parallel_efficiency')} = LB "
                    f"{pct('load_balance')} x CommE {pct('communication_efficiency')} (SerE "
                    f"{pct('serialisation_efficiency')}, TE {pct('transfer_efficiency')})",
                ]
                if "transfer_efficiency" in v
                else []
            )
        title = f"POP metrics (perfweave pop; ideal runtime: {_ideal_of(doc)[1]})"
        return ["", title] + text_table(rows, ["factor", "value"], ["<", ">"], view.width)

    def html(self, data, page):
        doc = data.get("pop")
        if not doc or doc.get("error"):
            return []
        rows = _rows(doc)
        return ["<h2>POP metrics</h2>", html_table(rows, ["factor", "value"])] if rows else []


def _ideal_of(doc):
    """(the ideal runtime's entry of the document, its name): the replay's where it
    has one, else the critical path's."""
    ideal = doc["ideal"]
    if ideal["replay"].get("t_ideal_s") is not None:
        return ideal["replay"], "ideal-network replay"
    return ideal["critical_path"], "critical path of useful computation"


def factors(doc):
    """The multiplicative factors the document has, with the ideal runtime's."""
    mul = dict(doc["multiplicative"])
    mul.update(_ideal_of(doc)[0]["multiplicative"])
    return mul


def _rows(doc):
    """(indented name, value %) of the multiplicative factors the document has."""
    mul = factors(doc)
    return [
        ["  " * (depth - 1) + name, f"{100 * mul[key]:.1f}%"]
        for key, name, depth in FACTORS
        if key in mul
    ]


SECTION = Pop()

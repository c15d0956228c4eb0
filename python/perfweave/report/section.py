"""A section of the report: what it collects from an experiment and how it shows it, as
text (a terminal) and as HTML (one page). The report is the list
report/sections/__init__.py SECTIONS, in the order the sections are shown; a module that
measures something new adds its section there, and nothing else in report/ changes.

`collect` runs each section's collect once, after the sections it `needs` (their data is
in the report dict it is given), and lays the report dict out in the order of the list:
`perfweave report --json` is that dict. The text and the HTML are drawn from the dict
alone, so that the JSON holds everything either shows."""

from dataclasses import dataclass, field

from perfweave import progress

ALL = "*"  # Section.needs: every other section (the advice reads the whole report)


class Section:
    """One section. name: its key in the report dict (None for a section that only shows
    data collected by others); needs: the names of the sections whose data its collect
    reads, or ALL."""

    name = None
    needs = ()

    def collect(self, experiment, report, top):
        """The section's entries of the report dict ({} for none): usually
        {self.name: value}; a section may give several top-level keys (the run's)."""
        return {}

    def text(self, report, view):
        """Lines of the text report (a View says how many rows and how wide)."""
        return []

    def html(self, report, page):
        """Parts of the HTML page's body; data for the page's scripts go to page.data."""
        return []


@dataclass
class View:
    """How the text report is drawn. max_rows: rows per table (None: every row, the
    --full report); width: the widest line (None: no limit, names whole); rows: rows of
    the function and call-site tables (`--top N`, else max_rows)."""

    max_rows: int = 4
    width: int = 100
    rows: int = None

    def __post_init__(self):
        if self.rows is None:
            self.rows = self.max_rows

    @property
    def full(self):
        return self.max_rows is None


@dataclass
class Page:
    """The HTML page being drawn: its experiment, and the JSON data of its scripts by
    element id (each becomes <script type="application/json" id="pw-ID">)."""

    experiment: object
    data: dict = field(default_factory=dict)

    def plot(self, chart, ylabel, stacked=False, xlabel=None):
        """A line chart that the page draws (uPlot): the HTML of its element, to put in
        the section's parts. chart: {"t": x values (s), "names": series, "values": one
        list per series (None: no value), optional "units" and "colours" per series};
        stacked: the series drawn on top of each other; xlabel: the x axis's label."""
        plots = self.data.setdefault("plots", [])
        el = f"plot{len(plots)}"
        plots.append({"id": el, "chart": chart, "ylabel": ylabel, "stacked": stacked})
        if xlabel:
            plots[-1]["chart"] = {**chart, "xlabel": xlabel}
        return f'<div class=chart id="{el}"></div>'


def collect(sections, experiment, top):
    """The report dict of experiment: every section's collect, each after those it
    needs, laid out in the order of sections."""
    by_name = {s.name: s for s in sections if s.name}
    done, report = set(), {}
    parts = {}

    def run(s, chain=()):
        if id(s) in done:
            return
        if s.name in chain:
            raise ValueError(f"report sections need each other: {' -> '.join(chain)}")
        needs = (
            [o for o in sections if o is not s] if s.needs == ALL else [by_name[n] for n in s.needs]
        )
        for o in needs:
            if o.needs != ALL:  # the ALL sections come last, after the others
                run(o, chain + (s.name,))
        part = s.collect(experiment, report, top)
        report.update(part)
        parts[id(s)] = part
        done.add(id(s))
        bar.step(what=f"report: {s.name or 'run'}")

    with progress.task("report: reading", len(sections), "section") as bar:
        for s in sorted(sections, key=lambda s: s.needs == ALL):
            run(s)
    out = {}
    for s in sections:
        out.update(parts[id(s)])
    return out

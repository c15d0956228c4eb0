"""`perfweave report --html FILE`: the report as one self-contained HTML file that works
offline. The page is templates/page.html; each section of the report (report/sections/)
gives its part of the body and the data its charts draw (the flame graph, call tree and
activity over time per rank of the samples, the node timeline plotted), drawn with the
vendored uPlot (report/vendor/) and inline script (templates/*.js), or as SVG by the
sections (widgets.py svg_bars); every chart colours an activity as widgets.py
ACTIVITY_COLOURS says. Every string that comes
from the program or the machine is escaped: HTML text with html.escape, embedded data as
JSON whose "<" is written \\u003c, so no string can close the script element or open a tag.
"""

from importlib import resources
from string import Template

from perfweave.report import sections
from perfweave.report.section import Page
from perfweave.report.widgets import (
    ACTIVITIES,
    ACTIVITY_COLOURS,
    SPARE_COLOURS,
    activity_name,
    json_for_script,
)


def _resource(*path):
    return resources.files("perfweave.report").joinpath(*path).read_text()


def render(data, experiment):
    """The HTML text of report data (report/data.py collect) of experiment."""
    page = Page(experiment)
    # every chart's colour of an activity, and its name, from one table (widgets.py)
    page.data["activities"] = {
        "colours": ACTIVITY_COLOURS,
        "spare": SPARE_COLOURS,
        "names": {a: activity_name(a) for a in ACTIVITIES},
    }
    body = sections.html(data, page)
    scripts = "\n".join(
        f'<script type="application/json" id="pw-{name}">'
        f"{json_for_script(page.data[name])}</script>"
        for name in sorted(page.data)
    )
    return Template(_resource("templates", "page.html")).substitute(
        uplot_css=_resource("vendor", "uPlot.min.css"),
        samples_css=_resource("templates", "samples.css"),
        uplot_js=_resource("vendor", "uPlot.iife.min.js"),
        samples_js=_resource("templates", "samples.js"),
        body="\n".join(body),
        data=scripts,
    )

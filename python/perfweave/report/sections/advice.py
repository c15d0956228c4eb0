"""Advice: what to change, from every other section's data (analysis/advice.py)."""

import textwrap

from perfweave.analysis.advice import advise
from perfweave.report.widgets import cut_rows, escape, more_rows
from perfweave.report.section import ALL, Section

MAX_ADVICE = 2  # advice items in the default text report


class Advice(Section):
    name = "advice"
    needs = ALL

    def collect(self, experiment, report, top):
        return {"advice": advise(report)}

    def text(self, data, view):
        advice = data.get("advice") or []
        if not advice:
            return []
        out = ["", "Advice"]
        shown, more = cut_rows(advice, None if view.full else MAX_ADVICE)
        for a in shown:
            out += textwrap.wrap(
                a["text"],
                view.width or 88,
                initial_indent="  - ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
        return out + more_rows(more, "advice items", "--full")

    def html(self, data, page):
        if not data.get("advice"):
            return []
        return [
            "<h2>Advice</h2><ul class=advice>"
            + "".join(f"<li>{escape(a['text'])}</li>" for a in data["advice"])
            + "</ul>"
        ]


SECTION = Advice()

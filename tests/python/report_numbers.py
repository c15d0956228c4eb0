"""The check that the text report and the HTML page agree on every number
(test_report_agree.py, tests/runtime/test_html.py): section by section
(report/sections/ SECTIONS, every one, whoever wrote it), every number of the section's
text, in the default report and the --full one, must appear in the section's HTML,
written the same way (numbers are compared as the text writes them: "1.234ms", "12.5",
"3,000"). Lines that only say how many rows the view left out ("(3 more call sites;
...)") are not numbers of the report."""

import html
import re

from perfweave.report.section import Page, View
from perfweave.report.sections import NAMES, SECTIONS

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
HINT = re.compile(r"^\s*\(.*\bmore\b.*\)\s*$")  # more_rows and the like


def page_text(parts):
    """The visible text of HTML parts: no scripts or styles, tags gone, entities read."""
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", "".join(parts))
    return html.unescape(re.sub(r"<[^>]*>", " ", text))


def numbers(text):
    return set(NUMBER.findall(text))


def disagreements(data, experiment):
    """[(section, number, text line)] of every number of the text report of data that
    the section's HTML lacks; also the sections whose text has numbers and whose HTML
    has none at all."""
    out = []
    for name, section in zip(NAMES, SECTIONS):
        page = Page(experiment)
        shown = numbers(page_text(section.html(data, page)))
        for view in (View(width=None), View(max_rows=None, width=None)):
            for line in section.text(data, view):
                if HINT.match(line):
                    continue
                for n in NUMBER.findall(line):
                    if n not in shown:
                        out.append((name, n, line.strip()))
    return sorted(set(out))


def assert_agree(data, experiment):
    bad = disagreements(data, experiment)
    assert not bad, "the HTML lacks numbers of the text report:\n" + "\n".join(
        f"  section {s}: {n!r} of {line!r}" for s, n, line in bad[:40]
    )

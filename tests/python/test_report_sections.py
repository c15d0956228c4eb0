"""The report as a list of sections (report/section.py): each section's collect runs
after the sections it needs, the report dict follows the list's order, and a new
section shows in the JSON, the text and the HTML page by being in the list."""
from types import SimpleNamespace

import pytest

from perfweave.report import section
from perfweave.report.section import ALL, Page, Section, View


class Probe(Section):
    """A section that records when it was collected and what it saw."""

    def __init__(self, name, needs=(), log=None):
        self.name, self.needs, self.log = name, needs, log

    def collect(self, experiment, report, top):
        self.log.append(self.name)
        return {self.name: {"saw": sorted(report), "top": top}}

    def text(self, report, view):
        return [f"{self.name} rows {view.rows}"]

    def html(self, report, page):
        page.data[self.name] = report[self.name]["saw"]
        return [f"<h2>{self.name}</h2>"]


def test_collect_follows_needs_and_lays_out_in_list_order():
    log = []
    a, b = Probe("a", needs=("c",), log=log), Probe("b", needs=ALL, log=log)
    c, d = Probe("c", log=log), Probe("d", log=log)
    report = section.collect([a, b, c, d], SimpleNamespace(), 7)
    assert log == ["c", "a", "d", "b"]                 # c before a; b (ALL) last
    assert list(report) == ["a", "b", "c", "d"]        # the list's order
    assert report["a"]["saw"] == ["c"]
    assert report["b"]["saw"] == ["a", "c", "d"]       # every other section's data
    assert report["d"] == {"saw": ["a", "c"], "top": 7}


def test_sections_that_need_each_other_are_refused():
    log = []
    with pytest.raises(ValueError, match="need each other"):
        section.collect([Probe("a", ("b",), log), Probe("b", ("a",), log)], None, 1)


def test_view_and_page_defaults():
    assert View().rows == View().max_rows == 4 and not View().full
    assert View(max_rows=None, width=None).full and View(max_rows=3, rows=9).rows == 9
    page = Page(experiment="exp")
    assert page.data == {}


def test_the_report_is_its_list_of_sections(monkeypatch, tmp_path):
    """A section added to SECTIONS reaches the JSON, the text and the HTML page, and
    nothing else in report/ has to know it."""
    from perfweave.report import data, html, sections, text

    log = []
    extra = Probe("extra", needs=("run",), log=log)
    run = SimpleNamespace(name="run", needs=(), collect=lambda e, r, t: {"run": 1},
                          text=lambda r, v: ["run"], html=lambda r, p: ["<h1>run</h1>"])
    monkeypatch.setattr(sections, "SECTIONS", [run, extra])
    report = data.collect(SimpleNamespace(path=tmp_path), top=3)
    assert report == {"run": 1, "extra": {"saw": ["run"], "top": 3}}
    assert text.render(report, max_rows=2) == "run\nextra rows 2\n"
    page = html.render(report, SimpleNamespace(path=tmp_path))
    assert "<h1>run</h1>\n<h2>extra</h2>" in page
    assert '<script type="application/json" id="pw-extra">["run"]</script>' in page

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
    assert log == ["c", "a", "d", "b"]  # c before a; b (ALL) last
    assert list(report) == ["a", "b", "c", "d"]  # the list's order
    assert report["a"]["saw"] == ["c"]
    assert report["b"]["saw"] == ["a", "c", "d"]  # every other section's data
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
    run = SimpleNamespace(
        name="run",
        needs=(),
        collect=lambda e, r, t: {"run": 1},
        text=lambda r, v: ["run"],
        html=lambda r, p: ["<h1>run</h1>"],
    )
    monkeypatch.setattr(sections, "SECTIONS", [run, extra])
    report = data.collect(SimpleNamespace(path=tmp_path), top=3)
    assert report == {"run": 1, "extra": {"saw": ["run"], "top": 3}}
    assert text.render(report, max_rows=2) == "run\nextra rows 2\n"
    page = html.render(report, SimpleNamespace(path=tmp_path))
    assert "<h1>run</h1>\n<h2>extra</h2>" in page
    assert '<script type="application/json" id="pw-extra">["run"]</script>' in page


def example_model():
    """The example module's model of two processes (3 threads, 3000 calls, 8 ms), built in
    memory: also the example's data of test_report_agree.py."""
    from perfweave.model.example import Example

    return Example.from_literal(
        [
            {"rank": 1, "threads": 1, "calls": 2000, "total_ns": 6_000_000, "max_ns": 9_000},
            {"rank": 0, "threads": 2, "calls": 1000, "total_ns": 2_000_000, "max_ns": 40_000},
        ],
        job={
            "ranks": 2,
            "reported": 2,
            "function": "sched_yield",
            "threads": 3,
            "calls": 3000,
            "total_ns": 8_000_000,
            "max_ns": 40_000,
        },
    )


def test_example_section_from_its_model():
    """The example module's section (the template of a module's section) from a model
    built in memory: totals, per process most time first, notes; no key at all when the
    run recorded none of the module's data."""
    from perfweave.report.sections.example import SECTION

    ex = example_model()
    assert [p.rank for p in ex.processes] == [0, 1]
    got = SECTION.collect(SimpleNamespace(example=ex), {}, 10)["example"]
    assert (got["processes"], got["ranks"], got["threads"], got["calls"]) == (2, 2, 3, 3000)
    assert got["time_s"] == pytest.approx(8e-3)
    assert got["mean_call_s"] == pytest.approx(8e-3 / 3000)
    assert got["longest_call_s"] == pytest.approx(40e-6)
    assert [p["rank"] for p in got["per_process"]] == [1, 0]  # most time first
    assert got["job"]["calls"] == 3000
    lines = SECTION.text({"example": got}, View(max_rows=1))
    assert lines[1] == "Example module (sched_yield calls, --example)"
    assert lines[2] == (
        "  3,000 calls in 3 threads of 2 ranks: 8.000ms (2.7us per call, longest 40.0us)"
    )
    assert "rank 1" in lines[-2] and "2,000" in lines[-2]
    assert lines[-1] == "  (1 more processes; --max-rows N or --full)"
    html = "".join(SECTION.html({"example": got}, Page(experiment=None)))
    assert "<h2>Example module: sched_yield calls</h2>" in html and "rank 0" in html
    # nothing recorded: nothing in the report
    assert SECTION.collect(SimpleNamespace(example=type(ex)()), {}, 10) == {}
    assert SECTION.text({}, View()) == [] and SECTION.html({}, Page(None)) == []


def test_example_analysis_is_the_sections_data_and_its_table():
    """analysis/example.py (the template of a module's analysis): its typed result's
    to_json() is the section's data, its per_process table has a row per process, most
    time first, and the API finds it by the dataset's name (RECORDED_BY)."""
    from perfweave import api
    from perfweave.analysis import example
    from perfweave.model.example import Example
    from perfweave.report.sections.example import SECTION

    ex = Example.from_literal(
        [
            {"rank": 0, "threads": 2, "calls": 1000, "total_ns": 2_000_000, "max_ns": 40_000},
            {"rank": 1, "threads": 1, "calls": 2000, "total_ns": 6_000_000, "max_ns": 9_000},
        ]
    )
    res = example.analyze(ex)
    t = res.per_process
    assert t["rank"].tolist() == [1, 0] and t["calls"].tolist() == [2000, 1000]
    assert t["time_s"].tolist() == pytest.approx([6e-3, 2e-3])
    assert SECTION.collect(SimpleNamespace(example=ex), {}, 10)["example"] == res.to_json()
    assert api._analysis("example") is example and api._analysis("samples") is None
    assert example.analyze(Example()).to_json()["per_process"] == []


def test_example_reader_keeps_what_it_can_read(tmp_path):
    """readers/example.py: the files as the module writes them, a damaged one left out
    with a note, a file of another version named."""
    import json

    from perfweave.readers.example import read_example

    d = tmp_path / "example"
    d.mkdir()
    base = {
        "format": "perfweave-example",
        "version": 1,
        "host": "n1",
        "state": "complete",
        "function": "sched_yield",
        "threads": 1,
        "total_ns": 10,
        "max_ns": 5,
    }
    (d / "rank-0.json").write_text(json.dumps({**base, "rank": 0, "pid": 11, "calls": 3}))
    (d / "n1.12.json").write_text(json.dumps({**base, "rank": -1, "pid": 12, "calls": 4}))
    (d / "rank-1.json").write_text('{"format": "perfweave-example", "vers')
    (d / "rank-2.json").write_text(
        json.dumps({**base, "rank": 2, "pid": 13, "calls": 1, "version": 2})
    )
    ex = read_example(tmp_path)
    assert [(p.rank, p.pid, p.calls) for p in ex.processes] == [(0, 11, 3), (-1, 12, 4)]
    assert ex.job is None and len(ex.notes) == 2
    assert all(n.startswith("example module: ") and n.endswith("; left out") for n in ex.notes)
    assert "version 2" in ex.notes[1]
    assert not read_example(tmp_path / "none") and not read_example(tmp_path / "none").notes

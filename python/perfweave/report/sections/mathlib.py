"""The math-library section (runtime/modules/mathlib.c, `perfweave run --mathlib`): the
share of the processes' time in BLAS, LAPACK and FFTW calls, per routine, per call site
and per size class with flops rates, the libraries that answered, the FFTW plans and the
advice of analysis/mathlib.py. Absent when the run made no math-library call."""

import textwrap

from perfweave.analysis.mathlib import analyze
from perfweave.report.html import _e, _table as _html_table
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.text import _cut, _more, _table


class MathLibSection(Section):
    name = "mathlib"

    def collect(self, experiment, report, top):
        ml = experiment.mathlib
        if not ml and not ml.notes:
            return {}
        return {"mathlib": analyze(ml).to_json()}

    def text(self, data, view):
        m = data.get("mathlib")
        if not m:
            return []
        out = ["", "Math libraries (BLAS, LAPACK, FFTW calls; --mathlib)"]
        for line in _summary(m):
            out += _wrap(line, view.width)
        for title, rows, cols, what in _tables(m):
            if not rows:
                continue
            shown, more = _cut(rows, view.max_rows)
            out += ["", f"  {title}"]
            out += _table(shown, cols, width=view.width)
            out += _more(more, what)
        for a in m["advice"]:
            out += _wrap(f"advice: {a['text']}", view.width)
        out += [f"  note: {n}" for n in m["notes"]]
        return out

    def html(self, data, page):
        m = data.get("mathlib")
        if not m:
            return []
        parts = ["<h2>Math libraries</h2>"] + [f"<p>{_e(x)}</p>" for x in _summary(m)]
        for title, rows, cols, _ in _tables(m):
            if rows:
                parts += [f"<h3>{_e(title)}</h3>", _html_table(rows, cols)]
        parts += [f"<p class=advice>{_e(a['text'])}</p>" for a in m["advice"]]
        return parts + [f"<p class=note>{_e(n)}</p>" for n in m["notes"]]


def _wrap(line, width):
    return textwrap.wrap(line, (width or 100) - 2, initial_indent="  ", subsequent_indent="    ")


def _summary(m):
    if not m["calls"]:
        return ["no math-library call recorded"]
    who = f"{m['ranks']} ranks" if m["ranks"] else f"{m['processes']} process(es)"
    lines = [
        f"{m['pct_of_process']:.1f} % of the processes' time in math-library calls: "
        f"{_t(m['time_s'])} in {m['calls']:,} calls ({m['internal_calls']:,} internal) from "
        f"{m['threads']} threads of {who}, {m['gflops']:.2f} GF/s"
    ]
    if m["routines"] and m["callsites"]:
        r, s = m["routines"][0], m["callsites"][0]
        lines.append(
            f"{r['pct']:.0f} % of it {r['routine']}; the busiest call site: {s['routine']} from "
            f"{s['function'] + ' ' if s['function'] else ''}{s['where']} ({s['pct']:.0f} %)"
        )
    for lib in m["libraries"]:
        ref = " (reference implementation)" if lib["reference"] else ""
        lines.append(f"answered by {lib['library'] or '?'}{ref}: {_t(lib['time_s'])}")
    if m["dropped"]:
        lines.append(f"{m['dropped']:,} calls beyond --mathlib-max-sites in overflow sites")
    return lines


def _tables(m):
    routines = [
        [
            r["routine"],
            r["calls"],
            r["internal"],
            _t(r["time_s"]),
            f"{r['pct']:.1f}",
            f"{r['gflops']:.2f}",
            f"{r['intensity']:.2f}",
        ]
        for r in m["routines"]
    ]
    sites = [
        [
            s["routine"],
            f"{s['function']} {s['where']}".strip(),
            s["calls"],
            _t(s["time_s"]),
            f"{s['pct']:.1f}",
            f"{s['gflops']:.2f}",
        ]
        for s in m["callsites"]
    ]
    sizes = [
        [z["routine"], z["chars"], z["dims"], z["calls"], _t(z["time_s"]), f"{z['gflops']:.2f}"]
        for z in m["size_classes"]
    ]
    plans = [
        [
            p["rank"],
            p["gen"],
            p["routine"],
            p["kind"],
            p["dims"],
            p["howmany"],
            p["executes"],
            _t(p["plan_s"]),
            _t(p["exec_s"]),
            f"{p['gflops']:.2f}",
        ]
        for p in m["plans"]
    ]
    return [
        (
            "Routines",
            routines,
            ["routine", "calls", "internal", "time", "%", "GF/s", "F/B"],
            "routines",
        ),
        ("Call sites", sites, ["routine", "called from", "calls", "time", "%", "GF/s"], "sites"),
        ("Size classes", sizes, ["routine", "op", "mean dims", "calls", "time", "GF/s"], "classes"),
        (
            "FFTW plans",
            plans,
            [
                "rank",
                "plan",
                "planner",
                "kind",
                "dims",
                "howmany",
                "executes",
                "planning",
                "executing",
                "GF/s",
            ],
            "plans",
        ),
    ]


SECTION = MathLibSection()

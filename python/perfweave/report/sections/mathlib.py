"""The math-library section (runtime/modules/mathlib.c, `perfweave run --mathlib`): the
share of the processes' time in BLAS, LAPACK and FFTW calls, per routine, per call site
and per size class with flops rates, each routine's dimensions as a histogram, the
libraries that answered, the FFTW plans and the advice of analysis/mathlib.py; beside the
wrappers' exact calls, the samples' view (the math libraries' share of the app time per
routine and calling line, analysis/samples/), the routines the samples show but the
wrappers never saw (a library linked statically), and MKL_VERBOSE's calls when given
(`perfweave report --mkl-verbose LOG`). Absent when none of these has anything."""

import os
import textwrap

from perfweave.analysis.mathlib import analyze
from perfweave.report.widgets import cut_rows, escape, html_table, more_rows, text_table
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t


class MathLibSection(Section):
    name = "mathlib"
    needs = ("samples",)

    def collect(self, experiment, report, top):
        ml = experiment.mathlib
        sampled = (report.get("samples") or {}).get("mathlib")
        mkl = getattr(experiment, "mkl_verbose", None)
        if not ml and not ml.notes and not sampled and mkl is None:
            return {}
        return {"mathlib": analyze(ml, sampled=sampled, mkl_verbose=mkl).to_json()}

    def text(self, data, view):
        m = data.get("mathlib")
        if not m:
            return []
        out = ["", "Math libraries (BLAS, LAPACK, FFTW calls; --mathlib)"]
        for line in _summary(m):
            out += wrap_line(line, view.width)
        for line in _sampled_summary(m):
            out += wrap_line(line, view.width)
        for title, rows, cols, what in _tables(m):
            if not rows:
                continue
            shown, more = cut_rows(rows, view.max_rows)
            out += ["", f"  {title}"]
            out += text_table(shown, cols, width=view.width)
            out += more_rows(more, what)
        # its advice is in the report's Advice section (analysis/advice.py rule_sections)
        out += [f"  note: {n}" for n in m["notes"]]
        return out

    def html(self, data, page):
        m = data.get("mathlib")
        if not m:
            return []
        parts = ["<h2>Math libraries</h2>"]
        parts += [f"<p>{escape(x)}</p>" for x in _summary(m) + _sampled_summary(m)]
        for title, rows, cols, _ in _tables(m):
            if rows:
                parts += [f"<h3>{escape(title)}</h3>", html_table(rows, cols)]
        return parts + [f"<p class=note>{escape(n)}</p>" for n in m["notes"]]


def wrap_line(line, width):
    return textwrap.wrap(line, (width or 100) - 2, initial_indent="  ", subsequent_indent="    ")


def _summary(m):
    if not m["calls"]:
        return ["no math-library call recorded by the wrappers"]
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


def _sampled_summary(m):
    """The samples' view in a sentence: the math libraries' share of the app time, its
    largest routine and that routine's largest caller."""
    sm = m.get("sampled")
    out = []
    if sm and sm["routines"]:
        r = sm["routines"][0]
        c = r["callers"][0] if r["callers"] else None
        out.append(
            f"sampled: {sm['pct']:.1f} % of the app time in math libraries, "
            f"{r['math_pct']:.0f} % of it {r['routine']}"
            + (f", {c['routine_pct']:.0f} % of that from {c['name']}" if c else "")
        )
    mk = m.get("mkl_verbose")
    if mk:
        out.append(
            f"MKL_VERBOSE ({mk['path']}): {mk['calls']:,} calls, {_t(mk['time_s'])}"
            + (f"; {mk['skipped']} MKL_VERBOSE lines not calls" if mk["skipped"] else "")
        )
    return out


def _range(lo, hi):
    return f"{lo}-{hi}" if hi > lo else f"{lo}"


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
    sm = m.get("sampled") or {}
    sampled = [
        [
            r["routine"],
            ("static in " if r["static"] else "") + os.path.basename(r["object"]),
            f"{r['pct']:.1f}",
            f"{r['math_pct']:.1f}",
            r["calls"],
        ]
        for r in sm.get("routines", [])
    ]
    callers = [
        [r["routine"], c["name"], f"{c['pct']:.1f}", f"{c['routine_pct']:.0f}"]
        for r in sm.get("routines", [])
        for c in r["callers"]
    ]
    dims = [
        [
            h["routine"],
            f"d{h['dim'] + 1}",
            _range(h["lo"], h["hi"]),
            h["calls"],
            f"{h['pct']:.0f}",
            _t(h["time_s"]),
        ]
        for h in m.get("dims_hist", [])
    ]
    mkl = [
        [r["routine"], r["calls"], _t(r["time_s"]), f"{r['pct']:.1f}", r["threads"]]
        for r in (m.get("mkl_verbose") or {}).get("routines", [])
    ]
    return [
        (
            "Sampled (app time's samples in math libraries)",
            sampled,
            ["routine", "library", "% of app", "% of math", "calls seen"],
            "routines",
        ),
        (
            "Sampled callers (the frame outside the library)",
            callers,
            ["routine", "called from", "% of app", "% of routine"],
            "callers",
        ),
        (
            "Routines",
            routines,
            ["routine", "calls", "internal", "time", "%", "GF/s", "F/B"],
            "routines",
        ),
        ("Call sites", sites, ["routine", "called from", "calls", "time", "%", "GF/s"], "sites"),
        ("Size classes", sizes, ["routine", "op", "mean dims", "calls", "time", "GF/s"], "classes"),
        (
            "Dimensions (histogram of each routine's dims, log2 classes)",
            dims,
            ["routine", "dim", "sizes", "calls", "% calls", "time"],
            "rows",
        ),
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
        ("MKL_VERBOSE", mkl, ["routine", "calls", "time", "%", "threads"], "routines"),
    ]


SECTION = MathLibSection()

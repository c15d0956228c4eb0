"""The boundness section (`perfweave boundness`, docs/boundness.md): per sampled routine its
CPU time alone and beside the memory-bandwidth stressor, the slowdown with its 95 %
interval and the verdict; the heap sites live while it ran (with --heap); what the
machine could not vary. Shown in the report of a run of a boundness directory (and of
the directory itself, which opens as its first baseline run); the verb prints the same
lines (`lines`)."""

from perfweave.report.section import Section
from perfweave.report.widgets import (
    byte_size,
    cut_rows,
    escape,
    html_table,
    more_rows,
    text_table,
    wrap_line,
)

COLUMNS = ["routine", "CPU s alone", "beside", "samples", "slowdown", "95 % interval", "verdict"]


class BoundnessSection(Section):
    name = "boundness"

    def collect(self, experiment, report, top):
        result = experiment.boundness
        return {"boundness": result.to_json()} if result is not None else {}

    def text(self, data, view):
        doc = data.get("boundness")
        return ["", *lines(doc, view.width, view.max_rows)] if doc else []

    def html(self, data, page):
        doc = data.get("boundness")
        if not doc:
            return []
        out = ["<h2>Bandwidth- or compute-bound (perfweave boundness)</h2>"]
        out.append(f"<p>{escape(_setup_line(doc))}</p>")
        if doc.get("control"):
            out.append(f"<p>{escape(_control_line(doc['control']))}</p>")
        out.append(html_table([_row(r) for r in doc["routines"]], COLUMNS))
        for r in doc["routines"]:
            if r.get("live_sites"):
                out.append(f"<p>{escape(_sites_line(r))}</p>")
        out += [f"<p class=note>{escape(t)}</p>" for t in _notes(doc)]
        return out


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _row(r):
    return [
        r["routine"],
        _fmt(r["baseline_cpu_s"], ".3f"),
        _fmt(r["stressor_cpu_s"], ".3f"),
        f"{r['baseline_samples']:,} / {r['stressor_samples']:,}",
        _fmt(r["slowdown"], ".2f"),
        f"{_fmt(r['slowdown_lo'], '.2f')}-{_fmt(r['slowdown_hi'], '.2f')}",
        r["verdict"],
    ]


def _setup_line(doc):
    s = doc["setup"]
    st = s["stressor"]
    cores = ",".join(map(str, st["cores"]))
    share = "sharing the program's cores" if st["shares_cores"] else "on cores the program left"
    return (
        f"{doc['rounds']} rounds, interleaved; stressor: {st['program']} ({st['threads']} "
        f"thread{'s' * (st['threads'] != 1)} on core {cores}, {share}; arrays "
        f"{byte_size(st['bytes'])} = {st['llc_times']:.3g} x the last-level cache "
        f"{byte_size(s['machine']['llc_bytes'])}); program threads: {s['program_threads']}"
    )


def _live_during(s):
    """Measured (the share of the routine's samples taken while the site was live), or
    the lower bound of a heap record without timelines."""
    if "live_during_pct" in s:
        return f"live during {s['live_during_pct']:.0f} % of its samples"
    return f"live during >= {s['live_during_pct_min']:.0f} % of it (bound)"


def _control_line(c):
    """The control's figures in one line (analysis/boundness.py control())."""
    triads = ", ".join(
        f"{byte_size(t['bytes'])} {t['slowdown']:.2f} x"
        + (f" ({t['lo']:.2f}-{t['hi']:.2f})" if t["bytes"] == c["bytes"] else "")
        for t in c["triads"]
    )
    said = (
        "the stressor loads the memory system (a triad judged bandwidth-bound)"
        if c["bites"]
        else "it did not load the memory system: routines not slowed are undetermined"
    )
    return (
        f"reference triads beside the stressor: {triads}; a register-only FMA chain "
        f"{c['fma_slowdown']:.2f} x ({c['fma_lo']:.2f}-{c['fma_hi']:.2f}): {said}"
    )


def _sites_line(r):
    sites = "; ".join(
        f"{s['where']} ({byte_size(s['peak_bytes'])} peak, {_live_during(s)})"
        for s in r["live_sites"]
    )
    return f"{r['routine']} ({r['verdict']}): heap sites live while it ran: {sites}"


def _notes(doc):
    return [
        f"rule: {doc['setup']['rule']['text']}",
        *(f"not available here: {t}" for t in doc["not_available"]),
        *doc["notes"],
    ]


def lines(doc, width, max_rows):
    """The section's lines of a boundness result's JSON document (the verb's output)."""
    out = ["Bandwidth- or compute-bound (perfweave boundness)"]
    out += wrap_line("runs", _setup_line(doc), width)
    if doc.get("control"):
        out += wrap_line("control", _control_line(doc["control"]), width)
    shown, more = cut_rows(doc["routines"], max_rows)
    out += text_table([_row(r) for r in shown], COLUMNS, width=width)
    out += more_rows(more, "routines")
    for r in shown:
        if r.get("live_sites") and r["verdict"] in ("bandwidth-bound", "mixed"):
            out += wrap_line("heap", _sites_line(r), width)
    for t in _notes(doc):
        out += wrap_line("note", t, width)
    return out


SECTION = BoundnessSection()

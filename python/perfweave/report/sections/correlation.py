"""Everything a run recorded, per phase or region (analysis/correlate.py): one table per
interval with its wall time, the time split (compute / MPI / I/O / other), the wait
states, I/O bytes, energy and counters, each as min / mean / max over ranks, and where
each column came from. Shown for runs made with `perfweave run --all` (experiment.json
"all"); absent otherwise (no key, no lines)."""

import numpy as np

from perfweave.analysis import phases
from perfweave.analysis.correlate import correlate, region_intervals
from perfweave.readers import trace as trace_files
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import byte_size, escape, html_table, text_table, wrap_line

# the rows of an interval's table: (label, key, how a value is written)
ROWS = [
    ("wall time", "wall_s", _t),
    ("compute", "compute_s", _t),
    ("MPI", "mpi_s", _t),
    ("I/O", "io_s", _t),
    ("other (sleep, wait)", "other_s", _t),
    ("waiting (wait states)", "wait_s", _t),
    ("I/O read", "io_bytes_read", byte_size),
    ("I/O written", "io_bytes_written", byte_size),
    ("energy (node)", "energy_j", lambda j: f"{j:.2f} J"),
    ("GPU energy (node)", "gpu_energy_j", lambda j: f"{j:.2f} J"),
    ("GPU power (node, mean)", "gpu_power_w", lambda w: f"{w:.1f} W"),
]
COLUMNS = ["", "min", "mean", "max"]


class CorrelationSection(Section):
    name = "correlation"

    def collect(self, experiment, report, top):
        if not experiment.meta.get("all") or experiment.profile is None:
            return {}
        samples = list(experiment.samples or [])
        metas = [ps.meta for ps in samples]
        table = phases.intervals(experiment.profile, metas)
        regions = experiment.regions
        mine = region_intervals(regions.intervals, samples) if regions else table[:0]
        if not len(table) and not len(mine):
            return {}
        traced = experiment.path if trace_files.trace_dir(experiment.path).is_dir() else None
        result = correlate(
            np.concatenate([table, mine]),
            samples=samples,
            io=experiment.io,
            timelines=experiment.timelines,
            exp_path=traced,
            mpi_init=phases.init_times(experiment.profile),
        )
        if len(mine):
            result.intervals_from = "phases and regions"
        return {"correlation": result.to_json()}

    def text(self, data, view):
        c = data.get("correlation")
        if not c:
            return []
        out = ["", f"Per {_what(c)}: everything recorded (perfweave run --all)"]
        for iv in c["intervals"]:
            ranks = f"{iv['ranks']} rank{'s' * (iv['ranks'] != 1)}"
            out.append(f"  {iv['kind']} {iv['name']} ({ranks}, {iv['samples']} samples)")
            out += text_table(_rows(iv), COLUMNS, width=view.width)
        out.append("  where each row comes from:")
        for k, v in c["sources"].items():
            out += wrap_line(k, v, view.width, indent=15)
        return out

    def html(self, data, page):
        c = data.get("correlation")
        if not c:
            return []
        parts = [f"<h2>Per {escape(_what(c))}: everything recorded</h2>"]
        for iv in c["intervals"]:
            parts.append(
                f"<h3>{escape(iv['kind'])} {escape(iv['name'])} "
                f"({iv['ranks']} ranks, {iv['samples']} samples)</h3>"
            )
            parts.append(html_table(_rows(iv), COLUMNS))
        parts += [f"<p class=note>{escape(k)}: {escape(v)}</p>" for k, v in c["sources"].items()]
        return parts


def _what(c):
    """The title's word for the intervals: the MPI life phases, with the program's own
    regions and phases when it declared any."""
    return {"phases": "phase", "phases and regions": "phase and region"}.get(
        c["intervals_from"], "region"
    )


def _rows(iv):
    rows = []
    for label, key, fmt in ROWS:
        s = iv.get(key)
        if s is not None:
            rows.append([label] + [fmt(s[k]) for k in ("min", "mean", "max")])
    for event, s in iv.get("counters", {}).items():
        if s is not None:
            rows.append([event] + [f"{s[k]:,.0f}" for k in ("min", "mean", "max")])
    return rows


SECTION = CorrelationSection()

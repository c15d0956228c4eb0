"""A traced run's timeline over an interval: one lane per rank (and thread) with its MPI
calls over the time between them (compute), drawn on a canvas in the HTML page
(templates/trace_interval.js). The interval is the whole run when its calls are few
(MAX_CALLS), else the window of the run with the most time in MPI calls, where ranks
wait; or the interval the user chose (`perfweave report --interval START:END`, seconds
since the first rank's MPI_Init, set on the experiment as `trace_window`). Its calls
are drawn as they are up to MAX_DRAWN, beyond that neighbours closer than a pixel of the
chart are merged into one bar (and the page says so). The full trace opens in
ui.perfetto.dev after `perfweave export EXP --format chrome`."""

import textwrap

import numpy as np

from perfweave.analysis import trace_source
from perfweave.errors import PerfweaveError
from perfweave.model.trace import T
from perfweave.report.section import Section
from perfweave.report.sections.wait_states import resource
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import escape

MAX_CALLS = 5000  # calls of a run shown whole; a larger one shows a window of about as many
MAX_DRAWN = 20000  # bars drawn at most (before merging neighbours)
PIXELS = 2000  # the chart's resolution when merging: the interval in this many steps
MAX_LANES = 64  # lanes shown, the ranks (and threads) in order
BINS = 400  # steps of the run in which the window is looked for
MAX_BYTES = 256 << 20  # larger traces are not read for the report (16 M events)


class TraceInterval(Section):
    name = "trace_interval"

    def collect(self, experiment, report, top):
        traces = experiment.path / "traces"
        if not traces.is_dir():
            return {}
        size = sum(p.stat().st_size for p in traces.iterdir() if p.is_file())
        if size > MAX_BYTES:
            return {
                "trace_interval": {
                    "error": f"traces of {size / 2**20:,.0f} MiB, more than the report reads "
                    f"({MAX_BYTES >> 20} MiB); perfweave export {experiment.path} --format "
                    "chrome opens them in ui.perfetto.dev"
                }
            }
        try:
            window = getattr(experiment, "trace_window", None)
            return {"trace_interval": interval(experiment.path, window_s=window)}
        except (PerfweaveError, OSError, ValueError, KeyError, IndexError) as e:
            # a damaged trace: the rest of the report stands
            return {"trace_interval": {"error": str(e) or type(e).__name__}}

    def text(self, data, view):
        ti = data.get("trace_interval")
        if not ti or not (view.full or ti.get("chosen")):  # the default report stays short
            return []
        if ti.get("error"):
            return ["", f"Trace timeline: not shown ({ti['error']})"]
        width = view.width or 10**6
        return [
            "",
            *textwrap.wrap(summary_line(ti), width, subsequent_indent="  "),
            *textwrap.wrap(export_line(ti), width, initial_indent="  ", subsequent_indent="  "),
        ]

    def html(self, data, page):
        ti = data.get("trace_interval")
        if not ti:
            return []
        if ti.get("error"):
            return ["<h2>Trace timeline</h2>", f"<p>not shown ({escape(ti['error'])})</p>"]
        page.data["trace-interval"] = ti
        return [
            "<h2>Trace timeline</h2>",
            f"<p>{escape(summary_line(ti).strip())}</p>",
            f"<p>{escape(export_line(ti))}</p>",
            '<div id="pw-trace-view"><canvas id="pw-trace-canvas"></canvas>'
            '<div id="pw-trace-legend"></div><div id="pw-trace-tip"></div></div>',
            f"<script>{resource('trace_interval.js')}</script>",
        ]


def summary_line(ti):
    """The interval in one line: where, how many calls, how chosen, merged or not."""
    how = (
        "as chosen"
        if ti.get("chosen")
        else "the whole run"
        if ti["whole"]
        else "the window with the most time in MPI calls"
    )
    line = (
        f"Trace timeline: {_t(ti['start_s'])} to {_t(ti['end_s'])} of the run ({how}), "
        f"{ti['calls']:,} MPI calls on {len(ti['lanes'])} lanes"
    )
    if ti["lanes_left_out"]:
        line += f" ({ti['lanes_left_out']} more lanes not shown)"
    if ti["merged"]:
        line += f"; drawn as {ti['drawn']:,} bars, calls closer than a pixel merged"
    return line


def export_line(ti):
    return (
        f"The whole trace in ui.perfetto.dev: perfweave export {ti['experiment']} "
        "--format chrome -o trace.json, then open trace.json there."
    )


def interval(path, start_ns=None, end_ns=None, window_s=None):
    """The timeline's data of the traced experiment at path, over [start_ns, end_ns] (ns
    on rank 0's clock), or window_s (start, end: seconds since the first rank's MPI_Init;
    end None: the run's end), or, with neither, the interval chosen as the module
    says: {"start_s", "end_s" (since the first rank's MPI_Init), "whole", "chosen" (the caller's
    interval), "calls" (MPI calls that overlap the interval),
    "lanes": [{"rank", "thread", "calls" (in the interval), "first_s" (the lane's first
    call in the run)}], "functions" (names), "bars": [[lane, function, start s, end s,
    calls]] (merged bars have calls > 1), "drawn", "merged", "lanes_left_out",
    "experiment"}."""
    X = trace_source.load(path)
    lanes, fnames, cols = [], [], []
    begin = None
    for rx in X.each():
        call = rx.rec["type"] == T["CALL"]
        fn = rx.rec["fn"][call].astype(np.int64)
        names = list(rx.functions) + ["?"]
        fn = np.minimum(fn, len(names) - 1)
        glob = np.array([_index(fnames, n) for n in names], np.int64)[fn]
        thr, t0, t1 = rx.thread[call], rx.t0[call], np.maximum(rx.t1[call], rx.t0[call])
        begin = rx.t_begin if begin is None else min(begin, rx.t_begin)
        for t in np.unique(thr):
            sel = thr == t
            order = np.argsort(t0[sel], kind="stable")
            lanes.append({"rank": rx.rank, "thread": int(t)})
            cols.append((glob[sel][order], t0[sel][order], t1[sel][order]))
    if begin is None:
        raise PerfweaveError("the experiment's traces have no rank")
    end = max((int(c[2].max()) for c in cols if len(c[2])), default=begin)
    total = sum(len(c[0]) for c in cols)
    chosen = start_ns is not None or window_s is not None
    if window_s is not None:
        start_ns = begin + round(window_s[0] * 1e9)
        end_ns = end if window_s[1] is None else begin + round(window_s[1] * 1e9)
        if start_ns > end:
            raise PerfweaveError(
                f"--interval starts at {window_s[0]:g} s, after the trace's end "
                f"({(end - begin) / 1e9:g} s after MPI_Init)"
            )
        end_ns = min(end_ns, end)
    whole = not chosen and total <= MAX_CALLS
    if start_ns is None:
        start_ns, end_ns = (begin, end) if whole else _busiest(cols, begin, end, total)
    out_lanes, bars, calls = [], [], 0
    merged = False
    inside = [(c[2] >= start_ns) & (c[1] <= end_ns) for c in cols]
    shown = sum(int(m.sum()) for m in inside[:MAX_LANES])
    step = (end_ns - start_ns) / PIXELS if shown > MAX_DRAWN else 0
    for i, ((fn, t0, t1), m) in enumerate(zip(cols, inside)):
        calls += int(m.sum())
        if i >= MAX_LANES:
            continue
        lane = dict(lanes[i], calls=int(m.sum()))
        lane["first_s"] = (int(t0[0]) - begin) / 1e9 if len(t0) else None
        out_lanes.append(lane)
        f, a, b = fn[m], t0[m], t1[m]
        n = np.ones(len(f), np.int64)
        if step and len(f) > 1:
            f, a, b, n = _merge(f, a, b, step)
            merged = merged or bool((n > 1).any())
        bars += [
            [i, int(x), (y - begin) / 1e9, (z - begin) / 1e9, int(k)]
            for x, y, z, k in zip(f.tolist(), a.tolist(), b.tolist(), n.tolist())
        ]
    return {
        "experiment": str(path),
        "start_s": (start_ns - begin) / 1e9,
        "end_s": (end_ns - begin) / 1e9,
        "whole": whole,
        "chosen": chosen,
        "calls": calls,
        "lanes": out_lanes,
        "lanes_left_out": max(len(lanes) - MAX_LANES, 0),
        "functions": fnames,
        "bars": bars,
        "drawn": len(bars),
        "merged": merged,
    }


def _index(names, name):
    if name not in names:
        names.append(name)
    return names.index(name)


def _busiest(cols, begin, end, total):
    """(start, end) ns of the window of about MAX_CALLS calls' length (in BINS steps of
    the run) with the most time in MPI calls, each call's time in the step of its middle."""
    width = max(end - begin, 1) / BINS
    t0 = np.concatenate([c[1] for c in cols])
    t1 = np.concatenate([c[2] for c in cols])
    mid = np.minimum(((t0 + t1) / 2 - begin) // width, BINS - 1).astype(np.int64)
    busy = np.bincount(np.maximum(mid, 0), weights=(t1 - t0).astype(float), minlength=BINS)
    k = max(1, int(BINS * MAX_CALLS / total))
    sums = np.convolve(busy, np.ones(k), "valid")
    j = int(np.argmax(sums))
    return begin + int(j * width), begin + int((j + k) * width)


def _merge(fn, t0, t1, step):
    """Neighbouring calls of a lane whose gap is under step, merged: (function of the
    longest call of each bar, start, end, calls)."""
    new = np.r_[True, t0[1:] - np.maximum.accumulate(t1)[:-1] > step]
    bar = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    n = np.bincount(bar)
    ends = np.maximum.reduceat(t1, starts)
    # the function of each bar's longest call: sort by (bar, duration), take the last
    order = np.lexsort((t1 - t0, bar))
    last = np.r_[starts[1:], len(bar)] - 1
    return fn[order[last]], t0[starts], ends, n


SECTION = TraceInterval()

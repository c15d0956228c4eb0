"""Plain-text rendering of report data (report/data.py), made for a terminal: no line
wider than WIDTH (long names shortened in the middle, "…"; their full text is in
--json), at most max_rows rows per table, with "N more" where rows were cut.
`perfweave report --full` shows every row and every name whole."""
import re
import textwrap

from perfweave.report import summary
from perfweave.report.summary import duration as _t
from perfweave.report.data import mpi_library_line

WIDTH = 100          # columns of the terminal the default report fits
MAX_ROWS = 4         # rows per table by default (--max-rows)
MAX_ADVICE = 2       # advice items by default
ELLIPSIS = "…"
MORE = "--max-rows N or --full"


def shorten(text, width):
    """text cut in the middle to at most width characters, with an ellipsis where the
    middle was: both ends of a path, a C++ symbol or a version string are what tell
    them apart. Whitespace runs become one space. width None: text as is."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    if width is None or len(text) <= width:
        return text
    if width < 2:
        return text[:max(width, 0)]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _more(n, what, how=MORE):
    return [f"  ({n} more {what}; {how})"] if n > 0 else []


def _cut(rows, limit):
    """rows[:limit] and how many were left out (limit None: all)."""
    if limit is None or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def _b(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def _table(rows, header, align=None, width=WIDTH, drop=()):
    """Lines of a table, two spaces in front. When it is wider than width (None: no
    limit), the columns in drop (indices, the first dropped first) go, then columns
    aligned left ("<": names, places) shrink, the widest first, and their cells are
    shortened in the middle."""
    rows = [[str(c) for c in r] for r in rows]
    header = [str(h) for h in header]
    align = list(align or ["<"] + [">"] * (len(header) - 1))

    def widths_of():
        return [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def over():
        return 2 + sum(widths) + 2 * (len(widths) - 1) - width

    widths = widths_of()
    if width is not None:
        for i in sorted(drop, key=list(drop).index):
            if over() <= 0:
                break
            k = i - sum(1 for j in drop[:list(drop).index(i)] if j < i)
            for r in [header] + rows:
                del r[k]
            del align[k]
            widths = widths_of()
        over = over()
        names = [i for i, a in enumerate(align) if a == "<"]
        while over > 0:
            floor = {i: min(widths[i], max(len(header[i]), 20)) for i in names}
            i = max(names, key=lambda k: widths[k] - floor[k], default=None)
            if i is None or widths[i] <= floor[i]:
                break
            cut = min(over, widths[i] - floor[i])
            widths[i] -= cut
            over -= cut
        for r in rows:
            for i in names:
                r[i] = shorten(r[i], widths[i])
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    out = ["  " + fmt.format(*header).rstrip()]
    out += ["  " + fmt.format(*r).rstrip() for r in rows]
    return out


def render(data, max_rows=MAX_ROWS, width=WIDTH, rows=None):
    """The report as text. max_rows: rows per table (None: all); width: the widest line
    (None: no limit, names whole); rows: rows of the function and call-site tables
    (default max_rows: `--top N` given explicitly)."""
    full = max_rows is None
    m = data["mpi_profile"]
    top = rows if rows is not None else max_rows
    out = [_fit(f"perfweave report: {data['experiment']}", width, head=18)]
    if data.get("imported"):
        imp = data["imported"]
        by = f", written by {imp['creator']}" if imp.get("creator") else ""
        skipped = f"; {imp['skipped_locations']} locations not imported" \
            if imp.get("skipped_locations") else ""
        out += _wrap("imported", f"{imp['from']} ({imp['format']} trace{by}); profile "
                     f"computed from the trace{skipped}", width)
    else:
        out.append(_fit(f"  command    {' '.join(data['command'])}", width, head=13))
    status = data.get("exit_status") or {}
    exit_text = (f"killed by signal {status['signal']}" if "signal" in status
                 else f"exit code {status.get('code', '?')}")
    if data.get("wall_s") is not None:
        out.append(f"  wall time  {_t(data['wall_s'])} (launch to exit, {exit_text})")
    if m["mpi"]:
        hosts = m["hosts"]
        out.append(_fit(f"  ranks      {m['ranks']}"
                        + (f" of {m['world_size']}" if m["world_size"] != m["ranks"] else "")
                        + f" on {len(hosts)} host{'s' if len(hosts) != 1 else ''}"
                        + (f" ({', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''})"),
                        width, head=13))
        lib = mpi_library_line(m["mpi_library"])
        if not data.get("imported"):
            out.append(_fit(f"  MPI        {lib} (perfweave runtime: {m['mpi_flavor']})", width,
                            keep=len(f" (perfweave runtime: {m['mpi_flavor']})"), head=13))
        a = m["app_time_s"]
        out.append(f"  app time   {_t(a['mean'])} mean, {_t(a['min'])} min, {_t(a['max'])} max "
                   "(MPI_Init to MPI_Finalize)")
        if startup := summary.startup(data):
            out += _wrap("start-up", startup, width)
    else:
        out.append("  MPI        not used (one process without MPI)")
    out.append(f"  state      {data['state']}"
               + (" (incomplete experiment: see the first note)" if data.get("unwritten") else ""))
    if split := summary.time_split(data):
        out += _wrap("time", split, width)
    for note in data["notes"]:
        out += _wrap("note", note, width)
    out += _sampling(data, max_rows, width)
    advice = data.get("advice") or []
    if advice:
        out += ["", "Advice"]
        shown, more = _cut(advice, None if full else MAX_ADVICE)
        for a in shown:
            out += textwrap.wrap(a["text"], (width or 88) - 0, initial_indent="  - ",
                                 subsequent_indent="    ", break_on_hyphens=False)
        out += _more(more, "advice items", "--full")
    if not m["mpi"]:
        return _join(out + _timeline(data, max_rows, width), width)

    # ---- time in MPI per rank ----
    out += ["", "MPI time per rank (MPI% and outside%: of the rank's app time)"]
    ranks = m["per_rank"]
    limit = None if full else max(max_rows, 8)
    shown, more = _cut(sorted(ranks, key=lambda r: -r["mpi_pct"]) if limit is not None and
                       len(ranks) > limit else ranks, limit)
    out += _table([[r["rank"], r["host"], _t(r["app_s"]), _t(r["mpi_s"]), f"{r['mpi_pct']:.2f}",
                    f"{r['outside_pct']:.2f}", r["calls"]] for r in shown],
                  ["rank", "host", "app", "MPI", "MPI%", "outside%", "calls"],
                  [">", "<", ">", ">", ">", ">", ">"], width)
    out += _more(more, "ranks with less MPI time", f"{MORE}, or --json")
    mp, op = m["mpi_pct"], m["outside_mpi_pct"]
    out.append(f"  MPI%: min {mp['min']:.2f}  mean {mp['mean']:.2f}  max {mp['max']:.2f}  "
               f"stdev {mp['stdev']:.2f}")
    out.append(f"  outside MPI: Avg/Max {m['outside_mpi_s']['avg_over_max']:.2f} "
               "(1.00 = perfectly balanced computation)")

    # ---- Extrae-style balance table: as many functions as fit ----
    fns = m["functions"][:min(m.get("top", 20), 8)]
    if fns:
        out += ["", "Balance: % of each rank's app time (across ranks)"]
        cols = [("Outside MPI", op)] + [(f["name"], f["pct_of_app_per_rank"]) for f in fns]
        stats = (("Average", "mean"), ("Maximum", "max"), ("Minimum", "min"),
                 ("StDev", "stdev"))
        while True:
            stat_rows = [[label] + [f"{c[1][key]:.2f}%" for c in cols] for label, key in stats]
            stat_rows.append(["Avg/Max"] + [f"{c[1]['avg_over_max']:.2f}" for c in cols])
            table = _table(stat_rows, [""] + [c[0] for c in cols], width=None)
            if width is None or len(cols) <= 2 or max(map(len, table)) <= width:
                break
            cols.pop()
        out += table
        out += _more(len(fns) + 1 - len(cols), "functions", "--full, or a wider terminal")

    # ---- functions ----
    out += ["", "MPI functions by time (App%: of the app time summed over ranks; MPI%: of "
            "the MPI time)"]
    shown, more = _cut(m["functions"][:m.get("top", 20)], top)
    more += max(len(m["functions"]) - m.get("top", 20), 0)
    out += _table([[f["name"], f["calls"], _t(f["time_s"]), f"{f['app_pct']:.2f}",
                    f"{f['mpi_pct']:.2f}", _b(f["bytes_sent"]), _b(f["bytes_recv"]),
                    _b(f["mean_bytes"])] for f in shown],
                  ["function", "calls", "time", "App%", "MPI%", "sent", "received", "avg size"],
                  width=width)
    out += _more(more, "functions", f"{MORE}, or --top N")

    # ---- call sites ----
    out += ["", "MPI call sites by time (time summed over ranks; App% and MPI% as above; "
            "COV of per-rank time)"]
    sites, more = _cut(m["callsites"][:m.get("top", 20)], top)
    more = m["callsites_total"] - len(sites)
    out += _table([[c["id"], c["function"], c["where"], c["calls"], _t(c["time_s"]),
                    _t(c["mean_s"]), _t(c["max_s"]), f"{c['app_pct']:.2f}",
                    f"{c['mpi_pct']:.2f}", f"{c['cov']:.2f}", c["ranks"]]
                   for c in sites],
                  ["id", "function", "location", "calls", "time", "mean", "max", "App%", "MPI%",
                   "COV", "ranks"],
                  [">", "<", "<", ">", ">", ">", ">", ">", ">", ">", ">"], width, drop=(5, 8))
    for c in sites:
        if c["stack_where"]:
            out.append(_fit(f"  site {c['id']} called from: " + " <- ".join(c["stack_where"]),
                            width))
    out += _more(more, "call sites", f"{MORE}, or --top N")

    # ---- counters (--counters) ----
    left_out = data.get("counters_not_counted") or []
    if left_out:
        out += [""] + textwrap.wrap(
            "Counters not counted (PAPI could not count them here): " +
            ", ".join(f"{c['event']} ({c['why']})" for c in left_out), width or 10 ** 6,
            subsequent_indent="  ", break_on_hyphens=False)
    if m.get("counters"):
        evs = m["counters"]
        out += ["", "Counters per call site (summed over ranks; inside the calls / before them, "
                "since the thread's previous MPI call)"]
        header = ["id", "function", "location"]
        for ev in evs:
            header += [f"{ev} in", f"{ev} before"]
        out += _table([[c["id"], c["function"], c["where"]] +
                       [x for ev in evs for x in (c["counters"][ev]["inside"],
                                                  c["counters"][ev]["before"])]
                       for c in sites if "counters" in c],
                      header, [">", "<", "<"] + [">"] * (2 * len(evs)), width)
        rated = [c for c in sites if "counters_time_s" in c]
        if rated:
            out += ["", "Counter rates per call site (per second of the time the counts cover: "
                    "inside the calls / before them)"]
            header = ["id", "function", "location", "s in", "s before"]
            for ev in evs:
                header += [f"{ev}/s in", f"{ev}/s before"]
            out += _table([[c["id"], c["function"], c["where"],
                            f"{c['counters_time_s']['inside']:.3g}",
                            f"{c['counters_time_s']['before']:.3g}"] +
                           [_rate(c["counters"][ev].get(f"{k}_per_s"))
                            for ev in evs for k in ("inside", "before")] for c in rated],
                          header, [">", "<", "<"] + [">"] * (2 + 2 * len(evs)), width)
        out += ["", "Counters per rank (inside and between MPI calls, MPI_Init to MPI_Finalize)"]
        counted = [r for r in ranks if "counters" in r]
        shown, more = _cut(counted, limit)
        out += _table([[r["rank"]] + [r["counters"][ev] for ev in evs] for r in shown],
                      ["rank"] + evs, [">"] * (1 + len(evs)), width)
        out += _more(more, "ranks", f"{MORE}, or --json")

    # ---- wait states (perfweave analyze) ----
    ws = data.get("wait_states")
    if ws and ws.get("error"):
        out += ["", f"Wait states: not shown ({ws['error']})"]
    elif ws:
        out += ["", "Wait states (perfweave analyze" +
                ("" if ws["complete"] else "; incomplete, see its notes") + ")"]
        if ws["patterns"]:
            shown, more = _cut(ws["patterns"], max_rows)
            out += _table([[p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]]
                           for p in shown],
                          ["pattern", "time", "%", "largest at"], ["<", ">", ">", "<"], width)
            out += _more(more, "wait states", f"{MORE}, or perfweave analyze")
        else:
            out.append("  none found")

    # ---- message sizes ----
    sizes = [s for s in m["message_sizes"] if s["calls"]]
    if sizes:
        out += ["", "Message sizes (bytes per call; p2p, collectives, one-sided; most time first)"]
        sizes.sort(key=lambda s: -s["time_s"])
        shown, more = _cut(sizes, max_rows)
        out += _table([[s["function"], ("0" if not s["bucket"] else
                                         f"{_b(s['min_bytes'])}-{_b(s['max_bytes'])}"
                                         if s["max_bytes"] is not None
                                         else f">={_b(s['min_bytes'])}"), s["calls"],
                        _b(s["bytes"]), _t(s["time_s"])]
                       for s in shown],
                      ["function", "size", "calls", "bytes", "time"], width=width)
        out += _more(more, "sizes", MORE)
    return _join(out + _timeline(data, max_rows, width), width)


def _fit(line, width, keep=0, head=None):
    """One line shortened in the middle to width; head and keep: characters at its
    start (default: its indent) and at its end (a suffix that says what the line is)
    kept as they are."""
    if width is None or len(line) <= width:
        return line
    head = len(line) - len(line.lstrip()) if head is None else head
    end = len(line) - keep
    return line[:head] + shorten(line[head:end], width - head - keep) + line[end:]


def _join(lines, width):
    """The report's text. Every line fits width: a line no section shortened (a table
    with too many numeric columns) is shortened here, the last resort."""
    return "\n".join(_fit(line, width) for line in lines) + "\n"


def _timeline(data, max_rows=MAX_ROWS, width=WIDTH):
    tl = data.get("node_timeline")
    if not tl:
        return []
    from perfweave.report.timeline import render
    return render(tl, lambda rows, header, align=None: _table(rows, header, align, width),
                  max_rows=max_rows, width=width)


def _wrap(label, text, width, indent=13):
    """A header line ("  note       text"), wrapped under its text."""
    return textwrap.wrap(text, (width or 10 ** 6), initial_indent=f"  {label:<{indent - 3}} ",
                         subsequent_indent=" " * indent, break_on_hyphens=False) or [""]


def _activity(name):
    """An activity's name as the report shows it (analysis/sampling.py ACTIVITIES)."""
    return {"io": "I/O", "alloc": "allocation", "thread_sync": "thread sync",
            "omp_sync": "OpenMP sync"}.get(name, name.replace("_", " "))


def _rate(x):
    """A counter rate per second, three digits and an SI prefix."""
    if x is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}"
    return f"{x:.3g}"


def _sampling(data, max_rows=MAX_ROWS, width=WIDTH):
    sm = data.get("sampling")
    if not sm:
        return []
    if sm.get("error"):
        return ["", f"Sampled time: not shown ({sm['error']})"]
    act = ", ".join(f"{_activity(k)} {v:.1f} %" for k, v in sm["activity_pct"].items()
                    if v > 0)
    whole = ", start-up and shutdown included" if "phase_pct" in sm else ""
    out = [""] + textwrap.wrap(f"Where the time goes ({sm['samples']} samples of "
                               f"{sm['processes']} processes{whole}; every % here is of "
                               f"the samples: {act})", width or 10 ** 6,
                               subsequent_indent="  ")
    drop = sm.get("dropped") or {}
    if any(drop.values()):
        out.append(f"  threads not sampled: {drop['threads']} (more than the runtime's table), "
                   f"{drop['timers']} (no timer), {drop['memory']} (no memory)")
    tree = sm.get("call_tree") or []
    evs = sm.get("counters") or []
    many = len(sm["ranks"]) > 1
    if tree:
        out.append("  call tree (inclusive % / self %" +
                   (", [per rank min-max %]" if many else "") +
                   (f", {{{', '.join(evs)} inclusive}}" if evs else "") + "):")
        shown, more = _cut(tree, None if max_rows is None else max_rows + 1)
        for n in shown:
            tail = ((f"   [{n['per_rank_pct']['min']:.0f}-{n['per_rank_pct']['max']:.0f}]"
                     if many else "")
                    + (" {" + ", ".join(str(n["counters_inclusive"].get(ev, 0))
                                        for ev in evs) + "}"
                       if evs and "counters_inclusive" in n else ""))
            head = f"  {n['inclusive_pct']:6.1f} {n['exclusive_pct']:6.1f}  {'  ' * n['depth']}"
            room = None if width is None else max(width - len(head) - len(tail), 12)
            out.append(head + shorten(n["name"], room) + tail)
        out += _more(more, "nodes", f"{MORE}, or --json")
    # the tree has each function's inclusive and self time: the tables by function
    # only in the full report
    tables = (("functions (self)", "functions"), ("source lines (self)", "lines"),
              ("functions (inclusive)", "inclusive"))
    if max_rows is not None:
        tables = tables[1:2]
    for title, key in tables:
        rows, more = _cut(sm[key], 10 if max_rows is None else max_rows)
        if not rows:
            continue
        out += _table([[f"{r['pct']:.1f}", r["name"],
                        ", ".join(f"{_activity(k)} {v:.0f}" for k, v in
                                  r["by_state_pct"].items()),
                        f"{r['per_rank_pct']['min']:.1f}/{r['per_rank_pct']['mean']:.1f}/"
                        f"{r['per_rank_pct']['max']:.1f}", f"{r['imbalance']:.2f}"] +
                       [r.get("counters", {}).get(ev, 0) for ev in evs]
                       for r in rows],
                      ["%", title, "by activity (%)", "per rank min/mean/max %", "imbalance"]
                      + evs, [">", "<", "<", ">", ">"] + [">"] * len(evs), width)
        out += _more(more, key.replace("lines", "source lines") +
                     ("" if max_rows is None else "; functions by self and inclusive time"),
                     f"{MORE}, or --json")
    return out + _activity_phases(sm.get("timeline"), 12 if max_rows is None else max_rows)


def _activity_phases(tl, most=12):
    """The phases of the activity over time (bins with the same leading activity, mean
    over ranks, merged): the `most` longest, in time order."""
    phases = (tl or {}).get("phases") or []
    if not phases:
        return []
    shown = sorted(sorted(phases, key=lambda p: p["start_s"] - p["end_s"])[:most],
                   key=lambda p: p["start_s"])
    out = [f"  activity over time (leading activity, mean over ranks; "
           f"{len(tl['edges_s']) - 1} bins of {_t(tl['bin_s'])}):"]
    out += [f"  {p['start_s']:8.2f}-{p['end_s']:.2f} s  {p['activity'].replace('_', ' ')} "
            f"{p['pct']:.0f} %" for p in shown]
    out += _more(len(phases) - len(shown), "shorter phases", f"{MORE}, or --json")
    return out

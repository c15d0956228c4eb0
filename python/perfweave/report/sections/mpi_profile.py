"""The MPI profile (analysis/mpi.py): time in MPI per rank and its balance, MPI functions
and call sites by time, and the PAPI counters per call site and rank (--counters)."""

import textwrap

from perfweave.analysis.mpi import analyze
from perfweave._format import FAMILIES
from perfweave.report.widgets import (
    MORE,
    byte_size,
    cut_rows,
    escape,
    family_activity,
    fit_line,
    html_table,
    more_html,
    more_rows,
    svg_bars,
    text_table,
)
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

HTML_SITES = 50  # call sites in the HTML page


class MpiProfile(Section):
    name = "mpi_profile"

    def collect(self, experiment, report, top):
        m = analyze(experiment.profile, top=top).to_json()
        if experiment.meta.get("imported_from"):
            for site in m.get("callsites", []):
                site["where"] = "(imported trace: no call sites)"
        return {
            "counters_not_counted": experiment.meta.get("counters_not_counted", []),
            "mpi_profile": m,
        }

    def text(self, data, view):
        m = data["mpi_profile"]
        if not m["mpi"]:
            return []
        width = view.width
        out = _per_rank(m, view)
        out += _balance(m, width)
        # ---- functions ----
        out += [
            "",
            "MPI functions by time (App%: of the app time summed over ranks; MPI%: of "
            "the MPI time)",
        ]
        shown, more = cut_rows(m["functions"][: m.get("top", 20)], view.rows)
        more += max(len(m["functions"]) - m.get("top", 20), 0)
        out += text_table([_function_row(f) for f in shown], FUNCTION_COLUMNS, width=width)
        out += more_rows(more, "functions", f"{MORE}, or --top N")
        # ---- call sites ----
        out += [
            "",
            "MPI call sites by time (time summed over ranks; App% and MPI% as above; "
            "COV of per-rank time)",
        ]
        sites, more = cut_rows(m["callsites"][: m.get("top", 20)], view.rows)
        more = m["callsites_total"] - len(sites)
        out += text_table(
            [_site_row(c) for c in sites],
            SITE_COLUMNS,
            [">", "<", "<", ">", ">", ">", ">", ">", ">", ">", ">"],
            width,
            drop=(5, 8),
        )
        out += [fit_line(f"  {line}", width) for line in _stack_lines(sites)]
        out += more_rows(more, "call sites", f"{MORE}, or --top N")
        return out + _counters(data, sites, view)

    def html(self, data, page):
        m = data["mpi_profile"]
        if not m["mpi"]:
            return []
        ranks = m["per_rank"]
        if len(ranks) > HTML_RANKS:  # as the text: those with the most MPI time first
            ranks = sorted(ranks, key=lambda r: -r["mpi_pct"])
        parts = [
            "<h2>MPI time per rank</h2>",
            *rank_chart(m),
            "<p>MPI% and outside%: of the rank's app time</p>",
            html_table([_rank_row(r) for r in ranks[:HTML_RANKS]], RANK_COLUMNS),
            *more_html(len(ranks) - HTML_RANKS, "ranks with less MPI time", "--json"),
            *(f"<p>{escape(line)}</p>" for line in _spread_lines(m)),
        ]
        cols = _balance_columns(m)
        if cols:
            parts += [
                "<h3>Balance: % of each rank's app time (across ranks)</h3>",
                html_table(_balance_rows(cols), [""] + [c[0] for c in cols]),
            ]
        parts += [
            "<h2>MPI functions by time</h2><p>App%: of the app time summed over ranks; "
            "MPI%: of the MPI time</p>",
            html_table(
                [_function_row(f) for f in m["functions"][: m.get("top", 20)]], FUNCTION_COLUMNS
            ),  # fmt: skip
        ]
        sites = m["callsites"][: m.get("top", 20)]
        parts += [
            "<h2>MPI call sites</h2><p>time summed over ranks; App% and MPI% as above; COV "
            "of per-rank time</p>",
            html_table([_site_row(c) for c in sites], SITE_COLUMNS),
            *(f"<p>{escape(line)}</p>" for line in _stack_lines(sites)),
            *more_html(m["callsites_total"] - len(sites), "call sites", "--top N"),
        ]
        for title, rows, header in _counter_tables(data, sites, ranks):
            parts += [f"<h3>{escape(title)}</h3>", html_table(rows, header)]
        left_out = _not_counted(data)
        return parts + ([f"<p class=note>{escape(left_out)}</p>"] if left_out else [])


HTML_RANKS = 1024  # rows of the per-rank table of the HTML page
CHART_RANKS = 128  # bars of the per-rank chart
RANK_COLUMNS = ["rank", "host", "app", "MPI", "MPI%", "outside%", "calls"]
FUNCTION_COLUMNS = ["function", "calls", "time", "App%", "MPI%", "sent", "received", "avg size"]
SITE_COLUMNS = ["id", "function", "location", "calls", "time", "mean", "max", "App%", "MPI%",
                "COV", "ranks"]  # fmt: skip


def rank_chart(m):
    """The per-rank chart: each rank's app time split into outside MPI and its MPI
    calls' families (FAMILY_s), in the activities' colours; up to CHART_RANKS ranks (those
    with the most MPI time, in rank order)."""
    ranks = m["per_rank"]
    if not ranks or f"{FAMILIES[0]}_s" not in ranks[0]:
        return []
    shown = ranks
    if len(ranks) > CHART_RANKS:
        shown = sorted(sorted(ranks, key=lambda r: -r["mpi_pct"])[:CHART_RANKS],
                       key=lambda r: r["rank"])  # fmt: skip
    fams = [f for f in FAMILIES if any(r[f"{f}_s"] > 0 for r in shown)]
    series = [("outside MPI", "compute")] + [(f"MPI {f}", family_activity(f)) for f in fams]
    values = [[max(r["app_s"] - r["mpi_s"], 0.0)] + [r[f"{f}_s"] for f in fams] for r in shown]
    note = (
        [f"<p>the {CHART_RANKS} ranks of {len(ranks)} with the most MPI time</p>"]
        if len(shown) < len(ranks)
        else []
    )
    labels = [f"rank {r['rank']} ({r['host']})" for r in shown]
    return note + [svg_bars("pw-rank-mpi", labels, series, values, "seconds of app time", _t)]


def _rank_limit(view):
    return None if view.full else max(view.max_rows, 8)


def _per_rank(m, view):
    out = ["", "MPI time per rank (MPI% and outside%: of the rank's app time)"]
    ranks = m["per_rank"]
    limit = _rank_limit(view)
    shown, more = cut_rows(
        sorted(ranks, key=lambda r: -r["mpi_pct"])
        if limit is not None and len(ranks) > limit
        else ranks,
        limit,
    )
    out += text_table(
        [_rank_row(r) for r in shown], RANK_COLUMNS, [">", "<", ">", ">", ">", ">", ">"], view.width
    )
    out += more_rows(more, "ranks with less MPI time", f"{MORE}, or --json")
    return out + [f"  {line}" for line in _spread_lines(m)]


def _rank_row(r):
    return [
        r["rank"],
        r["host"],
        _t(r["app_s"]),
        _t(r["mpi_s"]),
        f"{r['mpi_pct']:.2f}",
        f"{r['outside_pct']:.2f}",
        r["calls"],
    ]


def _spread_lines(m):
    """MPI's share of the ranks' app time over ranks, and the balance outside MPI."""
    mp = m["mpi_pct"]
    return [
        f"MPI%: min {mp['min']:.2f}  mean {mp['mean']:.2f}  max {mp['max']:.2f}  "
        f"stdev {mp['stdev']:.2f}",
        f"outside MPI: Avg/Max {m['outside_mpi_s']['avg_over_max']:.2f} "
        "(1.00 = perfectly balanced computation)",
    ]


def _function_row(f):
    return [
        f["name"],
        f["calls"],
        _t(f["time_s"]),
        f"{f['app_pct']:.2f}",
        f"{f['mpi_pct']:.2f}",
        byte_size(f["bytes_sent"]),
        byte_size(f["bytes_recv"]),
        byte_size(f["mean_bytes"]),
    ]


def _site_row(c):
    return [
        c["id"],
        c["function"],
        c["where"],
        c["calls"],
        _t(c["time_s"]),
        _t(c["mean_s"]),
        _t(c["max_s"]),
        f"{c['app_pct']:.2f}",
        f"{c['mpi_pct']:.2f}",
        f"{c['cov']:.2f}",
        c["ranks"],
    ]


def _stack_lines(sites):
    return [
        f"site {c['id']} called from: " + " <- ".join(c["stack_where"])
        for c in sites
        if c["stack_where"]
    ]


def _balance_columns(m):
    """(name, statistics) of the balance table: outside MPI, then the functions."""
    fns = m["functions"][: min(m.get("top", 20), 8)]
    if not fns:
        return []
    return [("Outside MPI", m["outside_mpi_pct"])] + [
        (f["name"], f["pct_of_app_per_rank"]) for f in fns
    ]


def _balance_rows(cols):
    stats = (("Average", "mean"), ("Maximum", "max"), ("Minimum", "min"), ("StDev", "stdev"))
    rows = [[label] + [f"{c[1][key]:.2f}%" for c in cols] for label, key in stats]
    return rows + [["Avg/Max"] + [f"{c[1]['avg_over_max']:.2f}" for c in cols]]


def _balance(m, width):
    """Extrae-style balance table: as many functions as fit."""
    cols = _balance_columns(m)
    if not cols:
        return []
    out = ["", "Balance: % of each rank's app time (across ranks)"]
    n = len(cols)
    while True:
        table = text_table(_balance_rows(cols), [""] + [c[0] for c in cols], width=None)
        if width is None or len(cols) <= 2 or max(map(len, table)) <= width:
            break
        cols.pop()
    return out + table + more_rows(n - len(cols), "functions", "--full, or a wider terminal")


def _not_counted(data):
    left_out = data.get("counters_not_counted") or []
    if not left_out:
        return None
    return "Counters not counted (they cannot be counted here): " + ", ".join(
        f"{c['event']} ({c['why']})" for c in left_out
    )


def _counter_tables(data, sites, ranks):
    """(title, rows, header) of the counters' tables (--counters): per call site
    (counts, then rates) and per rank."""
    evs = data["mpi_profile"].get("counters")
    if not evs:
        return []
    out = [
        (
            "Counters per call site (summed over ranks; inside the calls / before them, "
            "since the thread's previous MPI call)",
            [
                [c["id"], c["function"], c["where"]]
                + [
                    x
                    for ev in evs
                    for x in (c["counters"][ev]["inside"], c["counters"][ev]["before"])
                ]
                for c in sites
                if "counters" in c
            ],
            ["id", "function", "location"] + [f"{ev} {w}" for ev in evs for w in ("in", "before")],
        )
    ]
    rated = [c for c in sites if "counters_time_s" in c]
    if rated:
        out.append(
            (
                "Counter rates per call site (per second of the time the counts cover: "
                "inside the calls / before them)",
                [
                    [
                        c["id"],
                        c["function"],
                        c["where"],
                        f"{c['counters_time_s']['inside']:.3g}",
                        f"{c['counters_time_s']['before']:.3g}",
                    ]
                    + [
                        _rate(c["counters"][ev].get(f"{k}_per_s"))
                        for ev in evs
                        for k in ("inside", "before")
                    ]
                    for c in rated
                ],
                ["id", "function", "location", "s in", "s before"]
                + [f"{ev}/s {w}" for ev in evs for w in ("in", "before")],
            )
        )
    counted = [r for r in ranks if "counters" in r]
    out.append(
        (
            "Counters per rank (inside and between MPI calls, MPI_Init to MPI_Finalize)",
            [[r["rank"]] + [r["counters"][ev] for ev in evs] for r in counted],
            ["rank"] + evs,
        )
    )
    return out


def _counters(data, sites, view):
    """The counters (--counters) per call site (counts, then rates) and per rank, and
    the events that could not be counted."""
    width = view.width
    out = []
    left_out = _not_counted(data)
    if left_out:
        out += [""] + textwrap.wrap(
            left_out, width or 10**6, subsequent_indent="  ", break_on_hyphens=False
        )
    tables = _counter_tables(data, sites, data["mpi_profile"]["per_rank"])
    for k, (title, rows, header) in enumerate(tables):
        if k == len(tables) - 1:  # per rank: as many ranks as the view shows
            rows, more = cut_rows(rows, _rank_limit(view))
        out += ["", title]
        names = (1, 2) if k < len(tables) - 1 else ()  # function and location, left
        align = [">"] + ["<" if i in names else ">" for i in range(1, len(header))]
        out += text_table(rows, header, align, width)
        if k == len(tables) - 1:
            out += more_rows(more, "ranks", f"{MORE}, or --json")
    return out


def _rate(x):
    """A counter rate per second, three digits and an SI prefix."""
    if x is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}"
    return f"{x:.3g}"


SECTION = MpiProfile()

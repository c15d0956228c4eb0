"""The MPI profile (analysis/mpi.py): time in MPI per rank and its balance, MPI functions
and call sites by time, and the PAPI counters per call site and rank (--counters)."""

import textwrap

from perfweave.analysis.mpi import analyze
from perfweave.report.widgets import (
    MORE,
    byte_size,
    cut_rows,
    fit_line,
    html_table,
    more_rows,
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
        out += text_table(
            [
                [
                    f["name"],
                    f["calls"],
                    _t(f["time_s"]),
                    f"{f['app_pct']:.2f}",
                    f"{f['mpi_pct']:.2f}",
                    byte_size(f["bytes_sent"]),
                    byte_size(f["bytes_recv"]),
                    byte_size(f["mean_bytes"]),
                ]
                for f in shown
            ],
            ["function", "calls", "time", "App%", "MPI%", "sent", "received", "avg size"],
            width=width,
        )
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
            [
                [
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
                for c in sites
            ],
            [
                "id",
                "function",
                "location",
                "calls",
                "time",
                "mean",
                "max",
                "App%",
                "MPI%",
                "COV",
                "ranks",
            ],
            [">", "<", "<", ">", ">", ">", ">", ">", ">", ">", ">"],
            width,
            drop=(5, 8),
        )
        for c in sites:
            if c["stack_where"]:
                out.append(
                    fit_line(
                        f"  site {c['id']} called from: " + " <- ".join(c["stack_where"]), width
                    )
                )
        out += more_rows(more, "call sites", f"{MORE}, or --top N")
        return out + _counters(data, sites, view)

    def html(self, data, page):
        m = data["mpi_profile"]
        if not m["mpi"]:
            return []
        sites = m["callsites"][:HTML_SITES]
        parts = [
            "<h2>MPI call sites</h2>",
            html_table(
                [
                    [
                        c["id"],
                        c["function"],
                        c["where"],
                        c["calls"],
                        _t(c["time_s"]),
                        f"{c['app_pct']:.2f}",
                        f"{c['mpi_pct']:.2f}",
                        f"{c['cov']:.2f}",
                        c["ranks"],
                    ]
                    for c in sites
                ],
                [
                    "id",
                    "function",
                    "location",
                    "calls",
                    "time",
                    "App % (of the app time)",
                    "MPI % (of the MPI time)",
                    "COV",
                    "ranks",
                ],
            ),
        ]
        if m.get("counters"):
            evs = m["counters"]
            parts.append("<h2>Counters per call site</h2>")
            parts.append(
                html_table(
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
                    ["id", "function", "location"]
                    + [f"{ev} {w}" for ev in evs for w in ("inside", "before")],
                )
            )
        return parts


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
        [
            [
                r["rank"],
                r["host"],
                _t(r["app_s"]),
                _t(r["mpi_s"]),
                f"{r['mpi_pct']:.2f}",
                f"{r['outside_pct']:.2f}",
                r["calls"],
            ]
            for r in shown
        ],
        ["rank", "host", "app", "MPI", "MPI%", "outside%", "calls"],
        [">", "<", ">", ">", ">", ">", ">"],
        view.width,
    )
    out += more_rows(more, "ranks with less MPI time", f"{MORE}, or --json")
    mp = m["mpi_pct"]
    out.append(
        f"  MPI%: min {mp['min']:.2f}  mean {mp['mean']:.2f}  max {mp['max']:.2f}  "
        f"stdev {mp['stdev']:.2f}"
    )
    out.append(
        f"  outside MPI: Avg/Max {m['outside_mpi_s']['avg_over_max']:.2f} "
        "(1.00 = perfectly balanced computation)"
    )
    return out


def _balance(m, width):
    """Extrae-style balance table: as many functions as fit."""
    fns = m["functions"][: min(m.get("top", 20), 8)]
    if not fns:
        return []
    out = ["", "Balance: % of each rank's app time (across ranks)"]
    cols = [("Outside MPI", m["outside_mpi_pct"])] + [
        (f["name"], f["pct_of_app_per_rank"]) for f in fns
    ]
    stats = (("Average", "mean"), ("Maximum", "max"), ("Minimum", "min"), ("StDev", "stdev"))
    while True:
        stat_rows = [[label] + [f"{c[1][key]:.2f}%" for c in cols] for label, key in stats]
        stat_rows.append(["Avg/Max"] + [f"{c[1]['avg_over_max']:.2f}" for c in cols])
        table = text_table(stat_rows, [""] + [c[0] for c in cols], width=None)
        if width is None or len(cols) <= 2 or max(map(len, table)) <= width:
            break
        cols.pop()
    return (
        out
        + table
        + more_rows(len(fns) + 1 - len(cols), "functions", "--full, or a wider terminal")
    )


def _counters(data, sites, view):
    """The counters (--counters) per call site (counts, then rates) and per rank, and
    the events that could not be counted."""
    m, width = data["mpi_profile"], view.width
    out = []
    left_out = data.get("counters_not_counted") or []
    if left_out:
        out += [""] + textwrap.wrap(
            "Counters not counted (they cannot be counted here): "
            + ", ".join(f"{c['event']} ({c['why']})" for c in left_out),
            width or 10**6,
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
    if not m.get("counters"):
        return out
    evs = m["counters"]
    out += [
        "",
        "Counters per call site (summed over ranks; inside the calls / before them, "
        "since the thread's previous MPI call)",
    ]
    header = ["id", "function", "location"]
    for ev in evs:
        header += [f"{ev} in", f"{ev} before"]
    out += text_table(
        [
            [c["id"], c["function"], c["where"]]
            + [x for ev in evs for x in (c["counters"][ev]["inside"], c["counters"][ev]["before"])]
            for c in sites
            if "counters" in c
        ],
        header,
        [">", "<", "<"] + [">"] * (2 * len(evs)),
        width,
    )
    rated = [c for c in sites if "counters_time_s" in c]
    if rated:
        out += [
            "",
            "Counter rates per call site (per second of the time the counts cover: "
            "inside the calls / before them)",
        ]
        header = ["id", "function", "location", "s in", "s before"]
        for ev in evs:
            header += [f"{ev}/s in", f"{ev}/s before"]
        out += text_table(
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
            header,
            [">", "<", "<"] + [">"] * (2 + 2 * len(evs)),
            width,
        )
    out += ["", "Counters per rank (inside and between MPI calls, MPI_Init to MPI_Finalize)"]
    counted = [r for r in m["per_rank"] if "counters" in r]
    shown, more = cut_rows(counted, _rank_limit(view))
    out += text_table(
        [[r["rank"]] + [r["counters"][ev] for ev in evs] for r in shown],
        ["rank"] + evs,
        [">"] * (1 + len(evs)),
        width,
    )
    return out + more_rows(more, "ranks", f"{MORE}, or --json")


def _rate(x):
    """A counter rate per second, three digits and an SI prefix."""
    if x is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}"
    return f"{x:.3g}"


SECTION = MpiProfile()

"""Wait states (perfweave analyze's analysis/waitstates.json): the patterns with time,
largest first, each with its worst call path and ranks."""

from importlib import resources

import numpy as np

from perfweave.analysis.metrics import HOW, IDS, PATTERNS, ROOT_CAUSE, root_of
from perfweave.errors import FormatError
from perfweave.model.table import records
from perfweave.readers.results import WAITSTATES_FILE, read_waitstates
from perfweave.report.widgets import (
    MORE,
    cut_rows,
    escape,
    html_table,
    more_rows,
    shorten,
    text_table,
    wrap_line,
)
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

TOP = 8  # patterns, and ranks per pattern, in the report


class WaitStates(Section):
    name = "wait_states"

    def collect(self, experiment, report, top):
        ws = summarize(experiment.path)
        return {} if ws is None else {"wait_states": ws}

    def text(self, data, view):
        ws = data.get("wait_states")
        if not ws or not data["mpi_profile"]["mpi"]:
            return []
        if ws.get("error"):
            return ["", f"Wait states: not shown ({ws['error']})"]
        out = [
            "",
            "Wait states (perfweave analyze"
            + ("" if ws["complete"] else "; incomplete, see its notes")
            + ")",
        ]
        out += clock_lines(ws.get("clock"), brief=view.max_rows is not None)
        if not ws["patterns"]:
            return out + ["  none found"]
        shown, more = cut_rows(ws["patterns"], view.max_rows)
        out += text_table(
            [[p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]] for p in shown],
            ["pattern", "time", "%", "largest at"],
            ["<", ">", ">", "<"],
            view.width,
        )
        out += more_rows(more, "wait states", f"{MORE}, or perfweave analyze")
        out += root_cause_lines(ws.get("root_causes"), view)
        return out + (cube_lines(ws.get("cube"), view.width) if view.full else [])

    def html(self, data, page):
        ws = data.get("wait_states")
        if not ws or not ws.get("patterns"):
            return []
        return [
            "<h2>Wait states</h2>",
            *(f"<p>{escape(line.strip())}</p>" for line in clock_lines(ws.get("clock"))),
            html_table(
                [
                    [p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]]
                    for p in ws["patterns"]
                ],
                ["pattern", "time", "%", "largest at"],
            ),
            *root_cause_html(ws.get("root_causes")),
            *cube_html(ws.get("cube"), page),
        ]


def clock_lines(clock, brief=False):
    """The clock condition of the analysis, one line (none when it was not checked;
    brief: none when it holds and nothing was corrected)."""
    if not clock or not clock.get("checked"):
        return []
    n = clock.get("violations", 0)
    if brief and not n and not clock.get("corrected"):
        return []
    line = f"  clock condition: {n:,} violations"
    if n:
        line += (
            f" ({clock.get('p2p', 0):,} messages received before sent, "
            f"{clock.get('collective', 0):,} collectives; largest "
            f"{_t(clock.get('largest_s', 0.0))})"
        )
    if clock.get("corrected"):
        line += "; wait states on corrected times (--correct-clocks)"
    elif n:
        line += "; perfweave analyze --correct-clocks corrects them"
    return [line]


def root_cause_lines(rc, view):
    """The root causes of the waiting and the critical path, as text lines: the largest
    cause in a line, the table of them in the --full report."""
    if not rc or not rc["causes"]:
        return []
    top = rc["causes"][0]
    if view.max_rows is not None:
        # the figures first; the call path takes what the terminal leaves, cut in the
        # middle (both ends tell call paths apart)
        head = (
            f"  most waiting caused by rank {top['rank']} ({_t(top['cost_s'])}), critical "
            f"path {_t(rc['critical_path_s'])}, at "
        )
        room = None if view.width is None else max(view.width - len(head), 8)
        return [head + shorten(top["callpath"], room)]
    out = ["", "  " + _CAUSES_TITLE]
    out += text_table(*_cause_table(rc), ["<", "<", ">", ">", ">", ">"], view.width)
    line = _critical_path_line(rc)
    return out + (["  " + line] if line else [])


_CAUSES_TITLE = "Who caused the waiting (delay analysis; perfweave analyze for all)"


def _cause_table(rc):
    """(rows, header) of the root causes, as the text and HTML reports show them."""
    rows = [
        [
            f"rank {c['rank']}",
            c["callpath"],
            _t(c["cost_s"]),
            _t(c["short_s"]),
            _t(c["long_s"]),
            "" if c["saves_s"] is None else _t(c["saves_s"]),
        ]
        for c in rc["causes"]
    ]
    return rows, ["cause", "at", "waiting caused", "directly", "propagated", "ideal replay saves"]


def _critical_path_line(rc):
    top = rc["critical_path"][0] if rc["critical_path"] else None
    if not top:
        return None
    return (
        f"Critical path {_t(rc['critical_path_s'])}; most of it at {top['callpath']} "
        f"on rank {top['rank']} ({_t(top['time_s'])})"
    )


def root_cause_html(rc):
    """The root causes' table and the critical path line as HTML (the --full text's)."""
    if not rc or not rc["causes"]:
        return []
    line = _critical_path_line(rc)
    return [
        f"<h3>{escape(_CAUSES_TITLE)}</h3>",
        html_table(*_cause_table(rc)),
        *([f"<p>{escape(line)}</p>"] if line else []),
    ]


def summarize(path, top=TOP):
    """Summary of analysis/waitstates.json (perfweave analyze; read as a
    model.waitstates.WaitStatesResult), or None: the wait-state patterns with time,
    largest first, each with its worst call path."""
    try:
        res = read_waitstates(path)
    except FileNotFoundError:
        return None
    except FormatError as e:  # the rest of the report stands without it
        return {
            "file": str(WAITSTATES_FILE),
            "error": str(e),
            "complete": False,
            "patterns": [],
            "notes": [],
        }
    names = dict(zip(res.callpaths["id"].tolist(), res.callpaths["name"].tolist()))
    rows = []
    for m in records(res.metrics):
        if m["id"] not in PATTERNS or not m["total"]:
            continue
        per_path, per_rank = {}, {}
        mine = res.values[res.values["metric"] == m["id"]]
        for p, r, v in zip(*(mine[k].tolist() for k in ("callpath", "rank", "value"))):
            per_path[p] = per_path.get(p, 0) + v
            per_rank[r] = per_rank.get(r, 0) + v
        if not per_path:
            continue
        worst = max(per_path, key=per_path.get)
        rows.append(
            {
                "id": m["id"],
                "name": m["name"],
                "time_s": m["total"],
                "pct": m["pct"],
                "callpath": names.get(worst, ""),
                "callpath_s": per_path[worst],
                "ranks": sorted(([r, v] for r, v in per_rank.items() if v), key=lambda x: -x[1])[
                    :top
                ],
            }
        )
    rows.sort(key=lambda r: -r["time_s"])
    out = {
        "file": str(path / WAITSTATES_FILE),
        "complete": res.complete,
        "patterns": rows[:top],
        "notes": res.notes,
        "clock": {
            k: res.clock[k]
            for k in ("checked", "violations", "p2p", "collective", "largest_s", "corrected")
            if k in res.clock
        },
    }
    causes = root_causes(res, names)
    if causes:
        out["root_causes"] = causes
    out["cube"] = cube(res, names)
    out["cube"]["selected"] = rows[0]["id"] if rows else "time"
    return out


# values of the three-pane view (metric x call path x rank) at most; a larger analysis
# shows its largest call paths' values and says so
CUBE_VALUES = 200_000


def cube(res, names, most=CUBE_VALUES):
    """The wait-state analysis as CUBE's three panes draw it: the time metrics with a value
    (the metric tree below Time: each metric's value includes its children's), the call
    paths with a value and their ancestors, and the values table of those metrics (one
    [call path, rank, seconds] per non-zero value, at its own call path: a path's
    inclusive value is its subtree's sum). {"total_s" (Time: the % base), "ranks",
    "metrics": [{id, name, parent, depth, value_s (inclusive), exclusive_s (less its
    children's), pct (of total_s)}], "callpaths": [{id, parent, name}] (tree order),
    "values": {metric id: [[call path, rank, seconds], ...]}, "cut": values left out}."""
    ms = [
        m
        for m in records(res.metrics)
        if m["id"] in IDS
        and root_of(m["id"]) == "time"
        and m["unit"] == "s"
        and np.isfinite(m["total"])
        and m["total"] > 0
    ]
    shown = {m["id"] for m in ms}
    v = res.values[np.isin(res.values["metric"], list(shown)) & np.isfinite(res.values["value"])]
    cut = 0
    if len(v) > most:  # keep the call paths with the most time
        paths, inv = np.unique(v["callpath"], return_inverse=True)
        per = np.bincount(inv, np.abs(v["value"]))
        order = np.argsort(-per, kind="stable")
        fits = np.cumsum(np.bincount(inv)[order]) <= most
        sel = np.isin(v["callpath"], paths[order[fits]])
        cut, v = int((~sel).sum()), v[sel]
    children = {}
    for m in ms:
        children.setdefault(m["parent"], []).append(m["id"])
    total = next((m["total"] for m in ms if m["id"] == "time"), 0.0)
    parent = _parents(res.callpaths)
    wanted = set()
    for p in set(v["callpath"].tolist()):
        while p is not None and p not in wanted:
            wanted.add(p)
            p = parent.get(p)
    values = {}
    for m in ms:
        mine = v[v["metric"] == m["id"]]
        values[m["id"]] = [
            [p, r, x] for p, r, x in zip(*(mine[k].tolist() for k in ("callpath", "rank", "value")))
        ]
    byid = {m["id"]: m for m in ms}
    return {
        "total_s": total,
        "ranks": res.ranks["rank"].tolist(),
        "metrics": [
            {
                "id": m["id"],
                "name": m["name"],
                "parent": m["parent"],
                "depth": m["depth"],
                "value_s": m["total"],
                "exclusive_s": _exclusive(m, [byid[c] for c in children.get(m["id"], [])]),
                "pct": _finite(m["total"] / total * 100.0 if total else 0.0),
            }
            for m in ms
        ],
        "callpaths": [
            {"id": i, "parent": parent.get(i), "name": names.get(i) or str(i)}
            for i in _tree_order(parent, wanted)
        ],
        "values": values,
        "cut": cut,
    }


def _exclusive(m, children):
    """A metric's value less its children's; 0 where only the sum's rounding is left."""
    x = m["total"] - sum(c["total"] for c in children)
    return 0.0 if abs(x) <= 1e-9 * abs(m["total"]) else _finite(x)


def _finite(x):
    """x, or 0 where a damaged file made it infinite."""
    return x if np.isfinite(x) else 0.0


def _parents(callpaths):
    """{call path: its parent} of the paths whose parents lead to a root (a damaged file's
    unknown parent or cycle makes the path a root)."""
    given = dict(zip(callpaths["id"].tolist(), callpaths["parent"].tolist()))
    out = {}
    for i in given:
        seen, p = {i}, given[i]
        while p is not None and p in given and p not in seen:
            seen.add(p)
            p = given[p]
        out[i] = given[i] if p is None else None
    return out


def _tree_order(parent, wanted):
    """The call paths of wanted, depth first from the roots, children by id."""
    kids = {}
    for i in sorted(wanted):
        kids.setdefault(parent.get(i), []).append(i)
    out, stack = [], list(reversed(kids.get(None, [])))
    while stack:
        i = stack.pop()
        out.append(i)
        stack += reversed(kids.get(i, []))
    return out


def cube_sums(cb):
    """{metric id: {call path: (inclusive s, exclusive s, {rank: inclusive s})}} of a
    cube (the three panes' numbers): a call path's inclusive value is its subtree's."""
    parent = {c["id"]: c["parent"] for c in cb["callpaths"]}
    out = {}
    for mid, rows in cb["values"].items():
        per = {}
        for p, r, x in rows:
            q, own = p, True
            while q is not None:
                inc, exc, ranks = per.get(q, (0.0, 0.0, {}))
                ranks[r] = ranks.get(r, 0.0) + x
                per[q] = (inc + x, exc + (x if own else 0.0), ranks)
                q, own = parent.get(q), False
        out[mid] = per
    return out


CUBE_TITLE = "Wait states by metric, call path and rank (% of all time)"


def cube_lines(cb, width):
    """The three panes as text (the --full report): each metric's value, then its call
    paths' inclusive and exclusive values, each with its ranks' inclusive values."""
    if not cb or not cb["metrics"]:
        return []
    total = cb["total_s"]
    sums = cube_sums(cb)

    def pct(x):
        return f"{100.0 * x / total:.2f} %" if total else "0.00 %"

    out = ["", "  " + CUBE_TITLE]
    if cb["cut"]:
        out.append(f"  ({cb['cut']:,} values of smaller call paths left out)")
    for m in cb["metrics"]:
        out.append(
            f"  {'  ' * m['depth']}{m['name']}: {_t(m['value_s'])} ({pct(m['value_s'])}), "
            f"exclusive {_t(m['exclusive_s'])} ({pct(m['exclusive_s'])})"
        )
        per = sums.get(m["id"], {})
        for c in cb["callpaths"]:
            if c["id"] not in per:
                continue
            inc, exc, ranks = per[c["id"]]
            out.append(
                "    "
                + shorten(
                    f"{_t(inc)} ({pct(inc)}), exclusive {_t(exc)} ({pct(exc)}) at {c['name']}",
                    None if width is None else width - 4,
                )
            )
            out += wrap_line(
                "ranks", ", ".join(f"{r} {_t(x)}" for r, x in sorted(ranks.items())), width
            )
    return out


def cube_html(cb, page):
    """The three panes (metric tree, call path tree, ranks) that templates/cube.js draws
    from the cube put in page.data["cube"]: a click on a metric shows it over the call
    paths, a click on a call path shows it over the ranks."""
    if not cb or not cb["metrics"]:
        return []
    page.data["cube"] = cb
    note = (
        f"<p class=note>{cb['cut']:,} values of smaller call paths left out</p>"
        if cb["cut"]
        else ""
    )
    return [
        f"<h3>{escape(CUBE_TITLE)}</h3>",
        "<p>Click a metric to see it over the call paths, a call path to see it over the "
        "ranks; values include their children's (metric tree, call tree), exclusive "
        "values do not.</p>",
        note,
        '<div id="pw-cube-view" class="cube"><div class="pane" id="pw-cube-metrics"></div>'
        '<div class="pane" id="pw-cube-paths"></div>'
        '<div class="pane" id="pw-cube-ranks"></div></div>',
        f"<style>{resource('cube.css')}</style><script>{resource('cube.js')}</script>",
    ]


def resource(name):
    """A file of report/templates/ as text."""
    return resources.files("perfweave.report").joinpath("templates", name).read_text()


ROOT_TOP = 3  # causes of waiting, and critical-path entries, in the report


def root_causes(res, names, top=ROOT_TOP):
    """The delay analysis' largest causes of waiting (rank, call path: short- and
    long-term costs, and what removing the delay saves on the ideal replay) and the
    critical path's largest entries, or None when the analysis has none."""
    ids = set(res.metrics["id"].tolist())
    if "delay" not in ids:  # an analysis by an older perfweave, or without root causes
        return None
    byid = {m["id"]: m for m in records(res.metrics)}

    def per(mids):
        out = {}
        mine = res.values[np.isin(res.values["metric"], list(mids))]
        for p, r, v in zip(*(mine[k].tolist() for k in ("callpath", "rank", "value"))):
            out[(r, p)] = out.get((r, p), 0.0) + v
        return out

    stored = [m for m in ROOT_CAUSE if m.startswith("delay_") and HOW[m] == "stored"]
    short = per([m for m in stored if m != "delay_savings" and not m.endswith("_longterm")])
    long_ = per([m for m in stored if m.endswith("_longterm")])
    saves = per(["delay_savings"])
    keys = sorted(set(short) | set(long_), key=lambda k: -(short.get(k, 0) + long_.get(k, 0)))
    causes = [
        {
            "rank": r,
            "callpath": names.get(p, ""),
            "cost_s": short.get((r, p), 0.0) + long_.get((r, p), 0.0),
            "short_s": short.get((r, p), 0.0),
            "long_s": long_.get((r, p), 0.0),
            "saves_s": saves.get((r, p)),
        }
        for r, p in keys
        if short.get((r, p), 0) + long_.get((r, p), 0) >= 1e-6
    ][:top]
    cp = per(["critical_path"])
    return {
        "cost_s": byid["delay"]["total"],
        "pct": byid["delay"]["pct"],
        "causes": causes,
        "critical_path_s": byid["critical_path"]["total"],
        "critical_path": [
            {"rank": r, "callpath": names.get(p, ""), "time_s": v}
            for (r, p), v in sorted(cp.items(), key=lambda kv: -kv[1])[:top]
        ],
    }


SECTION = WaitStates()

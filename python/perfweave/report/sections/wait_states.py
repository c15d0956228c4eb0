"""Wait states (perfweave analyze's analysis/waitstates.json): the patterns with time,
largest first, each with its worst call path and ranks."""

from perfweave.analysis.metrics import PATTERNS
from perfweave.errors import FormatError
from perfweave.model.table import records
from perfweave.readers.results import WAITSTATES_FILE, read_waitstates
from perfweave.report.widgets import MORE, cut_rows, escape, html_table, more_rows, text_table
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
        out += clock_lines(ws.get("clock"))
        if not ws["patterns"]:
            return out + ["  none found"]
        shown, more = cut_rows(ws["patterns"], view.max_rows)
        out += text_table(
            [[p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]] for p in shown],
            ["pattern", "time", "%", "largest at"],
            ["<", ">", ">", "<"],
            view.width,
        )
        return out + more_rows(more, "wait states", f"{MORE}, or perfweave analyze")

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
        ]


def clock_lines(clock):
    """The clock condition of the analysis, one line (none when it was not checked)."""
    if not clock or not clock.get("checked"):
        return []
    n = clock.get("violations", 0)
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
    return {
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


SECTION = WaitStates()

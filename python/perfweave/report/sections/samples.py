"""Where the time goes, from the call-stack samples (analysis/samples/): the call tree,
source lines and functions with their activity split and balance across ranks, and the
phases of the activity over time; in the HTML a flame graph and activity strips."""

import textwrap

from perfweave.analysis import phases, samples
from perfweave.errors import FormatError
from perfweave.report.widgets import (
    MORE,
    activity_name,
    cut_rows,
    escape,
    html_table,
    more_rows,
    shorten,
    text_table,
)
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

HTML_ROWS = 15  # rows of each table of the HTML page


class Sampling(Section):
    name = "samples"

    def collect(self, experiment, report, top):
        try:
            res = samples.analyze(
                experiment.samples,
                windows=phases.windows(experiment.profile),
                regions=experiment.regions.intervals,
            )
            sm = None if res is None else res.to_json(top)
        except FormatError as e:
            sm = {"error": str(e)}
        return {"samples": sm}

    def text(self, data, view):
        sm = data.get("samples")
        if not sm:
            return []
        if sm.get("error"):
            return ["", f"Sampled time: not shown ({sm['error']})"]
        max_rows, width = view.max_rows, view.width
        out = [""] + textwrap.wrap(_title(sm), width or 10**6, subsequent_indent="  ")
        out += [f"  {line}" for line in _dropped(sm)]
        tree = sm.get("call_tree") or []
        evs = sm.get("counters") or []
        many = len(sm["ranks"]) > 1
        if tree:
            out.append(
                "  call tree (inclusive % / self %"
                + (", [per rank min-max %]" if many else "")
                + (f", {{{', '.join(evs)} inclusive}}" if evs else "")
                + "):"
            )
            shown, more = cut_rows(tree, None if max_rows is None else max_rows + 1)
            for n in shown:
                tail = (f"   [{_min_max(n)}]" if many else "") + (
                    " {" + ", ".join(_tree_counters(n, evs)) + "}"
                    if evs and "counters_inclusive" in n
                    else ""
                )
                head = f"  {n['inclusive_pct']:6.1f} {n['exclusive_pct']:6.1f}  {'  ' * n['depth']}"
                room = None if width is None else max(width - len(head) - len(tail), 12)
                out.append(head + shorten(n["name"], room) + tail)
            out += more_rows(more, "nodes", f"{MORE}, or --json")
        # the tree has each function's inclusive and self time: the tables by function
        # only in the full report
        tables = TABLES if max_rows is None else TABLES[1:2]
        for title, key in tables:
            rows, more = cut_rows(sm[key], 10 if max_rows is None else max_rows)
            if not rows:
                continue
            out += text_table(
                [_table_row(r, evs) for r in rows],
                _table_header(title, evs),
                [">", "<", "<", ">", ">"] + [">"] * len(evs),
                width,
            )
            out += more_rows(
                more,
                key.replace("lines", "source lines")
                + ("" if max_rows is None else "; functions by self and inclusive time"),
                f"{MORE}, or --json",
            )
        return out + _activity_phases(sm.get("timeline"), 12 if max_rows is None else max_rows)

    def html(self, data, page):
        sm = data.get("samples")
        page.data["samples"] = _script_data(sm)
        if not sm:
            return []
        if sm.get("error"):
            return [f"<p class=note>Sampled time: not shown ({escape(sm['error'])})</p>"]
        parts = [f"<h2>Where the time goes</h2><p>{escape(_title(sm))}</p>"]
        parts += [f"<p class=note>{escape(line)}</p>" for line in _dropped(sm)]
        parts += _views(sm)
        evs = sm.get("counters") or []
        for title, key in TABLES:
            parts.append(
                html_table(
                    [_table_row(r, evs) for r in sm[key][:HTML_ROWS]], _table_header(title, evs)
                )
            )
        return parts


def _title(sm):
    """The section's first line: how many samples, and the activities' shares."""
    act = ", ".join(f"{activity_name(k)} {v:.1f} %" for k, v in sm["activity_pct"].items() if v > 0)
    whole = ", start-up and shutdown included" if "phase_pct" in sm else ""
    return (
        f"Where the time goes ({sm['samples']} samples of {sm['processes']} processes"
        f"{whole}; every % here is of the samples: {act})"
    )


def _dropped(sm):
    drop = sm.get("dropped") or {}
    if not any(drop.values()):
        return []
    return [
        f"threads not sampled: {drop['threads']} (more than the runtime's "
        f"table), {drop['timers']} (no timer), {drop['memory']} (no memory)"
    ]


def _min_max(n):
    """A call-tree node's share of the samples over ranks: min-max %."""
    return f"{n['per_rank_pct']['min']:.0f}-{n['per_rank_pct']['max']:.0f}"


def _tree_counters(n, evs):
    return [str(n["counters_inclusive"].get(ev, 0)) for ev in evs]


def _by_activity(shares, digits=0):
    """A row's split by activity (% of its samples)."""
    return ", ".join(f"{activity_name(k)} {v:.{digits}f}" for k, v in shares.items())


def _table_header(title, evs):
    return ["%", title, "by activity (%)", "per rank min/mean/max %", "imbalance"] + evs


def _table_row(r, evs):
    pr = r["per_rank_pct"]
    return [
        f"{r['pct']:.1f}",
        r["name"],
        _by_activity(r["by_activity_pct"]),
        f"{pr['min']:.1f}/{pr['mean']:.1f}/{pr['max']:.1f}",
        f"{r['imbalance']:.2f}",
    ] + [r.get("counters", {}).get(ev, 0) for ev in evs]


TABLES = (
    ("functions (self)", "functions"),
    ("source lines (self)", "lines"),
    ("functions (inclusive)", "inclusive"),
)


def _activity_phases(tl, most=12):
    """The phases of the activity over time (bins with the same leading activity, mean
    over ranks, merged): the `most` longest, in time order."""
    phases_ = (tl or {}).get("phases") or []
    if not phases_:
        return []
    shown = sorted(
        sorted(phases_, key=lambda p: p["start_s"] - p["end_s"])[:most], key=lambda p: p["start_s"]
    )
    out = [
        f"  activity over time (leading activity, mean over ranks; "
        f"{len(tl['edges_s']) - 1} bins of {_t(tl['bin_s'])}):"
    ]
    out += [
        f"  {p['start_s']:8.2f}-{p['end_s']:.2f} s  {p['activity'].replace('_', ' ')} "
        f"{p['pct']:.0f} %"
        for p in shown
    ]
    out += more_rows(len(phases_) - len(shown), "shorter phases", f"{MORE}, or --json")
    return out


def _views(sm):
    """The flame graph and activity strips (drawn by templates/samples.js from the
    page's data) and the call tree as a collapsible table."""
    out = []
    tree = sm.get("call_tree") or []
    evs = sm.get("counters") or []
    if tree:
        out.append(
            "<h3>Flame graph (width: inclusive share of the samples; click a frame "
            "to zoom, the top bar to zoom out)</h3><p class=ctl>colour by "
            "<select id=pw-flame-mode><option value=activity>leading activity</option>"
            "<option value=imbalance>imbalance across ranks</option></select> "
            "<span id=pw-flame-legend class=legend></span></p>"
            "<div id=pw-flame class=flame></div>"
        )
        kids = {n["parent"] for n in tree}
        rows = []
        for n in tree:
            pr = n["per_rank_pct"]
            tog = (
                "<button class=tog aria-expanded=true>&#9662;</button>"
                if n["id"] in kids
                else "<span class=tog></span>"
            )
            by = _by_activity(n["by_activity_pct"], 1)
            extra = "".join(
                f"<td>{escape(x)}</td>"
                for x in (_tree_counters(n, evs) if "counters_inclusive" in n else [""] * len(evs))
            )
            rows.append(
                f'<tr data-depth="{n["depth"]}"><td style="padding-left:'
                f'{0.3 + 1.2 * n["depth"]:.1f}em">{tog}{escape(n["name"])}</td>'
                f"<td>{n['inclusive_pct']:.1f}</td><td>{n['exclusive_pct']:.1f}</td>"
                f"<td>{escape(by)}</td>"
                f"<td>{pr['min']:.1f} / {pr['mean']:.1f} / {pr['max']:.1f}</td>"
                f"<td>{_min_max(n)}</td>"
                f"<td>{n['imbalance']:.2f}</td><td>{escape(n['worst_rank'])}</td>{extra}</tr>"
            )
        head = "".join(
            f"<th>{x}</th>"
            for x in (
                "call tree",
                "inclusive %",
                "self %",
                "by activity (%)",
                "per rank min / mean / max %",
                "per rank min-max %",
                "imbalance",
                "worst rank",
                *(f"{ev} inclusive" for ev in evs),
            )
        )
        out.append(
            f"<h3>Call tree</h3><table class=tree id=pw-tree><thead><tr>{head}</tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>"
        )
    tl = sm.get("timeline")
    if tl and tl.get("activities"):
        out.append(
            f"<h3>Activity over time ({len(tl['ranks'])} ranks, "
            f"{len(tl['edges_s']) - 1} bins of {_t(tl['bin_s'])})</h3>"
            '<div class=chart id="pw-act-mean"></div>'
            "<p class=ctl>per rank: the leading activity of each bin, darker the larger "
            "its share <span id=pw-strip-legend class=legend></span></p>"
            '<canvas id="pw-act-ranks" class=strip></canvas>'
        )
        phases_ = _activity_phases(tl, len(tl.get("phases") or []))
        out += [f"<p>{escape(line.strip())}</p>" for line in phases_]
    return out


def _script_data(sm):
    """What templates/samples.js draws: the call tree and the activity over time, or
    None."""
    if not sm or sm.get("error"):
        return None
    return {
        "call_tree": sm.get("call_tree") or [],
        "timeline": sm.get("timeline"),
        "activity_pct": sm.get("activity_pct") or {},
    }


SECTION = Sampling()

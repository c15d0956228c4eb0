"""Presentation of a wait-state analysis (analysis/waitstates/): call path names with
source locations, and the text rendering of `perfweave analyze` — the metric tree with
totals and % of the total like Tables 2-3 of Hermanns et al. (IJHPCA 2012), then where
each wait state occurs (call path and ranks)."""

import os

import numpy as np

from perfweave.analysis.metrics import PATTERNS, ROOT_CAUSE
from perfweave.model.table import records
from perfweave.model.waitstates import split_site
from perfweave.symbols import Symbolizer


def name_paths(result, symbolizer=None):
    """Give every call path of the result (a WaitStatesResult) a readable name
    (outermost first, ' > ' between frames) and its leaf a function and where (file:line
    of an MPI call site). Symbols come from the objects named in the labels
    (addr2line)."""
    sym = symbolizer or Symbolizer()
    wanted = {}
    cps = result.callpaths
    for labels in cps["labels"]:
        for lab in labels:
            kind, _, rest = lab.partition(":")
            site = (
                rest.split("@", 1)[1]
                if kind == "M" and "@" in rest
                else rest
                if kind == "F"
                else ""
            )
            s = split_site(site) if site else None
            if s and s[0] not in ("?", ""):
                # a function address is looked up as itself; a call site's return
                # address as the byte before (Symbolizer subtracts 1)
                wanted.setdefault(s[0], set()).add(s[1] + (1 if kind == "F" else 0))
    locs = {}
    for obj, offs in wanted.items():
        offs = sorted(offs)
        for o, loc in zip(offs, sym.resolve(obj, offs)):
            locs[(obj, o)] = loc
    for i, labels in enumerate(cps["labels"]):
        names = [_label_name(lab, locs)[0] for lab in labels]
        cps["name"][i] = " > ".join(names[1:]) or names[0]
        leaf = _label_name(labels[-1], locs)
        cps["function"][i], cps["where"][i] = leaf[1], leaf[2]
    return result


def _label_name(lab, locs):
    """(display text, function, where) of one label."""
    kind, _, rest = lab.partition(":")
    if kind == "N":
        return rest, rest, ""
    if kind == "F":
        s = split_site(rest)
        if s:
            loc = locs.get((s[0], s[1] + 1))
            if loc and loc.function:
                return loc.function, loc.function, ""
            return f"{os.path.basename(s[0])}+{s[1]:#x}", "", ""
        return "?", "", ""
    if kind == "M":
        fn, _, site = rest.partition("@")
        s = split_site(site)
        where = ""
        if s:
            loc = locs.get((s[0], s[1]))
            if loc and loc.file and loc.line:
                where = f"{os.path.basename(loc.file)}:{loc.line}"
            elif loc and loc.function:
                where = loc.function
            else:
                where = f"{os.path.basename(s[0])}+{s[1]:#x}"
        return (f"{fn} @ {where}" if where else fn), fn, where
    return lab, "", ""


def _t(unit, v):
    if unit == "s":
        return f"{v:.6f} s" if abs(v) < 10 else f"{v:.3f} s"
    if unit == "bytes":
        return f"{int(v):,} B"
    return f"{int(v):,}"


def _shown(result):
    """The metric rows (dicts) of the wait-state patterns found, in the tree's order."""
    return [m for m in records(result.metrics) if m["id"] in PATTERNS and m["total"] > 0]


def _sums(rows, key):
    """{key value: the rows' values summed} of values-table rows."""
    keys, inv = np.unique(rows[key], return_inverse=True)
    return dict(zip(keys.tolist(), np.bincount(inv, rows["value"]).tolist()))


def render_per_rank(result, limit=64):
    """A rank x pattern table: each rank's time (and its share of its own time) in every
    wait state found, ranks with the most waiting first."""
    pats = _shown(result)
    if not pats:
        return "\nPer rank: no wait states\n"
    own = dict(zip(result.ranks["rank"].tolist(), result.ranks["time_s"].tolist()))
    table = {}
    for m in pats:
        for r, v in result.per_rank(m["id"]).items():
            table.setdefault(r, {})[m["id"]] = v
    top_level = [m for m in pats if m["parent"] not in {p["id"] for p in pats}]
    waited = {r: sum(v.get(m["id"], 0.0) for m in top_level) for r, v in table.items()}
    ranks = sorted(own, key=lambda r: -waited.get(r, 0.0))
    head = ["rank", "time", "waiting", "%"] + [m["name"] for m in pats]
    rows = []
    for r in ranks[:limit]:
        w = waited.get(r, 0.0)
        rows.append(
            [str(r), _t("s", own[r]), _t("s", w), f"{100 * w / own[r]:.2f}" if own[r] else "0.00"]
            + [_t("s", table.get(r, {}).get(m["id"], 0.0)) for m in pats]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out = [
        "",
        "Wait states per rank (waiting: the patterns that are not part of another; "
        "most waiting first)",
    ]
    out.append("  " + "  ".join(h.rjust(w) for h, w in zip(head, widths)))
    out += ["  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    if len(ranks) > limit:
        out.append(f"  ({len(ranks) - limit} more ranks; --json for all)")
    return "\n".join(out) + "\n"


def render_clock(result, top=5):
    """The clock condition's lines of the analysis text (analysis/waitstates/clockcheck.py):
    the violations of the top pairs, and the moves of the ranks moved most."""
    clock = result.clock
    names = dict(zip(result.callpaths["id"].tolist(), result.callpaths["name"].tolist()))
    if not clock or not clock.get("checked"):
        return []
    n = clock["violations"]
    out = [
        f"  clock      {n:,} clock-condition violations"
        + (
            f" ({clock['p2p']:,} messages, {clock['collective']:,} collectives; largest "
            f"{_t('s', clock['largest_s'])})"
            if n
            else ""
        )
    ]
    for p in clock["pairs"][:top]:
        out.append(
            f"    {p['count']:>8,} {p['kind']:<10} rank {p['from']} -> {p['to']}, largest "
            f"{_t('s', p['largest_s'])}, at {names.get(p['callpath']) or p['callpath']}"
        )
    if len(clock["pairs"]) > top:
        out.append(f"    ({len(clock['pairs']) - top} more pairs; --json for all)")
    c = clock.get("correction")
    if c:
        out.append(
            f"  corrected  {c['method']}, minimum latency {_t('s', c['min_latency_s'])}, "
            f"{c['passes']} pass{'es' if c['passes'] != 1 else ''}; violations left "
            f"{c['violations_after']:,}"
        )
        moved = sorted(
            (r for r in c["ranks"] if r["moved"]), key=lambda r: (-r["max_s"], r["rank"])
        )
        if not moved:
            out.append("    no event moved")
        for r in moved[:top]:
            out.append(
                f"    rank {r['rank']:>5}: {r['moved']:,} events moved, max "
                f"{_t('s', r['max_s'])}, mean {_t('s', r['mean_s'])}"
            )
        if len(moved) > top:
            out.append(f"    ({len(moved) - top} more ranks; --json for all)")
    return out


def render(result, top=5, width=100):
    """The analysis as text; call path names shortened in the middle and notes wrapped
    so that no line is wider than width (None: names whole; --json has them whole)."""
    from perfweave.report.widgets import shorten, wrap_line

    def name(p, indent):
        return shorten(paths.get(p) or str(p), None if width is None else width - indent)

    out = [f"perfweave analyze: {result.experiment}"]
    a = result.analysis
    nranks = len(result.ranks)
    out.append(
        f"  traces     {nranks} of {result.world_size} ranks, "
        f"{result.events:,} events; analysed in "
        f"{a.get('load_s', 0) + a.get('patterns_s', 0):.2f} s "
        f"({a.get('processes', 1)} process{'es' if a.get('processes', 1) != 1 else ''})"
    )
    c = result.counts
    out.append(
        f"  matched    {c['messages']:,} messages, {c['collectives']:,} collective "
        f"operations, {c['fences']:,} fences, {c['access_epochs']:,} access and "
        f"{c['exposure_epochs']:,} exposure epochs"
    )
    out.append(f"  state      {'complete' if result.complete else 'INCOMPLETE'}")
    out += render_clock(result, top)
    for n in result.notes:
        out += wrap_line("note", n, width)
    metrics = records(result.metrics)
    byid = {m["id"]: m for m in metrics}
    # the critical path is the run's length once computed: 0 where the root causes were
    # not (a large trace, or --no-root-causes: docs/wait-states.md), whose metrics are
    # left out
    no_causes = not byid.get("critical_path", {}).get("total")
    rows = []
    for m in metrics:
        parent = byid.get(m["parent"]) if m["parent"] else None
        if m["total"] == 0 and parent is not None and parent["total"] == 0:
            continue
        if no_causes and m["id"] in ROOT_CAUSE:
            continue
        rows.append(("  " * m["depth"] + m["name"], _t(m["unit"], m["total"]), f"{m['pct']:.2f}"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    out += ["", f"  {'Metric':{w0}}  {'value':>{w1}}  {'%':>6}"]
    out += [f"  {a_:{w0}}  {b:>{w1}}  {c_:>6}" for a_, b, c_ in rows]

    # ---- where the wait states are ----
    paths = dict(zip(result.callpaths["id"].tolist(), result.callpaths["name"].tolist()))
    shown = _shown(result)
    if shown:
        out += ["", "Wait states: where (call path) and who (ranks)"]
    for m in shown:
        per_path = {}
        v = result.values_of(m["id"])
        for p, r, x in zip(*(v[k].tolist() for k in ("callpath", "rank", "value"))):
            per_path.setdefault(p, {})[r] = per_path.get(p, {}).get(r, 0) + x
        out.append(f"  {m['name']}: {_t('s', m['total'])} ({m['pct']:.2f}% of time)")
        for p, ranks in sorted(per_path.items(), key=lambda kv: -sum(kv[1].values()))[:top]:
            tot = sum(ranks.values())
            worst = max(ranks, key=ranks.get)
            mean = tot / max(nranks, 1)
            out.append(f"    {_t('s', tot):>12}  {name(p, 18)}")
            out.append(
                f"    {'':>12}  ranks {len(ranks)}; max {_t('s', ranks[worst])} on "
                f"rank {worst}; mean over all ranks {_t('s', mean)}"
            )
        if len(per_path) > top:
            out.append(f"    ({len(per_path) - top} more call paths; --top N)")
    counts = [m for m in metrics if m["id"] == "mpi_rma_pairsync_count" and m["total"]]
    for m in counts:
        un = byid["mpi_rma_pairsync_unneeded_count"]
        out += [
            "",
            f"Pair-wise one-sided synchronizations: {int(m['total']):,}, of which "
            f"unneeded {int(un['total']):,} ({un['pct']:.1f}%)",
        ]
        per_path = _sums(result.values_of(un["id"]), "callpath")
        for p, v in sorted(per_path.items(), key=lambda kv: -kv[1])[:top]:
            out.append(f"    {int(v):>12,}  {name(p, 18)}")
    return "\n".join(out) + "\n"

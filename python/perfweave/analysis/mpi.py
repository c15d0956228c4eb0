"""MPI profile analysis: per-rank MPI time and balance, per-function aggregates,
call sites across ranks, message sizes.

Everything is computed on the profile's arrays with numpy grouping; the result is an
MpiProfileResult, whose tables are numpy structured arrays (model/table.py) and whose
to_json() is the report's "mpi_profile" (docs/mpi-profile.md).
"""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import FAMILIES, HIST_BUCKETS
from perfweave.model.table import column, records, table
from perfweave.model.profile import BRACKET, state_name
from perfweave.symbols import Symbolizer


def stats(values):
    """min, mean, max, stdev (population) and avg_over_max (mean / max) of values."""
    v = np.asarray(values, dtype=float)
    if not len(v):
        return {"min": 0.0, "mean": 0.0, "max": 0.0, "stdev": 0.0, "avg_over_max": 0.0}
    mx = float(v.max())
    return {
        "min": float(v.min()),
        "mean": float(v.mean()),
        "max": mx,
        "stdev": float(v.std()),
        "avg_over_max": float(v.mean() / mx) if mx > 0 else 1.0,
    }


def _group(keys):
    """Group rows by key columns: returns (unique key rows, inverse index)."""
    if not len(keys):
        return keys, np.zeros(0, dtype=np.int64)
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, inv.reshape(-1)


def _stack_ids(profile):
    """An id per distinct deeper stack (0 = none) for each site row."""
    ids = np.zeros(len(profile.sites), dtype=np.int64)
    table = {}
    stacks = [()]
    for i in np.nonzero(profile.sites["nframes"] > 0)[0]:
        s = profile.sites[i]
        f = profile.frames[s["first_frame"] : s["first_frame"] + s["nframes"]]
        key = tuple(zip(f["object"].tolist(), f["offset"].tolist()))
        if key not in table:
            table[key] = len(stacks)
            stacks.append(key)
        ids[i] = table[key]
    return ids, stacks


def _region(ranks):
    """The MPI_Pcontrol region of interest (profile version 5: docs/pop.md): the most
    intervals a rank opened, the longest rank's region and app time (s); None when no
    rank marked one."""
    if (
        "region_intervals" not in (ranks.dtype.names or ())
        or not (ranks["region_intervals"] > 0).any()
    ):
        return None
    return {
        "intervals": int(ranks["region_intervals"].max()),
        "region_s": float(ranks["region_ns"].max()) / 1e9,
        "app_s": float(ranks["app_ns"].max()) / 1e9,
    }


def analyze(profile, top=20, symbolizer=None):
    symbolizer = symbolizer or Symbolizer()
    ranks = profile.ranks[profile.ranks["rank"] >= 0] if profile.mpi else profile.ranks
    ranks = np.sort(ranks, order="rank")
    nranks = len(ranks)
    app_s = ranks["app_ns"] / 1e9
    mpi_s = ranks["mpi_ns"] / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        mpi_pct = np.where(app_s > 0, 100.0 * mpi_s / app_s, 0.0)
    total_app = float(app_s.sum())
    total_mpi = float(mpi_s.sum())
    rank_pos = {int(r): i for i, r in enumerate(ranks["rank"])}

    per_rank = [
        {
            "rank": int(r["rank"]),
            "host": profile.hosts[r["host"]] if 0 <= r["host"] < len(profile.hosts) else "?",
            "pid": int(r["pid"]),
            "state": state_name(int(r["state"])),
            "app_s": float(a),
            "mpi_s": float(m),
            "mpi_pct": float(p),
            "outside_pct": float(100.0 - p) if a > 0 else 0.0,
            "calls": int(r["mpi_calls"]),
            "threads": int(r["nthreads"]),
            "table_resident_bytes": int(r["table_resident"]),
            "init_s": float((r["t_init_leave"] - r["t_init_enter"]) / 1e9),
            "clock_offset_init_s": float(r["offset_init_ns"] / 1e9),
            "clock_offset_fini_s": float(r["offset_fini_ns"] / 1e9),
            "clock_offset_error_s": float(
                max(r["offset_init_err_ns"], r["offset_fini_err_ns"]) / 1e9
            ),
        }
        for r, a, m, p in zip(ranks, app_s, mpi_s, mpi_pct)
    ]

    if profile.counters:  # per rank: counted inside and between MPI calls
        c = profile.counts
        crank = profile.sites["rank"][c["site"]] if len(c) else np.zeros(0, np.int64)
        for p in per_rank:
            mine = crank == p["rank"]
            p["counters"] = {
                ev: int(
                    c["inside"][mine & (c["event"] == e)].sum()
                    + c["before"][mine & (c["event"] == e)].sum()
                )
                for e, ev in enumerate(profile.counters)
            }

    # ---- sites: one id per (function, caller object, caller offset, deeper stack) ----
    sites = profile.sites
    mpi_fns = profile.function_ids("mpi")  # other modules' calls are theirs to analyse
    keep = np.isin(sites["rank"], ranks["rank"]) & np.isin(sites["fn"], mpi_fns)
    bracket_fns = [i for i in mpi_fns if profile.functions[i] in BRACKET]
    in_app = keep & ~np.isin(sites["fn"], bracket_fns)
    stack_ids, stacks = _stack_ids(profile)
    s = sites[in_app]
    sid_stack = stack_ids[in_app]
    key = np.zeros(
        len(s), dtype=[("fn", "<i4"), ("object", "<i4"), ("offset", "<i8"), ("stack", "<i8")]
    )
    key["fn"], key["object"], key["offset"], key["stack"] = (
        s["fn"],
        s["object"],
        s["offset"],
        sid_stack,
    )
    ukeys, site_of_row = _group(key)
    nsites = len(ukeys)
    rpos = np.array([rank_pos[int(r)] for r in s["rank"]], dtype=np.int64)

    # per rank, the app time's MPI calls by family (the report's per-rank chart); a
    # family an older file names otherwise counts as "other"
    fam_of_fn = np.array(
        [FAMILIES.index(f) if f in FAMILIES else FAMILIES.index("other") for f in profile.families]
        or [0],
        dtype=np.int64,
    )
    fam_s = np.zeros((len(per_rank), len(FAMILIES)))
    np.add.at(fam_s, (rpos, fam_of_fn[s["fn"]]), s["total_ns"] / 1e9)
    for p, row in zip(per_rank, fam_s):
        p.update({f"{f}_s": float(v) for f, v in zip(FAMILIES, row)})

    # per (site, rank) totals: a dense sites x ranks matrix is fine at profile sizes
    time_sr = np.zeros((nsites, max(nranks, 1)))
    calls_sr = np.zeros((nsites, max(nranks, 1)), dtype=np.int64)
    np.add.at(time_sr, (site_of_row, rpos), s["total_ns"] / 1e9)
    np.add.at(calls_sr, (site_of_row, rpos), s["count"])
    site_calls = calls_sr.sum(axis=1)
    site_time = time_sr.sum(axis=1)
    site_min = np.full(nsites, np.inf)
    site_max = np.zeros(nsites)
    np.minimum.at(site_min, site_of_row, s["min_ns"] / 1e9)
    np.maximum.at(site_max, site_of_row, s["max_ns"] / 1e9)
    site_sent = np.bincount(site_of_row, s["bytes_sent"], minlength=nsites)
    site_recv = np.bincount(site_of_row, s["bytes_recv"], minlength=nsites)
    present = calls_sr > 0
    nrank_site = present.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_r = np.where(nrank_site > 0, site_time / np.maximum(nrank_site, 1), 0.0)
        var_r = np.where(present, (time_sr - mean_r[:, None]) ** 2, 0.0).sum(axis=1) / np.maximum(
            nrank_site, 1
        )
        cov = np.where(mean_r > 0, np.sqrt(var_r) / mean_r, 0.0)

    order = np.argsort(-site_time, kind="stable")
    # symbolise every site's caller (grouped per object), and deeper frames
    by_object = {}
    for k in ukeys:
        by_object.setdefault(int(k["object"]), set()).add(int(k["offset"]))
    for st in stacks[1:]:
        for m, o in st:
            by_object.setdefault(m, set()).add(o)
    locs = {}
    for m, offs in by_object.items():
        path = profile.objects[m] if 0 <= m < len(profile.objects) else ""
        offs = sorted(offs)
        for o, loc in zip(offs, symbolizer.resolve(path, offs)):
            locs[(m, o)] = loc

    ctr, ctr_ns = _site_counters(profile, in_app, site_of_row, nsites)
    callsites = []
    for rank_in_order, i in enumerate(order):
        k = ukeys[i]
        m, o = int(k["object"]), int(k["offset"])
        loc = locs.get((m, o))
        overflow = m < 0 and o == 0
        entry = {
            "id": rank_in_order + 1,
            "function": profile.functions[k["fn"]],
            "family": profile.families[k["fn"]],
            "location": loc.to_json() if loc and not overflow else None,
            "where": "(overflow: sites beyond --max-callsites)"
            if overflow
            else (loc.short() if loc else "?"),
            "stack": [locs[f].to_json() for f in stacks[int(k["stack"])]],
            "stack_where": [locs[f].short() for f in stacks[int(k["stack"])]],
            "calls": int(site_calls[i]),
            "time_s": float(site_time[i]),
            "mean_s": float(site_time[i] / site_calls[i]) if site_calls[i] else 0.0,
            "min_s": float(site_min[i]) if np.isfinite(site_min[i]) else 0.0,
            "max_s": float(site_max[i]),
            "app_pct": 100.0 * float(site_time[i]) / total_app if total_app else 0.0,
            "mpi_pct": 100.0 * float(site_time[i]) / total_mpi if total_mpi else 0.0,
            "cov": float(cov[i]),
            "ranks": int(nrank_site[i]),
            "bytes_sent": int(site_sent[i]),
            "bytes_recv": int(site_recv[i]),
            "per_rank_time_s": {
                int(ranks["rank"][j]): float(time_sr[i, j]) for j in np.nonzero(present[i])[0]
            },
        }
        if ctr is not None:
            entry["counters"] = {
                ev: {"inside": int(ctr[i, e, 0]), "before": int(ctr[i, e, 1])}
                for e, ev in enumerate(profile.counters)
            }
            if ctr_ns is not None:  # rates: per second of the time the counts cover
                cover = {"inside": ctr_ns[i, 0] / 1e9, "before": ctr_ns[i, 1] / 1e9}
                entry["counters_time_s"] = {k: float(v) for k, v in cover.items()}
                for e, ev in enumerate(profile.counters):
                    for k, j in (("inside", 0), ("before", 1)):
                        entry["counters"][ev][f"{k}_per_s"] = (
                            float(ctr[i, e, j] / cover[k]) if cover[k] > 0 else None
                        )
        callsites.append(entry)

    # bytes per call, from the histograms (which count max(sent, received) per call)
    hist_calls = (
        np.bincount(profile.hist["fn"], profile.hist["count"], minlength=len(profile.functions))
        if len(profile.hist)
        else None
    )
    hist_bytes = (
        np.bincount(profile.hist["fn"], profile.hist["bytes"], minlength=len(profile.functions))
        if len(profile.hist)
        else None
    )

    # ---- functions ----
    fn_ids = ukeys["fn"] if nsites else np.zeros(0, dtype=np.int32)
    functions = []
    for f in np.unique(fn_ids):
        rows = fn_ids == f
        t_r = time_sr[rows].sum(axis=0)[:nranks]
        with np.errstate(divide="ignore", invalid="ignore"):
            pct_r = np.where(app_s > 0, 100.0 * t_r / app_s, 0.0)
        calls = int(site_calls[rows].sum())
        t = float(site_time[rows].sum())
        sent, recv = int(site_sent[rows].sum()), int(site_recv[rows].sum())
        functions.append(
            {
                "name": profile.functions[f],
                "family": profile.families[f],
                "calls": calls,
                "time_s": t,
                "app_pct": 100.0 * t / total_app if total_app else 0.0,
                "mpi_pct": 100.0 * t / total_mpi if total_mpi else 0.0,
                "bytes_sent": sent,
                "bytes_recv": recv,
                "mean_bytes": float(hist_bytes[f] / hist_calls[f])
                if hist_calls is not None and hist_calls[f]
                else (float(max(sent, recv) / calls) if calls else 0.0),
                "sites": int(rows.sum()),
                "ranks": int((calls_sr[rows].sum(axis=0) > 0).sum()),
                "pct_of_app_per_rank": stats(pct_r),
            }
        )
    functions.sort(key=lambda d: -d["time_s"])

    # ---- message sizes ----
    h = profile.hist[
        np.isin(profile.hist["rank"], ranks["rank"]) & np.isin(profile.hist["fn"], mpi_fns)
    ]
    sizes = []
    if len(h):
        hk = np.zeros(len(h), dtype=[("fn", "<i4"), ("bucket", "<i4")])
        hk["fn"], hk["bucket"] = h["fn"], h["bucket"]
        uk, inv = _group(hk)
        cnt = np.bincount(inv, h["count"], minlength=len(uk))
        byt = np.bincount(inv, h["bytes"], minlength=len(uk))
        tim = np.bincount(inv, h["total_ns"], minlength=len(uk)) / 1e9
        for k, c, b, t in zip(uk, cnt, byt, tim):
            lo, hi = bucket_range(int(k["bucket"]), profile.hist_buckets)
            sizes.append(
                {
                    "function": profile.functions[k["fn"]],
                    "bucket": int(k["bucket"]),
                    "min_bytes": lo,
                    "max_bytes": hi,
                    "calls": int(c),
                    "bytes": int(b),
                    "time_s": float(t),
                }
            )

    init = [p["init_s"] for p in per_rank] if profile.mpi else []
    outside_s = app_s - mpi_s
    result = {
        "ranks": nranks,
        "world_size": int(profile.world_size),
        "mpi": profile.mpi,
        "mpi_library": profile.module("mpi").get("library", ""),
        "mpi_flavor": profile.module("mpi").get("flavor", ""),
        "hosts": sorted(set(p["host"] for p in per_rank)),
        "app_time_s": stats(app_s),
        "mpi_time_s": stats(mpi_s),
        "mpi_pct": stats(mpi_pct),
        "outside_mpi_s": stats(outside_s),
        "outside_mpi_pct": stats(np.where(app_s > 0, 100.0 - mpi_pct, 0.0) if nranks else []),
        "init_s": stats(init),
        "region": _region(ranks),
        "total_app_s": total_app,
        "total_mpi_s": total_mpi,
        "per_rank": per_rank,
        "functions": functions,
        "callsites": callsites,
        "callsites_total": len(callsites),
        "counters": list(profile.counters),
        "message_sizes": sizes,
        "sites_dropped": int(ranks["sites_dropped"].sum()) if nranks else 0,
        "top": top,
    }
    return MpiProfileResult.from_json(result)


def bucket_range(bucket, nbuckets=HIST_BUCKETS):
    """Sizes in a histogram bucket: 0 holds 0; b holds [2^(b-1), 2^b - 1]; the last
    bucket is open-ended (max None)."""
    if bucket <= 0:
        return 0, 0
    return 1 << (bucket - 1), (1 << bucket) - 1 if bucket < nbuckets - 1 else None


def _site_counters(profile, in_app, site_of_row, nsites):
    """(sites, events, 2) array of --counters counts per call site (inside its calls,
    before them), summed over ranks and threads, and (sites, 2): the ns of wall time
    those counts cover (None for profiles of format 1); (None, None) without counters."""
    if not profile.counters:
        return None, None
    group = np.full(len(profile.sites), -1, np.int64)
    group[np.flatnonzero(in_app)] = site_of_row
    c = profile.counts
    g = group[c["site"]] if len(c) else np.zeros(0, np.int64)
    ok = g >= 0
    out = np.zeros((nsites, len(profile.counters), 2), np.int64)
    np.add.at(out, (g[ok], c["event"][ok], 0), c["inside"][ok])
    np.add.at(out, (g[ok], c["event"][ok], 1), c["before"][ok])
    if "inside_ns" not in (c.dtype.names or ()):
        return out, None
    # every event's record of a site row carries the same times: once per row
    row_ns = np.zeros((len(profile.sites), 2), np.int64)
    np.maximum.at(row_ns, (c["site"], 0), c["inside_ns"])
    np.maximum.at(row_ns, (c["site"], 1), c["before_ns"])
    ns = np.zeros((nsites, 2), np.int64)
    rows = np.flatnonzero(group >= 0)
    np.add.at(ns, group[rows], row_ns[rows])
    return out, ns


# functions' pct_of_app_per_rank: the columns of its statistics
_STATS = {
    "min": "rank_min_pct",
    "mean": "rank_mean_pct",
    "max": "rank_max_pct",
    "stdev": "rank_stdev_pct",
    "avg_over_max": "rank_avg_over_max",
}
_PARTS = ("inside", "before")  # of a call site's counts
# each table's keys in the JSON, when it has no rows to take them from (counters are
# there only with --counters)
_LAYOUT = {
    "per_rank": (
        "rank",
        "host",
        "pid",
        "state",
        "app_s",
        "mpi_s",
        "mpi_pct",
        "outside_pct",
        "calls",
        "threads",
        "table_resident_bytes",
        "init_s",
        "clock_offset_init_s",
        "clock_offset_fini_s",
        "clock_offset_error_s",
        *(f"{f}_s" for f in FAMILIES),  # the app time's MPI calls by family
    ),
    "functions": (
        "name",
        "family",
        "calls",
        "time_s",
        "app_pct",
        "mpi_pct",
        "bytes_sent",
        "bytes_recv",
        "mean_bytes",
        "sites",
        "ranks",
        "pct_of_app_per_rank",
    ),
    "callsites": (
        "id",
        "function",
        "family",
        "location",
        "where",
        "stack",
        "stack_where",
        "calls",
        "time_s",
        "mean_s",
        "min_s",
        "max_s",
        "app_pct",
        "mpi_pct",
        "cov",
        "ranks",
        "bytes_sent",
        "bytes_recv",
        "per_rank_time_s",
    ),
    "message_sizes": ("function", "bucket", "min_bytes", "max_bytes", "calls", "bytes", "time_s"),
}


@dataclass
class MpiProfileResult:
    """The MPI profile's analysis (analyze): the job's numbers, and its tables (numpy
    structured arrays, model/table.py). Times in seconds; app_pct: % of the app time
    summed over ranks, mpi_pct: % of the MPI time.

    per_rank: one row per rank, by rank: rank, host, pid, state, app_s, mpi_s, mpi_pct
      and outside_pct (of the rank's app time), calls, threads, table_resident_bytes,
      init_s, clock_offset_init_s, clock_offset_fini_s, clock_offset_error_s, FAMILY_s
      (the app time's MPI calls of each family, _format FAMILIES); with counters one
      column per event (counted inside and between MPI calls).
    functions: one row per MPI function, by time: name, family, calls, time_s, app_pct,
      mpi_pct, bytes_sent, bytes_recv, mean_bytes, sites, ranks, and the function's share
      of each rank's app time across ranks: rank_min_pct, rank_mean_pct, rank_max_pct,
      rank_stdev_pct, rank_avg_over_max (mean / max).
    callsites: one row per call site, by time: id (1, 2, ... in that order), function,
      family, location (the caller's symbols.Location.to_json; None for the overflow
      site), where ('file.c:12'), stack and stack_where (the deeper callers, innermost
      first: their locations and names), calls, time_s, mean_s, min_s, max_s, app_pct,
      mpi_pct, cov (of the per-rank times), ranks, bytes_sent, bytes_recv, file and line
      (of location; "" and 0 without); with counters EVENT_inside and EVENT_before (the
      counts inside the site's calls and before them) and, where the profile has the
      time they cover, EVENT_inside_per_s, EVENT_before_per_s (NaN where that time is 0),
      counters_inside_s and counters_before_s.
    callsite_ranks: one row per (call site, rank) with calls, by id then rank: id, rank,
      time_s.
    message_sizes: one row per (function, size bucket): function, bucket, min_bytes,
      max_bytes (-1: the open-ended last bucket), calls, bytes, time_s.

    from_json/to_json: the report's "mpi_profile" (docs/mpi-profile.md), the layout in
    which the analysis computes its rows; to_json(from_json(d)) == d."""

    ranks: int
    world_size: int
    mpi: bool
    mpi_library: str
    mpi_flavor: str
    hosts: list
    app_time_s: dict  # across ranks (stats): min, mean, max, stdev, avg_over_max
    mpi_time_s: dict
    mpi_pct: dict
    outside_mpi_s: dict
    outside_mpi_pct: dict
    init_s: dict
    total_app_s: float
    total_mpi_s: float
    per_rank: np.ndarray
    functions: np.ndarray
    callsites: np.ndarray
    callsite_ranks: np.ndarray
    counters: list
    message_sizes: np.ndarray
    sites_dropped: int
    top: int
    # the MPI_Pcontrol region (_region: intervals, region_s, app_s); None: none marked
    region: dict = None
    layout: dict = field(default_factory=dict, repr=False)  # each table's keys in the JSON

    @classmethod
    def from_json(cls, doc):
        """The result of the report's "mpi_profile" dict doc."""
        layout = {k: list(doc[k][0]) if doc[k] else list(_LAYOUT[k]) for k in _LAYOUT}
        sites = doc["callsites"]
        pairs = [(c["id"], r, t) for c in sites for r, t in c["per_rank_time_s"].items()]
        return cls(
            **{k: v for k, v in doc.items() if k not in _LAYOUT and k != "callsites_total"},
            per_rank=_flat("per_rank", doc["per_rank"], layout),
            functions=_flat("functions", doc["functions"], layout),
            callsites=_flat("callsites", sites, layout),
            callsite_ranks=table(
                {
                    k: np.array([x[j] for x in pairs], dt)
                    for j, (k, dt) in enumerate((("id", int), ("rank", int), ("time_s", float)))
                },
                len(pairs),
            ),
            message_sizes=_flat("message_sizes", doc["message_sizes"], layout),
            layout=layout,
        )

    def to_json(self):
        """The report's "mpi_profile" dict."""
        per_site = {}
        for i, r, t in self.callsite_ranks.tolist():
            per_site.setdefault(i, {})[r] = t
        rates = "counters_time_s" in self.layout["callsites"]
        out = {}
        for k in self.__dataclass_fields__:
            if k == "callsite_ranks":
                out["callsites_total"] = len(self.callsites)
            elif k in _LAYOUT:
                out[k] = [
                    _nest(k, r, self.layout[k], self.counters, rates, per_site)
                    for r in records(getattr(self, k))
                ]
            elif k != "layout":
                out[k] = getattr(self, k)
        return out


def _flat(name, rows, layout):
    """The table `name` of rows (dicts of the JSON's layout): a column per plain key,
    the others spread over columns (MpiProfileResult)."""
    cols = {}
    for key in layout[name]:
        values = [r[key] for r in rows]
        if key == "pct_of_app_per_rank":
            cols.update({c: [v[s] for v in values] for s, c in _STATS.items()})
        elif key == "counters" and name == "per_rank":
            cols.update({ev: [v[ev] for v in values] for ev in values[0]})
        elif key == "counters":  # per call site: inside, before, and their rates
            cols.update(
                {
                    f"{ev}_{part}": [np.nan if v[ev][part] is None else v[ev][part] for v in values]
                    for ev in values[0]
                    for part in values[0][ev]
                }
            )
        elif key == "counters_time_s":
            cols.update({f"counters_{p}_s": [v[p] for v in values] for p in _PARTS})
        elif key == "max_bytes":  # None: the open-ended bucket
            cols[key] = [-1 if v is None else v for v in values]
        elif key != "per_rank_time_s":  # callsite_ranks
            cols[key] = values
    if name == "callsites":
        locs = [r["location"] or {} for r in rows]
        cols.update(file=[x.get("file", "") for x in locs], line=[x.get("line", 0) for x in locs])
    return table({k: column(v) for k, v in cols.items()}, len(rows))


def _nest(name, row, layout, events, rates, per_site):
    """A row of the table `name` in the JSON's layout (the inverse of _flat)."""
    out = {}
    for key in layout:
        if key == "pct_of_app_per_rank":
            out[key] = {s: row[c] for s, c in _STATS.items()}
        elif key == "counters" and name == "per_rank":
            out[key] = {ev: row[ev] for ev in events}
        elif key == "counters":
            parts = _PARTS + tuple(f"{p}_per_s" for p in _PARTS if rates)
            out[key] = {ev: {p: _none(row[f"{ev}_{p}"]) for p in parts} for ev in events}
        elif key == "counters_time_s":
            out[key] = {p: row[f"counters_{p}_s"] for p in _PARTS}
        elif key == "max_bytes":
            out[key] = None if row[key] < 0 else row[key]
        elif key == "per_rank_time_s":
            out[key] = per_site.get(row["id"], {})
        else:
            out[key] = row[key]
    return out


def _none(x):
    """None for NaN (a rate over no time), else x."""
    return None if x != x else x

"""Experiments compared (`perfweave compare`, docs/compare.md): per key (a routine, a
call path, an MPI call site, an MPI function or an I/O file) each side's value, the
difference, the ratio, Welch's t-test and a regression flag, the compute/MPI/I/O split
and the POP factors of each side.

A side is one experiment or several repetitions of one (A1,A2,A3). An experiment's value
of a key is its sum over ranks; a side's, the mean over its experiments. Welch's test is
across the experiments' values when both sides have two or more, else across the
per-rank values (of every experiment of the side). A key some side lacks is "only in" the
other, not 0. The regression flag: ratio B / A above 1 + max(5 %, 3 sigma), sigma the
baseline's relative standard deviation of the key's value: over its experiments when it
has several, else the relative standard error of the sum from the per-rank values
(stdev / (mean sqrt(ranks))).

Keys are names, never addresses (analysis/callpaths.py for routines and call paths; a
call site is its MPI function and the caller's function, source file and line)."""

import math
import os
from dataclasses import dataclass, field

import numpy as np

from perfweave import progress
from perfweave._format import IO_LAYERS
from perfweave.analysis.callpaths import METRICS as CALLPATH_METRICS, callpath_metrics, samples_of
from perfweave.errors import PerfweaveError
from perfweave.model.profile import BRACKET
from perfweave.model.table import column, records, table
from perfweave.symbols import Symbolizer

BY = ("routine", "callpath", "callsite", "mpi-call", "file")
# the metrics of each key and their units; the first is the default
SITE_METRICS = {
    m: CALLPATH_METRICS[m][0] for m in ("mpi_time", "visits", "bytes_sent", "bytes_recv")
}
FILE_METRICS = {"io_time": "s", "bytes_read": "bytes", "bytes_written": "bytes"}
METRICS = {
    "routine": {m: u for m, (u, _) in CALLPATH_METRICS.items()},
    "callpath": {m: u for m, (u, _) in CALLPATH_METRICS.items()},
    "callsite": SITE_METRICS,
    "mpi-call": SITE_METRICS,
    "file": FILE_METRICS,
}
MIN_RISE = 0.05  # a regression is at least 5 % more
SIGMAS = 3.0
COLUMNS = (
    "key",
    "a",
    "b",
    "delta",
    "ratio",
    "p_value",
    "test",
    "sigma",
    "threshold",
    "regression",
    "only_in",
    "a_ranks",
    "b_ranks",
)


def default_metric(by):
    return next(iter(METRICS[by]))


# ---- one experiment's values per key ------------------------------------------------


def key_values(experiment, by, metric, symbolizer=None, samples=None, inclusive=False):
    """{key: per-rank values (float64)} of one experiment (readers' open_experiment);
    samples: its SamplesResult, where the caller has it. inclusive (routine, callpath):
    each node's value with its subtree's; a routine's, of its outermost calls (a
    recursive call is inside its caller's value, not added again)."""
    sym = symbolizer or Symbolizer()
    if by in ("routine", "callpath"):
        cm = callpath_metrics(experiment, sym, samples)
        v = cm.inclusive(metric) if inclusive else cm.metrics[metric].values
        paths = cm.paths()
        keys = ["/".join(p) for p in paths] if by == "callpath" else cm.names
        out = {}
        for k, p, row in zip(keys, paths, v):
            if inclusive and by == "routine" and p[-1] in p[:-1]:
                continue
            out[k] = out.get(k, 0) + row
        # a node with nothing of this metric in the run (a caller of MPI calls, for
        # mpi_time) is no key of it
        return {k: r for k, r in out.items() if r.any()}
    if by == "file":
        return _file_values(experiment, metric)
    return _site_values(experiment, by, metric, sym)


def _site_values(experiment, by, metric, sym):
    profile = experiment.profile
    sites = profile.sites
    mpi_fns = profile.function_ids("mpi")
    bracket = [i for i in mpi_fns if profile.functions[i] in BRACKET]
    ranks = sorted(set(int(r) for r in profile.ranks["rank"] if r >= 0))
    col = {r: j for j, r in enumerate(ranks)}
    rows = np.flatnonzero(
        np.isin(sites["fn"], mpi_fns)
        & ~np.isin(sites["fn"], bracket)
        & np.isin(sites["rank"], ranks)
    )
    field_ = {"mpi_time": "total_ns", "visits": "count"}.get(metric, metric)
    scale = 1e-9 if metric == "mpi_time" else 1.0
    names = _site_names(profile, rows, sym, experiment) if by == "callsite" else None
    out = {}
    for n, i in enumerate(rows.tolist()):
        s = sites[i]
        fn = profile.functions[s["fn"]]
        key = f"{fn} at {names[n]}" if by == "callsite" else fn
        row = out.setdefault(key, np.zeros(len(ranks)))
        row[col[int(s["rank"])]] += float(s[field_]) * scale
    return out


def _site_names(profile, rows, sym, experiment):
    """The caller of each site row as 'function (file.c:12)', its deeper callers after
    '<': names, never addresses."""
    if experiment.meta.get("imported_from"):
        return ["(imported trace: no call sites)"] * len(rows)
    wanted = {}
    frames = []
    for i in rows.tolist():
        s = profile.sites[i]
        f = profile.frames[s["first_frame"] : s["first_frame"] + s["nframes"]]
        mine = [(int(s["object"]), int(s["offset"]))] + list(
            zip(f["object"].tolist(), f["offset"].tolist())
        )
        frames.append(mine)
        for m, o in mine:
            if m >= 0:
                wanted.setdefault(m, set()).add(o)
    where = {}
    for m, offs in wanted.items():
        path = profile.objects[m] if m < len(profile.objects) else ""
        offs = sorted(offs)
        for o, loc in zip(offs, sym.resolve(path, offs)):
            if loc.function and loc.file and loc.line:
                where[(m, o)] = f"{loc.function} ({os.path.basename(loc.file)}:{loc.line})"
            else:
                where[(m, o)] = loc.function or f"[{os.path.basename(path) or '?'}]"
    out = []
    for mine in frames:
        if mine[0][0] < 0:
            out.append("[unknown caller]")
            continue
        out.append(" < ".join(where.get(k, "?") for k in mine))
    return out


def _file_values(experiment, metric):
    """Per I/O file (its pattern, as the report's: out.0001 .. out.0400 one) and layer."""
    from perfweave.analysis.io import pattern_of

    io = experiment.io
    if not io or not len(io.records):
        return {}
    recs, procs = io.records, io.processes
    ranks = sorted(set(int(r) for r in procs["rank"]))
    col = {r: j for j, r in enumerate(ranks)}
    pats = pattern_of(io.files)
    if metric == "io_time":
        x = recs["time_ns"].sum(axis=1) / 1e9
    else:
        x = recs[metric].astype(float)
    out = {}
    for f, layer, p, v in zip(recs["file"], recs["layer"], recs["process"], x):
        key = f"{pats[f]} ({IO_LAYERS[layer]})"
        row = out.setdefault(key, np.zeros(len(ranks)))
        row[col[int(procs["rank"][p])]] += v
    return {k: r for k, r in out.items() if r.any()}


# ---- statistics ----------------------------------------------------------------------


def _betacf(a, b, x):
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a, b, x):
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def welch(x, y):
    """Welch's two-sided t-test of samples x and y: the p-value, NaN where a side has
    fewer than two values or neither varies (a difference then is certain or none)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or len(y) < 2:
        return math.nan
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy <= 0:
        return 0.0 if x.mean() != y.mean() else 1.0
    t = (x.mean() - y.mean()) / math.sqrt(vx + vy)
    # Welch-Satterthwaite degrees of freedom
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return _betai(df / 2, 0.5, df / (df + t * t))


# ---- the comparison -----------------------------------------------------------------


@dataclass
class Side:
    """One side: its label and experiments, each {key: per-rank values}."""

    label: str
    paths: list
    values: list  # per experiment {key: np.ndarray}
    split: dict  # the compute/MPI/I/O split (mean over its experiments)
    pop: dict = None  # the first experiment's POP factors, with a trace


def _compare(base, other):
    """The rows of other against base (COLUMNS)."""
    keys = sorted(set().union(*base.values, *other.values))
    rows = []
    for k in keys:
        row = {"key": k}
        per = []
        for s in (base, other):
            present = [k in v for v in s.values]
            totals = np.array([float(v[k].sum()) if k in v else 0.0 for v in s.values])
            ranks = [v[k] for v in s.values if k in v]
            per.append((any(present), totals, np.concatenate(ranks) if ranks else np.zeros(0)))
        (ina, ta, ra), (inb, tb, rb) = per
        a, b = float(ta.mean()), float(tb.mean())
        repeated = len(base.values) > 1 and len(other.values) > 1
        if repeated:
            p = welch(ta, tb)
            sigma = float(ta.std(ddof=1) / ta.mean()) if ta.mean() > 0 else 0.0
        else:
            p = welch(ra, rb)
            sigma = (
                float(ra.std(ddof=1) / (ra.mean() * math.sqrt(len(ra))))
                if len(ra) > 1 and ra.mean() > 0
                else 0.0
            )
        threshold = 1 + max(MIN_RISE, SIGMAS * sigma)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = b / a if a else (math.inf if b else math.nan)
        only = "" if ina and inb else (base.label if ina else other.label)
        row.update(
            a=a if ina else math.nan,
            b=b if inb else math.nan,
            delta=b - a if not only else math.nan,
            ratio=ratio if not only else math.nan,
            p_value=p if not only else math.nan,
            test="experiments" if repeated else "ranks",
            sigma=sigma,
            threshold=threshold,
            regression=bool(not only and ratio > threshold),
            only_in=only,
            a_ranks=int(np.count_nonzero(ra)) // len(base.values),
            b_ranks=int(np.count_nonzero(rb)) // len(other.values),
        )
        rows.append(row)
    # the largest changes first; a key of one side by its value
    rows.sort(key=lambda r: (-abs(r["delta"] if r["delta"] == r["delta"] else _one(r)), r["key"]))
    return table({c: column([r[c] for r in rows]) for c in COLUMNS}, len(rows))


def _one(row):
    return row["b"] if row["a"] != row["a"] else row["a"]


@dataclass
class CompareResult:
    """perfweave compare's result: by, metric, inclusive and the metric's unit; sides (the first the
    baseline): label, experiments, split ({part: % of the app time}, app_s), pop (the
    multiplicative POP factors, or None); comparisons: per other side its label and
    table, one row per key, by |delta| (COLUMNS: key, a, b (NaN: not in that side),
    delta, ratio (b / a), p_value (Welch, NaN: too few values), test ('experiments' or
    'ranks': what the test and sigma come from), sigma, threshold (1 + max(5 %,
    3 sigma)), regression, only_in ('', 'A', 'B'), a_ranks, b_ranks); notes.
    to_json: docs/compare.md."""

    by: str
    metric: str
    inclusive: bool  # values with their callees' (routine, callpath)
    unit: str
    sides: list  # dicts: label, experiments, split, pop
    comparisons: list  # dicts: label, rows (table)
    notes: list = field(default_factory=list)

    def to_json(self):
        return {
            "format": "perfweave-compare",
            "version": 1,
            "by": self.by,
            "metric": self.metric,
            "inclusive": self.inclusive,
            "unit": self.unit,
            "rule": {"min_rise": MIN_RISE, "sigmas": SIGMAS},
            "sides": self.sides,
            "comparisons": [
                {
                    "label": c["label"],
                    "rows": [{k: _json(v) for k, v in r.items()} for r in records(c["rows"])],
                    "regressions": int(c["rows"]["regression"].sum()),
                }
                for c in self.comparisons
            ],
            "notes": self.notes,
        }


def _json(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if v != v else ("inf" if v > 0 else "-inf")
    return v


def split_of(experiment, samples=None):
    """The app time's split (% compute, MPI, I/O, ...) of one experiment: its samples'
    (samples: its SamplesResult, analysis/samples time_split) where it has some, else
    the profile's MPI time and the I/O module's time against the app time; with app_s,
    the app time summed over ranks (the MPI profile's)."""
    profile = experiment.profile
    ranks = profile.ranks[profile.ranks["rank"] >= 0] if profile.mpi else profile.ranks
    app = float(ranks["app_ns"].sum()) / 1e9
    out = dict(samples.time_split) if samples is not None and samples.time_split else None
    if out is None and app > 0:
        io_s = 0.0
        io = experiment.io
        if io:
            io_s = float(io.processes["busy_s"].sum())
        mpi_pct = 100 * float(ranks["mpi_ns"].sum()) / 1e9 / app
        io_pct = 100 * io_s / app
        out = {"compute": max(100 - mpi_pct - io_pct, 0.0), "MPI": mpi_pct, "I/O": io_pct}
    return {"app_s": app, "pct": out or {}, "from": "samples" if samples else "profile"}


def pop_of(path):
    """The multiplicative POP factors of a traced experiment (analysis/pop.py, with the
    replay's ideal runtime), None without a trace."""
    from pathlib import Path

    from perfweave.analysis import eventgraph, pop

    if not (Path(path) / "traces").exists():
        return None
    graph = eventgraph.load_graph(path)
    res = pop.analyze(
        graph, path, what_if=dict(eager_limit=None, latency_s=0.0, bandwidth_Bps=math.inf)
    )
    factors = dict(res.mul)
    for name, ideal in res.ideal.items():
        for k, v in (ideal.get("mul") or {}).items():
            factors.setdefault(k, v)
    return {k: v for k, v in factors.items() if isinstance(v, (int, float))}


def mean_split(splits):
    keys = list(dict.fromkeys(k for s in splits for k in s["pct"]))
    return {
        "app_s": float(np.mean([s["app_s"] for s in splits])),
        "pct": {k: float(np.mean([s["pct"].get(k, 0.0) for s in splits])) for k in keys},
        "from": splits[0]["from"],
    }


def compare(
    sides, by="callpath", metric=None, open_experiment=None, with_pop=True, inclusive=False
):
    """The CompareResult of sides: a list of (label, [experiment paths]), the first the
    baseline. open_experiment(path) gives an experiment (readers' ExperimentDir);
    inclusive: the routines' and call paths' values with their callees' (key_values)."""
    if by not in BY:
        raise PerfweaveError(f"--by {by}: expected one of {', '.join(BY)}")
    metric = metric or default_metric(by)
    if metric not in METRICS[by]:
        raise PerfweaveError(
            f"--metric {metric}: not a metric of --by {by} (one of {', '.join(METRICS[by])})"
        )
    if inclusive and by not in ("routine", "callpath"):
        raise PerfweaveError(f"--inclusive: for --by routine or callpath, not --by {by}")
    if len(sides) < 2:
        raise PerfweaveError("compare needs two sides or more (A B [C ...])")
    sym = Symbolizer()
    built = []
    notes = []
    total = sum(len(paths) for _, paths in sides)
    with progress.task("compare: reading", total, "experiment") as bar:
        for label, paths in sides:
            values, splits = [], []
            for p in paths:
                bar.step(0, f"compare: reading {label} ({p})")
                exp = open_experiment(p)
                sm = samples_of(exp, sym)
                values.append(key_values(exp, by, metric, sym, sm, inclusive))
                splits.append(split_of(exp, sm))
                bar.step()
            built.append(Side(label, [str(p) for p in paths], values, mean_split(splits)))
    for s in built:
        if not any(s.values):
            why = " (sampled: the experiment has no samples; --metric mpi_time is exact)"
            notes.append(f"{s.label}: no {metric} by {by}" + (why if metric == "time" else ""))
    if with_pop:
        pops = [pop_of(s.paths[0]) for s in built]
        if all(p is not None for p in pops):
            for s, p in zip(built, pops):
                s.pop = p
        elif any(p is not None for p in pops):
            notes.append("POP factors: not every side has a trace (perfweave run --trace)")
    return CompareResult(
        by=by,
        metric=metric,
        inclusive=inclusive,
        unit=METRICS[by][metric],
        sides=[
            {"label": s.label, "experiments": s.paths, "split": s.split, "pop": s.pop}
            for s in built
        ],
        comparisons=[{"label": s.label, "rows": _compare(built[0], s)} for s in built[1:]],
        notes=notes,
    )

"""The measurements of an experiment as pandas DataFrames (docs/python-api.md).

    import perfweave
    exp = perfweave.open("run.pwx")
    exp.call_tree()            # the sampled call tree, one row per node
    exp.mpi_callsites()        # the MPI call-site profile, one row per call site

Every table is computed by the same analysis as `perfweave report` (analysis/sampling.py,
analysis/mpi.py, report/data.py) and agrees with `perfweave report --json`; this module
only lays the results out as rows and columns. A table the experiment has no data for
raises perfweave.errors.NoData (one line saying what is missing and which option of
`perfweave run` records it)."""

import re

import numpy as np
import pandas as pd

from perfweave.errors import NoData
from perfweave.symbols import Symbolizer


def open(path):  # noqa: A001 (perfweave.open)
    """The experiment directory path (perfweave run -o), read lazily: each table is
    computed on first use and kept. PerfweaveError if path is not an experiment."""
    from perfweave.readers.experiment import open_experiment

    return Experiment(open_experiment(path))


_LINE = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


class Experiment:
    """One experiment; see docs/python-api.md for every table's columns."""

    def __init__(self, experiment):
        self._exp = experiment
        self._sym = Symbolizer()
        self._cache = {}

    # ---- the experiment -------------------------------------------------------------
    @property
    def path(self):
        return self._exp.path

    @property
    def meta(self):
        """experiment.json: command, times, options, exit status."""
        return self._exp.meta

    @property
    def profile(self):
        """The MPI profile model (model/profile.py Profile: numpy arrays of the ranks, call
        sites, frames and message-size histograms, and the names they index), the tables'
        source."""
        return self._exp.profile

    def report(self):
        """The `perfweave report --json` document (every row, not the top 20)."""
        if "report" not in self._cache:
            from perfweave.report.data import collect

            self._cache["report"] = collect(self._exp, top=None)
        return self._cache["report"]

    def __repr__(self):
        return f"perfweave.open({str(self.path)!r})"

    def __getattr__(self, name):
        """The model of each kind of data beside the profile (readers/kinds.py:
        samples, timelines, traces, and each module's, such as example), read on first
        use and kept."""
        from perfweave.readers.kinds import KINDS

        if not name.startswith("_") and name in KINDS:
            return getattr(self._exp, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- sampling (perfweave run --sample) --------------------------------------------
    def _sampling(self):
        if "sampling" not in self._cache:
            from perfweave.analysis import phases, sampling

            raw = {}
            sm = sampling.analyze(
                self._exp.samples,
                top=None,
                symbolizer=self._sym,
                raw=raw,
                windows=phases.windows(self._exp.profile),
            )
            self._cache["sampling"] = (sm, raw)
        sm, raw = self._cache["sampling"]
        if sm is None:
            raise NoData(
                f"{self.path}: no call-stack samples (`perfweave run` records "
                "them by default, or with `--sample`; this run had `--no-sample`)"
            )
        return sm, raw

    @staticmethod
    def _places(rows, states, events):
        """Rows of the sampling tables (functions, lines, tree nodes) -> columns."""
        out = []
        for r in rows:
            row = {"pct": r["pct"]} if "pct" in r else {}
            row.update({f"{s}_pct": r["by_state_pct"].get(s, 0.0) for s in states})
            pr = r["per_rank_pct"]
            row.update(
                rank_min_pct=pr["min"],
                rank_mean_pct=pr["mean"],
                rank_max_pct=pr["max"],
                imbalance=r["imbalance"],
                worst_rank=r["worst_rank"],
            )
            for key in ("counters", "counters_inclusive", "counters_exclusive"):
                for ev in events if key in r else ():
                    row[ev + key[len("counters") :]] = r[key].get(ev, 0)  # EV, EV_inclusive
            out.append(row)
        return out

    def call_tree(self):
        """The sampled call tree, depth first (children by inclusive share): id, parent
        (<NA> for a root), depth, name, path ('main/solve/kernel'), inclusive_pct,
        exclusive_pct, ACTIVITY_pct per activity (inclusive), rank_min/mean/max_pct,
        imbalance, worst_rank; with --counters EVENT_inclusive and EVENT_exclusive."""
        sm, _ = self._sampling()
        tree = sm["call_tree"]
        paths = _tree_paths(tree)
        rows = []
        for n, extra in zip(tree, self._places(tree, sm["activities"], sm["counters"])):
            rows.append(
                {
                    "id": n["id"],
                    "parent": n["parent"],
                    "depth": n["depth"],
                    "name": n["name"],
                    "path": "/".join(paths[n["id"]]),
                    "inclusive_pct": n["inclusive_pct"],
                    "exclusive_pct": n["exclusive_pct"],
                    **extra,
                }
            )
        df = pd.DataFrame(rows)
        if len(df):
            df["parent"] = df["parent"].astype("Int64")
        return df

    def call_tree_per_rank(self):
        """The call tree's values per rank, long format: node (call_tree's id), rank,
        activity, samples (inclusive), exclusive_samples (samples weighted by the wall
        time each stands for, see samples()), pct and exclusive_pct (of the rank's
        samples), seconds and exclusive_seconds (the wall time of those samples). Rows
        with no samples are left out."""
        sm, raw = self._sampling()
        tree = sm["call_tree"]
        paths = _tree_paths(tree)
        ranks, states = sm["ranks"], sm["activities"]
        total = raw["per_rank_total"]
        # the weights sum to the samples: a weighted sample is the wall time sampled
        # (all threads) / the samples
        per_sample_s = sum(float(x.sum()) for x in raw["seconds"]) / max(
            sum(map(len, raw["seconds"])), 1
        )
        cols = {
            k: []
            for k in (
                "node",
                "rank",
                "activity",
                "samples",
                "exclusive_samples",
                "pct",
                "exclusive_pct",
                "seconds",
                "exclusive_seconds",
            )
        }
        for n in tree:
            v = raw["tree"][paths[n["id"]]]  # (incl/excl, proc, state)
            for j, s in zip(*np.nonzero(v[0])):
                inc, exc = float(v[0, j, s]), float(v[1, j, s])
                for k, x in (
                    ("node", n["id"]),
                    ("rank", ranks[j]),
                    ("activity", states[s]),
                    ("samples", round(inc)),
                    ("exclusive_samples", round(exc)),
                    ("pct", 100 * inc / max(total[j], 1)),
                    ("exclusive_pct", 100 * exc / max(total[j], 1)),
                    ("seconds", inc * per_sample_s),
                    ("exclusive_seconds", exc * per_sample_s),
                ):
                    cols[k].append(x)
        return pd.DataFrame(cols)

    def functions(self, inclusive=False):
        """Sampled time per function: name, pct (of all samples), ACTIVITY_pct,
        rank_min/mean/max_pct, imbalance, worst_rank, with --counters one column per
        event. Self time (the innermost frame of the program's own code) by default;
        inclusive=True: the function anywhere on the stack."""
        sm, _ = self._sampling()
        rows = sm["inclusive" if inclusive else "functions"]
        return pd.DataFrame(
            [
                {"name": r["name"], **x}
                for r, x in zip(rows, self._places(rows, sm["activities"], sm["counters"]))
            ]
        )

    def lines(self):
        """Sampled self time per source line: name ('fn (file.c:12)'), function, file,
        line (0 where unknown), then the columns of functions()."""
        sm, _ = self._sampling()
        rows = sm["lines"]
        out = []
        for r, x in zip(rows, self._places(rows, sm["activities"], sm["counters"])):
            m = _LINE.match(r["name"])
            out.append(
                {
                    "name": r["name"],
                    "function": m["function"] if m else r["name"],
                    "file": m["file"] if m else "",
                    "line": int(m["line"]) if m else 0,
                    **x,
                }
            )
        return pd.DataFrame(out)

    def samples(self):
        """Every kept sample: time_s (since the process's start), rank (-1 without MPI),
        process, thread, activity, leaf (the innermost function of the program's own
        code), line ('fn (file:line)'), stack (outermost first, ';'-separated: the
        folded-stack format of flame graph tools), seconds (the wall time the sample
        stands for: since its thread's previous sample; shares of time are shares of
        these, not of samples, see docs/sampling.md), with --counters one column per
        event: its increase since the thread's previous sample."""
        sm, raw = self._sampling()
        states = sm["activities"]
        frames = []
        for p, act, leaf, line, stack, delta, secs in zip(
            raw["procs"],
            raw["activity"],
            raw["leaf"],
            raw["line"],
            raw["stack"],
            raw["deltas"],
            raw["seconds"],
        ):
            rec = p.records
            st = np.clip(np.asarray(act, np.int64), 0, len(states) - 1)
            df = pd.DataFrame(
                {
                    "time_s": (rec["t"] - p.meta.get("t_start", 0)) / 1e9,
                    "rank": p.rank,
                    "process": p.name,
                    "thread": rec["thread"].astype(np.int64),
                    "activity": pd.Categorical.from_codes(st, states),
                    "leaf": leaf,
                    "line": line,
                    "stack": [";".join(s) for s in stack],
                    "seconds": secs,
                }
            )
            for e, ev in enumerate(sm["counters"]):
                df[ev] = delta[:, e] if delta.shape[1] > e else 0
            frames.append(df)
        df = pd.concat(frames, ignore_index=True)
        return df.sort_values(
            ["rank", "process", "thread", "time_s"], kind="stable", ignore_index=True
        )

    # ---- the MPI profile ----------------------------------------------------------------
    def _mpi(self):
        if "mpi" not in self._cache:
            from perfweave.analysis.mpi import analyze

            self._cache["mpi"] = analyze(self._exp.profile, top=None, symbolizer=self._sym)
        m = self._cache["mpi"]
        if not m["mpi"]:
            raise NoData(f"{self.path}: no MPI profile (the program did not use MPI)")
        return m

    def mpi_ranks(self):
        """Per rank: rank, host, pid, state, app_s, mpi_s, mpi_pct, outside_pct, calls,
        threads, init_s, clock offsets; with --counters one column per event."""
        m = self._mpi()
        rows = []
        for r in m["per_rank"]:
            row = {k: v for k, v in r.items() if k != "counters"}
            row.update(r.get("counters", {}))
            rows.append(row)
        return pd.DataFrame(rows)

    def mpi_functions(self):
        """Per MPI function: name, family, calls, time_s, app_pct, mpi_pct, bytes_sent,
        bytes_recv, mean_bytes, sites, ranks, rank_min/mean/max_pct (% of app time)."""
        rows = []
        for f in self._mpi()["functions"]:
            row = {k: v for k, v in f.items() if k != "pct_of_app_per_rank"}
            st = f["pct_of_app_per_rank"]
            row.update(
                rank_min_pct=st["min"],
                rank_mean_pct=st["mean"],
                rank_max_pct=st["max"],
                rank_stdev_pct=st["stdev"],
            )
            rows.append(row)
        return pd.DataFrame(rows)

    def mpi_callsites(self, per_rank=False):
        """Per MPI call site (by time): id, function, family, where, file, line, stack
        (' <- '-joined callers), calls, time_s, mean_s, min_s, max_s, app_pct, mpi_pct,
        cov, ranks, bytes_sent, bytes_recv; with --counters EVENT_inside and
        EVENT_before. per_rank=True: long format id, function, where, rank, time_s."""
        sites = self._mpi()["callsites"]
        if per_rank:
            return pd.DataFrame(
                [
                    {
                        "id": c["id"],
                        "function": c["function"],
                        "where": c["where"],
                        "rank": r,
                        "time_s": t,
                    }
                    for c in sites
                    for r, t in c["per_rank_time_s"].items()
                ],
                columns=["id", "function", "where", "rank", "time_s"],
            )
        rows = []
        for c in sites:
            loc = c["location"] or {}
            row = {
                "id": c["id"],
                "function": c["function"],
                "family": c["family"],
                "where": c["where"],
                "file": loc.get("file", ""),
                "line": loc.get("line", 0),
                "stack": " <- ".join(c["stack_where"]),
            }
            row.update(
                {
                    k: v
                    for k, v in c.items()
                    if k not in row
                    and k not in ("location", "stack_where", "per_rank_time_s", "counters")
                }
            )
            for ev, v in c.get("counters", {}).items():
                row[f"{ev}_inside"], row[f"{ev}_before"] = v["inside"], v["before"]
            rows.append(row)
        return pd.DataFrame(rows)

    def message_sizes(self):
        """Message-size histogram: function, bucket, min_bytes, max_bytes (<NA>: open
        ended), calls, bytes, time_s."""
        df = pd.DataFrame(
            self._mpi()["message_sizes"],
            columns=["function", "bucket", "min_bytes", "max_bytes", "calls", "bytes", "time_s"],
        )
        df["max_bytes"] = df["max_bytes"].astype("Int64")
        return df

    # ---- wait states (perfweave analyze) -------------------------------------------------
    def wait_states(self):
        """The wait-state analysis (analysis/waitstates.json), long format: metric (id),
        metric_name, parent (metric id), unit, callpath (id), callpath_name, function,
        where, rank, value. Every non-zero value of every metric."""
        from perfweave.readers.results import read_waitstates

        try:
            res = read_waitstates(self.path)
        except FileNotFoundError:
            raise NoData(
                f"{self.path}: no wait-state analysis (record with `perfweave run "
                "--trace`, then run `perfweave analyze`)"
            ) from None
        paths = {cp["id"]: cp for cp in res.get("callpaths", [])}
        rows = []
        for m in res.get("metrics", []):
            for p, r, v in m["values"]:
                cp = paths.get(p, {})
                rows.append(
                    {
                        "metric": m["id"],
                        "metric_name": m["name"],
                        "parent": m.get("parent"),
                        "unit": m.get("unit", ""),
                        "callpath": p,
                        "callpath_name": cp.get("name", ""),
                        "function": cp.get("function", ""),
                        "where": cp.get("where", ""),
                        "rank": r,
                        "value": v,
                    }
                )
        return pd.DataFrame(
            rows,
            columns=[
                "metric",
                "metric_name",
                "parent",
                "unit",
                "callpath",
                "callpath_name",
                "function",
                "where",
                "rank",
                "value",
            ],
        )

    # ---- node timeline ------------------------------------------------------------------
    def timeline(self, rates=False):
        """The node timeline, long format: host, time_s (since the node's first tick),
        source, series, unit, kind (counter or gauge), value (NaN where unread). Counters
        are cumulative; rates=True gives per-second rates between ticks instead (counters:
        increase / interval; gauges: mean of the interval's ends), at the interval's end."""
        nodes = self._exp.timelines
        if not nodes:
            raise NoData(
                f"{self.path}: no node timeline (it is recorded unless "
                "`perfweave run --node-interval 0`)"
            )
        frames = []
        for tl in nodes:
            t = (tl.t - tl.t[0]) / 1e9 if len(tl.t) else tl.t.astype(float)
            vals = tl.rates() if rates else tl.values
            t = t[1:] if rates else t
            n, k = vals.shape
            frames.append(
                pd.DataFrame(
                    {
                        "host": tl.host,
                        "time_s": np.repeat(t, k),
                        "source": np.tile([s["source"] for s in tl.series], n),
                        "series": np.tile([s["name"] for s in tl.series], n),
                        "unit": np.tile([s["unit"] for s in tl.series], n),
                        "kind": np.tile([s["kind"] for s in tl.series], n),
                        "value": vals.reshape(-1),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)


def _tree_paths(tree):
    """{node id: (name, ...) from the root}: the key of the analysis' tree tables."""
    paths = {}
    for n in tree:
        paths[n["id"]] = (paths[n["parent"]] if n["parent"] is not None else ()) + (n["name"],)
    return paths


__all__ = ["open", "Experiment", "NoData"]

"""The measurements of an experiment as pandas DataFrames (docs/python-api.md).

    import perfweave
    exp = perfweave.open("run.pwx")
    exp.call_tree()            # the sampled call tree, one row per node
    exp.mpi_callsites()        # the MPI call-site profile, one row per call site

Every table is computed by the same analysis as `perfweave report` and agrees with
`perfweave report --json`: it is a table of an analysis' typed result (analysis/samples/
SamplesResult, analysis/mpi.py MpiProfileResult, model/waitstates.py WaitStatesResult) or
of a model (model/timeline.py NodeTimeline) made a DataFrame, never read from the report's
dict (`report()` is the JSON document only). A table the experiment has no data for
raises perfweave.errors.NoData (one line saying what is missing and which option of
`perfweave run` records it)."""

import importlib
import importlib.util
import os

import numpy as np
import pandas as pd

from perfweave.errors import NoData, PerfweaveError
from perfweave.symbols import Symbolizer


def open(path, snapshot=None):  # noqa: A001 (perfweave.open)
    """The experiment directory path (perfweave run -o), read lazily: each table is
    computed on first use and kept. PerfweaveError if path is not an experiment. One
    that an older perfweave imported (its traces, no profile.pwprof) is given the
    profile that perfweave import writes today, computed in memory for this read: a
    read saves nothing into the user's directory (perfweave report saves it).
    snapshot: the live snapshot N (perfweave snapshot, docs/snapshots.md) to read;
    None: the newest while the run has not finished, else the run's own files; False:
    the run's own files always. Experiment.snapshot says which was read."""
    from perfweave.readers.sweep import is_sweep

    if is_sweep(path):  # a placement sweep's directory: its result and runs
        return Sweep(path)
    if snapshot is not None:
        from perfweave.readers.experiment import open_experiment

        return Experiment(open_experiment(path, snapshot=snapshot))
    return Experiment(_open_experiment(path))


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
    def snapshot(self):
        """The live snapshot read (docs/snapshots.md): a dict of number, count (snapshots
        taken), taken (its request's time), answered and world_size (ranks); None when
        the run's own files were read."""
        return self._exp.snapshot

    @property
    def meta(self):
        """experiment.json: command, times, options, exit status."""
        return self._exp.meta

    @property
    def profile(self):
        """The profile (model/profile.py Profile): every measured module's calls by call
        site, merged over the experiment's files."""
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
        """The model of each dataset beside the profile (readers/datasets.py:
        samples, timelines, traces, and each module's, such as example), read on first
        use and kept."""
        from perfweave.readers.datasets import DATASETS

        if not name.startswith("_") and name in DATASETS:
            return getattr(self._exp, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- sampling (perfweave run --sample) --------------------------------------------
    def _samples_result(self):
        """The SamplesResult (analysis/samples/) of every sample."""
        if "samples" not in self._cache:
            from perfweave.analysis import phases, samples

            self._cache["samples"] = samples.analyze(
                self._exp.samples,
                symbolizer=self._sym,
                windows=phases.windows(self._exp.profile),
                regions=self._exp.regions.intervals,
            )
        sm = self._cache["samples"]
        if sm is None:
            raise NoData(
                f"{self.path}: no call-stack samples (`perfweave run` records "
                "them by default, or with `--sample`; this run had `--no-sample`)"
            )
        return sm

    def call_tree(self):
        """The sampled call tree, depth first (children by inclusive share): id, parent
        (<NA> for a root), depth, name, path ('main/solve/kernel'), inclusive_pct,
        exclusive_pct, ACTIVITY_pct per activity (inclusive), rank_min/mean/max_pct,
        imbalance, worst_rank; with --counters EVENT_inclusive and EVENT_exclusive."""
        df = pd.DataFrame(self._samples_result().call_tree)
        df["parent"] = df["parent"].astype("Int64").mask(df["parent"] < 0)
        return df

    def call_tree_per_rank(self):
        """The call tree's values per rank, long format: node (call_tree's id), rank,
        activity, samples (inclusive), exclusive_samples (samples weighted by the wall
        time each stands for, see samples()), pct and exclusive_pct (of the rank's
        samples), seconds and exclusive_seconds (the wall time of those samples). Rows
        with no samples are left out."""
        return pd.DataFrame(self._samples_result().call_tree_per_rank)

    def functions(self, inclusive=False):
        """Sampled time per function: name, pct (of all samples), ACTIVITY_pct,
        rank_min/mean/max_pct, imbalance, worst_rank, with --counters one column per
        event. Self time (the innermost frame of the program's own code) by default;
        inclusive=True: the function anywhere on the stack."""
        sm = self._samples_result()
        return pd.DataFrame(sm.inclusive if inclusive else sm.functions)

    def lines(self):
        """Sampled self time per source line: name ('fn (file.c:12)'), function, file
        (its name, without directories), line (0 where unknown), then the columns of
        functions()."""
        df = pd.DataFrame(self._samples_result().lines)
        df["file"] = [os.path.basename(f) for f in df["file"]]
        return df

    def samples(self):
        """Every kept sample: time_s (since the process's start), rank (-1 without MPI),
        process, thread, activity, leaf (the innermost function of the program's own
        code), line ('fn (file:line)'), stack (outermost first, ';'-separated: the
        folded-stack format of flame graph tools), seconds (the wall time the sample
        stands for: since its thread's previous sample; shares of time are shares of
        these, not of samples, see docs/samples.md), with --counters one column per
        event: its increase since the thread's previous sample."""
        sm = self._samples_result()
        df = pd.DataFrame(sm.samples)
        df["activity"] = pd.Categorical(df["activity"], categories=sm.activities)
        return df

    def heap_live(self):
        """Which heap sites were live during each sampled routine's samples (--heap with
        samples; docs/heap.md "When a site's objects were live"): routine (a function
        anywhere on the stack), samples (its samples in processes with live timelines),
        site (the row of table("heap", "sites")), where, live_samples (of its samples,
        those taken while some of the site's objects were live), live_pct. One row per
        (routine, site) with some, most first; none for a record without timelines."""
        from perfweave.analysis.heap import routines_live

        metas = {p.name: p.meta for p in self._exp.samples}
        t = routines_live(
            self._exp.heap, self._result("heap"), self._samples_result().samples, metas
        )
        return pd.DataFrame({k: t[k] for k in t.dtype.names}, columns=list(t.dtype.names))

    # ---- the MPI profile ----------------------------------------------------------------
    def _mpi(self):
        """The MpiProfileResult (analysis/mpi.py) of the profile."""
        if "mpi" not in self._cache:
            from perfweave.analysis.mpi import analyze

            self._cache["mpi"] = analyze(self._exp.profile, top=None, symbolizer=self._sym)
        m = self._cache["mpi"]
        if not m.mpi:
            raise NoData(f"{self.path}: no MPI profile (the program did not use MPI)")
        return m

    def mpi_ranks(self):
        """Per rank: rank, host, pid, state, app_s, mpi_s, mpi_pct, outside_pct, calls,
        threads, init_s, clock offsets; with --counters one column per event."""
        return pd.DataFrame(self._mpi().per_rank)

    def mpi_functions(self):
        """Per MPI function: name, family, calls, time_s, app_pct, mpi_pct, bytes_sent,
        bytes_recv, mean_bytes, sites, ranks, rank_min/mean/max_pct (% of app time)."""
        return pd.DataFrame(self._mpi().functions).drop(columns="rank_avg_over_max")

    def mpi_callsites(self, per_rank=False):
        """Per MPI call site (by time): id, function, family, where, file, line, stack
        (' <- '-joined callers), calls, time_s, mean_s, min_s, max_s, app_pct, mpi_pct,
        cov, ranks, bytes_sent, bytes_recv; with --counters EVENT_inside and
        EVENT_before. per_rank=True: long format id, function, where, rank, time_s."""
        m = self._mpi()
        sites = m.callsites
        if per_rank:
            pr = m.callsite_ranks
            row = pr["id"] - 1  # ids number the call sites from 1, in order
            return pd.DataFrame(
                {
                    "id": pr["id"],
                    "function": sites["function"][row],
                    "where": sites["where"][row],
                    "rank": pr["rank"],
                    "time_s": pr["time_s"],
                },
                columns=["id", "function", "where", "rank", "time_s"],
            )
        head = ["id", "function", "family", "where", "file", "line"]
        counts = [f"{ev}_{p}" for ev in m.counters for p in ("inside", "before")]
        other = set(head + counts) | {"location", "stack", "stack_where", "file", "line"}
        other |= {f"{ev}_{p}_per_s" for ev in m.counters for p in ("inside", "before")}
        other |= {"counters_inside_s", "counters_before_s"}
        df = pd.DataFrame({k: sites[k] for k in head})
        df["stack"] = [" <- ".join(s) for s in sites["stack_where"]]
        for k in sites.dtype.names:
            if k not in other:
                df[k] = sites[k]
        for k in counts:
            df[k] = sites[k]
        return df

    def mpi_compact_callsites(self, top=None):
        """The compact profile's MPI call sites (profile.pwcompact: every MPI run's, the only
        MPI profile above --full-profile-ranks), by time: function, where, ranks (that
        called it), calls, time_s and the statistics over those ranks: min_s, mean_s,
        max_s, argmin, argmax, std_s, median_s and p90_s (from a sketch, within
        sketch_relative_error), imbalance (max / mean), bytes_sent, bytes_recv, and the
        90th percentiles per rank of calls, bytes sent and received (calls_p90, sent_p90,
        recv_p90: sketches too; NaN from a version-1 file). NoData without the file."""
        from perfweave.analysis.compact import analyze

        p = self._exp.compact
        if p is None:
            raise NoData(f"{self.path}: no compact profile (profile.pwcompact)")
        c = analyze(p, top=top or len(p.nodes))
        return pd.DataFrame(c["callsites"])

    def message_sizes(self):
        """Message-size histogram: function, bucket, min_bytes, max_bytes (<NA>: open
        ended), calls, bytes, time_s."""
        df = pd.DataFrame(self._mpi().message_sizes)
        df["max_bytes"] = df["max_bytes"].astype("Int64").mask(df["max_bytes"] < 0)
        return df

    def comm_matrix(self, collectives=False):
        """The communication matrix (docs/mpi-profile.md "Communication matrix"), from the
        profile: per communicator, sender and receiver (MPI_COMM_WORLD ranks; -2 a sender
        the runtime could not know), messages, bytes, send_s, recv_s, with comm_name and
        the sender's and receiver's hosts. collectives=True: per communicator, collective
        function and rank: calls, bytes_sent, bytes_recv, time_s (by the collective's
        own size formula). NoData without MPI or from a profile before version 6.
        Above --full-profile-ranks (the compact profile alone): its top pairs by bytes,
        without send_s, recv_s and hosts (NaN, ""); no collectives (NoData)."""
        from perfweave.analysis.comm_matrix import analyze, from_compact

        prof = self._exp.profile
        if not len(prof.comms) and not len(prof.ranks):
            c = from_compact(self._exp.compact)
            if c is None or collectives:
                raise NoData(f"{self.path}: no communication matrix in the compact profile"
                             + (" (collectives per rank are not in it)" if c else ""))  # fmt: skip
            df = pd.DataFrame(c["pairs"], columns=["comm", "comm_name", "sender", "receiver",
                                                   "messages", "bytes"])  # fmt: skip
            df["send_s"] = df["recv_s"] = np.nan
            df["sender_host"] = df["receiver_host"] = ""
            return df
        m = analyze(prof)
        if not prof.mpi or not m["communicators"]:
            raise NoData(f"{self.path}: no communication matrix (no MPI calls recorded)")
        names = {c["id"]: c["name"] for c in m["communicators"]}
        host = m["hosts"]
        if collectives:
            df = pd.DataFrame(
                m["collectives"],
                columns=["comm", "function", "rank", "calls", "bytes_sent", "bytes_recv",
                         "time_s"],
            )  # fmt: skip
            df.insert(1, "comm_name", df["comm"].map(names))
            df["host"] = df["rank"].map(lambda r: host.get(str(r), ""))
            return df
        df = pd.DataFrame(
            m["p2p"],
            columns=["comm", "sender", "receiver", "messages", "bytes", "send_s", "recv_s"],
        )
        df.insert(1, "comm_name", df["comm"].map(names))
        df["sender_host"] = df["sender"].map(lambda r: host.get(str(r), ""))
        df["receiver_host"] = df["receiver"].map(lambda r: host.get(str(r), ""))
        return df

    def comm_rank_totals(self):
        """Per rank its point-to-point bytes and messages sent and received (every send
        and receive row of the rank, exact): rank, sent_bytes, sent_messages, recv_bytes,
        recv_messages; from the full profile's matrix, or the compact profile's summary
        above --full-profile-ranks. NoData without either."""
        from perfweave.analysis.comm_matrix import from_compact
        from perfweave.model.compact import RANK_COMM, matrix_summary

        prof = self._exp.profile
        if not len(prof.comms):
            c = from_compact(self._exp.compact) if not len(prof.ranks) else None
            if c is None:
                raise NoData(f"{self.path}: no communication matrix (no MPI calls recorded)")
            return pd.DataFrame(c["ranks"], columns=["rank", *RANK_COMM])
        _, totals = matrix_summary(prof.comms, prof.world_size)  # the compact's, exactly
        df = pd.DataFrame(totals.T, columns=list(RANK_COMM))
        df.insert(0, "rank", np.arange(prof.world_size))
        return df

    # ---- wait states (perfweave analyze) -------------------------------------------------
    def wait_states(self):
        """The wait-state analysis (analysis/waitstates.json), long format: metric (id),
        metric_name, parent (metric id), unit, callpath (id), callpath_name, function,
        where, rank, value. Every non-zero value of every metric."""
        res = self._exp.waitstates
        if res is None:
            raise NoData(
                f"{self.path}: no wait-state analysis (record with `perfweave run "
                "--trace`, then run `perfweave analyze`)"
            )
        m, cp, v = res.metrics, res.callpaths, res.values
        metric = {k: i for i, k in enumerate(m["id"].tolist())}
        path = {k: i for i, k in enumerate(cp["id"].tolist())}
        mi = np.array([metric[k] for k in v["metric"].tolist()], np.int64)
        pi = [path.get(k) for k in v["callpath"].tolist()]

        def of_path(col):  # "" for a call path the result does not describe
            return [cp[col][i] if i is not None else "" for i in pi]

        return pd.DataFrame(
            {
                "metric": v["metric"],
                "metric_name": m["name"][mi],
                "parent": m["parent"][mi],
                "unit": m["unit"][mi],
                "callpath": v["callpath"],
                "callpath_name": of_path("name"),
                "function": of_path("function"),
                "where": of_path("where"),
                "rank": v["rank"],
                "value": v["value"],
            },
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

    # ---- every module's tables, one path -------------------------------------------------
    def _result(self, kind):
        """The typed result of kind's analysis (_analysis), computed once."""
        analysis = _analysis(kind)
        if analysis is None:
            with_tables = sorted(k for k in _datasets() if _analysis(k) is not None)
            raise PerfweaveError(
                f"no tables of {kind!r} (kinds with tables: {', '.join(with_tables)})"
            )
        key = ("result", kind)
        if key not in self._cache:
            data = getattr(self._exp, kind)
            if not data:
                raise NoData(f"{self.path}: no {kind} data ({analysis.RECORDED_BY})")
            self._cache[key] = analysis.analyze(data)
        return self._cache[key]

    def tables(self, kind):
        """The names of the tables of kind's analysis result (table(kind, name))."""
        r = self._result(kind)
        return [
            k
            for k in r.__dataclass_fields__
            if isinstance(getattr(r, k), np.ndarray) and getattr(r, k).dtype.names
        ]

    def table(self, kind, name):
        """The table `name` of the analysis result of the module data `kind` (mathlib:
        routines, callsites, size_classes, plans, dims_hist; io: per_rank, files,
        callsites), one row per row of the result, its fields as columns: the rows
        `perfweave report --json` shows under that kind's section."""
        names = self.tables(kind)
        if name not in names:
            raise PerfweaveError(f"{kind} has no table {name!r} (its tables: {', '.join(names)})")
        t = getattr(self._result(kind), name)
        return pd.DataFrame({k: t[k] for k in t.dtype.names}, columns=list(t.dtype.names))

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


class Sweep:
    """A placement sweep's directory (perfweave placement sweep -o, docs/placement.md
    "Sweep"), what perfweave.open() returns for it: its result (analysis/sweep.py
    SweepResult, the same as the sweep's --json) and each run's experiment."""

    def __init__(self, path):
        from perfweave.analysis.sweep import SweepResult
        from perfweave.readers.sweep import read_sweep

        self.path = os.fspath(path)
        self.result = SweepResult.from_json(read_sweep(self.path))

    def __repr__(self):
        return f"<perfweave.Sweep {self.path!r}: {len(self.result.rows)} rows>"

    def table(self, name="rows"):
        """rows (one per range or site, all-slow and all-fast first: SweepResult's
        columns) or runs (one per run: variant, round, wall_s, placed_bytes,
        verified_bytes, experiment)."""
        if name not in ("rows", "runs"):
            raise PerfweaveError(f"a sweep has no table {name!r} (its tables: rows, runs)")
        t = getattr(self.result, name)
        return pd.DataFrame({k: t[k] for k in t.dtype.names}, columns=list(t.dtype.names))

    def experiment(self, variant="profile", round=0):  # noqa: A002 (the runs' column)
        """The Experiment of one run: variant 'profile' (the --heap run that picked the
        ranges) or a row's name (slow, fast, range1, site1, ...), and its round."""
        if variant == "profile":
            rel = self.result.profile
        else:
            runs = self.result.runs
            hit = runs[(runs["variant"] == variant) & (runs["round"] == round)]
            if not len(hit):
                raise PerfweaveError(f"{self.path}: no run {variant!r} in round {round}")
            rel = hit["experiment"][0]
        return open(os.path.join(self.path, rel))


def _datasets():
    from perfweave.readers.datasets import DATASETS

    return DATASETS


def _analysis(kind):
    """The analysis of the dataset `kind` (readers/datasets.py) that gives table() its
    tables: analysis/KIND.py, when it declares RECORDED_BY (what records the data, for
    NoData) beside its analyze(model), which returns a typed result with numpy tables;
    else None. A module's analysis offers its tables so, in its own file."""
    if kind not in _datasets() or importlib.util.find_spec(f"perfweave.analysis.{kind}") is None:
        return None
    analysis = importlib.import_module(f"perfweave.analysis.{kind}")
    return analysis if hasattr(analysis, "RECORDED_BY") else None


__all__ = ["open", "Experiment", "Sweep", "NoData"]


def _open_experiment(path):
    """The readers' experiment of path, as open() reads it (an older import's profile
    computed in memory)."""
    from perfweave.readers.experiment import NoImportedProfile, open_experiment

    try:
        return open_experiment(path)
    except NoImportedProfile:
        # the analyses load only here: reading any other experiment needs none of them
        from perfweave.analysis.imported_profile import content

        return open_experiment(path, reduced_content=content(path))


def compare(a, b, *more, by="callpath", metric=None, inclusive=False, result=False):
    """Experiments compared against the baseline a (analysis/compare.py, the same as
    `perfweave compare --json`): a DataFrame, one row per (compared side, key): side
    ('B', 'C', ...: the side compared with a), key (for callpath the '/'-joined path),
    a, b (NaN: not in that side), delta, ratio (b / a), p_value (Welch's), test,
    sigma, threshold, regression, only_in ('' or the label of the one side with the
    key), a_ranks, b_ranks. A side is a path or a list of paths (repetitions of one
    experiment); inclusive: routines' and call paths' values with their callees'.
    result=True: the CompareResult instead (its sides' split and POP factors)."""
    from perfweave.analysis.compare import compare as run

    sides = []
    for i, s in enumerate((a, b, *more)):
        paths = [s] if isinstance(s, (str, os.PathLike)) else list(s)
        sides.append((chr(ord("A") + i) if i < 26 else f"S{i + 1}", paths))
    res = run(sides, by=by, metric=metric, inclusive=inclusive, open_experiment=_open_experiment)
    if result:
        return res
    parts = []
    for c in res.comparisons:
        df = pd.DataFrame(c["rows"])
        df.insert(0, "side", c["label"])
        parts.append(df)
    out = pd.concat(parts, ignore_index=True)
    out["key"] = out["key"].astype(str)
    out["regression"] = out["regression"].astype(bool)
    return out

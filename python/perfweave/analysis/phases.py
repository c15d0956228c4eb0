"""The parts of a rank's life, apart (docs/mpi-profile.md "Start-up and shutdown").

A rank's life has four phases, by the timestamps of its rank record (docs/format.md):
  before_init  from the runtime's start (the process's, after the loader) to MPI_Init's
               entry: constructors and the program's own code before MPI_Init;
  init         inside MPI_Init (the start-up): the launcher's and PMI's wire-up, MPI's
               own set-up, perfweave's set-up and clock synchronisation;
  app          the app time: MPI_Init's return to MPI_Finalize's entry, what the MPI
               profile's percentages are of;
  shutdown     from MPI_Finalize's entry to the process's exit: MPI_Finalize, the
               gathering and writing of perfweave's data, code after it, exit handlers.
The end of the shutdown is known from the samples (their description's t_end, written at
exit); without samples it is not measured. On a short run the start-up can be most of the
wall time (a PMIx wire-up of 0.2 s against 5 ms of app time): the report shows it on its
own line so that no percentage of the app time hides it.
"""

import numpy as np

from perfweave.analysis.mpi import stats

PHASES = ("before_init", "init", "app", "shutdown")
APP = PHASES.index("app")


def windows(profile):
    """{rank: (t_init_enter, t_init_leave, t_fini_enter)} of the ranks that entered
    MPI_Init (their own CLOCK_MONOTONIC ns); empty without MPI or for an imported trace
    (no such times)."""
    if profile is None or not profile.mpi:
        return {}
    r = profile.ranks
    ok = (r["rank"] >= 0) & (r["t_init_enter"] > 0) & (r["t_init_leave"] >= r["t_init_enter"])
    return {
        int(x["rank"]): (int(x["t_init_enter"]), int(x["t_init_leave"]), int(x["t_fini_enter"]))
        for x in r[ok]
    }


def of_samples(t, window):
    """Each timestamp's phase (an index into PHASES); all app without a window (a process
    without MPI: its app time is its life)."""
    if window is None:
        return np.full(len(t), APP, np.int64)
    enter, leave, fini = window
    return np.searchsorted(
        np.array([enter, leave, fini], np.int64), np.asarray(t, np.int64), side="right"
    )


def summarize(profile, mpi_ranks, sample_metas=(), samples_pct=None):
    """The report's "startup" block, or None without MPI start-up times: per rank and over
    ranks (min/mean/max/stdev), before_init_s, init_s (the start-up), app_time_s and
    shutdown_s (None without samples: its end is their write at exit). mpi_ranks: the MPI
    analysis' per_rank (analysis/mpi.py), whose init_s and app_s these are; samples_pct:
    each phase's share of the samples (analysis/samples/ phase_pct), when sampled."""
    win = windows(profile)
    if not win:
        return None
    starts = dict(zip(profile.ranks["rank"].tolist(), profile.ranks["t_start"].tolist()))
    ends = {
        int(m.get("rank", -1)): int(m["t_end"])
        for m in sample_metas
        if m.get("rank", -1) in win and m.get("t_end")
    }
    per_rank = []
    for r in mpi_ranks:
        rank = r["rank"]
        if rank not in win:
            continue
        enter, _, fini = win[rank]
        end = ends.get(rank)
        per_rank.append(
            {
                "rank": rank,
                "before_init_s": max(enter - starts[rank], 0) / 1e9 if starts[rank] else None,
                "init_s": r["init_s"],
                "app_s": r["app_s"],
                "shutdown_s": max(end - fini, 0) / 1e9 if end else None,
            }
        )

    def over(key):
        v = [p[key] for p in per_rank if p[key] is not None]
        return stats(v) if v else None

    return {
        "ranks": len(per_rank),
        "before_init_s": over("before_init_s"),
        "init_s": over("init_s"),
        "app_time_s": over("app_s"),
        "shutdown_s": over("shutdown_s"),
        "shutdown_ranks": sum(p["shutdown_s"] is not None for p in per_rank),
        "samples_pct": samples_pct,
        "per_rank": per_rank,
    }


def intervals(profile, sample_metas=()):
    """The phases as an interval table (analysis/correlate.py INTERVAL_DTYPE: kind
    "phase", thread 0, depth 0, the rank's CLOCK_MONOTONIC ns): before_init from the
    runtime's start, init, app, and shutdown where the samples' end is known."""
    from perfweave.analysis.correlate import intervals_of

    win = windows(profile)
    starts = dict(zip(profile.ranks["rank"].tolist(), profile.ranks["t_start"].tolist()))
    ends = {int(m.get("rank", -1)): int(m["t_end"]) for m in sample_metas if m.get("t_end")}
    rows = []
    for rank in sorted(win):
        enter, leave, fini = win[rank]
        bounds = [starts.get(rank) or 0, enter, leave, fini, ends.get(rank, 0)]
        for i, name in enumerate(PHASES):
            if bounds[i] > 0 and bounds[i + 1] >= bounds[i]:
                rows.append(
                    {
                        "rank": rank,
                        "thread": 0,
                        "name": name,
                        "kind": "phase",
                        "depth": 0,
                        "t_begin": bounds[i],
                        "t_end": bounds[i + 1],
                    }
                )
    return intervals_of(rows)


def init_times(profile):
    """{rank: (MPI_Init entered, left, MPI_Finalize entered)} in the rank's
    CLOCK_MONOTONIC ns (windows, for analysis/correlate.py)."""
    return windows(profile)

"""The regions module's data (runtime/modules/regions.c; docs/regions.md): the intervals
of the program's regions, phases and measurement-off windows, per process. readers/
regions.py builds it from the files, `from_literal` from plain values (tests); the
analysis (analysis/regions.py) and the report section read it."""

from dataclasses import dataclass, field

import numpy as np

# the intervals table's columns (one row per interval): times in ns of the process's
# CLOCK_MONOTONIC, the clock of its samples and trace records
INTERVAL_COLUMNS = [
    ("rank", np.int64),  # -1: a process without an MPI rank
    ("pid", np.int64),
    ("host", object),
    ("thread", np.int64),  # the thread's OS id (the samples' threads' "tid")
    ("name", object),
    ("kind", object),  # "region", "phase" or "off"
    ("depth", np.int64),  # regions open around a region; 0 for the others
    ("t_begin", np.int64),
    ("t_end", np.int64),
    ("mpi_ns", np.int64),  # the thread's recorded MPI time inside (inclusive)
    ("mpi_calls", np.int64),
    ("open", bool),  # still open when the process ended (t_end: its end)
]
INTERVAL_DTYPE = np.dtype(INTERVAL_COLUMNS)


@dataclass(frozen=True)
class RegionsProcess:
    """One process's description (regions/NAME.json)."""

    rank: int
    pid: int
    host: str
    state: str
    unmatched_ends: int  # ends that named no open region or phase (ignored)
    dropped: int  # intervals not kept (too deep, too many names, no memory)


@dataclass
class Regions:
    """Every process's intervals (INTERVAL_DTYPE, by rank, pid, thread, t_begin), the
    processes, and what could not be read (notes)."""

    intervals: np.ndarray = field(default_factory=lambda: np.zeros(0, INTERVAL_DTYPE))
    processes: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def __bool__(self):
        """Whether the run recorded any of the module's data."""
        return bool(len(self.intervals) or self.processes)

    @classmethod
    def from_literal(cls, intervals, processes=(), notes=()):
        """Regions of plain values: intervals, dicts of INTERVAL_COLUMNS (rank 0, pid
        1000 + rank, host "h", thread pid, kind "region", depth 0, mpi_ns and mpi_calls
        0, open False unless given); processes, dicts of RegionsProcess's fields
        (defaults alike; by default one per (rank, pid) of the intervals)."""
        rows = []
        for iv in intervals:
            rank = iv.get("rank", 0)
            pid = iv.get("pid", 1000 + rank)
            base = {"rank": rank, "pid": pid, "host": "h", "thread": pid, "kind": "region"}
            base.update({"depth": 0, "mpi_ns": 0, "mpi_calls": 0, "open": False})
            base.update(iv)
            rows.append(tuple(base[k] for k, _ in INTERVAL_COLUMNS))
        table = sort_intervals(np.array(rows, INTERVAL_DTYPE))
        procs = [
            RegionsProcess(
                **{"host": "h", "state": "complete", "unmatched_ends": 0, "dropped": 0, **p}
            )
            for p in processes
        ]
        if not procs:
            seen = sorted({(int(r["rank"]), int(r["pid"])) for r in table})
            procs = [RegionsProcess(r, p, "h", "complete", 0, 0) for r, p in seen]
        return cls(table, procs, list(notes))


def sort_intervals(table):
    """The intervals in the model's order."""
    order = np.lexsort(
        (table["depth"], table["t_begin"], table["thread"], table["pid"], table["rank"])
    )
    return table[order]

"""The example module's analysis (runtime/modules/example.c, `perfweave run --example`):
its wrapped function's calls and time, in all and per process, as a typed result. The
template of a module's analysis: `analyze` takes the module's model (model/example.py,
ExperimentDir.example) and returns a result whose `to_json()` is the report section's data
(report/sections/example.py) and whose tables are `perfweave.open(path).table("example",
NAME)` DataFrames (api.py finds this module by the dataset's name and its RECORDED_BY)."""

from dataclasses import dataclass

import numpy as np

from perfweave.model.table import records, table

# how `perfweave run` records the kind's data: api.py's NoData message when there is none;
# a module's analysis that declares it offers its tables to perfweave.open().table()
RECORDED_BY = "record it with `perfweave run --example`"


@dataclass
class ExampleResult:
    """The calls of every process (model/example.py Example) summed, and per process.

    per_process: one row per process, most time first (where the calls cost): rank (-1:
    no MPI rank), host, pid, state (how it ended), threads (that made calls), calls,
    time_s (inside the calls), longest_call_s."""

    function: str
    processes: int
    ranks: int
    threads: int
    calls: int
    time_s: float
    mean_call_s: float  # None without calls
    longest_call_s: float
    per_process: np.ndarray
    job: dict  # example/job.json's sums (an MPI job's), None without
    notes: list

    def to_json(self):
        return {
            "function": self.function,
            "processes": self.processes,
            "ranks": self.ranks,
            "threads": self.threads,
            "calls": self.calls,
            "time_s": self.time_s,
            "mean_call_s": self.mean_call_s,
            "longest_call_s": self.longest_call_s,
            "per_process": records(self.per_process),
            "job": self.job,
            "notes": list(self.notes),
        }


def analyze(ex):
    """The ExampleResult of an Example."""
    procs = sorted(ex.processes, key=lambda p: -p.total_ns)
    calls = sum(p.calls for p in procs)
    total = sum(p.total_ns for p in procs)
    per_process = table(
        {
            "rank": [p.rank for p in procs],
            "host": [p.host for p in procs],
            "pid": [p.pid for p in procs],
            "state": [p.state for p in procs],
            "threads": [p.threads for p in procs],
            "calls": [p.calls for p in procs],
            "time_s": [p.total_ns / 1e9 for p in procs],
            "longest_call_s": [p.max_ns / 1e9 for p in procs],
        }
    )
    return ExampleResult(
        function=ex.function,
        processes=len(procs),
        ranks=sum(p.rank >= 0 for p in procs),
        threads=sum(p.threads for p in procs),
        calls=calls,
        time_s=total / 1e9,
        mean_call_s=total / calls / 1e9 if calls else None,
        longest_call_s=max((p.max_ns for p in procs), default=0) / 1e9,
        per_process=per_process,
        job=ex.job,
        notes=list(ex.notes),
    )

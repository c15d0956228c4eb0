"""The example module's data (runtime/modules/example.c, `perfweave run --example`): its
one wrapped function's calls per process, and the job's sums. The model every layer
above the reader works on: readers/example.py builds it from the files, `from_literal`
from plain values (tests), the report section (report/sections/example.py) reads it.
The template of a module's model, with the reader and the section beside it."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ExampleProcess:
    """One measured process (example/rank-R.json or example/HOST.PID.json)."""

    rank: int  # -1: a process without an MPI rank
    pid: int
    host: str
    state: str  # how it ended: a name of format.h PW_STATES
    threads: int  # threads that made calls
    calls: int
    total_ns: int  # time inside the calls
    max_ns: int  # the longest call


@dataclass
class Example:
    """Every process's counts (ranks in rank order, then processes without a rank by
    host and pid), the job's sums (example/job.json, an MPI job's reduce at
    MPI_Finalize; None without), and what could not be read (notes)."""

    function: str = "sched_yield"
    processes: list = field(default_factory=list)
    job: dict = None
    notes: list = field(default_factory=list)

    def __bool__(self):
        """Whether the run recorded any of the module's data."""
        return bool(self.processes or self.job)

    @classmethod
    def from_literal(cls, processes, job=None, function="sched_yield", notes=()):
        """An Example of plain values: processes, dicts of ExampleProcess's fields
        (host "h", state "complete" and pid 0 unless given)."""
        procs = [
            ExampleProcess(**{"host": "h", "state": "complete", "pid": 0, **p}) for p in processes
        ]
        return cls(
            function, sorted(procs, key=process_key), dict(job) if job else None, list(notes)
        )


def process_key(p):
    """The order of Example.processes."""
    return (p.rank < 0, p.rank, p.host, p.pid)

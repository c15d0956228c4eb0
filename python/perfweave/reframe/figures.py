"""The figures of a perfweave report that a ReFrame test gets as performance variables
(docs/reframe.md), declared once: name, unit, what the run needs to have them (MPI
calls, a `perfweave run` option), what they are, and where the report (`perfweave
report --json`) or the saved wait-state analysis (`perfweave analyze`,
analysis/waitstates.json) holds them.

`figures(report, waitstates)` needs no ReFrame: the test base in mixin.py reads the
files its job wrote and hands them here."""

from dataclasses import dataclass
from typing import Callable

from perfweave.analysis.metrics import PARENT, PATTERNS
from perfweave.report.sections.pop import factors


@dataclass(frozen=True)
class Figure:
    name: str  # the performance variable's name, the key of `reference`
    unit: str
    needs: tuple  # of NEEDS: what the run must have for the report to hold the figure
    what: str  # one sentence, as docs/reframe.md lists it
    # (report, waitstates) -> the value, or None where the report has no such figure
    get: Callable


def _option(name):
    return lambda report: bool((report.get("options") or {}).get(name))


# what a figure can need of the run: MPI calls in the program (a profile of them), and
# the options of `perfweave run` that record more (the report's `options`)
NEEDS = {
    "mpi": lambda report: bool((report.get("mpi_profile") or {}).get("mpi")),
    "io": _option("io"),
    "trace": _option("trace"),
}


def _stat(key, stat):
    """A statistic over ranks of the report's MPI profile."""
    return lambda report, waitstates: report["mpi_profile"][key][stat]


def _io_pct(report, waitstates):
    io = report.get("io")
    return io.get("io_pct") if io else None


def _pop(key):
    """A multiplicative POP factor, in %, as the report's POP line prints it."""

    def get(report, waitstates):
        doc = report.get("pop")
        if not doc or doc.get("error"):
            return None
        value = factors(doc).get(key)
        return None if value is None else 100 * value

    return get


def _outer_pattern(mid):
    """A wait-state pattern that is no part of another (Late Sender, not its wrong-order
    part): the patterns' metrics are inclusive of their children."""
    up = PARENT[mid]
    while up:
        if up in PATTERNS:
            return False
        up = PARENT[up]
    return True


def _totals(waitstates):
    """{metric id: total} of a wait-state analysis."""
    return dict(zip(waitstates.metrics["id"].tolist(), waitstates.metrics["total"].tolist()))


def _wait(report, waitstates):
    if waitstates is None:
        return None
    return sum(t for m, t in _totals(waitstates).items() if m in PATTERNS and _outer_pattern(m))


def _overhead(report, waitstates):
    return None if waitstates is None else _totals(waitstates).get("overhead")


FIGURES = (
    Figure(
        "elapsed",
        "s",
        (),
        "wall time of the launch command, from its start to its exit (`wall_s`)",
        lambda report, waitstates: report.get("wall_s"),
    ),
    Figure(
        "app_time",
        "s",
        ("mpi",),
        "the longest rank's time from MPI_Init to MPI_Finalize (`mpi_profile.app_time_s.max`)",
        _stat("app_time_s", "max"),
    ),
    Figure(
        "compute",
        "s",
        ("mpi",),
        "the longest rank's time outside MPI within its app time: computation, and I/O "
        "outside MPI (`mpi_profile.outside_mpi_s.max`)",
        _stat("outside_mpi_s", "max"),
    ),
    Figure(
        "mpi_pct",
        "%",
        ("mpi",),
        "MPI time as a share of the app time, mean over ranks (`mpi_profile.mpi_pct.mean`)",
        _stat("mpi_pct", "mean"),
    ),
    Figure(
        "io_pct",
        "%",
        ("io",),
        "I/O time as a share of the processes' wall time (`io.io_pct`)",
        _io_pct,
    ),
    Figure(
        "wait",
        "s",
        ("mpi", "trace"),
        "seconds in wait states, every pattern of perfweave analyze's metric tree summed over "
        "ranks, a pattern inside another counted once (analysis/waitstates.json)",
        _wait,
    ),
    Figure(
        "overhead",
        "s",
        ("mpi", "trace"),
        "perfweave's trace buffer flushes inside the ranks' app time, summed over ranks "
        "(perfweave analyze's Overhead metric)",
        _overhead,
    ),
    Figure(
        "PE",
        "%",
        ("mpi", "trace"),
        "POP parallel efficiency (`pop.multiplicative.parallel_efficiency`)",
        _pop("parallel_efficiency"),
    ),
    Figure(
        "LB",
        "%",
        ("mpi", "trace"),
        "POP load balance (`pop.multiplicative.load_balance`)",
        _pop("load_balance"),
    ),
    Figure(
        "CommE",
        "%",
        ("mpi", "trace"),
        "POP communication efficiency (`pop.multiplicative.communication_efficiency`)",
        _pop("communication_efficiency"),
    ),
    Figure(
        "SerE",
        "%",
        ("mpi", "trace"),
        "POP serialisation efficiency, from the ideal-network replay (else the critical "
        "path), as the report prints it (`pop.ideal.replay.multiplicative`)",
        _pop("serialisation_efficiency"),
    ),
    Figure(
        "TE",
        "%",
        ("mpi", "trace"),
        "POP transfer efficiency, from the same ideal runtime as SerE",
        _pop("transfer_efficiency"),
    ),
)


def recorded(report, figure):
    """Whether the run of the report has what figure needs (MPI calls, the `perfweave run`
    options that record it)."""
    return all(NEEDS[n](report) for n in figure.needs)


def figures(report, waitstates=None):
    """{name: value} of the FIGURES that the report (the `perfweave report --json` document,
    a dict) and the wait-state analysis (a model.waitstates.WaitStatesResult, or None when
    perfweave analyze did not run) hold."""
    out = {}
    for f in FIGURES:
        value = f.get(report, waitstates) if recorded(report, f) else None
        if value is not None:
            out[f.name] = value
    return out

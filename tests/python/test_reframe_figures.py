"""perfweave.reframe without ReFrame: the package imports, PerfweaveMixin's look-up says
what is missing, and figures() takes each figure from the report's key or the wait-state
analysis, on reports written by hand. The plugin under the real ReFrame:
tests/runtime/test_reframe.py."""

import subprocess
import sys

import pytest

from perfweave.model.waitstates import WaitStatesResult
from perfweave.reframe import FIGURES, figures

PROFILE = {
    "wall_s": 2.5,
    "options": {"trace": False, "io": False},
    "mpi_profile": {
        "mpi": True,
        "app_time_s": {"min": 1.0, "mean": 1.5, "max": 2.0},
        "outside_mpi_s": {"min": 0.5, "mean": 1.0, "max": 1.5},
        "mpi_pct": {"min": 10.0, "mean": 20.0, "max": 30.0},
    },
}


def test_imports_without_reframe():
    """With `reframe` unimportable, the package and its figures import; the mixin's
    look-up is one ImportError naming ReFrame."""
    code = (
        "import sys; sys.modules['reframe'] = None\n"
        "import perfweave.reframe as pr\n"
        "assert pr.FIGURES and callable(pr.figures)\n"
        "try:\n"
        "    from perfweave.reframe import PerfweaveMixin\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        "perfweave.reframe.PerfweaveMixin needs ReFrame 4.6 or later (pip install reframe-hpc)"
    )


def test_profile_figures():
    """A run without --trace or --io: the profile's figures only."""
    assert figures(PROFILE) == {"elapsed": 2.5, "app_time": 2.0, "compute": 1.5, "mpi_pct": 20.0}


def test_program_without_mpi():
    report = {"wall_s": 1.25, "options": {}, "mpi_profile": {"mpi": False}}
    assert figures(report) == {"elapsed": 1.25}


def test_trace_and_io_figures():
    """Wait states: Late Sender (its wrong-order part inside it, not counted again) plus
    Wait at Barrier; POP factors in %, SerE and TE from the critical path when the replay
    has no ideal runtime (the report's POP line does the same)."""
    report = {
        **PROFILE,
        "options": {"trace": True, "io": True},
        "io": {"io_pct": 3.5},
        "pop": {
            "multiplicative": {
                "parallel_efficiency": 0.5,
                "load_balance": 0.625,
                "communication_efficiency": 0.8,
            },
            "ideal": {
                "replay": {"multiplicative": {}, "t_ideal_s": None},
                "critical_path": {
                    "multiplicative": {
                        "serialisation_efficiency": 0.875,
                        "transfer_efficiency": 0.25,
                    },
                    "t_ideal_s": 1.0,
                },
            },
        },
    }
    rows = [
        ("time", None, 4.0),
        ("mpi_latesender", "mpi_point2point", 0.75),
        ("mpi_latesender_wo", "mpi_latesender", 0.5),
        ("mpi_barrier_wait", "mpi_sync_collective", 0.125),
        ("overhead", "time", 0.0625),
    ]
    ws = WaitStatesResult.from_literal(
        [{"id": m, "name": m, "parent": p, "total": t, "pct": 0.0} for m, p, t in rows], [], []
    )
    got = figures(report, ws)
    assert got == {
        **figures(PROFILE),
        "io_pct": 3.5,
        "wait": 0.875,
        "overhead": 0.0625,
        "PE": 50.0,
        "LB": 62.5,
        "CommE": 80.0,
        "SerE": 87.5,
        "TE": 25.0,
    }
    assert list(got) == [f.name for f in FIGURES]


@pytest.mark.parametrize("pop", [None, {"error": "a replay that deadlocks"}])
def test_trace_without_pop(pop):
    """A trace whose report has no POP section, or one with an error: no POP figures (the
    test base then fails the test in one line, rather than give a number it lacks)."""
    report = {**PROFILE, "options": {"trace": True}, "pop": pop}
    assert not {"PE", "LB", "CommE", "SerE", "TE"} & figures(report).keys()

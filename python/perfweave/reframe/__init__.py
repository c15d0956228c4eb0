"""perfweave in ReFrame regression tests (docs/reframe.md).

    from perfweave.reframe import PerfweaveMixin

    @rfm.simple_test
    class Solver(rfm.RunOnlyRegressionTest, PerfweaveMixin): ...

runs the test's job under `perfweave run` and gives the report's figures (FIGURES:
elapsed, MPI %, I/O %, wait states, POP factors, ...) as performance variables, for
`reference` thresholds to gate.

Importing this package does not import ReFrame: PerfweaveMixin (mixin.py) is imported at
its first look-up, and without ReFrame that look-up is an ImportError that says so.
FIGURES and figures() need no ReFrame.
"""

from perfweave.reframe.figures import FIGURES, Figure, figures

__all__ = ["FIGURES", "Figure", "PerfweaveMixin", "figures"]


def __getattr__(name):
    if name != "PerfweaveMixin":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    need = "perfweave.reframe.PerfweaveMixin needs ReFrame 4.6 or later (pip install reframe-hpc)"
    try:
        import reframe
    except ImportError:
        raise ImportError(need) from None
    # 4.6 gave job launchers the modifier that puts perfweave in front of them
    if tuple(int(x) for x in reframe.VERSION.split(".")[:2]) < (4, 6):
        raise ImportError(f"{need}; this is ReFrame {reframe.VERSION}")
    from perfweave.reframe.mixin import PerfweaveMixin

    return PerfweaveMixin

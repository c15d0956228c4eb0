"""perfweave: performance analysis for parallel HPC programs."""

__version__ = "0.1.0"


def open(path, snapshot=None):  # noqa: A001 (as perfweave.open)
    """An experiment directory as pandas DataFrames: perfweave.api.Experiment
    (docs/python-api.md); a placement sweep's directory: perfweave.api.Sweep
    (docs/placement.md "Sweep"). pandas is imported here, not by the command line. snapshot:
    a live snapshot's number (docs/snapshots.md; None: the newest while the run runs)."""
    from perfweave import api

    return api.open(path, snapshot=snapshot)


def compare(a, b, *more, by="callpath", metric=None, inclusive=False):
    """Experiments compared, B (and more) against the baseline A, as a pandas DataFrame:
    perfweave.api.compare (docs/compare.md). A side is a path or a list of paths
    (repeated experiments)."""
    from perfweave import api

    return api.compare(a, b, *more, by=by, metric=metric, inclusive=inclusive)

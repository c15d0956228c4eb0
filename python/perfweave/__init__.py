"""perfweave: performance analysis for parallel HPC programs."""

__version__ = "0.1.0"


def open(path):  # noqa: A001 (as perfweave.open)
    """An experiment directory as pandas DataFrames: perfweave.api.Experiment
    (docs/python-api.md). pandas is imported here, not by the command line."""
    from perfweave import api

    return api.open(path)

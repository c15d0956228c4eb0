"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""


class PerfweaveError(Exception):
    """Bad input from the user: a missing program, a bad option, a corrupt experiment."""


class FormatError(PerfweaveError):
    """A file of an experiment is missing, truncated or not what it claims to be."""


class NoData(PerfweaveError):
    """The experiment has no data of the kind asked for (no samples, no MPI, no trace
    analysis): the message says which option of `perfweave run` records it."""

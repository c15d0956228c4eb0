"""The MPI module's own file beside the profile: the compact profile, profile.pwcompact
(readers/compact.py reads it; docs/format.md "Compact profile"). Its dataset, `compact`,
is None when the experiment has none (a run before it existed, an import, a program
without MPI)."""

import os

from perfweave.readers.compact import NAME, read_compact
from perfweave.readers.dataset import Dataset


def read_experiment_compact(path):
    """The CompactProfile of experiment path, None without profile.pwcompact."""
    f = path / NAME
    return read_compact(f) if os.path.lexists(f) else None


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "compact",
    ".",
    read_experiment_compact,
    "the compact profile: rank statistics per MPI call site, reduced up a tree (every MPI run)",
)

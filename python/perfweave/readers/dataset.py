"""What a dataset is: the record of one kind of data an experiment directory holds beside
its profile, and the reader that makes its model (readers/datasets.py lists them all). A
module's reader declares its own (`DATASET` in readers/NAME.py), so that a new module
registers no dataset: readers/datasets.py finds it by the module's name."""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Dataset:
    name: str  # the ExperimentDir attribute, and the key in DATASETS
    directory: str  # its files' directory in the experiment
    read: Callable  # experiment path -> the model (an empty one, or None, when absent)
    what: str  # for messages and docs
    # a process's own measurements, in file-backed memory: what it counted up to a SIGKILL
    # is there, so an experiment without any profile is still opened for it. None, or
    # experiment path -> the ranks (-1: a process without one) of the processes whose
    # files there counted something (readers/experiment.py kept_by_modules)
    kept_ranks: Callable = None

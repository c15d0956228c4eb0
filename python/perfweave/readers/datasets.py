"""The datasets an experiment directory holds beside its profile (samples, timelines, traces,
each module's data), each with the one reader that reads it (docs/format.md has their
files). `ExperimentDir.NAME` (readers/experiment.py) reads the dataset NAME on first use
and keeps it, so that every analysis and report section works on the same models and no
file is read twice. A module's dataset is declared by its reader (readers/NAME.py
`DATASET`) and found here by the module's name: a new module registers none. (Not the
format's file kinds: a dataset is what a reader makes of one or more of them.)"""

import importlib
import importlib.util

from perfweave._format import MODULES
from perfweave.readers import boundness, results, trace
from perfweave.readers.dataset import Dataset


class Traces:
    """The event traces of an experiment, rank by rank: each read only when asked for (a
    trace can be far larger than memory; interop.RankExportStream reads one in chunks)."""

    def __init__(self, path):
        self.path = path

    @property
    def ranks(self):
        """The ranks with a trace, sorted; PerfweaveError (one line: why) without any."""
        return trace.list_ranks(self.path)

    def rank(self, r, meta_note=None):
        """Rank r's records, checked (readers/trace.py read_rank)."""
        return trace.read_rank(self.path, r, meta_note)


def module_datasets():
    """The datasets of the runtime's modules, in modules.def's order (perfweave._format
    MODULES): a module's reader, readers/NAME.py, declares its DATASET; a module without
    a reader of its name (counters, mpi: their data is in the profile) has none."""
    for name in MODULES:
        if importlib.util.find_spec(f"perfweave.readers.{name}") is not None:
            yield importlib.import_module(f"perfweave.readers.{name}").DATASET


DATASETS = {
    k.name: k
    for k in (
        *module_datasets(),
        Dataset("traces", "traces", Traces, "event trace per rank (perfweave run --trace)"),
        Dataset(
            "waitstates",
            "analysis",
            results.saved_waitstates,
            "the wait-state analysis of the traces (perfweave analyze), None before it ran",
        ),
        Dataset(
            "boundness",
            "..",
            boundness.boundness_of,
            "the perfweave boundness result of which this experiment is a run, else None",
        ),
    )
}

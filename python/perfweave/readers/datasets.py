"""The datasets an experiment directory holds beside its profile (samples, timelines,
traces, each module's data), each with the one reader that reads it (docs/format.md has
their files). `ExperimentDir.NAME` (readers/experiment.py) reads the dataset NAME on first
use and keeps it, so that every analysis and report section works on the same models and
no file is read twice. A new measurement module registers its dataset here: one entry.
(Not the format's file kinds: a dataset is what a reader makes of one or more of them.)"""

from dataclasses import dataclass
from typing import Callable

from perfweave.readers import example, io, mathlib, results, samples, timeline, trace


@dataclass(frozen=True)
class Dataset:
    name: str  # the ExperimentDir attribute, and the key in DATASETS
    directory: str  # its files' directory in the experiment
    read: Callable  # experiment path -> the model (an empty one, or None, when absent)
    what: str  # for messages and docs
    # a process's own measurements, in file-backed memory: what it counted up to a SIGKILL
    # is there, so an experiment without any profile is still opened for it
    kept_when_killed: bool = False


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


DATASETS = {
    k.name: k
    for k in (
        Dataset(
            "samples",
            "samples",
            samples.read_samples,
            "call-stack samples per process (perfweave run --sample)",
        ),
        Dataset(
            "timelines",
            "timeline",
            timeline.read_timelines,
            "node timeline per node (perfweave run --node-interval)",
        ),
        Dataset("traces", "traces", Traces, "event trace per rank (perfweave run --trace)"),
        Dataset(
            "waitstates",
            "analysis",
            results.saved_waitstates,
            "the wait-state analysis of the traces (perfweave analyze), None before it ran",
        ),
        Dataset(
            "example",
            "example",
            example.read_example,
            "the example module's calls per process (perfweave run --example)",
        ),
        Dataset(
            "mathlib",
            "mathlib",
            mathlib.read_mathlib,
            "BLAS, LAPACK and FFTW calls per process (perfweave run --mathlib)",
        ),
        Dataset(
            "io",
            "io",
            io.read_io,
            "I/O per file, layer and process (perfweave run --io)",
            kept_when_killed=True,
        ),
    )
}

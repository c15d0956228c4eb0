"""The sections of the report, in the order they are shown (report/section.py), and the
one place that goes through them: collect (the report's data, `perfweave report
--json`), text and html (each section's lines and HTML, in order). A new measurement
module adds its section here: one line, its module's name in NAMES."""

import importlib

from perfweave.report import section

# The sections by their modules' names (report/sections/NAME.py, each its SECTION), in the
# order they are shown: a module that measures something new adds its section's line.
NAMES = [
    "run",  # the run: command, times, ranks, state, notes
    "hangs",  # ranks that stayed --hang seconds in one MPI call, and the others then
    "startup",  # MPI_Init and shutdown times (shown in the run's lines)
    "advice",  # what to change, from all the sections' data
    "samples",  # where the time goes: call tree, lines, activity over time
    "source",  # the source of the samples' hottest lines
    "mpi_profile",  # MPI time per rank, balance, functions, call sites, counters
    "compact",  # the compact profile's MPI call sites, when it is the only MPI profile
    "wait_states",  # perfweave analyze's wait states
    "pop",  # the POP factors of a traced run (perfweave pop)
    "trace_interval",  # a traced run's timeline over an interval (HTML: a canvas)
    "message_sizes",  # the MPI profile's message sizes
    "comm_matrix",  # the MPI profile's communication matrix
    "io",  # the I/O profile (--io): share, files, ranks, call sites
    "heap",  # the allocation sites (--heap): sites by byte-seconds, size ranges
    "boundness",  # bandwidth- or compute-bound routines (a run of perfweave boundness)
    "node_timeline",  # per node: processes' activity and node rates over time
    "correlation",  # everything recorded, per phase or region (perfweave run --all)
    "example",  # the example module's calls (--example)
    "mathlib",  # BLAS, LAPACK and FFTW calls (--mathlib)
    "gpu",  # CUDA kernels, copies and host waits per rank, device and stream (CUPTI)
    "regions",  # the program's regions and phases (perfweave.h, MPI_Pcontrol)
]
SECTIONS = [importlib.import_module(f"perfweave.report.sections.{n}").SECTION for n in NAMES]


def collect(experiment, top):
    """Every section's data of experiment (section.collect: each after those it needs)."""
    return section.collect(SECTIONS, experiment, top)


def text(data, view):
    """Every section's lines of the report's data, in order."""
    return [line for s in SECTIONS for line in s.text(data, view)]


def html(data, page):
    """Every section's HTML of the report's data, in order, onto page."""
    return [part for s in SECTIONS for part in s.html(data, page)]

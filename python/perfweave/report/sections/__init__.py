"""The sections of the report, in the order they are shown (report/section.py), and the
one place that goes through them: collect (the report's data, `perfweave report
--json`), text and html (each section's lines and HTML, in order). A new measurement
module adds its section here: one line."""

from perfweave.report import section
from perfweave.report.sections import (
    advice,
    example,
    io,
    mathlib,
    message_sizes,
    mpi_profile,
    node_timeline,
    run,
    samples,
    startup,
    wait_states,
)

SECTIONS = [
    run.SECTION,  # the run: command, times, ranks, state, notes
    startup.SECTION,  # MPI_Init and shutdown times (shown in the run's lines)
    advice.SECTION,  # what to change, from all the sections' data
    samples.SECTION,  # where the time goes: call tree, lines, activity over time
    mpi_profile.SECTION,  # MPI time per rank, balance, functions, call sites, counters
    wait_states.SECTION,  # perfweave analyze's wait states
    message_sizes.SECTION,  # the MPI profile's message sizes
    io.SECTION,  # the I/O profile (--io): share, files, ranks, call sites
    node_timeline.SECTION,  # per node: processes' activity and node rates over time
    example.SECTION,  # the example module's calls (--example)
    mathlib.SECTION,  # BLAS, LAPACK and FFTW calls (--mathlib)
]


def collect(experiment, top):
    """Every section's data of experiment (section.collect: each after those it needs)."""
    return section.collect(SECTIONS, experiment, top)


def text(data, view):
    """Every section's lines of the report's data, in order."""
    return [line for s in SECTIONS for line in s.text(data, view)]


def html(data, page):
    """Every section's HTML of the report's data, in order, onto page."""
    return [part for s in SECTIONS for part in s.html(data, page)]

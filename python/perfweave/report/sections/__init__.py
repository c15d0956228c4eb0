"""The sections of the report, in the order they are shown (report/section.py). A new
measurement module adds its section here: one line."""

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

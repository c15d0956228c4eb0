"""Everything `perfweave report` shows, as one JSON-ready dict (docs/mpi-profile.md):
the data of the report's sections (report/sections/)."""

from perfweave.report import sections


def collect(experiment, top=20):
    """The report dict of experiment (readers/experiment.py): every section's data
    (report/sections/), `perfweave report --json`. top: rows of the function, call-site
    and sampling tables (None: all)."""
    return sections.collect(experiment, top)

"""Everything `perfweave report` shows, as one JSON-ready dict (docs/mpi-profile.md):
the data of the report's sections (report/sections/)."""

import re

REPORT_FORMAT = "perfweave-report"
REPORT_VERSION = 2


def mpi_library_line(version):
    """The MPI library's name and version on one line, from the full string the library
    gives (MPI_Get_library_version; the runtime records its line breaks as spaces):
    Open MPI's "Open MPI v4.1.4, package: ..., repo rev: ..." gives "Open MPI v4.1.4",
    MPICH's "MPICH Version: 4.0.2 MPICH Release date: ... MPICH configure: ..." gives
    "MPICH 4.0.2". The JSON report keeps the full string."""
    text = " ".join((version or "").split())
    labelled = re.match(r"(.+?) Version: ?(\S+)", text)
    if labelled:
        return f"{labelled.group(1)} {labelled.group(2)}"
    return text.split(",")[0].strip() or "?"


def collect(experiment, top=20):
    """The report dict of experiment (readers/experiment.py): every section's data
    (report/sections/), `perfweave report --json`. top: rows of the function, call-site
    and sampling tables (None: all)."""
    from perfweave.report import section
    from perfweave.report.sections import SECTIONS

    return section.collect(SECTIONS, experiment, top)

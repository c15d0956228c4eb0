"""The MPI profile of an imported experiment written as its profile.pwprof (write), as
the runtime's writer does, so that the readers read an imported experiment as a run's;
analysis/imported_profile.py computes it from the traces (from_traces, encode).
An experiment imported by an older perfweave has no profile.pwprof: open_upgraded, what
perfweave report and the Darshan export read through, gives it the one the import
writes today and saves it (perfweave.open computes it for each read and saves nothing).
"""

from pathlib import Path

from perfweave.analysis import imported_profile
from perfweave.analysis.imported_profile import encode
from perfweave.readers.experiment import NoImportedProfile, open_experiment
from perfweave.writing import write_atomic


def write(path, profile):
    """Write profile as a profile file at path (encode)."""
    with open(path, "wb") as f:
        f.write(encode(profile))


def open_upgraded(path, note=None, snapshot=None):
    """The experiment directory path as the readers' open_experiment reads it; one that
    an older perfweave imported (its traces, no profile.pwprof) is first given the
    profile.pwprof that perfweave import writes today (imported_profile.content), once, as
    the import writes it: whole or not at all. Where the experiment cannot be written,
    that profile is computed for this read only and read from memory. note(line): told
    which, for the user. snapshot: open_experiment's (a live snapshot's number)."""
    if snapshot is not None:  # a snapshot's profile is the runtime's, never an import's
        return open_experiment(path, snapshot=snapshot)
    try:
        return open_experiment(path)
    except NoImportedProfile:
        pass
    content = imported_profile.content(path)
    target = Path(path) / "profile.pwprof"
    try:
        write_atomic(target, content)
    except OSError as e:
        if note:
            note(
                f"{path}: imported by an older perfweave, without profile.pwprof: its "
                f"profile is computed from its traces for this read and not saved "
                f"({target}: cannot write: {e.strerror or e})"
            )
        return open_experiment(path, reduced_content=content)
    if note:
        note(
            f"{path}: imported by an older perfweave: its profile, computed from its "
            f"traces as perfweave import does, is saved as {target}"
        )
    return open_experiment(path)

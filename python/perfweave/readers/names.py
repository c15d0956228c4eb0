"""Names of the experiment format that changed between versions, and how the readers
say them in older files (no numpy: perfweave run's verdict reads profile headers with
them, readers/profile_header.py)."""

# Names that changed: the MPI family of MPI_File_* calls was "io" (in the profile's and
# traces' "families", the samples' activity "mpi_io", the timeline's series PID.mpi_io_ns)
# before profile 4, trace 3, samples 4 and timeline 2; their readers rename it in older
# files. "io" now means POSIX and stdio I/O alone.
OLD_FAMILY_NAMES = {"io": "file"}


def renamed_families(names):
    """An older file's family names as this version says them."""
    return [OLD_FAMILY_NAMES.get(n, n) for n in names]


def renamed_activity(name):
    """An older file's activity name ("mpi_" family or another) as this version says it."""
    if name.startswith("mpi_") and name[4:] in OLD_FAMILY_NAMES:
        return "mpi_" + OLD_FAMILY_NAMES[name[4:]]
    return name

"""The header of a profile file (`*.pwprof`, docs/format.md): its first line, one JSON
object. Read alone, without numpy, by perfweave run's verdict (readers/recorded.py);
readers/profile.py reads the arrays it describes."""

from perfweave.errors import FormatError

from perfweave._format import FILES, HIST_BUCKETS
from perfweave.readers.files import check, parse_json, read_line
from perfweave.readers.names import renamed_families

MAGIC = FILES["profile"].magic
# 1: counts without inside_ns/before_ns; 1 and 2: loaded objects named "modules", the
# MPI library in mpi_library and mpi_flavor; 1 to 3: the MPI family "file" named "io"
# (read as version 4 says them: _upgrade); 1 to 4: ranks without the MPI_Pcontrol
# region's fields (zero: readers/profile.py _upgrade_arrays); 1 to 5: no "comms" array
# (no communication matrix: readers/experiment.py merge)
SUPPORTED_VERSIONS = (1, 2, 3, 4, 5, FILES["profile"].version)
HEADER_SCHEMA = {
    "partial": bool,
    "world_size": int,
    "hist_buckets": int,
    "data_bytes": int,
    "counters": [str],
    "states": [str],
    "notes": [str],  # perfweave import's: what reading the trace found (partial, damage)
    "arrays": {},
}


def parse_header(line, path):
    """The header of a profile file from its first line, checked."""
    if not line.startswith(b"{"):
        raise FormatError(f"{path}: not a perfweave profile file")
    header = parse_json(line, path, "header")
    if not isinstance(header, dict) or header.get("format") != MAGIC:
        raise FormatError(f"{path}: not a perfweave profile file")
    if header.get("version") not in SUPPORTED_VERSIONS:
        raise FormatError(
            f"{path}: profile format version {header.get('version')} is not "
            f"supported (this perfweave reads {SUPPORTED_VERSIONS})"
        )
    check(header, HEADER_SCHEMA, path, "header")
    _upgrade(header, path)
    if header.get("world_size", 0) < 0 or not 0 < header.get("hist_buckets", HIST_BUCKETS) <= 64:
        raise FormatError(f"{path}: corrupt header (world_size or hist_buckets)")
    return header


def _upgrade(header, path):
    """A header of an older version as version 4 says the same. Before 4: the MPI family
    "file" was "io". Before 3: the loaded objects under "objects", and one measured
    module, "mpi", that owns every function and holds the MPI library's strings. The
    arrays' "module" fields are renamed by _upgrade_arrays."""
    if header["version"] < 4 and isinstance(header.get("families"), list):
        header["families"] = renamed_families(header["families"])
    if header["version"] >= 3:
        return
    if "objects" in header:
        raise FormatError(f"{path}: corrupt header (objects in a version {header['version']} file)")
    header["objects"] = header.pop("modules", None)
    functions = header.get("functions")
    mpi = {"name": "mpi", "version": header["version"], "first": 0}
    mpi["count"] = len(functions) if isinstance(functions, list) else 0
    mpi["library"] = header.pop("mpi_library", "")
    mpi["flavor"] = header.pop("mpi_flavor", "")
    header["modules"] = [mpi] if mpi["count"] else []


def read_header(path):
    """The header of a profile file alone (its first line), checked as read_profile
    checks it, without reading the arrays."""
    try:
        return parse_header(read_line(path), path)
    except FileNotFoundError:
        raise FormatError(f"{path}: cannot read: no such file") from None

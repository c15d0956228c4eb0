"""Reader of the regions module's files (regions/ in an experiment; docs/format.md
"Regions"): the model of model/regions.py. A file that cannot be read is left out with a
note; the others stand."""

import numpy as np

from perfweave._format import RECORDS, REGION_KINDS
from perfweave.errors import FormatError
from perfweave.model.regions import INTERVAL_DTYPE, Regions, RegionsProcess, sort_intervals
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_document


def read_regions(path):
    """The Regions of experiment path (an empty one without regions/)."""
    d = path / "regions"
    out = Regions()
    if not d.is_dir():
        return out
    parts = []
    for f in sorted(d.glob("*.json")):
        try:
            doc = read_document(f, "regions", "regions file")
            raw = np.fromfile(f.with_suffix(".intervals"), RECORDS["region_interval"])
        except (FormatError, OSError, ValueError) as e:
            out.notes.append(f"regions: {e}; left out")
            continue
        names = np.array(list(doc["names"]) + ["?"], object)
        tids = np.array([int(t) for t in doc["threads"]] + [-1], np.int64)
        kinds = np.array(list(REGION_KINDS) + ["?"], object)
        part = np.zeros(len(raw), INTERVAL_DTYPE)
        part["rank"] = doc["rank"]
        part["pid"] = doc["pid"]
        part["host"] = doc["host"]
        part["thread"] = tids[np.clip(raw["thread"], 0, len(tids) - 1)]
        part["name"] = names[np.clip(raw["name"], 0, len(names) - 1)]
        part["kind"] = kinds[np.clip(raw["kind"], 0, len(kinds) - 1)]
        for k in ("depth", "t_begin", "t_end", "mpi_ns", "mpi_calls"):
            part[k] = raw[k]
        part["open"] = (raw["flags"] & 1) != 0
        parts.append(part)
        out.processes.append(
            RegionsProcess(
                doc["rank"],
                doc["pid"],
                doc["host"],
                doc["state"],
                doc["unmatched_ends"],
                doc["dropped"],
            )
        )
    if parts:
        out.intervals = sort_intervals(np.concatenate(parts))
    out.processes.sort(key=lambda p: (p.rank < 0, p.rank, p.host, p.pid))
    return out


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "regions",
    "regions",
    read_regions,
    "the program's regions, phases and measurement-off intervals (perfweave.h, MPI_Pcontrol)",
)

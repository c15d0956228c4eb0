"""What the Caliper and CUBE exports share: the experiment's metric x call path x rank
table (analysis/callpaths.py, the one `perfweave compare --by callpath` reads, so that the
three agree node for node), the run's description for the exported file's metadata, and
the writing of the file whole or not at all."""

import json
import time
from dataclasses import dataclass, field

import numpy as np

from perfweave import __version__
from perfweave.analysis.callpaths import callpath_metrics
from perfweave.errors import NoData, PerfweaveError
from perfweave.interop import output_file
from perfweave.writing import write_atomic


@dataclass
class Source:
    exp: object  # readers' ExperimentDir
    table: object  # CallpathMetrics
    notes: list = field(default_factory=list)
    started: float = 0.0  # perf_counter at the start, for the summary's seconds


def load(exp):
    """The experiment directory exp opened (an older import upgraded as report does)
    with its CallpathMetrics; an experiment with neither samples nor MPI calls is an
    error, as it has no call path to export."""
    from perfweave.interop.profile import open_upgraded

    started = time.perf_counter()
    notes = []
    e = open_upgraded(exp, notes.append)
    table = callpath_metrics(e)
    if not table.names:
        raise NoData(
            f"{exp}: no call paths to export: no samples and no MPI calls (perfweave run "
            "samples by default; MPI calls are recorded when the program calls MPI)"
        )
    loose = table.ranks < 0
    if loose.any():
        first = int(column_ranks(table)[loose].min())
        notes.append(
            f"{int(loose.sum())} process(es) without an MPI rank written as rank {first} and up"
        )
    return Source(e, table, notes + list(table.notes), started)


def depth_first(table):
    """The table's nodes depth first, siblings by name: new number -> old index."""
    paths = table.paths()
    return sorted(range(len(paths)), key=paths.__getitem__)


def column_ranks(table):
    """The rank of each column in the exported file: its MPI rank; a process without
    one gets a number after the last rank (Hatchet fills ranks 0..max and knows no rank
    -1)."""
    ranks = table.ranks.astype(np.int64).copy()
    loose = np.flatnonzero(ranks < 0)
    top = int(ranks.max()) if len(ranks) else -1
    ranks[loose] = max(top, -1) + 1 + np.arange(len(loose))
    return ranks


def run_metadata(e):
    """The run's description as flat key -> scalar pairs: what a profile reader
    (Hatchet's and Thicket's metadata table, CUBE's attributes) keeps of it."""
    m = e.meta or {}
    prof = e.profile
    recorded = int((prof.ranks["rank"] >= 0).sum()) if prof is not None else 0
    out = {
        "perfweave.version": __version__,
        "perfweave.experiment_version": m.get("perfweave_version", ""),
        "command": " ".join(m.get("command") or []),
        "program": m.get("program", ""),
        "launcher": m.get("launcher", ""),
        "mpi.flavor": m.get("mpi_flavor", "")
        or (prof.module("mpi").get("flavor", "") if prof else ""),
        "mpi.world.size": int(getattr(prof, "world_size", 0) or recorded),
        "ranks.recorded": recorded,
        "hostname": m.get("host", ""),
        "launchdate": m.get("start_time", ""),
        "end_time": m.get("end_time", ""),
        "wall_seconds": float(m.get("wall_seconds", 0.0) or 0.0),
        "state": m.get("state", ""),
        "perfweave.options": json.dumps(m.get("options") or {}, sort_keys=True),
    }
    return out


def write(exp, out, name, force, data):
    """Write data (bytes or str) to the export's file (interop.output_file: out, NAME in
    out, or EXP/export/NAME), whole or not at all. Returns its path."""
    path = output_file(exp, out, name, force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    except OSError as err:
        raise PerfweaveError(f"{path}: cannot write ({err.strerror or err})") from None
    return path

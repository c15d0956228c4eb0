"""The node timeline of an experiment: timeline/HOST.values + timeline/HOST.json
(docs/format.md "Node timeline"), written by the runtime's node sampler
(runtime/modules/timeline.c), one pair per node.

read_timelines(exp) -> [NodeTimeline] (model/timeline.py): per node, the tick times and
a (ticks x series) matrix of values, with each series' source, name, unit and kind.
"""

from pathlib import Path

import numpy as np

from perfweave.errors import FormatError
from perfweave._format import JSON
from perfweave.model.timeline import NodeTimeline
from perfweave.dtypes import TIMELINE_DTYPE, TIMELINE_VERSION
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_array, read_document
from perfweave.readers.names import renamed_activity

# 1: the series PID.mpi_file_ns named PID.mpi_io_ns (renamed as read)
READ_VERSIONS = (1, TIMELINE_VERSION)


def timeline_dir(exp):
    return Path(exp) / "timeline"


def read_timelines(exp):
    """Every node's timeline of experiment exp ([] if it has none)."""
    d = timeline_dir(exp)
    if not d.is_dir():
        return []
    out = []
    for meta_path in sorted(d.glob("*.json")):
        out.append(read_node(meta_path))
    return out


# the keys readers use, with their types: those format/timeline.h declares, and the
# items of its series
META_SCHEMA = {
    **JSON["timeline"],
    "series": [{"source": str, "name": str, "unit": str, "kind": str}],
}


def read_node(meta_path):
    meta_path = Path(meta_path)
    meta = read_document(meta_path, "timeline", "node timeline", READ_VERSIONS, META_SCHEMA)
    if not all(
        {"source", "name", "unit", "kind"} <= s.keys() for s in meta.get("series", [])
    ) or not all(isinstance(v, str) for v in meta.get("absent", {}).values()):
        raise FormatError(f"{meta_path}: corrupt node timeline (series or absent)")
    if meta["version"] < 2:
        for s in meta.get("series", []):
            pid, dot, name = s["name"].partition(".")
            if dot and name.endswith("_ns"):
                s["name"] = f"{pid}.{renamed_activity(name[:-3])}_ns"
    host = meta.get("host", meta_path.stem)
    series = list(meta.get("series") or [])
    notes = []
    vpath = meta_path.with_suffix(".values")
    try:
        raw = read_array(vpath)
    except FileNotFoundError:
        raw = np.zeros(0, np.uint8)
    n = len(raw) // TIMELINE_DTYPE.itemsize
    if len(raw) % TIMELINE_DTYPE.itemsize:
        notes.append(f"{vpath.name}: ends with a partial record (ignored)")
    rec = raw[: n * TIMELINE_DTYPE.itemsize].view(TIMELINE_DTYPE)
    ok = (rec["series"] >= 0) & (rec["series"] < len(series))
    if not ok.all():
        notes.append(
            f"{vpath.name}: {int((~ok).sum())} records name unknown series "
            "(the run ended before the JSON was rewritten): ignored"
        )
        rec = rec[ok]
    # NaN: not read; times are CLOCK_MONOTONIC ns, never negative
    ok = (np.isfinite(rec["value"]) | np.isnan(rec["value"])) & (rec["t"] >= 0)
    if not ok.all():
        notes.append(
            f"{vpath.name}: {int((~ok).sum())} records with an infinite value or a "
            "negative time (corrupt): ignored"
        )
        rec = rec[ok]
    if not meta.get("complete"):
        notes.append(
            f"{host}: the sampler did not stop normally (its process was killed?); "
            "the timeline ends at its last tick"
        )
    return NodeTimeline.from_records(host, meta, series, rec, notes)


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "timelines",
    "timeline",
    read_timelines,
    "node timeline per node (perfweave run --node-interval)",
)

"""Call-stack samples of an experiment (perfweave run --sample): samples/NAME.samples
(fixed-size records, SAMPLE_DTYPE: format/samples.h) + samples/NAME.json (rank, threads,
objects, activities), one pair per process (NAME: rank-R, or HOST.PID without MPI). Written by
runtime/modules/samples.c; docs/format.md "Samples". read_samples gives the model of
model/samples.py, one ProcessSamples per process."""

from pathlib import Path

import numpy as np

from perfweave.errors import FormatError
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE, SAMPLE_FRAMES, SAMPLES_VERSION
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_array, read_document, short
from perfweave.readers.names import renamed_activity

# versions 1 and 2 named the activity "state" and the loaded object "module" (the records'
# fields, _upgrade_records; the description's "states" and "modules", RENAMED)
OLD_NAMES = {"activity": "state", "object": "module"}
RENAMED = {"activities": "states", "objects": "modules"}
SAMPLE_DTYPE_V2 = np.dtype([(OLD_NAMES.get(f[0], f[0]), *f[1:]) for f in SAMPLE_DTYPE.descr])
# versions 1 to 3: the activity "mpi_file" named "mpi_io" (_upgrade)
# version 1: the record without its counters (the first --counters events at each sample)
SAMPLE_DTYPE_V1 = np.dtype([f for f in SAMPLE_DTYPE_V2.descr if f[0] != "counters"])
# version 4 and before: a stack deeper than the records' frames kept its innermost ones
# (5 keeps the outermost too; read the same)
RECORDS_BY_VERSION = {
    1: SAMPLE_DTYPE_V1,
    2: SAMPLE_DTYPE_V2,
    3: SAMPLE_DTYPE,
    4: SAMPLE_DTYPE,
    5: SAMPLE_DTYPE,
}
assert max(RECORDS_BY_VERSION) == SAMPLES_VERSION


# what the declared keys (format/samples.h JSON: _format.JSON["samples"]) hold, where
# their declared type says only "list" or "object" (docs/format.md "Samples")
META_SCHEMA = {
    "dropped": {"threads": int, "timers": int, "memory": int},
    "threads": [{"tid": int, "taken": int, "kept": int, "thinned": int, "interval_ns": int}],
    "objects": [[str]],
}


def read_sample_metas(exp):
    """[(path of NAME.json, its description)] of every sampled process, checked, without
    the records."""
    d = Path(exp) / "samples"
    out = []
    for meta_path in sorted(d.glob("*.json")) if d.is_dir() else []:
        meta = read_document(
            meta_path,
            "samples",
            "samples description",
            tuple(RECORDS_BY_VERSION),
            META_SCHEMA,
            lambda version: RENAMED if version < 3 else {},
        )
        if meta["frames"] != SAMPLE_FRAMES:
            raise FormatError(
                f"{meta_path}: samples of {short(meta['frames'])} frames (this perfweave "
                f"reads {SAMPLE_FRAMES})"
            )
        if meta["version"] < 4 and "activities" in meta:  # "mpi_io" then
            meta["activities"] = [renamed_activity(a) for a in meta["activities"]]
        if not all(len(m) >= 1 for m in meta.get("objects", [])) or not all(
            {"interval_ns", "thinned"} <= t.keys() for t in meta.get("threads", [])
        ):
            raise FormatError(f"{meta_path}: corrupt samples description (objects or threads)")
        out.append((meta_path, meta))
    return out


def _upgrade_records(rec, version):
    """Records of version 1 or 2 with the field names of version 3 (activity, object): a
    view of the same bytes (the dtypes of RECORDS_BY_VERSION stay as they are)."""
    if version >= 3:
        return rec
    new = {old: name for name, old in OLD_NAMES.items()}
    return rec.view(np.dtype([(new.get(f[0], f[0]), *f[1:]) for f in rec.dtype.descr]))


def read_samples(exp):
    out = []
    for meta_path, meta in read_sample_metas(exp):
        dt = RECORDS_BY_VERSION[meta["version"]]
        spath = meta_path.with_suffix(".samples")
        try:
            raw = read_array(spath)
        except FileNotFoundError:
            raise FormatError(f"{spath}: missing (its description is there)") from None
        n = len(raw) // dt.itemsize
        rec = raw[: n * dt.itemsize].view(dt)
        rec = _upgrade_records(rec, meta["version"])
        rec = rec[_valid(rec, meta)]  # a copy, writable
        # frames beyond a record's depth are not read; unknown (-1) for whole-array work
        rec["object"][np.arange(SAMPLE_FRAMES)[None, :] >= rec["depth"][:, None]] = -1
        out.append(
            ProcessSamples(meta_path.stem, meta, rec, [m[0] for m in meta.get("objects", [])])
        )
    return out


def _valid(rec, meta):
    """Records whose indexes (thread, frames' objects) and depth are in range (activities
    out of range are taken as compute by the analysis)."""
    depth = rec["depth"].astype(np.int64)
    ok = (depth >= 0) & (depth <= SAMPLE_FRAMES)
    if "threads" in meta:
        ok &= (rec["thread"] >= 0) & (rec["thread"] < len(meta["threads"]))
    used = np.arange(SAMPLE_FRAMES)[None, :] < depth[:, None]
    obj = rec["object"]
    ok &= ~(used & ((obj < -1) | (obj >= len(meta.get("objects", []))))).any(axis=1)
    return ok


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "samples", "samples", read_samples, "call-stack samples per process (perfweave run --sample)"
)

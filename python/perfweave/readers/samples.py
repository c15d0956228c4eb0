"""Call-stack samples of an experiment (perfweave run --sample): samples/NAME.samples
(fixed-size records, SAMPLE_DTYPE: format/sampler.h) + samples/NAME.json (rank, threads, modules,
states), one pair per process (NAME: rank-R, or HOST.PID without MPI). Written by
runtime/modules/sampler.c; docs/format.md "Samples". read_samples gives the model of
model/samples.py, one ProcessSamples per process."""

from pathlib import Path

import numpy as np

from perfweave.errors import FormatError
from perfweave.model.samples import ProcessSamples
from perfweave.readers.dtypes import SAMPLE_DTYPE, SAMPLE_FRAMES, SAMPLES_VERSION
from perfweave.readers.files import check, read_array, read_json
from perfweave._format import FILES

MAGIC = FILES["samples"].magic
# version 1: the record without its counters (the first --counters events at each sample)
SAMPLE_DTYPE_V1 = np.dtype([f for f in SAMPLE_DTYPE.descr if f[0] != "counters"])
RECORDS_BY_VERSION = {1: SAMPLE_DTYPE_V1, SAMPLES_VERSION: SAMPLE_DTYPE}


# the keys readers use, with their types (docs/format.md "Samples")
META_SCHEMA = {
    "rank": int,
    "pid": int,
    "host": str,
    "frames": int,
    "counters": [str],
    "samples": int,
    "dropped": {"threads": int, "timers": int, "memory": int},
    "t_start": int,
    "t_end": int,
    "states": [str],
    "threads": [{"tid": int, "taken": int, "kept": int, "thinned": int, "interval_ns": int}],
    "modules": [[str]],
    "unwinder": str,
    "unwind_fallbacks": int,
}


def read_sample_metas(exp):
    """[(path of NAME.json, its description)] of every sampled process, checked, without
    the records."""
    d = Path(exp) / "samples"
    out = []
    for meta_path in sorted(d.glob("*.json")) if d.is_dir() else []:
        meta = read_json(meta_path, "samples description")
        if (
            meta.get("format") != MAGIC
            or meta.get("version") not in RECORDS_BY_VERSION
            or meta.get("frames") != SAMPLE_FRAMES
        ):
            raise FormatError(
                f"{meta_path}: not perfweave samples of version "
                + " or ".join(map(str, RECORDS_BY_VERSION))
            )
        check(meta, META_SCHEMA, meta_path, "samples description")
        if not all(len(m) >= 1 for m in meta.get("modules", [])) or not all(
            {"interval_ns", "thinned"} <= t.keys() for t in meta.get("threads", [])
        ):
            raise FormatError(f"{meta_path}: corrupt samples description (modules or threads)")
        out.append((meta_path, meta))
    return out


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
        rec = rec[_valid(rec, meta)]  # a copy, writable
        # frames beyond a record's depth are not read; unknown (-1) for whole-array work
        rec["module"][np.arange(SAMPLE_FRAMES)[None, :] >= rec["depth"][:, None]] = -1
        out.append(
            ProcessSamples(meta_path.stem, meta, rec, [m[0] for m in meta.get("modules", [])])
        )
    return out


def _valid(rec, meta):
    """Records whose indexes (thread, frames' modules) and depth are in range (states
    out of range are taken as compute by the analysis)."""
    depth = rec["depth"].astype(np.int64)
    ok = (depth >= 0) & (depth <= SAMPLE_FRAMES)
    if "threads" in meta:
        ok &= (rec["thread"] >= 0) & (rec["thread"] < len(meta["threads"]))
    used = np.arange(SAMPLE_FRAMES)[None, :] < depth[:, None]
    mod = rec["module"]
    ok &= ~(used & ((mod < -1) | (mod >= len(meta.get("modules", []))))).any(axis=1)
    return ok

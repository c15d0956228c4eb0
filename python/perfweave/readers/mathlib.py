"""Reader of the mathlib module's files (mathlib/ in an experiment; docs/format.md
"Math-library calls"): the model of model/mathlib.py. A process whose files cannot be
read is left out with a note; the others stand."""

import numpy as np

from perfweave._format import FILES, RECORDS
from perfweave.errors import FormatError
from perfweave.model.mathlib import (
    CALL_COLUMNS,
    INTERNAL_COLUMNS,
    PLAN_COLUMNS,
    MathLib,
    MathLibProcess,
    empty,
)
from perfweave.model.table import table
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_document

FORMAT, VERSION = FILES["mathlib"].magic, FILES["mathlib"].version
# version 1: plans without "procs" (every plan a process's own: 1), read as version 2
_PLAN_V1 = np.dtype([f for f in RECORDS["mlplan"].descr if f[0] != "procs"])
READ_VERSIONS = (1, VERSION)


def _records(path, name, dtype=None):
    dtype = RECORDS[name] if dtype is None else dtype
    size = path.stat().st_size
    if size % dtype.itemsize:
        raise FormatError(f"{path}: {size} bytes, not whole {name} records")
    return np.fromfile(path, dtype=dtype)


def _read_process(f):
    doc = read_document(f, "mathlib", "math-library file", READ_VERSIONS)
    stem = f.name[: -len(".json")]
    calls = _records(f.with_name(stem + ".calls"), "mlcall")
    if doc["version"] == 1:
        old = _records(f.with_name(stem + ".plans"), "mlplan", _PLAN_V1)
        plans = np.zeros(len(old), RECORDS["mlplan"])
        for name in old.dtype.names:
            plans[name] = old[name]
        plans["procs"] = 1
    else:
        plans = _records(f.with_name(stem + ".plans"), "mlplan")
    n = len(doc["routines"])
    if len(doc["groups"]) != n or len(doc["libraries"]) != n or len(doc["internal"]) != n:
        raise FormatError(f"{f}: routines, groups, libraries and internal differ in length")
    for recs in (calls, plans):
        if len(recs) and (recs["routine"].min() < 0 or recs["routine"].max() >= n):
            raise FormatError(f"{f}: a record names no routine")
    return doc, calls, plans


def read_mathlib(path):
    """The MathLib of experiment path (an empty one without mathlib/)."""
    d = path / "mathlib"
    out = MathLib()
    if not d.is_dir():
        return out
    parts = []
    for f in sorted(d.glob("*.json")):
        try:
            parts.append(_read_process(f))
        except (FormatError, OSError, ValueError) as e:
            out.notes.append(f"math-library calls: {e}; left out")
    parts.sort(key=lambda p: (p[0]["rank"] < 0, p[0]["rank"], p[0]["host"], p[0]["pid"]))
    calls, plans, internal = [], [], []
    for i, (doc, c, p) in enumerate(parts):
        out.processes.append(
            MathLibProcess(**{k: doc[k] for k in MathLibProcess.__dataclass_fields__})
        )
        names = np.array(doc["routines"], object)
        groups = np.array(doc["groups"], object)
        libs = np.array(doc["libraries"], object)
        objs = np.array([o[0] for o in doc["objects"]] + [""], object)  # -1: ""
        calls.append(
            {
                "process": np.full(len(c), i, np.int64),
                "routine": names[c["routine"]],
                "group": groups[c["routine"]],
                "library": libs[c["routine"]],
                "object": objs[np.where(c["object"] < len(objs) - 1, c["object"], -1)],
                "offset": c["offset"].astype(np.int64),
                **{f"b{k}": c["dim_bucket"][:, k].astype(np.int64) for k in range(3)},
                "chars": np.array(
                    [bytes(x).rstrip(b"\0").decode("ascii", "replace") for x in c["chars"]], object
                ),
                **{k: c[k].astype(np.int64) for k in ("count", "total_ns", "min_ns", "max_ns")},
                "flops": c["flops"],
                "bytes": c["bytes"],
                **{f"dim{k}_sum": c["dim_sum"][:, k].astype(np.int64) for k in range(3)},
            }
        )
        kinds = np.array(doc["fft_kinds"] + ["?"], object)
        plans.append(
            {
                "process": np.full(len(p), i, np.int64),
                "gen": p["gen"],
                "routine": names[p["routine"]],
                "object": objs[np.where(p["object"] < len(objs) - 1, p["object"], -1)],
                "offset": p["offset"],
                "kind": kinds[np.clip(p["kind"], 0, len(kinds) - 1)],
                "rank": p["rank"].astype(np.int64),
                **{f"n{k}": p["n"][:, k] for k in range(3)},
                **{
                    k: p[k].astype(np.int64)
                    for k in ("howmany", "procs", "sign", "flags", "inplace")
                },
                "size": p["size"],
                "live": p["live"].astype(np.int64),
                **{k: p[k] for k in ("plan_ns", "executes", "exec_ns")},
                "flops": p["flops"],
            }
        )
        inner = np.array(doc["internal"], np.int64)
        k = np.flatnonzero(inner)
        internal.append(
            {
                "process": np.full(len(k), i, np.int64),
                "routine": names[k],
                "group": groups[k],
                "library": libs[k],
                "calls": inner[k],
            }
        )
        if not out.not_wrapped:
            out.not_wrapped = [tuple(x) for x in doc["not_wrapped"]]
    out.calls = _concat(calls, CALL_COLUMNS)
    out.plans = _concat(plans, PLAN_COLUMNS)
    out.internal = _concat(internal, INTERNAL_COLUMNS)
    return out


def _concat(parts, columns):
    parts = [p for p in parts if len(p["process"])]
    if not parts:
        return empty(columns)
    return table({c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in columns})


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "mathlib",
    "mathlib",
    read_mathlib,
    "BLAS, LAPACK and FFTW calls per process (perfweave run --mathlib)",
)

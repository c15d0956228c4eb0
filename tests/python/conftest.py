"""Shared helpers of the Python-level tests: profile files and experiment
directories written by hand, byte for byte as runtime/core/writer.c writes them.

A profile file (`*.pwprof`) is
  - one line of JSON (the header), padded with spaces so that the line and its
    newline fill a multiple of 64 bytes (the arrays start 64-byte aligned);
  - the arrays ranks, sites, frames, hist, counts (format.h record layouts), back to back,
    at the offsets the header announces;
  - the 8-byte end marker b"PWEND\\n\\n\\n".

The helpers are plain functions (`write_pwprof`, `write_experiment`) and are also
handed to tests as fixtures of the same purpose (`pwprof`, `experiment_dir`), so
that test modules never need to import this file by name.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from perfweave.dtypes import (
    COUNT_DTYPE,
    FRAME_DTYPE,
    HIST_DTYPE,
    PROFILE_VERSION,
    RANK_DTYPE,
    SITE_DTYPE,
)

END_MARKER = b"PWEND\n\n\n"
STATES = ["complete", "no-finalize", "abort", "signal"]
ARRAYS = (
    ("ranks", RANK_DTYPE),
    ("sites", SITE_DTYPE),
    ("frames", FRAME_DTYPE),
    ("hist", HIST_DTYPE),
    ("counts", COUNT_DTYPE),
)


def records(rows, dtype):
    """A structured array from a list of dicts (missing fields are 0), or an array as is."""
    if isinstance(rows, np.ndarray):
        return rows.astype(dtype)
    out = np.zeros(len(rows), dtype)
    for i, row in enumerate(rows):
        for k, v in row.items():
            out[i][k] = v
    return out


def pwprof_bytes(header_extra=None, ranks=(), sites=(), frames=(), hist=(), counts=()):
    """The bytes of a profile file (version 3). header_extra adds to or replaces header
    keys (functions, families, objects, buildids, hosts, world_size, modules, format,
    version, ...); buildids default to "" per object, modules to one "mpi" module owning
    every function (with mpi_library and mpi_flavor, if given, as its strings)."""
    header_extra = dict(header_extra or {})
    if not isinstance(sites, np.ndarray):  # as the writer: first_frame -1 without frames
        sites = [dict({"first_frame": -1}, **row) for row in sites]
    arrays = {
        "ranks": records(ranks, RANK_DTYPE),
        "sites": records(sites, SITE_DTYPE),
        "frames": records(frames, FRAME_DTYPE),
        "hist": records(hist, HIST_DTYPE),
        "counts": records(counts, COUNT_DTYPE),
    }
    objects = header_extra.get("objects", [])
    functions = header_extra.get("functions", [])
    mpi = {"name": "mpi", "version": PROFILE_VERSION, "first": 0, "count": len(functions)}
    mpi["library"] = header_extra.pop("mpi_library", "")
    mpi["flavor"] = header_extra.pop("mpi_flavor", "")
    header = {
        "format": "perfweave-profile",
        "version": PROFILE_VERSION,
        "partial": False,
        "world_size": len(arrays["ranks"]),
        "hist_buckets": 34,
        "hosts": ["host0"],
        "objects": objects,
        "buildids": [""] * len(objects),
        "modules": [mpi] if functions else [],
        "functions": [],
        "families": [],
        "counters": [],
        "states": STATES,
    }
    desc, offset = {}, 0
    for name, dtype in ARRAYS:
        a = arrays[name]
        desc[name] = {
            "offset": offset,
            "count": len(a),
            "itemsize": dtype.itemsize,
            "dtype": [list(field) for field in dtype.descr],
        }
        offset += dtype.itemsize * len(a)
    header["arrays"] = desc
    header["data_bytes"] = offset
    header.update(header_extra)
    line = json.dumps(header, separators=(",", ":")).encode()
    line += b" " * (-(len(line) + 1) % 64)
    assert (len(line) + 1) % 64 == 0
    data = b"".join(arrays[name].tobytes() for name, _ in ARRAYS)
    assert len(data) == offset
    return line + b"\n" + data + END_MARKER


def write_pwprof(path, header_extra=None, ranks=(), sites=(), frames=(), hist=(), counts=()):
    """Write a valid profile file at path (parents created); returns the path.
    ranks/sites/frames/hist: lists of dicts keyed by format.h field names (or
    structured arrays); missing fields are 0, a site's first_frame -1."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pwprof_bytes(header_extra, ranks, sites, frames, hist, counts))
    return path


def experiment_meta(**extra):
    meta = {
        "format": "perfweave-experiment",
        "version": 1,
        "command": ["./app", "-x"],
        "state": "finished",
        "wall_seconds": 1.0,
        "exit_status": {"code": 0},
    }
    meta.update(extra)
    return meta


def write_experiment(path, meta=None, **extra):
    """Create an experiment directory with its experiment.json; returns the path."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    meta = experiment_meta(**extra) if meta is None else meta
    (path / "experiment.json").write_text(json.dumps(meta, indent=1) + "\n")
    return path


@pytest.fixture
def pwprof():
    """The write_pwprof helper."""
    return write_pwprof


@pytest.fixture
def experiment_dir(tmp_path):
    """experiment_dir(name="exp", **meta) -> a fresh experiment directory under tmp_path."""

    def _make(name="exp", meta=None, **extra):
        return write_experiment(tmp_path / name, meta, **extra)

    return _make

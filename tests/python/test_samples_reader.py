"""readers/samples.py on sample files written by hand: the files of versions 1 and 2, which
named the activity "state" and the loaded object "module" (the records' fields, the
description's "states" and "modules"), are read as version 3 says the same."""

import json

import numpy as np
import pytest

from perfweave.errors import FormatError
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE, SAMPLES_VERSION
from perfweave.readers.samples import read_samples

APP, LIBC = "/nonexistent/app", "/nonexistent/libc.so.6"


def literal():
    """Two samples of rank 0: computing in app, then in an MPI collective through libc."""
    return ProcessSamples.from_literal(
        [
            {"frames": [(APP, 0x101)], "counters": [5]},
            {"frames": [(LIBC, 0x11), (APP, 0x201)], "activity": "mpi_coll", "counters": [7]},
        ],
        objects=[APP, LIBC],
        counters=["perf::PAGE-FAULTS"],
    )


def write(exp, p, version, rename=None):
    """p's records and description as samples/rank-0.samples + .json of `version`; rename:
    {key of version 3: the key written instead}. The records of version 1 have no counters
    (a record is its fields' bytes back to back: the file holds no dtype)."""
    d = exp / "samples"
    d.mkdir(parents=True)
    rec = p.records
    if version == 1:
        assert SAMPLE_DTYPE.names[-1] == "counters"  # version 2 appended them
        v1 = np.zeros(len(rec), [(n, SAMPLE_DTYPE[n]) for n in SAMPLE_DTYPE.names[:-1]])
        for n in v1.dtype.names:
            v1[n] = rec[n]
        rec = v1
    meta = {"format": "perfweave-samples", "version": version, **p.meta}
    for new, old in (rename or {}).items():
        meta[old] = meta.pop(new)
    (d / "rank-0.samples").write_bytes(np.ascontiguousarray(rec).tobytes())
    (d / "rank-0.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("version", [1, 2])
def test_versions_1_and_2_read_as_version_3(tmp_path, version):
    p = literal()
    write(tmp_path, p, version, {"activities": "states", "objects": "modules"})
    [got] = read_samples(tmp_path)
    assert got.records.dtype.names[:6] == ("t", "thread", "activity", "depth", "object", "offset")
    assert got.records["activity"].tolist() == p.records["activity"].tolist()
    assert got.records["object"].tolist() == p.records["object"].tolist()
    assert got.records["offset"].tolist() == p.records["offset"].tolist()
    assert got.meta["activities"] == p.meta["activities"]
    assert got.meta["objects"] == [[APP, ""], [LIBC, ""]] and got.objects == [APP, LIBC]
    assert "states" not in got.meta and "modules" not in got.meta
    if version == 2:
        assert got.records["counters"][:, 0].tolist() == [5, 7]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_versions_1_to_3_name_the_mpi_io_activity_mpi_io(tmp_path, version):
    """Before version 4 the activity of MPI_File_* calls was "mpi_io": read as "mpi_file"."""
    p = ProcessSamples.from_literal(
        [{"frames": [(APP, 0x101)], "activity": "mpi_file", "counters": [1]}],
        objects=[APP],
        counters=["perf::PAGE-FAULTS"],
    )
    p.meta["activities"] = ["mpi_io" if a == "mpi_file" else a for a in p.meta["activities"]]
    assert "mpi_io" in p.meta["activities"]
    old = {"activities": "states", "objects": "modules"} if version < 3 else None
    write(tmp_path, p, version, old)
    [got] = read_samples(tmp_path)
    assert got.meta["activities"][got.records["activity"][0]] == "mpi_file"
    assert "mpi_io" not in got.meta["activities"]


def test_version_3_as_written(tmp_path):
    write(tmp_path, literal(), SAMPLES_VERSION)
    [got] = read_samples(tmp_path)
    assert got.records.dtype == SAMPLE_DTYPE and got.objects == [APP, LIBC]
    assert got.meta["activities"][got.records["activity"][1]] == "mpi_coll"


@pytest.mark.parametrize("new, old", [("activities", "states"), ("objects", "modules")])
def test_old_and_new_names_do_not_mix(tmp_path, new, old):
    """A version 2 description with one key of version 3 beside the old one."""
    write(tmp_path, literal(), 2, {"activities": "states", "objects": "modules"})
    path = tmp_path / "samples" / "rank-0.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, new: meta[old]}))
    with pytest.raises(FormatError, match=f"{new} in a version 2 file"):
        read_samples(tmp_path)


def test_an_old_key_is_checked_under_its_own_name(tmp_path):
    p = literal()
    p.meta["activities"] = "compute"
    write(tmp_path, p, 2, {"activities": "states", "objects": "modules"})
    with pytest.raises(FormatError, match="states"):
        read_samples(tmp_path)

"""readers/mathlib.py on files written by hand: the current version as written, and
version 1 (plans without `procs`, every plan the process's own) read as version 2."""

import json

import numpy as np
import pytest

from perfweave._format import FILES, RECORDS
from perfweave.readers.mathlib import read_mathlib

HEAD = {
    "format": FILES["mathlib"].magic,
    "rank": 0,
    "pid": 42,
    "host": "n1",
    "state": "complete",
    "t_start": 0,
    "t_end": 10**9,
    "threads": 1,
    "dropped": 0,
    "plans_dropped": 0,
    "unknown_plan_executes": 0,
    "routines": ["dgemm_", "fftw_plan_dft_3d"],
    "groups": ["blas3", "fftw"],
    "libraries": ["/usr/lib/libblas.so.3", "/usr/lib/libfftw3.so.3"],
    "internal": [0, 0],
    "fft_kinds": ["c2c", "r2c", "c2r"],
    "not_wrapped": [],
    "objects": [["/home/u/app", ""]],
}


def write(exp, version):
    d = exp / "mathlib"
    d.mkdir(parents=True)
    (d / "rank-0.json").write_text(json.dumps({**HEAD, "version": version}))
    call = np.zeros(1, RECORDS["mlcall"])
    call["routine"], call["object"], call["offset"] = 0, 0, 0x400
    call["count"], call["total_ns"], call["flops"] = 3, 3000, 3 * 2.0 * 300 * 200 * 100
    call.tofile(d / "rank-0.calls")
    plan_dtype = RECORDS["mlplan"]
    if version == 1:
        plan_dtype = np.dtype([f for f in plan_dtype.descr if f[0] != "procs"])
    plan = np.zeros(1, plan_dtype)
    plan["routine"], plan["rank"], plan["n"] = 1, 3, (16, 16, 16)
    plan["executes"], plan["size"] = 3, 16**3
    if version != 1:
        plan["procs"] = 1
    plan.tofile(d / "rank-0.plans")


@pytest.mark.parametrize("version", [1, FILES["mathlib"].version])
def test_versions_read_as_the_current_one(tmp_path, version):
    write(tmp_path, version)
    ml = read_mathlib(tmp_path)
    assert not ml.notes
    assert ml.calls["routine"].tolist() == ["dgemm_"] and ml.calls["count"].tolist() == [3]
    assert ml.calls["object"].tolist() == ["/home/u/app"]
    assert ml.plans["routine"].tolist() == ["fftw_plan_dft_3d"]
    assert ml.plans["procs"].tolist() == [1] and ml.plans["executes"].tolist() == [3]
    assert (ml.plans["n0"][0], ml.plans["n1"][0], ml.plans["n2"][0]) == (16, 16, 16)


def test_an_unknown_version_is_left_out_with_a_note(tmp_path):
    write(tmp_path, 99)
    ml = read_mathlib(tmp_path)
    assert not ml.processes and "version 99" in ml.notes[0] and "reads versions 1, 2" in ml.notes[0]

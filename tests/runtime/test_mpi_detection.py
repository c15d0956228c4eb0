"""Which MPI wrappers record a process is decided inside the process, at its first MPI
call, from the MPI library it really loaded (runtime/modules/mpi_loader.c): so a task
started through a wrapper script, `env`, `taskset`, `numactl` or a Python interpreter is
measured as a direct launch is, and processes that never call MPI (the wrapper's shell,
what it runs before exec) are no ranks."""

import shutil
import stat

import pytest

from harness import FLAVORS, PROGRAMS, by_name

# counts.c on 4 ranks (see its header)
COUNTS = {
    "MPI_Send": 5,
    "MPI_Recv": 5,
    "MPI_Bcast": 12,
    "MPI_Allreduce": 8,
    "MPI_Barrier": 16,
    "MPI_Gather": 4,
    "MPI_Alltoall": 4,
    "MPI_Comm_rank": 4,
    "MPI_Comm_size": 4,
}


def check_counts(exp, mpi):
    assert not exp.profile.partial  # the experiment's state: complete
    assert len(exp.mpi_ranks()) == 4 and exp.profile.world_size == 4
    assert exp.profile.module("mpi")["flavor"] == mpi.name
    f = by_name(exp.mpi_functions())
    assert {n: f[n]["calls"] for n in COUNTS} == COUNTS
    assert f["MPI_Send"]["bytes_sent"] == 5 * 8000


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_wrapper_script_that_execs(mpi, build, run_pw, tmp_path):
    """The usual per-task set-up script: the shell (and what it runs before exec) never
    calls MPI and leaves no rank; the program it execs is measured with its own MPI."""
    prog = build(mpi, "counts.c")
    wrap = script(tmp_path, "wrap.sh", 'export PW_TEST_SETUP=1\nhostname >/dev/null\nexec "$@"\n')
    r = run_pw(mpi.launch(4) + [wrap, prog])
    check_counts(r.open(), mpi)
    # the helpers the script ran are processes of the run, not ranks
    assert len(list((r.exp / "procs").glob("*.pwprof"))) >= 4
    assert sorted(p.name for p in (r.exp / "samples").glob("rank-*.json")) == [
        f"rank-{k}.json" for k in range(4)
    ]


@pytest.mark.parametrize(
    "prefix",
    [["env", "PW_TEST_VAR=1"], ["taskset", "-c", "0"], ["numactl", "--localalloc"]],
    ids=["env", "taskset", "numactl"],
)
def test_program_started_by_another(mpi, build, run_pw, prefix):
    assert shutil.which(prefix[0]), f"{prefix[0]} is not installed (make test installs it)"
    prog = build(mpi, "counts.c")
    r = run_pw(mpi.launch(4) + prefix + [prog])
    check_counts(r.open(), mpi)


def test_mpi4py(run_pw):
    """A Python interpreter that loads MPI through mpi4py's extension module (Debian's
    python3-mpi4py, built with Open MPI only: so this test runs with Open MPI only)."""
    mpi = FLAVORS["openmpi"]
    python = "/usr/bin/python3"
    r = run_pw(mpi.launch(4) + [python, PROGRAMS / "mpi4py_ring.py"])
    exp = r.open()
    assert not exp.profile.partial  # the experiment's state: complete
    per_rank = exp.mpi_ranks().to_dict("records")
    assert len(per_rank) == 4 and exp.profile.module("mpi")["flavor"] == "openmpi"
    f = by_name(exp.mpi_functions())
    assert f["MPI_Send"]["calls"] == 28 and f["MPI_Recv"]["calls"] == 28
    assert f["MPI_Send"]["bytes_sent"] == 28 * 100 == f["MPI_Recv"]["bytes_recv"]
    assert f["MPI_Barrier"]["calls"] >= 12
    for p in per_rank:
        assert p["calls"] >= 7 + 7 + 3


def test_mpi_none_records_no_call(mpi, build, run_pw):
    prog = build(mpi, "counts.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--mpi", "none"])
    assert not (r.exp / "profile.pwprof").exists()
    assert len(list((r.exp / "procs").glob("*.pwprof"))) == 4
    # no MPI function called: the profile (the processes') has no call site
    assert len(r.open().profile.sites) == 0

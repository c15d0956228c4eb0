"""Launch options users already wrote (docs/launching.md): an LD_PRELOAD given to the
tasks on an MPI launcher's own command line (Open MPI's `-x LD_PRELOAD=...`, hydra's
`-genv` / `-env LD_PRELOAD ...`) would win over perfweave's; it is kept behind
perfweave's library, so both the user's library and perfweave's runtime are in every
rank."""

import json
import shutil

import pytest

from harness import FLAVORS, bare, by_name


@pytest.mark.parametrize(
    "flavor, form",
    [
        ("openmpi", ["-x", "LD_PRELOAD=LIB"]),
        ("mpich", ["-genv", "LD_PRELOAD", "LIB"]),
        ("mpich", ["-env", "LD_PRELOAD=LIB"]),
    ],
)
def test_user_preload_on_the_launch_line(build, run_pw, flavor, form):
    mpi = FLAVORS[flavor]
    assert shutil.which(mpi.run), f"{mpi.run} is not installed (make test installs it)"
    lib = build(None, "user_preload_lib.c", ("-shared", "-fPIC"))
    prog = build(mpi, "user_preload.c")
    option = [w.replace("LIB", str(lib)) for w in form]
    # mpirun [-n 2] OPTION PROG: hydra's -env applies to the executable it precedes
    cmd = mpi.launch(2) + option + [prog]
    expected = "rank 0 marker 4242\nrank 1 marker 4242\n"
    ref = bare(cmd)
    assert ref.returncode == 0 and "".join(sorted(ref.stdout.splitlines(True))) == expected
    r = run_pw(cmd)
    # the user's library is in every rank and works there, as without perfweave
    assert "".join(sorted(r.proc.stdout.splitlines(True))) == expected
    # and perfweave's runtime is in every rank too
    exp = r.open()
    assert not exp.profile.partial and len(exp.mpi_ranks()) == 2
    assert by_name(exp.mpi_functions())["MPI_Barrier"]["calls"] == 6
    meta = json.loads((r.exp / "experiment.json").read_text())
    assert meta["program"] == str(prog)  # not the library, an executable file too

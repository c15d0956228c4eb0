"""The runtime is preloaded into every process of a job, launchers included, which
have no MPI library: it must not need any symbol that only an MPI library defines."""
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

LIBDIR = Path(str(resources.files("perfweave").joinpath("lib")))


def libraries():
    return sorted(LIBDIR.glob("libperfweave*.so"))


def test_both_mpi_runtimes_are_built():
    names = {p.name for p in libraries()}
    assert {"libperfweave.so", "libperfweave-mpi-openmpi.so",
            "libperfweave-mpi-mpich.so"} <= names


@pytest.mark.parametrize("lib", libraries(), ids=lambda p: p.name)
def test_no_strong_undefined_symbols_but_libc(lib):
    nm = shutil.which("nm")
    assert nm, "binutils' nm is needed (make test installs binutils)"
    out = subprocess.run([nm, "-D", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    strong_undefined = [line.split()[-1] for line in out.splitlines()
                        if line.split()[:1] == ["U"] and "@GLIBC" not in line]
    assert strong_undefined == [], f"{lib.name} needs {strong_undefined}"

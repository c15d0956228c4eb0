"""The core (libperfweave.so) is preloaded into every process of a job, launchers
included, which have no MPI library: no runtime library may need a symbol that only an
MPI library defines. The MPI builds (libperfweave-mpi-FLAVOR.so) are loaded by the
core's MPI loader into processes that call MPI: they need the core's symbols and show
only their wrapper table; the core defines a stub for every wrapped MPI symbol."""

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

LIBDIR = Path(str(resources.files("perfweave").joinpath("lib")))
CORE = LIBDIR / "libperfweave.so"


def libraries():
    return sorted(LIBDIR.glob("libperfweave*.so"))


def mpi_builds():
    return sorted(LIBDIR.glob("libperfweave-mpi-*.so"))


def dynamic_symbols(lib, *flags):
    nm = shutil.which("nm")
    assert nm, "binutils' nm is needed (make test installs binutils)"
    out = subprocess.run(
        [nm, "-D", *flags, str(lib)], capture_output=True, text=True, check=True
    ).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def test_both_mpi_runtimes_are_built():
    names = {p.name for p in libraries()}
    assert {"libperfweave.so", "libperfweave-mpi-openmpi.so", "libperfweave-mpi-mpich.so"} <= names


@pytest.mark.parametrize("lib", libraries(), ids=lambda p: p.name)
def test_no_strong_undefined_symbols_but_libc_and_core(lib):
    core = {w[-1] for w in dynamic_symbols(CORE, "--defined-only")}
    strong_undefined = [
        w[-1] for w in dynamic_symbols(lib) if w[:1] == ["U"] and "@GLIBC" not in w[-1]
    ]
    needs = [n for n in strong_undefined if n not in core]
    assert needs == [], f"{lib.name} needs {needs}"
    if lib in mpi_builds():
        assert strong_undefined, "an MPI build uses the core it is loaded beside"


@pytest.mark.parametrize("lib", mpi_builds(), ids=lambda p: p.name)
def test_mpi_build_shows_only_its_wrapper_table(lib):
    defined = [w[-1] for w in dynamic_symbols(lib, "--defined-only")]
    assert defined == ["pw_mpi_wrapper_table"]


def test_core_stubs_every_wrapped_symbol():
    import importlib.util

    spec_dir = Path(__file__).resolve().parents[2] / "runtime" / "mpi"
    loader = importlib.util.spec_from_file_location("gen_wrappers", spec_dir / "gen_wrappers.py")
    gen = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(gen)
    wrapped = gen.symbols(gen.parse((spec_dir / "mpi.spec").read_text()))
    functions = {w[-1] for w in dynamic_symbols(CORE, "--defined-only") if w[1] == "T"}
    assert set(wrapped) <= functions
    mpi_named = {n for n in functions if re.match(r"(?i)p?mpi_", n)}
    assert mpi_named == set(wrapped)  # no other MPI name, no PMPI_ at all

"""What the preloaded core exports must not tell a program more than its MPI does
(runtime/modules/mpi_loader.c): a program or library that looks an MPI symbol up
(dlsym(RTLD_DEFAULT), a weak reference) sees under `perfweave run` what it sees without it:
the MPI-4 `_c` functions only where the MPI has them (MPICH 4, not Open MPI 4.1), no MPI
symbol in a process without MPI, the MPI's own symbols once it dlopens one. The names
looked up are every MPI symbol the core defines a stub for (its dynamic symbol table);
programs/mpi_symbols.c prints what it finds."""

import re
import subprocess
from pathlib import Path

import pytest

import perfweave
from harness import bare

CORE = Path(perfweave.__file__).parent / "lib" / "libperfweave.so"
SEEN = re.compile(r"^(MPI_|mpi_|weak )")


@pytest.fixture(scope="module")
def names(tmp_path_factory):
    """A file of the MPI symbols the core has stubs for (C and Fortran), one a line."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(CORE)], capture_output=True, text=True, check=True
    ).stdout
    syms = sorted({ln.split()[-1] for ln in out.splitlines() if SEEN.match(ln.split()[-1])})
    assert "MPI_File_read_c" in syms and "MPI_Send" in syms and "mpi_send_" in syms
    f = tmp_path_factory.mktemp("names") / "names"
    f.write_text("\n".join(syms) + "\n")
    return f


def seen(stdout, with_errors=True):
    """The program's report lines; without whether dlerror() said why, with_errors False."""
    lines = [ln for ln in stdout.splitlines() if SEEN.match(ln)]
    return lines if with_errors else [re.sub(r"absent \w+$", "absent", ln) for ln in lines]


def fortran_program(mpi, build_dir):
    """programs/mpi_symbols.f90 with mpi_symbols.c's report linked in."""
    src = Path(__file__).parent / "programs"
    out = build_dir / f"mpi_symbols_f-{mpi.name}"
    if not out.exists():
        obj = build_dir / f"mpi_symbols_report-{mpi.name}.o"
        subprocess.run(
            [mpi.cc, "-c", "-DFORTRAN_MAIN", "-o", str(obj), str(src / "mpi_symbols.c")], check=True
        )
        workdir = build_dir / f"mod-{mpi.name}"
        workdir.mkdir(exist_ok=True)
        subprocess.run(
            [mpi.fc, "-o", str(out), str(src / "mpi_symbols.f90"), str(obj)],
            check=True,
            cwd=workdir,
        )
    return out


@pytest.mark.parametrize("bind_now", [False, True], ids=["lazy", "bind-now"])
def test_mpi_programs_see_the_symbols_of_their_mpi(mpi, build, build_dir, run_pw, names, bind_now):
    """C and Fortran MPI programs, lazy binding and LD_BIND_NOW (the program's and its
    libraries' references bound at start-up, before the core's constructor): every
    look-up found or absent as without perfweave, with dlerror()'s error when absent, and
    the weak reference to MPI_File_read_c NULL under Open MPI 4.1; no word from the
    dynamic linker on stderr."""
    env = ["env", "LD_BIND_NOW=1"] if bind_now else []
    for prog in (build(mpi, "mpi_symbols.c", ("-DWITH_MPI",)), fortran_program(mpi, build_dir)):
        cmd = mpi.launch(1) + env + [prog, names]
        without = bare(cmd)
        assert without.returncode == 0, without.stderr
        r = run_pw(cmd)
        assert seen(r.proc.stdout) == seen(without.stdout)
        assert not re.search(r"IFUNC|Relink|symbol lookup", r.proc.stderr), r.proc.stderr
        lines = set(seen(r.proc.stdout))
        mpi4 = mpi.name == "mpich"  # MPICH 4 is MPI-4, Open MPI 4.1 is not
        assert ("MPI_File_read_c found" in lines) == mpi4
        assert ("weak MPI_File_read_c yes" in lines) == mpi4
        assert {"MPI_Send found", "weak MPI_Init yes"} <= lines


def test_processes_without_mpi_or_that_dlopen_it(mpi, build, run_pw, names):
    """A program without MPI finds no MPI symbol and its weak references are NULL; once it
    dlopens the MPI library (RTLD_GLOBAL) it finds that library's symbols, the _c ones
    only under MPICH. Found or absent as without perfweave (dlerror() may stay empty for
    an absent one here: docs/mpi-profile.md)."""
    plain = build(None, "mpi_symbols.c")
    linked = build(mpi, "mpi_symbols.c", ("-DWITH_MPI",))
    ldd = subprocess.run(["ldd", str(linked)], capture_output=True, text=True).stdout
    lib = re.search(r"=> (\S*/lib(mpi|mpich)\.so\S*)", ldd).group(1)
    for args, mpi_loaded in (([plain, names], False), ([plain, names, lib], True)):
        without = bare(args)
        assert without.returncode == 0, without.stderr
        r = run_pw(args)
        assert seen(r.proc.stdout, False) == seen(without.stdout, False)
        lines = set(seen(r.proc.stdout, False))
        assert ("MPI_Send found" in lines) == mpi_loaded
        assert ("MPI_File_read_c found" in lines) == (mpi_loaded and mpi.name == "mpich")
        assert {"weak MPI_Init no", "weak MPI_File_read_c no"} <= lines


def test_dlerror_message_survives_the_first_calls_of_wrapped_functions(build, run_pw):
    """A wrapper finds its real function at its first call, from the loaded objects' own
    tables: with dlsym it freed the message a failed dlopen had left (a later dlerror()
    said nothing) and the string dlerror() had returned (printf printed freed memory)."""
    prog = build(None, "dlerror_kept.c")
    without = bare([prog])
    assert without.returncode == 0
    want = without.stdout.splitlines()
    assert (
        want[1]
        == "/nonexistent/first.so: cannot open shared object file: No such file or directory"
    )
    for options in ((), ("--io",)):
        r = run_pw([prog], options)
        assert r.proc.stdout.splitlines()[:3] == want

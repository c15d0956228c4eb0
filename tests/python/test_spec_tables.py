"""What an MPI, I/O or math-library function is comes from its spec (perfweave/_mpi.py
from mpi.spec, perfweave/_io.py from io.spec, perfweave/_mathlib.py from mathlib.spec),
where model/trace.py, interop, analysis/samples/ and analysis/mathlib.py kept lists of
their own before. golden/classification.json holds what those lists said of every name
(the MPI functions of Open MPI's and MPICH's mpi.h and of mpi.spec, the wrappers'
symbols, the I/O names of both): the tables must say the same, but for the corrections
listed here, each with why. golden/mathlib_names.json holds what analysis/mathlib.py's
lists said (is_math_function, served_routine; is_math_library) of 5986 function names
and 225 loaded objects: the defined functions of Debian 12's libopenblas64.a (kernels of
one processor kept), libblas.a, liblapack.a, liblapacke.a, libfftw3.a, libfftw3f_mpi.a,
the dynamic symbols of libopenblas.so.0, libscalapack-openmpi.so, libc, libm, libgomp
and libfftw3q (one name of each type letter and precision, three of each prefix), every
BLAS routine, LAPACK matrix type and BLIS operation of those lists in the forms the
libraries name their kernels (and in forms that no library uses), MKL's and BLIS's
names; the libraries: every *.so of /usr/lib/x86_64-linux-gnu and one of each math
library's names. The samples' math-library classification must say the same."""

import json
import re
from pathlib import Path

import pytest

from perfweave import _io, _mathlib, _mpi, interop
from perfweave.analysis.samples.names import (
    activity_of,
    is_math_function,
    is_math_library,
    mpi_call_name,
    served_routine,
)
from perfweave.model.trace import ROLES, classify

GOLDEN = Path(__file__).resolve().parent / "golden"
OLD = json.loads((GOLDEN / "classification.json").read_text())

# (category, role, family, blocking twin, point-to-point, collective) that were wrong
_QUERY = ("other", "other", "other")
_FILE_QUERY = ("mgmt_file", "file", "file")
MPI_CORRECTED = {
    # local queries of a topology, no collectives ("neighbor" in the name made them so)
    "MPI_Dist_graph_neighbors": _QUERY,
    "MPI_Dist_graph_neighbors_count": _QUERY,
    "MPI_Graph_neighbors": _QUERY,
    "MPI_Graph_neighbors_count": _QUERY,
    # attribute keys and error handlers create no communicator ("Comm_create" prefix)
    "MPI_Comm_create_errhandler": _QUERY,
    "MPI_Comm_create_keyval": _QUERY,
    "MPI_Comm_free_keyval": _QUERY,
    # a file's queries and handle conversions move no data (any MPI_File_* was data)
    **{
        f"MPI_File_{n}": _FILE_QUERY
        for n in (
            "c2f f2c call_errhandler create_errhandler get_amode get_atomicity "
            "get_byte_offset get_errhandler get_group get_info get_position "
            "get_position_shared get_type_extent get_view set_atomicity set_errhandler "
            "set_info"
        ).split()
    },
}
# I/O functions io.spec wraps that the samples called computation; mmap stays
# allocation (a sample in it is malloc's), as before
IO_CORRECTED = {
    n: "io"
    for n in (
        "__open_2 __open64_2 __openat_2 __openat64_2 mkstemp mkstemp64 mkostemp mkostemp64 "
        "mkstemps mkstemps64 mkostemps mkostemps64 dup dup2 dup3 fcntl fcntl64 __read_chk "
        "__pread_chk __pread64_chk preadv64v2 pwritev64v2 mkdirat aio_read aio_read64 "
        "aio_write aio_write64 aio_fsync lio_listio aio_return freopen freopen64 __fread_chk "
        "__fread_unlocked_chk fputs_unlocked puts fputc fputc_unlocked putc _IO_putc fprintf "
        "vfprintf __fprintf_chk __vfprintf_chk printf vprintf __printf_chk __vprintf_chk "
        "__isoc99_fscanf vfscanf __isoc99_vfscanf fgets_unlocked __fgets_chk fgetc getc "
        "_IO_getc ftello ftello64 rewind"
    ).split()
}


def test_mpi_classification_is_what_the_lists_said():
    differ = {}
    for name, old in OLD["mpi"].items():
        new = [
            *classify(name),
            interop.family(name),
            interop.blocking_twin(name),
            interop.is_p2p(name),
            interop.is_collective(name),
        ]
        if name in MPI_CORRECTED:
            old = [*MPI_CORRECTED[name], name, False, False]
        if new != old:
            differ[name] = (old, new)
    assert not differ
    assert len(OLD["mpi"]) > 400 and len(MPI_CORRECTED) == 24


def test_io_classification_is_what_the_list_said():
    differ = {}
    for name, old in OLD["io"].items():
        old = IO_CORRECTED.get(name, old)
        if activity_of(name) != old:
            differ[name] = (old, activity_of(name))
    assert not differ
    assert activity_of("mmap") == activity_of("mmap64") == "alloc"


def test_mpi_call_names_are_the_specs():
    assert {s: mpi_call_name(s) for s in OLD["mpi_call_name"]} == OLD["mpi_call_name"]


def test_every_wrapped_function_has_a_pattern_role_of_its_family():
    assert ROLES == list(_mpi.PATTERN_ROLES)
    for name, (family, kind, role, twin) in _mpi.FUNCTIONS.items():
        assert _mpi.PATTERN_ROLES[role][1] == family, name
        if twin:  # a nonblocking collective: its twin is the same kind
            assert name == "MPI_I" + twin[4].lower() + twin[5:]
            assert _mpi.FUNCTIONS[twin][1:3] == (kind, role)


@pytest.mark.parametrize("name", ["read", "fopen", "IO_file_xsputn", "syncfs", "pwrite64"])
def test_io_names_hold_the_spec_and_its_classify_section(name):
    assert activity_of(name) == "io"
    assert "pwrite64" in _io.NAMES and "IO_file_xsputn" in _io.NAMES


def test_math_classification_is_what_the_lists_said():
    old = json.loads((GOLDEN / "mathlib_names.json").read_text())
    functions = {n: [is_math_function(n), served_routine(n)] for n in old["functions"]}
    assert functions == old["functions"]
    assert {p: is_math_library(p) for p in old["libraries"]} == old["libraries"]
    # the names mean something: math functions and routines among them, and not only
    assert 1000 < sum(math for math, _ in functions.values()) < len(functions) - 1000
    assert sum(served is not None for _, served in functions.values()) > 1000
    assert 30 < sum(old["libraries"].values()) < len(old["libraries"]) - 100


def test_math_names_hold_the_spec_and_its_sections():
    # from the spec's routines: daxpy_ (blas1), dgemm_ (blas3), dgetrf_ (lapack),
    # cblas_dgemm (cblas); from its sections: gbmv, the matrix type gb, mkl, libopenblas
    assert {"axpy", "gemm", "amax", "dotc", "gbmv", "rotmg"} <= _mathlib.BLAS
    assert {"ge", "po", "sy", "he", "gb", "la"} <= _mathlib.LAPACK_TYPES
    assert {"cblas", "LAPACKE", "lapacke"} == _mathlib.INTERFACES
    assert _mathlib.BLIS["gemmsup"] == "gemm" and "libopenblas" in _mathlib.LIBRARIES
    for name, routine in (("dgbmv_", "dgbmv_"), ("dgbtrf_", "dgbtrf_"), ("mkl_serv_x", None)):
        assert is_math_function(name) and served_routine(name) == routine, name


def _mathlib_generator():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "runtime" / "mathlib" / "gen_wrappers.py"
    loader = importlib.util.spec_from_file_location("pw_gen_mathlib", path)
    gen = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(gen)
    return gen


MINI = """blas1 call 2*n 8*n   void ?axpy_(const int *n:d, const void *x) [f p=dz]
lapack call n n   void ?getrf_(const int *n:d, void *a) [f p=d]
section blas
gbmv
section blis
axpyv=axpy gbmv=gbmv
"""


def test_the_mathlib_table_is_the_specs_routines_and_sections():
    gen = _mathlib_generator()
    table = {}
    exec(gen.generate(MINI)["_mathlib.py"], table)
    assert table["BLAS"] == {"axpy", "gbmv"} and table["LAPACK_TYPES"] == {"ge"}
    assert table["BLIS"] == {"axpyv": "axpy", "gbmv": "gbmv"} and table["LIBRARIES"] == set()
    for bad, why in (
        ("section blas\naxpy\n", "axpy listed twice"),
        ("section blis\ngemv=gemv\n", "'gemv=gemv' is not OPERATION=BLAS_ROUTINE"),
        ("section kernels\nx\n", "unknown sections ['kernels']"),
    ):
        with pytest.raises(gen.SpecError, match=re.escape(why)):
            gen.generate(MINI.split("section")[0] + bad)

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

from perfweave import _io, _mathlib, _mpi
from perfweave.interop.otf2 import mapping
from perfweave.analysis.samples.names import (
    activity_of,
    is_math_function,
    is_math_library,
    mpi_call_name,
    served_routine,
)
from perfweave.model.trace import ROLES, classify, family as mpi_family

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
            mpi_family(name),
            mapping.blocking_twin(name),
            mapping.is_p2p(name),
            mapping.is_collective(name),
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
    for name, (family, action, role, twin) in _mpi.FUNCTIONS.items():
        assert _mpi.PATTERN_ROLES[role][1] == family, name
        if twin:  # a nonblocking collective: its twin is the same action
            assert name == "MPI_I" + twin[4].lower() + twin[5:]
            assert _mpi.FUNCTIONS[twin][1:3] == (action, role)


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


def _load_generator(part):
    """runtime/PART/gen_wrappers.py as a module (the generators are scripts, not a package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "runtime" / part / "gen_wrappers.py"
    spec = importlib.util.spec_from_file_location(f"pw_gen_{part}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mathlib_generator():
    return _load_generator("mathlib")


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


# ---- OTF2: what the export and import called by hand lists before mpi.spec's table ----
#
# OTF2's definitions (OTF2_GeneralDefinitions.h, OTF2 2.x/3.x): OTF2_CollectiveOp and
# OTF2_RmaAtomicType by name and value, the values the export writes
OTF2_COLLECTIVE_OP = dict(
    BARRIER=0, BCAST=1, GATHER=2, GATHERV=3, SCATTER=4, SCATTERV=5, ALLGATHER=6,
    ALLGATHERV=7, ALLTOALL=8, ALLTOALLV=9, ALLTOALLW=10, ALLREDUCE=11, REDUCE=12,
    REDUCE_SCATTER=13, SCAN=14, EXSCAN=15, REDUCE_SCATTER_BLOCK=16,
)  # fmt: skip
OTF2_RMA_ATOMIC_TYPE = dict(ACCUMULATE=0, COMPARE_AND_SWAP=3, FETCH_AND_ACCUMULATE=7)
# otf2/mapping.py's lists: the collective operation by blocking twin (ALLREDUCE for any
# other), the atomic type (ACCUMULATE for any other), puts and gets
OLD_COLL_OPS = {
    "MPI_Barrier": "BARRIER", "MPI_Bcast": "BCAST", "MPI_Gather": "GATHER",
    "MPI_Gatherv": "GATHERV", "MPI_Scatter": "SCATTER", "MPI_Scatterv": "SCATTERV",
    "MPI_Allgather": "ALLGATHER", "MPI_Allgatherv": "ALLGATHERV", "MPI_Alltoall": "ALLTOALL",
    "MPI_Alltoallv": "ALLTOALLV", "MPI_Alltoallw": "ALLTOALLW", "MPI_Allreduce": "ALLREDUCE",
    "MPI_Reduce": "REDUCE", "MPI_Reduce_scatter": "REDUCE_SCATTER", "MPI_Scan": "SCAN",
    "MPI_Exscan": "EXSCAN", "MPI_Reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    "MPI_Neighbor_allgather": "ALLGATHER", "MPI_Neighbor_allgatherv": "ALLGATHERV",
    "MPI_Neighbor_alltoall": "ALLTOALL", "MPI_Neighbor_alltoallv": "ALLTOALLV",
    "MPI_Neighbor_alltoallw": "ALLTOALLW",
}  # fmt: skip
OLD_ATOMIC_TYPE = {
    "MPI_Compare_and_swap": "COMPARE_AND_SWAP",
    "MPI_Fetch_and_op": "FETCH_AND_ACCUMULATE",
    "MPI_Get_accumulate": "FETCH_AND_ACCUMULATE",
    "MPI_Rget_accumulate": "FETCH_AND_ACCUMULATE",
}
OLD_PUTS, OLD_GETS = {"MPI_Put", "MPI_Rput"}, {"MPI_Get", "MPI_Rget"}
# interop/__init__.py's lists of the functions whose records' flags OTF2 implies
OLD_SSEND, OLD_ISSEND = {"MPI_Ssend"}, {"MPI_Issend"}
OLD_START = {"MPI_Start", "MPI_Startall"}
OLD_RMA_REQ = {"MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate"}
# otf2/columns.py's lock and unlock calls of passive-target epochs and otf2/mapping.py's
# window creations that allocate memory (region role ALLOCATE)
OLD_LOCKS = {"MPI_Win_lock", "MPI_Win_lock_all"}
OLD_UNLOCKS = {"MPI_Win_unlock", "MPI_Win_unlock_all"}
OLD_ALLOCATES = {"MPI_Win_allocate", "MPI_Win_allocate_shared"}
# model/profile.py's calls that bracket the application's time; the OTF2 import's
# initialisations and finalisation
OLD_BRACKET = ("MPI_Init", "MPI_Init_thread", "MPI_Finalize")
OLD_INIT, OLD_FINI = {"MPI_Init", "MPI_Init_thread"}, {"MPI_Finalize"}
# otf2/calls.py's and runtime/interop/otf2_bulk.c's event kinds, in their order, with
# the OTF2 writer function of each and its number of arguments after the time
OLD_EVENTS = [
    ("ENTER", "Enter", 1), ("LEAVE", "Leave", 1), ("SEND", "MpiSend", 4),
    ("ISEND", "MpiIsend", 5), ("RECV", "MpiRecv", 4), ("IRECV", "MpiIrecv", 5),
    ("IRECV_REQ", "MpiIrecvRequest", 1), ("ISEND_DONE", "MpiIsendComplete", 1),
    ("COLL_BEGIN", "MpiCollectiveBegin", 0), ("COLL_END", "MpiCollectiveEnd", 5),
    ("WIN_CREATE", "RmaWinCreate", 1), ("WIN_DESTROY", "RmaWinDestroy", 1),
    ("PUT", "RmaPut", 4), ("GET", "RmaGet", 4), ("ATOMIC", "RmaAtomic", 6),
    ("RMA_COLL_BEGIN", "RmaCollectiveBegin", 0), ("RMA_COLL_END", "RmaCollectiveEnd", 6),
    ("GROUP_SYNC", "RmaGroupSync", 3), ("ACQUIRE", "RmaAcquireLock", 4),
    ("RELEASE", "RmaReleaseLock", 3), ("RMA_SYNC", "RmaSync", 3),
    ("PROGRAM_BEGIN", "ProgramBegin", 0), ("PROGRAM_END", "ProgramEnd", 1),
    ("NBC_REQUEST", "NonBlockingCollectiveRequest", 1),
    ("NBC_COMPLETE", "NonBlockingCollectiveComplete", 6),
]  # fmt: skip
ALL_NAMES = sorted(set(OLD["mpi"]) | set(_mpi.FUNCTIONS))


def test_otf2_operations_are_what_the_lists_said():
    assert len(OLD_COLL_OPS) == 22
    for name in ALL_NAMES:
        twin = mapping.blocking_twin(name)
        assert mapping.collective_op(name) == OLD_COLL_OPS.get(twin, "ALLREDUCE"), name
        assert mapping.atomic_type(name) == OLD_ATOMIC_TYPE.get(name, "ACCUMULATE"), name
        assert (mapping.rma_op(name) == "PUT") == (name in OLD_PUTS), name
        assert (mapping.rma_op(name) == "GET") == (name in OLD_GETS), name
    # every collective the spec wraps has an operation of its own, none the default
    colls = [n for n, f in _mpi.FUNCTIONS.items() if f[0] == "coll" and f[1]]
    assert sorted(colls) == sorted(_mpi.OTF2_COLLECTIVE_OPS) and len(colls) == 44
    assert set(_mpi.OTF2_COLLECTIVE_OPS.values()) == set(OTF2_COLLECTIVE_OP)


def test_otf2_operations_are_otf2s_values():
    """The numbers the export writes for the table's names are OTF2's."""
    otf2 = pytest.importorskip("otf2")
    for name, op in _mpi.OTF2_COLLECTIVE_OPS.items():
        assert int(getattr(otf2.CollectiveOp, op).value) == OTF2_COLLECTIVE_OP[op], name
    for name in _mpi.OTF2_RMA_OPS:
        op = mapping.atomic_type(name)
        assert int(getattr(otf2.RmaAtomicType, op).value) == OTF2_RMA_ATOMIC_TYPE[op], name


def test_implied_flags_are_what_the_lists_said():
    from perfweave.interop.otf2.implied import function_traits

    traits = function_traits(ALL_NAMES)
    for key, old in (
        ("ssend", OLD_SSEND),
        ("issend", OLD_ISSEND),
        ("start", OLD_START),
        ("rreq", OLD_RMA_REQ),
    ):
        assert [n for n, t in zip(ALL_NAMES, traits[key]) if t] == sorted(old), key
    nbcoll = [n for n, t in zip(ALL_NAMES, traits["nbcoll"]) if t]
    assert len(nbcoll) == 22 and all(n.startswith("MPI_I") for n in nbcoll)
    assert not any(v[-1] for v in traits.values())  # an unknown function implies nothing


class _RoleNames:
    """OTF2's RegionRole as the names of its members (region_role without the otf2 module)."""

    def __getattr__(self, name):
        return name


def test_rma_roles_and_brackets_are_what_the_lists_said():
    from types import SimpleNamespace

    from perfweave.model.profile import BRACKET

    assert (_mpi.LOCKS_WINDOW, _mpi.UNLOCKS_WINDOW) == (OLD_LOCKS, OLD_UNLOCKS)
    fake = SimpleNamespace(RegionRole=_RoleNames())
    allocate = {n for n in ALL_NAMES if mapping.region_role(fake, n) == "ALLOCATE"}
    assert allocate == _mpi.ALLOCATES_WINDOW == OLD_ALLOCATES
    assert BRACKET == OLD_BRACKET
    assert {n for n in ALL_NAMES if mapping.mpi_action(n) == "init"} == OLD_INIT
    assert {n for n in ALL_NAMES if mapping.mpi_action(n) == "finalize"} == OLD_FINI


def test_otf2_events_are_numbered_as_the_export_was():
    """One list, mpi.spec's section otf2, numbers the events for the Python side and the
    C loop; the numbers are the ones both hand lists had."""
    from perfweave.interop.otf2 import calls

    assert [(e, *w) for e, w in _mpi.OTF2_EVENTS.items()] == OLD_EVENTS
    assert calls.K == {e: i for i, (e, _, _) in enumerate(OLD_EVENTS)}
    spec = Path(__file__).resolve().parents[2] / "runtime" / "mpi" / "mpi.spec"
    header = _generator().generate(spec.read_text())["pw_otf2_events.h"]
    assert re.findall(r"^    X\((\w+)\)", header, re.M) == [e for e, _, _ in OLD_EVENTS]
    from perfweave.launch import library_dir

    if (library_dir() / "libperfweave-otf2.so").exists():  # the C loop, built from it
        assert calls.bulk_writer() is not None  # None: it counts other events


def _generator():
    return _load_generator("mpi")

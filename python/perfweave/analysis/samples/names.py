"""The names a sampled frame is classified by (classification.py): which loaded objects
are system, MPI, OpenMP and math libraries, and which functions stand for I/O, memory
allocation, thread and OpenMP synchronisation, MPI calls and math-library routines.

The generated tables hold the specs' names: perfweave/_io.py (io.spec: I/O),
perfweave/_mpi.py (mpi.spec: MPI calls) and perfweave/_mathlib.py (mathlib.spec: the math
libraries' objects, routines, interfaces and prefixes). What is here besides is glibc's,
libstdc++'s and libgomp's own names for allocation and synchronisation, and the grammar
by which optimised math libraries name their kernels after the routines they serve."""

import os
import re

import perfweave._mathlib as _mathlib
from perfweave._io import NAMES as IO_NAMES
from perfweave._mpi import FUNCTIONS as MPI_FUNCTIONS

SYSTEM_PREFIXES = ("/lib/", "/usr/lib/", "/lib64/", "/usr/lib64/", "[vdso]", "linux-vdso")


def is_system(path):
    """Whether a loaded object is no code of the program's: a system or MPI library,
    perfweave's, or unknown."""
    base = os.path.basename(path)
    return (
        not path
        or path.startswith(SYSTEM_PREFIXES)
        or base.startswith("libperfweave")
        or "libmpi" in base
        or "libpmpi" in base
    )


def is_wrapper(path):
    """perfweave's MPI wrappers: their MPI_* frames are the MPI calls of the call tree."""
    return os.path.basename(path).startswith("libperfweave-mpi")


_MPI_NAME = re.compile(r"^p?mpi_(\w+?)(_f08ts_|_f08_|__|_)?$", re.IGNORECASE)


_MPI_BY_LOWER = {n.lower(): n for n in MPI_FUNCTIONS}


def mpi_call_name(function):
    """MPI_Xxx_yyy for a C or Fortran MPI entry point (MPI_Send, PMPI_Send, mpi_send_,
    mpi_send__, mpi_send_f08_): as mpi.spec writes it, else in the standard's
    capitalisation; None for other names."""
    m = _MPI_NAME.match(function or "")
    if not m:
        return None
    rest = m.group(1)
    return _MPI_BY_LOWER.get("mpi_" + rest.lower()) or "MPI_" + rest[0].upper() + rest[1:].lower()


# Known functions, by normalised name (normalise: glibc's __GI_/__libc_ prefixes,
# 64/_nocancel suffixes, symbol versions and C++ arguments dropped).
# I/O: the functions io.spec lists and the names of its section "classify"
_IO = IO_NAMES
_ALLOC = {
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "cfree",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "malloc_usable_size",
    "int_malloc",
    "int_free",
    "int_realloc",
    "int_memalign",
    "mid_memalign",
    "malloc_consolidate",
    "sysmalloc",
    "sysmalloc_mmap",
    "sysmalloc_mmap_fallback",
    "systrim",
    "mtrim",
    "heap_trim",
    "shrink_heap",
    "grow_heap",
    "new_heap",
    "alloc_new_heap",
    "arena_get2",
    "arena_get_retry",
    "get_free_list",
    "reused_arena",
    "int_new_arena",
    "tcache_init",
    "tcache_get",
    "tcache_put",
    "tcache_get_n",
    "tcache_put_n",
    "unlink_chunk",
    "munmap_chunk",
    "mremap_chunk",
    "madvise_thp",
    "int_free_merge_chunk",
    "int_free_create_chunk",
    "int_free_maybe_consolidate",
    "malloc_hook_ini",
    "ptmalloc_init",
    # the kernel's side of it: malloc maps, unmaps and moves the break
    "mmap",
    "munmap",
    "mremap",
    "brk",
    "sbrk",
    "madvise",
    # C++ and Fortran
    "operator new",
    "operator new[]",
    "operator delete",
    "operator delete[]",
    "gfortran_os_error_at",
    "gfortran_internal_malloc",
    "gfortran_internal_free",
    "je_malloc",
    "je_free",
    "je_calloc",
    "je_realloc",
    "tc_malloc",
    "tc_free",
    "tc_calloc",
    "tc_realloc",
    "tc_new",
    "tc_delete",
}
_SYNC = {
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_mutex_lock_full",
    "pthread_mutex_cond_lock",
    "pthread_mutex_unlock",
    "pthread_mutex_trylock",
    "pthread_mutex_clocklock_common",
    "pthread_mutex_unlock_usercnt",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_cond_wait_common",
    "pthread_cond_signal",
    "pthread_cond_broadcast",
    "condvar_dec_grefs",
    "condvar_quiesce_and_switch_g1",
    "condvar_confirm_wakeup",
    "pthread_barrier_wait",
    "pthread_join",
    "pthread_clockjoin",
    "pthread_clockjoin_ex",
    "pthread_timedjoin",
    "pthread_timedjoin_np",
    "pthread_tryjoin_np",
    "pthread_spin_lock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_timedwrlock",
    "pthread_rwlock_clockrdlock",
    "pthread_rwlock_clockwrlock",
    "pthread_rwlock_rdlock_full",
    "pthread_rwlock_wrlock_full",
    "pthread_rwlock_unlock",
    "pthread_once",
    "pthread_once_slow",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "new_sem_wait",
    "new_sem_wait_slow",
    "do_futex_wait",
    "sem_wait_common",
    "lll_lock_wait",
    "lll_lock_wait_private",
    "lll_lock_wake",
    "lll_lock_wake_private",
    "futex_wait",
    "futex_wake",
    "futex_abstimed_wait",
    "futex_abstimed_wait_common",
    "futex_abstimed_wait_cancelable",
    "futex_lock_pi",
    "futex_unlock_pi",
    "futex_reltimed_wait",
    "futex_wait_cancelable",
    "futex_wait_simple",
    # C++ (libstdc++)
    "std::mutex::lock",
    "std::condition_variable::wait",
    "std::thread::join",
    "std::condition_variable::wait_until",
    "std::condition_variable::wait_for",
    "std::shared_mutex::lock",
    "std::shared_mutex::lock_shared",
    "std::__condvar::wait",
}
# OpenMP's own synchronisation (libgomp): barriers, critical sections, locks, the waits
# behind them; any other frame in an OpenMP runtime counts too (classification.py)
_OMP = {
    "gomp_barrier_wait",
    "gomp_barrier_wait_end",
    "gomp_barrier_wait_last",
    "gomp_team_barrier_wait",
    "gomp_team_barrier_wait_end",
    "gomp_team_barrier_wait_final",
    "gomp_team_barrier_wait_cancel",
    "gomp_team_barrier_wait_cancel_end",
    "gomp_mutex_lock_slow",
    "gomp_sem_wait_slow",
    "gomp_ptrlock_get_slow",
    "gomp_wait",
    "gomp_futex_wait",
    "GOMP_barrier",
    "GOMP_barrier_cancel",
    "GOMP_critical_start",
    "GOMP_critical_name_start",
    "GOMP_atomic_start",
    "GOMP_taskwait",
    "omp_set_lock",
    "omp_set_nest_lock",
}
# OpenMP's critical sections and locks, as against its barriers (advice.py)
OMP_LOCKS = {
    "gomp_mutex_lock_slow",
    "GOMP_critical_start",
    "GOMP_critical_name_start",
    "GOMP_atomic_start",
    "omp_set_lock",
    "omp_set_nest_lock",
}
# static helpers whose names mean something only in libgomp
_GOMP_SYNC = {"do_wait", "do_spin", "futex_wait", "gomp_futex_wait"}
# the OpenMP API's queries (omp_get_wtime, omp_get_thread_num): the program's own work
OMP_QUERY = re.compile(r"^omp_(get|in|is)_")
# alloc before io: io.spec wraps mmap, and a sample in it is malloc's far more often
_KNOWN = {"alloc": _ALLOC, "io": _IO, "omp_sync": _OMP, "thread_sync": _SYNC}


def normalise(name):
    """glibc's names for one function (__GI___libc_write, __libc_write, __write,
    write@@GLIBC_2.2.5, __pread64_nocancel, __futex_abstimed_wait_common64) -> one
    name (write, pread, futex_abstimed_wait_common); C++ arguments dropped."""
    name = name.split("(")[0].split("@")[0].strip()
    prev = None
    while prev != name:
        prev = name
        name = name.lstrip("_")
        for prefix in ("GI_", "libc_"):
            if name.startswith(prefix):
                name = name[len(prefix) :]
    for suffix in ("_nocancel", "_time64", "64", "_np"):
        if name.endswith(suffix) and len(name) > len(suffix) + 1 and name not in _SYNC:
            name = name[: -len(suffix)]
    return name


OPENMP_RUNTIMES = ("libgomp", "libomp", "libiomp")


def is_openmp_runtime(path):
    return os.path.basename(path).startswith(OPENMP_RUNTIMES)


def activity_of(function, obj=""):
    """The activity ("io", "alloc", "thread_sync", "omp_sync") a function's name stands
    for, or None."""
    n = normalise(function)
    for act, names in _KNOWN.items():
        if n in names or function in names:
            return act
    if os.path.basename(obj).startswith("libgomp") and n in _GOMP_SYNC:
        return "omp_sync"
    return None


# The objects a thread starts in before its start routine: libc's thread start (clone,
# start_thread), the dynamic loader's, and perfweave's trampoline
THREAD_START = ("libc.", "libpthread", "ld-linux", "libperfweave")


# The math libraries (perfweave/_mathlib.py, from mathlib.spec's routines and sections).
# Their loaded objects, by the start of their file name: the samples in them are the
# math-library activity, the threads they start too
MATH_LIBRARIES = tuple(sorted(_mathlib.LIBRARIES))
# A BLAS routine's type letters, before its name
_TYPES = r"(?:[sdcz]|sc|dz|ds|sd|i[sdcz])"
_BLAS = "|".join(sorted(_mathlib.BLAS))
_LAPACK = r"[sdcz](?:" + "|".join(sorted(_mathlib.LAPACK_TYPES)) + ")"
_PREFIXES = "|".join(sorted(_mathlib.INTERFACES | _mathlib.PREFIXES))
_INTERNALS = "|".join(
    re.escape(n[:-1]) + r"\w*" if n.endswith("*") else re.escape(n)
    for n in sorted(_mathlib.INTERNALS)
)
# The functions of math libraries by name, wherever they lie (a library linked
# statically into the executable): BLAS (and OpenBLAS's kernels named after them,
# dgemm_kernel_HASWELL, dgemm_nn, daxpy_k, dgemv_n_HASWELL, any ROUTINE_..._PROCESSOR
# such as dtrsm_iunncopy_ZEN; not daxpy_like), LAPACK (Fortran names), the interfaces'
# and the libraries' own by their prefix (CBLAS, LAPACKE, MKL, OpenBLAS, BLIS), FFTW's
MATH_FUNCTION = re.compile(
    rf"^(?:{_TYPES}(?:{_BLAS})"
    r"(?:_|_64_|_[a-z]{1,2}(?:_[A-Z0-9]\w*)?|_(?:kernel|beta|itcopy|oncopy|incopy|otcopy|thread)\w*"
    r"|_\w*_[A-Z][A-Z0-9_]{2,})?"
    rf"|{_LAPACK}\w{{1,6}}_(?:64_)?"
    rf"|(?:{_PREFIXES})_\w+"
    rf"|[sd]?fftw[fql]?_\w+|{_INTERNALS})$"
)
# A BLAS or LAPACK routine's name without the Fortran underscore (dgemm, idamax, dgetrf),
# and the extensions optimised libraries add (OpenBLAS's ?omatcopy, ?gemm3m, ?axpby)
_ROUTINE = re.compile(
    rf"^(?:{_TYPES}(?:{'|'.join(sorted(_mathlib.BLAS | _mathlib.EXTENSIONS))})"
    rf"|{_LAPACK}[a-z0-9]{{1,6}})$"
)
# The routines of a library's interface: Fortran (dgemm_, dgemm_64_; MKL's dgemm and
# DGEMM), CBLAS, LAPACKE (and its _work forms), FFTW's (its own functions all start fftw_:
# the interface's and the library's inside alike, named only in a static library)
_INTERFACE = re.compile(
    rf"^(?:(?:{'|'.join(sorted(_mathlib.INTERFACES))})_)?(\w+?)(?:_|_64_|_work)?$"
)
_FFTW = re.compile(r"^[sd]?fftw[fql]?_\w+$")
# BLIS's operations (bli_dgemm_haswell_asm_6x8, bli_dgemmsup_rv_haswell_asm_6x8m,
# bli_daxpyv_zen_int10, bli_ddotxf_zen_int_8: type letter, operation, then the kernel's
# configuration), by the BLAS routine whose work they do: _mathlib.BLIS
_BLIS = re.compile(r"^bli_([sdcz])([a-z0-9]+?)(?:_\w+)?$")


def served_routine(name):
    """The routine of a math library's interface that a function of the library serves,
    by its name (None: any routine, or not known). A routine of the interface serves itself
    (dgemm_, cblas_dgemm, dgetrf_, LAPACKE_dgesv, fftw_execute); an optimised library's
    kernels and drivers serve the BLAS or LAPACK routine they are named after, as its
    Fortran name:

    - OpenBLAS: ROUTINE_ then its part and the processor it was built for, which the
      library chooses at run time (OPENBLAS_CORETYPE): dgemm_kernel_HASWELL,
      dgemm_kernel_ZEN, dgemm_beta_SKYLAKEX, dgemm_itcopy_SANDYBRIDGE, dgemm_oncopy_...,
      dgemm_small_kernel_nn_..., dtrsm_kernel_LN_..., dtrsm_iunncopy_..., the drivers
      dgemm_nn, dgemm_tn, dgemm_thread_nn, dsyrk_UN, dtrsm_LNUU, dgetrf_single,
      dpotrf_U_parallel, dlaswp_plus, and the level 1-2 kernels dgemv_n_..., dgemv_t_...,
      daxpy_k, ddot_k_..., idamax_k, dsymv_L_... -> dgemm_, dtrsm_, dgemv_, daxpy_, ...;
    - MKL: mkl_blas_ or mkl_lapack_, the instruction set's name, then the routine, x
      before it in the threaded drivers: mkl_blas_avx2_dgemm_kernel_0,
      mkl_blas_avx512_xdgemm, mkl_blas_dgemm_dcopy_down12_ea, mkl_lapack_dgetrf -> dgemm_,
      dgetrf_;
    - BLIS: bli_, the type letter and the operation (_mathlib.BLIS), then the kernel's
      configuration: bli_dgemm_haswell_asm_6x8, bli_dgemmsup_rv_haswell_asm_6x8m ->
      dgemm_, bli_daxpyv_zen_int10 -> daxpy_, bli_damaxv_zen_int -> idamax_.

    Serving any routine: OpenBLAS's thread server and dispatch (blas_thread_server,
    exec_blas), BLIS's packing (bli_dpackm_...) and thread barriers, MKL's services
    (mkl_serv_...)."""
    n = name or ""
    m = _INTERFACE.match(n)
    if _FFTW.match(n) or (m and _ROUTINE.match(m.group(1).lower())):
        return n
    if n.startswith(("mkl_blas_", "mkl_lapack_")):
        for word in n.split("_")[2:]:
            for r in (word, word[1:] if word.startswith("x") else ""):
                if r and _ROUTINE.match(r):
                    return r + "_"
        return None
    m = _BLIS.match(n)
    if m:
        op = _mathlib.BLIS.get(m.group(2))
        if not op:
            return None
        return ("i" if op == "amax" else "") + m.group(1) + op + "_"
    head = n.split("_", 1)[0]
    return head + "_" if "_" in n and _ROUTINE.match(head) else None


def is_math_library(path):
    """Whether a loaded object (its path) is a math library's."""
    return os.path.basename(path or "").startswith(MATH_LIBRARIES)


def is_math_function(name):
    """Whether a function's name is a math library's (BLAS, LAPACK, FFTW, ...)."""
    return bool(MATH_FUNCTION.match(name or ""))

"""Where the sampled time goes: per function and per source line, the share of samples
(exclusive: the function is the innermost frame of the program's code; inclusive: it is
anywhere on the stack), split by what the thread was doing (computation, MPI family),
across ranks with min/mean/max and imbalance (max - mean) / max.

A sample's innermost frame is often in a library the program called (libc, libm, MPI);
"exclusive" time is charged to the innermost frame whose object is the program or one
of its own libraries (not a system or MPI library), so time in memcpy inside a solver
loop counts for the solver, as in MAP's "self time of the source line".

Activities: the runtime records each sample's activity (compute, mpi_FAMILY, sleep, and
any it adds later); a compute sample is further told apart post-mortem (classify) from
its innermost frames: the interrupted function, and the next frames while they are in
a system library (libc, libpthread, libgomp, libstdc++), named by the symbolizer and
matched against known I/O, memory-allocation and thread-synchronisation functions. A
compute sample with a frame of a math library anywhere on its stack (its object's name,
or a math routine's name in the executable: a library linked statically) is the math
libraries' (MATHLIB), whatever its innermost frames: the threads a library starts too."""

import os
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from perfweave._format import ACTIVITIES as RUNTIME_ACTIVITIES
from perfweave._io import NAMES as IO_NAMES
from perfweave._mpi import FUNCTIONS as MPI_FUNCTIONS
from perfweave.analysis import phases, timebins
from perfweave.analysis.mathlib import is_math_function, is_math_library, served_routine
from perfweave.analysis.phases import APP, PHASES
from perfweave.model.table import column, records, table
from perfweave.symbols import Symbolizer

SYSTEM_PREFIXES = ("/lib/", "/usr/lib/", "/lib64/", "/usr/lib64/", "[vdso]", "linux-vdso")


def _is_system(path):
    base = os.path.basename(path)
    return (
        not path
        or path.startswith(SYSTEM_PREFIXES)
        or base.startswith("libperfweave")
        or "libmpi" in base
        or "libpmpi" in base
    )


def _is_wrapper(path):
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


# What a sample's thread was doing: the runtime's activities (format.h PW_ACTIVITIES, by
# name), with the ones classify() tells apart within "compute" after "compute". A name
# not listed here (in files of a later runtime) is appended, when first seen, to the copy
# that one classification names its indexes with (never to this list: a result does not
# depend on what was analysed before), so these indexes stay the same in every result.
MATHLIB = "mathlib"  # time inside a math library's call (BLAS, LAPACK, FFTW), its threads'
ACTIVITIES = ["compute", "io", "alloc", "thread_sync", "omp_sync", MATHLIB] + [
    a for a in RUNTIME_ACTIVITIES if a != "compute"
]
MATHLIB_ROUTINES = 10  # the routines of SamplesResult.mathlib, and callers of each
MATHLIB_CALLERS = 5
CLASSIFY_FRAMES = 3  # frame 0 and up to two callers, while in a system library

# Known functions, by normalised name (_normalise: glibc's __GI_/__libc_ prefixes,
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
# behind them; any other frame in an OpenMP runtime counts too (_classify)
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
_OMP_QUERY = re.compile(r"^omp_(get|in|is)_")
# alloc before io: io.spec wraps mmap, and a sample in it is malloc's far more often
_KNOWN = {"alloc": _ALLOC, "io": _IO, "omp_sync": _OMP, "thread_sync": _SYNC}


def _normalise(name):
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


def _is_openmp_runtime(path):
    return os.path.basename(path).startswith(OPENMP_RUNTIMES)


def activity_of(function, obj=""):
    """The activity ("io", "alloc", "thread_sync", "omp_sync") a function's name stands
    for, or None."""
    n = _normalise(function)
    for act, names in _KNOWN.items():
        if n in names or function in names:
            return act
    if os.path.basename(obj).startswith("libgomp") and n in _GOMP_SYNC:
        return "omp_sync"
    return None


def _index(activities, name):
    if name not in activities:
        activities.append(name)
    return activities.index(name)


def _classify(procs, sym, activities):
    """Per process: (activity index per sample, the library function that decided it
    per sample: "" where none did; for a math-library sample the routine, its math
    frames: {sample: _MathFrame}). activities: the names of the indexes, a copy of
    ACTIVITIES to which names first seen are appended."""
    out = []
    for p in procs:
        rec = p.records
        recorded = p.meta.get("activities") or ["compute"]
        to_act = [_index(activities, s) for s in recorded] + [_index(activities, "compute")]
        to_act = np.array(to_act, np.int64)
        st = rec["activity"].astype(np.int64)
        act = to_act[np.where((st >= 0) & (st < len(recorded)), st, len(recorded))]
        why = [""] * len(rec)
        cand = np.flatnonzero(act == ACTIVITIES.index("compute"))
        depth = rec["depth"].astype(np.int64)
        # the frames to look at, resolved once per object
        wanted = {}
        for i in cand.tolist():
            for k in range(min(int(depth[i]), CLASSIFY_FRAMES)):
                m = int(rec["object"][i, k])
                if m >= 0:
                    wanted.setdefault(m, set()).add(int(rec["offset"][i, k]))
        names = {}
        for m, offs in wanted.items():
            path = p.objects[m] if m < len(p.objects) else ""
            offs = sorted(offs)
            if path and not path.startswith("["):
                for o, L in zip(offs, sym.resolve(path, offs)):
                    # the real function first, then the ones inlined into it, inwards
                    chain = [f for f, _, _ in reversed(L.inlined_into)] + [L.function]
                    names[(m, o)] = [f for f in chain if f]
        for i in cand.tolist():
            for k in range(min(int(depth[i]), CLASSIFY_FRAMES)):
                m = int(rec["object"][i, k])
                path = p.objects[m] if 0 <= m < len(p.objects) else ""
                found = None
                fns = names.get((m, int(rec["offset"][i, k])), ())
                for f in fns:
                    a = activity_of(f, path)
                    if a:
                        found = (a, _normalise(f))
                        break
                if not found and fns and _OMP_QUERY.match(fns[-1]):
                    break  # the program asking the time, its rank
                if not found and _is_openmp_runtime(path):
                    # the program's parallel regions are its own code (outlined
                    # functions): time inside the OpenMP runtime is waiting at barriers,
                    # locks, for work, or handing it out
                    found = (
                        "omp_sync",
                        _normalise(fns[-1]) if fns else os.path.basename(path).split(".so")[0],
                    )
                if found:
                    act[i] = _index(activities, found[0])
                    why[i] = found[1]
                    break
                # callers are looked at only through system libraries
                if not path or not _is_system(path) or "libmpi" in path:
                    break
        math = _math_frames(p, cand, sym)
        for i, mf in math.items():
            act[i] = _index(activities, MATHLIB)
            why[i] = mf.routine
        out.append((act, why, math))
    return out


@dataclass(frozen=True)
class _MathFrame:
    """A sample's place in a math library: the routine it serves (_served below), the
    object of its outermost frame in a library (static: found by a routine's name in an
    object that is no math library's), the frame that called the library ((object path,
    offset); None for a thread of the library's own, _STACK_ENDS for a stack that ends
    inside it), and
    unwrapped: that caller reached the library without perfweave's wrapper (the program
    calls it statically, or not through the PLT)."""

    routine: str
    object: str
    static: bool
    caller: tuple = None
    unwrapped: bool = False


_STACK_ENDS = ("", -1)  # the caller of a stack that ends inside the library


def _math_frames(p, cand, sym):
    """{sample index: _MathFrame} of the samples cand (indexes) with a math library's
    frame on their stack. perfweave's own frames (its wrappers of the routines, between
    the program and the library) are looked through.

    The routine a sample serves: the outermost frame's in the library when it is a
    routine of the interface (dgemm_, cblas_dgemm, dgetrf_); else the routine whose
    wrapper is just outside the library on the stack (the thread is in a wrapped call:
    the kernels of OpenBLAS, MKL and BLIS, whose stacks the sampler continues from the
    wrapper when they have no unwind tables); else, in a stack with nothing outside the
    library (its own threads; a stack that ends in it), the routine another thread of the
    process was seen calling within one sampling interval (the worker computes a part
    of that call, or waits for its next part); else the first of its frames, from the
    outermost, that a name pattern says serves a routine (served_routine: OpenBLAS's
    dgemm_kernel_HASWELL serves dgemm_); else its outermost frame's name, or its
    object's."""
    rec = p.records
    if not len(cand):
        return {}
    objs = p.objects
    depth = rec["depth"].astype(np.int64)
    math_obj = np.array([is_math_library(m) for m in objs] + [False], bool)
    ours = np.array([os.path.basename(m).startswith("libperfweave") for m in objs] + [True], bool)
    # objects where a math routine's name counts (a static library): neither a system
    # library, nor a math library, nor perfweave's
    by_name = np.array(
        [not _is_system(m) and not is_math_library(m) and not m.startswith("[") for m in objs]
        + [False],
        bool,
    )
    o = rec["object"][cand].astype(np.int64)
    oidx = np.where((o >= 0) & (o < len(objs)), o, len(objs))
    offset = rec["offset"][cand].astype(np.int64)
    valid = np.arange(o.shape[1])[None, :] < depth[cand][:, None]
    # per frame: 1 a math library's, 2 a math routine by name, 3 perfweave's, 0 other
    kind = np.where(valid & ours[oidx], 3, 0)
    kind[valid & math_obj[oidx]] = 1
    named = valid & by_name[oidx]
    names = {}

    def resolve(wanted):  # the names of these frames, resolved once per object
        pairs = np.unique(np.stack([oidx[wanted], offset[wanted]], 1), axis=0)
        for m in np.unique(pairs[:, 0]).tolist():
            if m >= len(objs):
                continue  # no object known
            offs = pairs[pairs[:, 0] == m, 1].tolist()
            for off, L in zip(offs, sym.resolve(objs[m], offs)):
                names[(m, off)] = L.function or ""

    if named.any():
        resolve(named)
        key = oidx[named] * (1 << 40) + offset[named]
        uniq, inv = np.unique(key, return_inverse=True)
        is_math = np.array(
            [is_math_function(names.get((int(k >> 40), int(k & ((1 << 40) - 1))))) for k in uniq],
            bool,
        )
        kind[named] = np.where(is_math[inv.reshape(-1)], 2, kind[named])
    rows = ((kind == 1) | (kind == 2)).any(axis=1)
    # the math libraries' frames and perfweave's of these samples: the routine they serve
    if (rows[:, None] & ((kind == 1) | (kind == 3))).any():
        resolve(rows[:, None] & ((kind == 1) | (kind == 3)))
    found = {}  # sample index: _Served
    for r in np.flatnonzero(rows).tolist():
        i = int(cand[r])
        d = int(depth[i])
        frames = [(int(oidx[r, k]), int(offset[r, k])) for k in range(d)]
        math = [k for k in range(d) if kind[r, k] in (1, 2)]
        outer = math[-1]
        outer_name = names.get(frames[outer], "")
        caller = wrapper = None
        for k in range(outer + 1, d):
            if kind[r, k] == 3:
                wrapper = wrapper or names.get(frames[k], "")
                continue  # perfweave's wrapper of the routine
            cm = frames[k][0]
            path = objs[cm] if cm < len(objs) else ""
            base = os.path.basename(path)
            if path and not base.startswith(_THREAD_START) and not _is_openmp_runtime(path):
                caller = (path, frames[k][1])
            break
        wrapped = bool(wrapper) and served_routine(wrapper) == wrapper
        if outer_name and served_routine(outer_name) == outer_name:
            served = outer_name
        else:
            served = wrapper if wrapped else None
        by_name = (served_routine(names.get(frames[k])) for k in reversed(math))
        found[i] = _Served(
            served,
            next((x for x in by_name if x), None) or outer_name,
            objs[frames[outer][0]],
            bool(kind[r, outer] == 2),
            caller,
            wrapped,
            # no frame outside the library at all: the walk stopped inside it (code
            # without unwind tables, a stack deeper than the frames kept); a thread of the
            # library's own has its thread's start outside it
            outer == d - 1,
        )
    # a thread seen started by the library (a stack from its start, all in the library):
    # its stacks that end in the library are the library's thread's too
    thread = rec["thread"]
    own_threads = {int(thread[i]) for i, f in found.items() if f.caller is None and not f.ends}
    for i, f in found.items():
        if f.ends and int(thread[i]) in own_threads:
            f.ends = False
    _served_by_time(p, found)
    return {
        i: _MathFrame(
            f.routine or f.by_name or os.path.basename(f.object),
            f.object,
            f.static,
            _STACK_ENDS if f.ends else f.caller,
            f.caller is not None and not f.wrapped,
        )
        for i, f in found.items()
    }


@dataclass
class _Served:
    """What _math_frames knows of a sample: the routine it serves (None: not known yet),
    the one its frames' names say (served_routine, else the outermost frame's name), the
    outermost frame's object, static, its caller, and whether perfweave's wrapper is on
    its stack (its thread is in a wrapped call)."""

    routine: str
    by_name: str
    object: str
    static: bool
    caller: tuple
    wrapped: bool
    ends: bool  # the stack has no frame outside the library


def _served_by_time(p, found):
    """The routine served by each sample of found (_math_frames) with nothing outside the
    library and no routine yet: the call another thread of the process was in (its stack
    shows the routine and its caller: a wrapped call, or a static library's routine), at
    its sample nearest in time within one sampling interval (the process's longest)."""
    todo = [i for i, f in found.items() if f.routine is None and f.caller is None]
    inside = sorted(
        (int(p.records["t"][i]), i)
        for i, f in found.items()
        if f.routine is not None and f.caller is not None
    )
    window = max((t.get("interval_ns", 0) for t in p.meta.get("threads") or []), default=0)
    if not todo or not inside or not window:
        return
    times = np.array([t for t, _ in inside], np.int64)
    thread = p.records["thread"]
    for i in todo:
        t = int(p.records["t"][i])
        k = int(np.searchsorted(times, t))
        near = [
            (abs(int(times[j]) - t), inside[j][1])
            for j in range(max(k - 2, 0), min(k + 2, len(inside)))
            if thread[inside[j][1]] != thread[i]
        ]
        dt, other = min(near, default=(window + 1, None))
        if dt <= window:
            found[i].routine = found[other].routine


def classify(procs, symbolizer=None, activities=None):
    """Per process (model.samples.ProcessSamples), an int array: each sample's activity,
    an index into activities (by default a copy of ACTIVITIES: the same indexes, and
    names no runtime of this version records appended when first seen)."""
    activities = list(ACTIVITIES) if activities is None else activities
    return [a for a, *_ in _classify(procs, symbolizer or Symbolizer(), activities)]


def analyze(procs, symbolizer=None, windows=None):
    """The SamplesResult of the samples procs (an experiment's samples: a list of
    model.samples.ProcessSamples), or None without samples. windows: per rank, its MPI_Init
    and MPI_Finalize times (analysis/phases.py windows): the samples in MPI_Init
    (start-up) and from MPI_Finalize on (shutdown) stay in the call tree and the tables
    (shares of the samples) but not in the app time's activities (app_activity_pct,
    time_split, activity_functions), which the advice quotes."""
    procs = [p for p in procs if len(p.records)]
    if not procs:
        return None
    sym = symbolizer or Symbolizer()
    activities = list(ACTIVITIES)  # the names of the activity indexes, this result's
    classified = _classify(procs, sym, activities)
    # every (object path, offset) of interest: the chosen frame of each sample and all
    # frames for inclusive time, resolved once per object
    per_proc = []
    weights = []  # per process: each sample's wall time (_seconds)
    wanted = {}
    for p, (act, why, _) in zip(procs, classified):
        rec = p.records
        d = rec["depth"].astype(np.int64)
        objs = rec["object"]
        system = np.array([_is_system(m) and not _is_wrapper(m) for m in p.objects] + [True], bool)
        objpath = p.objects + [""]
        oidx = np.where(objs >= 0, objs, len(p.objects))
        valid = np.arange(objs.shape[1])[None, :] < d[:, None]
        own = valid & ~system[oidx]
        # the innermost own frame, else the innermost frame
        first_own = np.where(own.any(axis=1), own.argmax(axis=1), 0)
        chosen_m = oidx[np.arange(len(rec)), first_own]
        chosen_o = rec["offset"][np.arange(len(rec)), first_own]
        keys = [(objpath[m], int(o)) for m, o in zip(chosen_m.tolist(), chosen_o.tolist())]
        stacks = []
        for i in range(len(rec)):
            frames = [
                (objpath[oidx[i, k]], int(rec["offset"][i, k]))
                for k in range(int(d[i]))
                if own[i, k]
            ]
            stacks.append(frames[::-1])  # outermost first
        for k in keys + [k for st in stacks for k in st]:
            wanted.setdefault(k[0], set()).add(k[1])
        per_proc.append((p, keys, act, _deltas(p), stacks, why))
        weights.append(_seconds(p))
    # weights scaled so that they sum to the samples: totals stay sample counts, and
    # shares are of wall time, within a rank and across ranks (thread-seconds)
    wall = sum(float(w.sum()) for w in weights)
    seconds = weights  # each sample's wall time (s)
    weights = [
        w * (sum(map(len, weights)) / wall) if wall > 0 else np.ones(len(w)) for w in weights
    ]
    loc = {}
    for m, offs in wanted.items():
        offs = sorted(offs)
        if m and not m.startswith("["):
            for o, L in zip(offs, sym.resolve(m, offs)):
                loc[(m, o)] = L
    # frames in perfweave's MPI wrappers: an MPI_* function is the MPI call (named as in
    # C, for Fortran bindings too, without file:line); its own helpers are left out
    mpi_frame = {}
    for k, L in list(loc.items()):
        if _is_wrapper(k[0]):
            name = mpi_call_name(L.function)
            mpi_frame[k] = name
            if name:
                loc[k] = type(L)(k[0], k[1], name)

    def clean(stack):  # outermost first
        out = []
        for k in stack:
            if k in mpi_frame:
                name = mpi_frame[k]
                if not name or (out and mpi_frame.get(out[-1]) == name):
                    continue  # a helper; a binding calling the C one
            out.append(k)
        return out

    # per sample: its stack, self frame (an MPI call is the place of an MPI sample),
    # and self line (the program's line: the MPI call's, for an MPI sample)
    line_keys = []
    for j, (p, keys, act, delta, stacks, why) in enumerate(per_proc):
        stacks = [clean(st) for st in stacks]
        keys = [st[-1] if st else k for st, k in zip(stacks, keys)]
        lkeys = [
            next((x for x in reversed(st) if x not in mpi_frame), k) for st, k in zip(stacks, keys)
        ]
        per_proc[j] = (p, keys, act, delta, stacks, why)
        line_keys.append(lkeys)
    ranks = [p.rank for p, *_ in per_proc]
    line_loc = {}  # line name -> (function, file, line)

    def fn_of(k):
        L = loc.get(k)
        return L.function if L and L.function else f"{os.path.basename(k[0]) or '?'}+{k[1]:#x}"

    chains = {}

    def chain_of(k):
        """The functions of one frame, outermost first: the function the code was
        compiled into, then those inlined into it (DWARF), so inlining keeps a caller."""
        c = chains.get(k)
        if c is None:
            L = loc.get(k)
            c = (f for f, _, _ in reversed(L.inlined_into) if f) if L and L.function else ()
            c = chains[k] = tuple(c) + (fn_of(k),)
        return c

    def line_of(k):
        L = loc.get(k)
        if L and L.file and L.line:
            name = f"{L.function or '?'} ({os.path.basename(L.file)}:{L.line})"
            line_loc[name] = (fn_of(k), L.file, L.line)
            return name
        return fn_of(k)

    # each sample's path of function names, outermost first, its thread rooted where the
    # program started it (rooted_paths); self names of samples rooted there
    paths, roots_self = [], []
    for p, keys, act, delta, stacks, why in per_proc:
        named = [tuple(f for k in st for f in chain_of(k)) for st in stacks]
        rooted = rooted_paths(p, named, act, sym)
        paths.append(rooted)
        roots_self.append([r[-1] if r and not n else None for r, n in zip(rooted, named)])

    # per rank: samples by (function) exclusive/inclusive and by (line) exclusive; the
    # counters' increase since the thread's previous sample goes where the sample is
    nst = max(len(activities), 1)
    events = list(procs[0].meta.get("counters") or [])
    nev = len(events)
    tables = {"function": {}, "line": {}, "inclusive": {}}
    counts = {name: {} for name in tables}
    totals = np.zeros((len(per_proc), nst))
    app_totals = np.zeros((len(per_proc), nst))  # the samples of the app time only
    phase_w = np.zeros(len(PHASES))
    phase_n = np.zeros(len(PHASES), np.int64)
    ctr_total = np.zeros(max(nev, 1))
    tree = {}  # function path -> [incl, excl] (proc, state)
    callee = {}  # (activity, library function) -> samples
    tree_ctr = {}  # function path -> [incl, excl] (event)
    math_w = {}  # (routine, static) -> {"callers", "objects": {key: app samples}, "unwrapped"}
    for j, (p, keys, st, delta, stacks, why) in enumerate(per_proc):
        st = np.clip(st, 0, nst - 1)
        w = weights[j]
        np.add.at(totals[j], st, w)
        phase = phases.of_samples(p.records["t"], (windows or {}).get(p.rank))
        np.add.at(phase_w, phase, w)
        phase_n += np.bincount(phase, minlength=len(PHASES))
        app = phase == APP
        np.add.at(app_totals[j], st[app], w[app])
        for i, mf in classified[j][2].items():
            if app[i]:
                x = float(w[i])
                by = math_w.setdefault(
                    (mf.routine, mf.static), {"callers": {}, "objects": {}, "unwrapped": 0.0}
                )
                by["callers"][mf.caller] = by["callers"].get(mf.caller, 0.0) + x
                by["objects"][mf.object] = by["objects"].get(mf.object, 0.0) + x
                by["unwrapped"] += x * mf.unwrapped
        for a, fn, x, in_app in zip(st.tolist(), why, w.tolist(), app.tolist()):
            if fn and in_app:
                callee[(activities[a], fn)] = callee.get((activities[a], fn), 0) + x
        if nev:
            ctr_total += delta.sum(axis=0)
        for i, s in enumerate(np.clip(st, 0, nst - 1).tolist()):
            path = paths[j][i] or ("?",)
            for n in range(1, len(path) + 1):
                node = tree.setdefault(path[:n], np.zeros((2, len(per_proc), nst)))
                node[0, j, s] += w[i]
                if nev:
                    tree_ctr.setdefault(path[:n], np.zeros((2, nev), np.int64))[0] += delta[i]
            tree[path][1, j, s] += w[i]
            if nev:
                tree_ctr[path][1] += delta[i]
        for i, (k, lk, s) in enumerate(zip(keys, line_keys[j], st.tolist())):
            rs = roots_self[j][i]
            for name, key in (("function", rs or fn_of(k)), ("line", rs or line_of(lk))):
                row = tables[name].setdefault(key, np.zeros((len(per_proc), nst)))
                row[j, s] += w[i]
                if nev:
                    counts[name][key] = counts[name].get(key, 0) + delta[i]
            for f in set(paths[j][i]) - {IDLE_WORKERS, STATIC_INIT}:
                row = tables["inclusive"].setdefault(f, np.zeros((len(per_proc), nst)))
                row[j, s] += w[i]
                if nev:
                    counts["inclusive"][f] = counts["inclusive"].get(f, 0) + delta[i]
    per_rank_total = totals.sum(axis=1)  # samples' worth of each rank's wall time
    cols = _PlaceColumns(per_rank_total, activities, ranks, events)

    def places(name):
        extra = {}
        if name == "line":
            for key in tables[name]:
                # the function, source file and line of a line's name; a place without
                # one (no debug information) is named by its function, file "", line 0
                f, file, line = line_loc.get(key, (key, "", 0))
                extra[key] = {"function": f, "file": file, "line": line}
        return cols.table(tables[name], counts[name], extra)

    threads = [t for p in procs for t in p.meta.get("threads", [])]
    all_samples = per_rank_total.sum()
    app_samples = app_totals.sum()
    tree_table, tree_paths = _tree(tree, per_rank_total, activities, ranks, tree_ctr, events)
    app_activity_pct = (
        {activities[s]: float(100 * app_totals[:, s].sum() / app_samples) for s in range(nst)}
        if app_samples > 0
        else {}
    )
    procs_ = [p for p, *_ in per_proc]

    def sample_table():
        return _sample_table(
            procs_,
            activities,
            events,
            activity=[a for _, _, a, _, _, _ in per_proc],
            leaf=[[fn_of(k) for k in keys] for _, keys, *_ in per_proc],
            line=[[line_of(k) for k in lk] for lk in line_keys],
            stack=paths,
            deltas=[d for _, _, _, d, _, _ in per_proc],
            seconds=seconds,
        )

    def tree_per_rank_table():
        return _tree_per_rank(
            tree, tree_table, tree_paths, per_rank_total, activities, ranks, seconds
        )

    return SamplesResult(
        processes=len(procs),
        sample_count=int(round(all_samples)),
        ranks=ranks,
        recorded_activities=procs[0].meta.get("activities") or ["compute"],
        activities=activities,
        activity_pct={
            activities[s]: float(100 * totals[:, s].sum() / all_samples) for s in range(nst)
        },
        activity_per_rank_pct={
            activities[s]: [float(x) for x in 100 * totals[:, s] / np.maximum(per_rank_total, 1)]
            for s in range(nst)
            if totals[:, s].any()
        },
        # of the app time's samples (the start-up and the shutdown are the MPI
        # library's and the launcher's): the report's time split and the advice
        app_samples=int(phase_n[APP]),
        app_activity_pct=app_activity_pct,
        # the library functions that made app samples I/O, allocation, synchronisation
        activity_functions={
            a: sorted(
                (
                    {"name": w, "pct": float(100 * n / app_samples)}
                    for (a2, w), n in callee.items()
                    if a2 == a
                ),
                key=lambda r: -r["pct"],
            )[:10]
            for a in sorted({a for a, _ in callee})
        },
        call_tree=tree_table,
        timeline=timebins.from_samples(procs, activities, [a for a, *_ in classified], seconds),
        functions=places("function"),
        lines=places("line"),
        inclusive=places("inclusive"),
        counters=events,
        counters_total={ev: int(ctr_total[e]) for e, ev in enumerate(events)},
        last_interval_ms=max((t["interval_ns"] for t in threads), default=0) / 1e6,
        thinned=max((t["thinned"] for t in threads), default=0),
        dropped={
            k: sum(p.meta.get("dropped", {}).get(k, 0) for p in procs)
            for k in ("threads", "timers", "memory")
        },
        kept_per_thread_max=max((t["kept"] for t in threads), default=0),
        phase_pct={ph: float(100 * phase_w[k] / all_samples) for k, ph in enumerate(PHASES)}
        if windows
        else None,
        phase_samples={ph: int(phase_n[k]) for k, ph in enumerate(PHASES)} if windows else None,
        time_split=time_split(app_activity_pct),
        mathlib=_mathlib_view(math_w, app_totals.sum(), sym),
        _build={"samples": sample_table, "call_tree_per_rank": tree_per_rank_table},
    )


# How a thread's samples are rooted in the call tree. The main thread's stack starts at
# main (libc's start-up frames are no frames of the program's). A thread the program
# creates starts in libc (clone, start_thread), then its start routine: a pthread routine
# of the program is its root. An OpenMP worker's routine is the runtime's (libgomp's
# gomp_thread_start), which calls the parallel region outlined by the compiler
# (gcc: foo._omp_fn.0 for a region in foo; clang: .omp_outlined.): its samples are put
# under the path by which the process's main thread enters the same region
# (main -> foo -> foo._omp_fn.0), so master and workers share one tree. A worker sample
# with no frame of the program's (waiting in the runtime for work or at the barrier that
# ends a region) belongs to the region the main thread is in at that moment (its nearest
# sample in time), or to the main thread's place at the region's fork or join (it is then
# in the runtime itself); between regions, to IDLE_WORKERS under the program's root.
# gfortran's main, which only calls the main program (MAIN__, named after the program),
# is left out, so a Fortran program's root is "program NAME"; C++ static constructors,
# which run before main, are under the root as STATIC_INIT.
IDLE_WORKERS = "[idle OpenMP threads]"
STATIC_INIT = "[static initialisation]"
# g++'s functions that run a translation unit's static constructors before main
_STATIC_INIT = ("_GLOBAL__sub_I_", "__static_initialization_and_destruction")
_OUTLINED = re.compile(r"^(.*?)\._omp_fn\.\d+$|^(.*?)\.omp_outlined\b|^\.?omp_outlined\.")
_THREAD_START = ("libc.", "libpthread", "ld-linux", "libperfweave")


def _outlined(name):
    return bool(_OUTLINED.match(name))


def _opener(name):
    """The function that opens an outlined parallel region (foo for foo._omp_fn.3)."""
    m = _OUTLINED.match(name)
    return (m.group(1) or m.group(2) or "") if m else ""


def _program_root(paths):
    """Paths without the start-up frames that the frame-pointer walk can reach (_start)
    and without gfortran's main, which only sets up libgfortran before calling the main
    program: its samples there go to the program. C++ static initialisers, run before
    main, are put under the program's root as STATIC_INIT."""
    out = []
    for x in paths:
        while len(x) >= 2 and x[0] == "_start":
            x = x[1:]
        out.append(x)
    program = {
        x[1]
        for x in out
        if len(x) >= 2 and x[0] == "main" and (x[1] == "MAIN__" or x[1].startswith("program "))
    }
    if len(program) == 1:
        root = (program.pop(),)
        out = [
            (x[1:] if x[1:2] == root else root + x[1:]) if x[:1] == ("main",) else x for x in out
        ]
    init = [bool(x) and x[0].startswith(_STATIC_INIT) for x in out]
    if any(init):
        roots = {}
        for x, i in zip(out, init):
            if x and not i:
                roots[x[0]] = roots.get(x[0], 0) + 1
        top = (max(roots, key=roots.get),) if roots else ()
        out = [top + (STATIC_INIT,) + x if i else x for x, i in zip(out, init)]
    return out


def rooted_paths(p, paths, act, sym):
    """Each sample's function path (outermost first) with worker threads rooted where
    the program started them (see IDLE_WORKERS above). paths: per sample, the names of
    its frames of the program's own code."""
    paths = _program_root(paths)
    rec = p.records
    threads = p.meta.get("threads") or []
    pid = p.meta.get("pid")
    main = next((i for i, t in enumerate(threads) if t.get("tid") == pid), 0)
    slot = rec["thread"].astype(np.int64)
    is_main = slot == main
    if is_main.all():
        return paths
    # the main thread's way into each region, its most frequent
    seen = {}
    main_idx = np.flatnonzero(is_main)
    for i in main_idx.tolist():
        x = paths[i]
        for k, f in enumerate(x):
            if _outlined(f):
                seen.setdefault(f, {}).setdefault(x[:k], 0)
                seen[f][x[:k]] += 1
    into = {f: max(c, key=c.get) for f, c in seen.items()}
    roots = {}
    for i in main_idx.tolist():
        if paths[i]:
            roots[paths[i][0]] = roots.get(paths[i][0], 0) + 1
    top = (max(roots, key=roots.get),) if roots else ()
    # each worker sample's nearest sample of the main thread in time
    workers = np.flatnonzero(~is_main)
    nearest = np.full(len(workers), -1, np.int64)
    if len(main_idx):
        order = main_idx[np.argsort(rec["t"][main_idx], kind="stable")]
        main_t = rec["t"][order]
        t = rec["t"][workers]
        k = np.clip(np.searchsorted(main_t, t), 1, max(len(order) - 1, 1))
        lo = np.maximum(k - 1, 0)
        hi = np.minimum(k, len(order) - 1)
        nearest = order[np.where(np.abs(t - main_t[lo]) <= np.abs(main_t[hi] - t), lo, hi)]
    omp = ACTIVITIES.index("omp_sync")
    out = list(paths)
    for i, m in zip(workers.tolist(), nearest.tolist()):
        x = paths[i]
        if x and _outlined(x[0]):
            pre = into.get(x[0])
            out[i] = (pre if pre is not None else (_opener(x[0]),) if _opener(x[0]) else ()) + x
            continue
        if x:
            continue  # a routine of the program's
        start = _start_routine(p, i)
        if start is None or not _is_openmp_runtime(p.objects[start[0]]):
            name = sym.resolve(p.objects[start[0]], [start[1]])[0] if start else None
            out[i] = (f"thread {name.function or name.short()}",) if name else ()
            continue
        mp = paths[m] if m >= 0 else ()
        regions = [n for n, f in enumerate(mp) if _outlined(f)]
        if regions:
            out[i] = mp[: regions[-1] + 1]
        elif mp and act[m] == omp:
            out[i] = mp
        else:
            out[i] = top + (IDLE_WORKERS,)
    return out


def _start_routine(p, i):
    """(object index, offset) of a thread's start routine: its outermost frame past
    libc's thread start (clone, start_thread) and perfweave's trampoline; None if the
    stack has no such frame."""
    rec = p.records
    for k in range(int(rec["depth"][i]) - 1, -1, -1):
        m = int(rec["object"][i, k])
        if 0 <= m < len(p.objects):
            if not os.path.basename(p.objects[m]).startswith(_THREAD_START):
                return m, int(rec["offset"][i, k])
    return None


LIBRARY_THREADS = "[threads of the library]"
STACK_ENDS = "[stack ends in the library]"


def _mathlib_view(math_w, app_total, sym):
    """SamplesResult.mathlib of {(routine, static): {"callers": {caller: app samples},
    "objects": {object: app samples}, "unwrapped": app samples}}."""
    if not math_w or app_total <= 0:
        return None
    total = sum(sum(by["callers"].values()) for by in math_w.values())
    rows = []
    for (routine, static), by in math_w.items():
        n = sum(by["callers"].values())
        callers = []
        ranked = sorted(by["callers"].items(), key=lambda kv: -kv[1])
        for caller, x in ranked[:MATHLIB_CALLERS]:
            row = {"name": LIBRARY_THREADS, "function": "", "file": "", "line": 0}
            if caller == _STACK_ENDS:
                row = dict(row, name=STACK_ENDS)
            elif caller is not None:
                L = sym.resolve(caller[0], [caller[1]])[0]
                fn = L.function or f"{os.path.basename(caller[0])}+{caller[1]:#x}"
                where = f" ({os.path.basename(L.file)}:{L.line})" if L.file and L.line else ""
                row = {
                    "name": fn + where,
                    "function": fn,
                    "file": L.file or "",
                    "line": L.line or 0,
                }
            callers.append(dict(row, pct=100 * x / app_total, routine_pct=100 * x / n))
        rows.append(
            {
                "routine": routine,
                "object": max(by["objects"], key=by["objects"].get),
                "static": static,
                "pct": 100 * n / app_total,
                "math_pct": 100 * n / total,
                "unwrapped_pct": 100 * by["unwrapped"] / app_total,
                "callers": callers,
            }
        )
    rows.sort(key=lambda r: (-r["pct"], r["routine"]))
    return {"pct": 100 * total / app_total, "routines": rows[:MATHLIB_ROUTINES]}


def time_split(app_activity_pct):
    """Performance Reports' split of the app time from its samples (app_activity_pct:
    without the start-up in MPI_Init and the shutdown): compute (memory allocation
    included), MPI (every family), I/O, thread synchronisation, and, only when there is
    some, time in math libraries (apart from compute) and time asleep or blocked; None
    without samples in the app time."""
    if not app_activity_pct:
        return None
    act = app_activity_pct
    split = {
        "compute": act.get("compute", 0) + act.get("alloc", 0),
        "MPI": sum(v for k, v in act.items() if k.startswith("mpi_")),
        "I/O": act.get("io", 0),
        "threads": act.get("thread_sync", 0) + act.get("omp_sync", 0),
    }
    if act.get(MATHLIB, 0):
        split["math libraries"] = act[MATHLIB]
    idle = act.get("sleep", 0) + act.get("wait", 0)
    if idle:
        split["sleep/wait"] = idle
    return split


def _seconds(p):
    """Each sample's wall time in seconds: the time since its thread's previous kept
    sample; a thread's first sample stands for its thread's median interval (when the
    thread started is not recorded), or the thread's last interval setting if it has
    only one.

    Why samples are weighted and not counted: the sampler's timer is wall-clock, but a
    thread waiting for a core (a busy or oversubscribed node) takes the timer's signal
    only when it runs again, and the timer, re-armed in the handler, does not fire in
    between: one sample, at the place where the thread was descheduled, for the whole
    wait. Counted, that place would get one interval of a wait of tens of ms: measured
    at a load of 11 on 2 cores, counts gave a function of 80 % of the wall time (by the
    program's own clock) 55 %, and a rank's 30 % in MPI_Barrier (by the MPI profile)
    17 %; weights were within 2 and 0.2 points of them."""
    rec = p.records
    order = np.lexsort((rec["t"], rec["thread"]))
    t = rec["t"][order].astype(np.int64)
    th = rec["thread"][order].astype(np.int64)
    dt = np.diff(t, prepend=t[:1]).astype(float) / 1e9
    first = np.r_[True, th[1:] != th[:-1]] if len(th) else np.zeros(0, bool)
    threads = p.meta.get("threads") or []
    for k in np.unique(th):
        mine = th == k
        later = dt[mine & ~first]
        setting = threads[k]["interval_ns"] / 1e9 if 0 <= k < len(threads) else 0.0
        dt[mine & first] = np.median(later) if len(later) else setting
    out = np.empty(len(rec))
    out[order] = dt
    return out


def _deltas(p):
    """(samples, events): each sample's counter increase since the previous sample of its
    thread (since counting began for a thread's first), 0 where a reading is missing."""
    events = p.meta.get("counters") or []
    rec = p.records
    if not events or "counters" not in (rec.dtype.names or ()):
        return np.zeros((len(rec), 0))
    c = rec["counters"][:, : len(events)].astype(np.int64)
    order = np.lexsort((rec["t"], rec["thread"]))
    out = np.zeros(c.shape, np.int64)
    prev = {}
    for i in order.tolist():
        th = int(rec["thread"][i])
        if (c[i] >= 0).all():
            last = prev.get(th, np.zeros(len(events), np.int64))
            out[i] = np.maximum(c[i] - last, 0)
            prev[th] = c[i]
    return out


TREE_MIN_PCT = 0.5  # nodes below this inclusive share are left out
TREE_MAX_NODES = 300


class _PlaceColumns:
    """The columns that the tables of places (functions, lines, call tree nodes) share:
    a place's share of all samples by activity, and its share of each rank's samples
    (min, mean, max, imbalance, worst rank)."""

    def __init__(self, per_rank_total, activities, ranks, events):
        self.per_rank_total, self.activities, self.ranks = per_rank_total, activities, ranks
        self.events = events

    def of(self, arr):
        """{column: value} of a place's samples arr (proc, state), from `pct` on."""
        total = self.per_rank_total.sum()
        share = 100 * arr.sum(axis=1) / np.maximum(self.per_rank_total, 1)  # % per rank
        mean, mx = float(share.mean()), float(share.max())
        row = {
            f"{a}_pct": float(100 * arr[:, s].sum() / total) if arr[:, s].any() else 0.0
            for s, a in enumerate(self.activities[: arr.shape[1]])
        }
        row.update(
            rank_min_pct=float(share.min()),
            rank_mean_pct=mean,
            rank_max_pct=mx,
            imbalance=(mx - mean) / mx if mx > 0 else 0.0,
            worst_rank=self.ranks[int(share.argmax())],
        )
        return row

    def table(self, places, counts, extra):
        """The table of places ({name: (proc, state) samples}), by share, then name:
        name, the `extra` columns of each name, pct, then `of`'s columns and the
        events' counts."""
        total = self.per_rank_total.sum()
        rows = [
            {
                "name": key,
                **extra.get(key, {}),
                "pct": float(100 * arr.sum() / total),
                **self.of(arr),
            }
            for key, arr in places.items()
        ]
        for r in rows:
            c = counts.get(r["name"], np.zeros(len(self.events)))
            r.update({ev: int(c[e]) for e, ev in enumerate(self.events)})
        # ties by name: the order of equal shares must not follow set iteration (string
        # hashes differ from run to run)
        rows.sort(key=lambda r: (-r["pct"], str(r["name"])))
        return _rows_table(rows, self.columns(["name", *_first(extra), "pct"], self.events))

    def columns(self, head, tail):
        """The names of a table's columns: head, the shares' columns, tail."""
        return (
            head
            + [f"{a}_pct" for a in self.activities]
            + ["rank_min_pct", "rank_mean_pct", "rank_max_pct", "imbalance", "worst_rank"]
            + list(tail)
        )


def _first(extra):
    """The names of the extra columns (the same for every place)."""
    return list(next(iter(extra.values()), {}))


def _rows_table(rows, names):
    """A table of rows (dicts) with the columns names, in that order."""
    return table({k: [r[k] for r in rows] for k in names}, len(rows))


def _tree(tree, per_rank_total, activities, ranks, tree_ctr=None, events=()):
    """The call tree of the samples (function paths from the outermost own frame), depth
    first, children by inclusive share: each node's inclusive and exclusive share of all
    samples, by activity, and its inclusive share per rank (min/mean/max, imbalance);
    with --counters, the events counted at its samples (inclusive and exclusive). Returns
    the table (SamplesResult.call_tree) and each node's path (a tuple of names)."""
    total = per_rank_total.sum()
    keep = {p: v for p, v in tree.items() if 100 * v[0].sum() / total >= TREE_MIN_PCT}
    children = {}
    for p in keep:
        children.setdefault(p[:-1], []).append(p)
    cols = _PlaceColumns(per_rank_total, activities, ranks, events)
    out, paths = [], []

    def visit(p, parent, depth):
        if len(out) >= TREE_MAX_NODES:
            return
        v = keep[p]
        me = len(out)
        row = {
            "id": me,
            "parent": -1 if parent is None else parent,
            "depth": depth,
            "name": p[-1],
            "path": "/".join(p),
            "inclusive_pct": float(100 * v[0].sum() / total),
            "exclusive_pct": float(100 * v[1].sum() / total),
            **cols.of(v[0]),
        }
        cn = (tree_ctr or {}).get(p, np.zeros((2, len(events)), np.int64))
        for e, ev in enumerate(events):
            row[f"{ev}_inclusive"], row[f"{ev}_exclusive"] = int(cn[0][e]), int(cn[1][e])
        out.append(row)
        paths.append(p)
        for c in sorted(children.get(p, []), key=lambda c: -keep[c][0].sum()):
            visit(c, me, depth + 1)

    for root in sorted(children.get((), []), key=lambda c: -keep[c][0].sum()):
        visit(root, None, 0)
    head = ["id", "parent", "depth", "name", "path", "inclusive_pct", "exclusive_pct"]
    tail = [f"{ev}_{k}" for k in ("inclusive", "exclusive") for ev in events]
    return _rows_table(out, cols.columns(head, tail)), paths


def _tree_per_rank(tree, tree_table, paths, per_rank_total, activities, ranks, seconds):
    """SamplesResult.call_tree_per_rank: per node of the tree, rank and activity with
    samples, the node's samples' worth (inclusive and exclusive), shares of the rank's
    samples and their wall time."""
    # the weights sum to the samples: a weighted sample is the wall time sampled (all
    # threads) / the samples
    per_sample_s = sum(float(x.sum()) for x in seconds) / max(sum(map(len, seconds)), 1)
    names = (
        "node",
        "rank",
        "activity",
        "samples",
        "exclusive_samples",
        "pct",
        "exclusive_pct",
        "seconds",
        "exclusive_seconds",
    )
    cols = {k: [] for k in names}
    for node, path in zip(tree_table["id"].tolist(), paths):
        v = tree[path]  # (incl/excl, proc, state)
        for j, s in zip(*np.nonzero(v[0])):
            inc, exc = float(v[0, j, s]), float(v[1, j, s])
            total = max(per_rank_total[j], 1)
            for k, x in zip(
                names,
                (
                    node,
                    ranks[j],
                    activities[s],
                    round(inc),
                    round(exc),
                    100 * inc / total,
                    100 * exc / total,
                    inc * per_sample_s,
                    exc * per_sample_s,
                ),
            ):
                cols[k].append(x)
    return table(
        {
            k: column(v) if v else np.zeros(0, object if k == "activity" else float)
            for k, v in cols.items()
        }
    )


def _sample_table(procs, activities, events, activity, leaf, line, stack, deltas, seconds):
    """SamplesResult.samples: every sample, by rank, process, thread and time."""
    names = np.array(activities, object)
    parts = []
    for p, act, lf, ln, st, delta, secs in zip(procs, activity, leaf, line, stack, deltas, seconds):
        rec = p.records
        n = len(rec)
        cols = {
            "time_s": (rec["t"] - p.meta.get("t_start", 0)) / 1e9,
            "rank": np.full(n, p.rank, np.int64),
            "process": column([p.name] * n),
            "thread": rec["thread"].astype(np.int64),
            "activity": names[np.clip(np.asarray(act, np.int64), 0, len(activities) - 1)],
            "leaf": column(lf),
            "line": column(ln),
            "stack": column([";".join(s) for s in st]),
            "seconds": np.asarray(secs, np.float64),
        }
        for e, ev in enumerate(events):
            cols[ev] = delta[:, e].astype(np.int64) if delta.shape[1] > e else np.zeros(n, np.int64)
        parts.append(table(cols, n))
    out = np.concatenate(parts)
    _, process = np.unique(out["process"], return_inverse=True)
    order = np.lexsort((out["time_s"], out["thread"], process.reshape(-1), out["rank"]))
    return out[order]


@dataclass
class SamplesResult:
    """Where the sampled time goes (analyze): the summary of the samples, and its tables
    (structured arrays, model/table.py). Shares (`pct`) are of all samples, each
    weighted by the wall time it stands for (_seconds), unless said otherwise.

    Tables of places, sorted by `pct` (then name):
      functions (self time), inclusive (anywhere on the stack): name, pct, ACTIVITY_pct
        (per activity of `activities`, 0 where none), rank_min_pct / rank_mean_pct /
        rank_max_pct (the place's share of each rank's samples), imbalance ((max - mean)
        / max), worst_rank; with counters one column per event (its increase at the
        place's samples);
      lines (self time of a source line): name ('fn (file.c:12)'), function, file (the
        source's path, "" without debug information), line (0 without), then as
        functions.
    call_tree: one row per node, depth first, children by inclusive share (nodes under
      TREE_MIN_PCT % left out, TREE_MAX_NODES at most): id, parent (-1 for a root),
      depth, name, path ('main/solve/kernel'), inclusive_pct, exclusive_pct, then the
      columns of the places from ACTIVITY_pct (inclusive) to worst_rank; with counters
      EVENT_inclusive, EVENT_exclusive.
    call_tree_per_rank (built on first use): one row per (node, rank, activity) with
      samples: node (call_tree's id), rank, activity, samples, exclusive_samples (the
      samples' weights, rounded), pct, exclusive_pct (of the rank's samples), seconds,
      exclusive_seconds.
    mathlib: the app time's samples in math libraries (MATHLIB), None without any:
      {"pct" (of the app time's samples), "routines": the MATHLIB_ROUTINES largest, each
      {"routine" (the routine its samples serve: _math_frames), "object" (the loaded
      object of most of its samples' outermost frame in a library), "static" (found by
      its name outside any math library: linked statically), "pct", "math_pct" (of the
      math samples), "unwrapped_pct" (of the app time's samples: called from outside
      the library without perfweave's wrapper), "callers": the MATHLIB_CALLERS largest, each
      {"name" ('solve (solver.f90:211)'; '[threads of the library]' for a thread with
      no frame outside it but its start, and its other samples; '[stack ends in the
      library]' where the walk stopped inside it in another thread), "function", "file",
      "line", "pct", "routine_pct"}}]}.
    samples (built on first use): one row per sample, by rank, process, thread and time:
      time_s (since the process's start), rank, process, thread, activity (its name),
      leaf (the self function), line (the self line's name), stack (the path of
      functions, outermost first, ';'-joined), seconds (the wall time it stands for),
      with counters one column per event (its increase since the thread's previous
      sample).

    to_json(top) is the report's "samples" (docs/mpi-profile.md)."""

    processes: int
    sample_count: int  # the samples' worth of wall time (weights), rounded: JSON "samples"
    ranks: list  # per process, in the order of the per-rank values
    recorded_activities: list  # the activities the runtime recorded (the first process's)
    activities: list  # the names of the activities (ACTIVITIES)
    activity_pct: dict  # {activity: % of all samples}
    activity_per_rank_pct: dict  # {activity: [% of each rank's samples]}, with samples
    app_samples: int  # samples of the app time (without start-up and shutdown)
    app_activity_pct: dict  # {activity: % of the app time's samples}, {} without
    activity_functions: dict  # {activity: [{name, pct}]}: library functions that decided
    call_tree: np.ndarray
    timeline: dict  # analysis/timebins.py: the activity over time
    functions: np.ndarray
    lines: np.ndarray
    inclusive: np.ndarray
    counters: list  # the --counters events
    counters_total: dict
    last_interval_ms: float
    thinned: int
    dropped: dict
    kept_per_thread_max: int
    phase_pct: dict = None  # {phase: % of samples}, with MPI_Init/Finalize windows
    phase_samples: dict = None
    time_split: dict = None  # sampling.time_split of app_activity_pct
    mathlib: dict = None  # the math libraries' app samples by routine and caller
    _build: dict = field(default_factory=dict, repr=False)  # the tables built on first use

    @cached_property
    def samples(self):
        return self._build["samples"]()

    @cached_property
    def call_tree_per_rank(self):
        return self._build["call_tree_per_rank"]()

    def to_json(self, top=None):
        """The report's "samples" dict; top: rows of the tables of places (None: all)."""
        out = {
            "processes": self.processes,
            "samples": self.sample_count,
            "ranks": self.ranks,
            "recorded_activities": self.recorded_activities,
            "activities": self.activities,
            "activity_pct": self.activity_pct,
            "activity_per_rank_pct": self.activity_per_rank_pct,
            "app_samples": self.app_samples,
            "app_activity_pct": self.app_activity_pct,
            "activity_functions": self.activity_functions,
            "call_tree": [self._node_json(r) for r in records(self.call_tree)],
            "timeline": self.timeline,
            "functions": [self._place_json(r) for r in records(self.functions[:top])],
            "lines": [self._place_json(r) for r in records(self.lines[:top])],
            "inclusive": [self._place_json(r) for r in records(self.inclusive[:top])],
            "counters": self.counters,
            "counters_total": self.counters_total,
            "last_interval_ms": self.last_interval_ms,
            "thinned": self.thinned,
            "dropped": self.dropped,
            "kept_per_thread_max": self.kept_per_thread_max,
        }
        if self.phase_pct is not None:
            out["phase_pct"] = self.phase_pct
            out["phase_samples"] = self.phase_samples
        out["time_split"] = self.time_split
        out["mathlib"] = self.mathlib
        return out

    def _shares_json(self, r):
        return {
            "by_activity_pct": {a: r[f"{a}_pct"] for a in self.activities if r[f"{a}_pct"] != 0},
            "per_rank_pct": {
                "min": r["rank_min_pct"],
                "mean": r["rank_mean_pct"],
                "max": r["rank_max_pct"],
            },
            "imbalance": r["imbalance"],
            "worst_rank": r["worst_rank"],
        }

    def _place_json(self, r):
        out = {"name": r["name"], "pct": r["pct"], **self._shares_json(r)}
        if r.get("file"):
            out.update(function=r["function"], file=r["file"], line=r["line"])
        if self.counters:
            out["counters"] = {ev: r[ev] for ev in self.counters}
        return out

    def _node_json(self, r):
        out = {k: r[k] for k in ("id", "parent", "depth", "name", "inclusive_pct", "exclusive_pct")}
        if out["parent"] < 0:
            out["parent"] = None
        out.update(self._shares_json(r))
        if self.counters:
            for k in ("inclusive", "exclusive"):
                out[f"counters_{k}"] = {ev: r[f"{ev}_{k}"] for ev in self.counters}
        return out

"""What a sampled thread was doing (its activity): the runtime records each sample's
activity (compute, mpi_FAMILY, sleep, and any it adds later); a compute sample is further
told apart post-mortem from its innermost frames: the interrupted function, and the next
frames while they are in a system library (libc, libpthread, libgomp, libstdc++), named
by the symbolizer and matched against the names of names.py (I/O, memory allocation,
thread and OpenMP synchronisation). A compute sample with a frame of a math library
anywhere on its stack (its object's name, or a math routine's name in the executable: a
library linked statically) is the math libraries' (MATHLIB), whatever its innermost
frames: the threads a library starts too; for it, the routine it serves and the frame
that called the library (_math_frames)."""

import os
from dataclasses import dataclass

import numpy as np

from perfweave._format import ACTIVITIES as RUNTIME_ACTIVITIES
from perfweave.analysis.samples.names import (
    OMP_QUERY,
    THREAD_START,
    activity_of,
    is_math_function,
    is_math_library,
    is_openmp_runtime,
    is_system,
    normalise,
    served_routine,
)
from perfweave.symbols import Symbolizer

# What a sample's thread was doing: the runtime's activities (format.h PW_ACTIVITIES, by
# name), with the ones classify() tells apart within "compute" after "compute". A name
# not listed here (in files of a later runtime) is appended, when first seen, to the copy
# that one classification names its indexes with (never to this list: a result does not
# depend on what was analysed before), so these indexes stay the same in every result.
MATHLIB = "mathlib"  # time inside a math library's call (BLAS, LAPACK, FFTW), its threads'
ACTIVITIES = ["compute", "io", "alloc", "thread_sync", "omp_sync", MATHLIB] + [
    a for a in RUNTIME_ACTIVITIES if a != "compute"
]
CLASSIFY_FRAMES = 3  # frame 0 and up to two callers, while in a system library


def _index(activities, name):
    if name not in activities:
        activities.append(name)
    return activities.index(name)


def classify_with_reasons(procs, sym, activities):
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
                        found = (a, normalise(f))
                        break
                if not found and fns and OMP_QUERY.match(fns[-1]):
                    break  # the program asking the time, its rank
                if not found and is_openmp_runtime(path):
                    # the program's parallel regions are its own code (outlined
                    # functions): time inside the OpenMP runtime is waiting at barriers,
                    # locks, for work, or handing it out
                    found = (
                        "omp_sync",
                        normalise(fns[-1]) if fns else os.path.basename(path).split(".so")[0],
                    )
                if found:
                    act[i] = _index(activities, found[0])
                    why[i] = found[1]
                    break
                # callers are looked at only through system libraries
                if not path or not is_system(path) or "libmpi" in path:
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
    offset); None for a thread of the library's own, CALLER_STACK_ENDS for a stack that ends
    inside it), and
    unwrapped: that caller reached the library without perfweave's wrapper (the program
    calls it statically, or not through the PLT)."""

    routine: str
    object: str
    static: bool
    caller: tuple = None
    unwrapped: bool = False


CALLER_STACK_ENDS = ("", -1)  # the caller of a stack that ends inside the library


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
        [not is_system(m) and not is_math_library(m) and not m.startswith("[") for m in objs]
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
            if path and not base.startswith(THREAD_START) and not is_openmp_runtime(path):
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
            CALLER_STACK_ENDS if f.ends else f.caller,
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
    return [a for a, *_ in classify_with_reasons(procs, symbolizer or Symbolizer(), activities)]

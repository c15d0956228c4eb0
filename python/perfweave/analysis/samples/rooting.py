"""Where each sample's path of functions starts in the call tree (rooted_paths): the
program's root for its main thread, the start routine for a thread the program created,
and for an OpenMP worker the path by which the main thread enters the same parallel
region (the comment below)."""

import os
import re

import numpy as np

from perfweave.analysis.samples.classification import ACTIVITIES
from perfweave.analysis.samples.names import THREAD_START, is_openmp_runtime

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
        if start is None or not is_openmp_runtime(p.objects[start[0]]):
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
            if not os.path.basename(p.objects[m]).startswith(THREAD_START):
                return m, int(rec["offset"][i, k])
    return None

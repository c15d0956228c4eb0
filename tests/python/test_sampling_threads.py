"""Where threads' samples are rooted in the call tree (analysis/samples/rooting.py
rooted_paths): hand-made samples of a process whose main thread opens an OpenMP
parallel region (solve -> GOMP_parallel -> solve._omp_fn.0), a worker thread that libgomp
started (clone -> start_thread -> gomp_thread_start -> solve._omp_fn.0), a thread whose
start routine is a library's, and a Fortran program (gfortran's main -> MAIN__)."""

import numpy as np
import pytest

from perfweave._format import ACTIVITIES as RUNTIME_ACTIVITIES
from perfweave.analysis import samples
from perfweave.analysis.samples.rooting import IDLE_WORKERS
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE
from perfweave.symbols import Location

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
GOMP = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
LIBQ = "/usr/lib/x86_64-linux-gnu/libqueue.so.2"
APP = "/home/u/solver"
OBJECTS = [LIBC, GOMP, LIBQ, APP]
# the activities a runtime records, as one before "wait" was appended wrote them
RECORDED = RUNTIME_ACTIVITIES[: RUNTIME_ACTIVITIES.index("wait")]
NAMES = {
    LIBC: {
        0x10: "syscall",
        0x50: "__libc_start_call_main",
        0x60: "start_thread",
        0x70: "clone3",
        0x80: "__GI___lll_lock_wait",
    },
    GOMP: {0x2000: "GOMP_parallel"},  # the rest: stripped, unnamed
    LIBQ: {0x500: "queue_worker"},
    APP: {
        0x100: "solve._omp_fn.0",
        0x200: "solve",
        0x300: "relax",
        0x400: "main",
        0x600: "MAIN__",
        0x700: "_start",
    },
}
FILES = {0x600: "/src/stencil.f90"}

START = [(LIBC, 0x50)]  # below main
WORKER = [(GOMP, 0x1000), (LIBC, 0x60), (LIBC, 0x70)]  # a libgomp thread's bottom
IN_REGION = [(APP, 0x300), (APP, 0x100), (GOMP, 0x2000), (APP, 0x200), (APP, 0x400)]
WAITING = [(LIBC, 0x10), (GOMP, 0x1100)]  # futex wait in libgomp


class Sym:
    def resolve(self, module, offsets):
        return [
            Location(
                module,
                o,
                NAMES.get(module, {}).get(o, ""),
                FILES.get(o, ""),
                1 if o in FILES else 0,
            )
            for o in offsets
        ]


def proc(samples, threads=3):
    """samples: [(thread slot, time in ms, [(object, offset), ...innermost first])];
    slot 0 is the main thread (tid = pid)."""
    rec = np.zeros(len(samples), SAMPLE_DTYPE)
    rec["object"] = -1
    for i, (th, ms, frames) in enumerate(samples):
        rec["thread"][i], rec["t"][i], rec["depth"][i] = th, ms * 1_000_000, len(frames)
        for k, (m, o) in enumerate(frames):
            rec["object"][i, k], rec["offset"][i, k] = OBJECTS.index(m), o
    meta = {
        "rank": 0,
        "pid": 100,
        "activities": RECORDED,
        "threads": [
            {"tid": 100 + t, "taken": 1, "kept": 1, "thinned": 0, "interval_ns": 2_000_000}
            for t in range(threads)
        ],
    }
    return ProcessSamples("rank-0", meta, rec, OBJECTS)


def analyze(p):
    """The report's sampling dict, and each sample's stack and activity (the samples
    below are in time order per thread, threads in order: the table's order)."""
    res = samples.analyze([p], symbolizer=Sym())
    return res.to_json(), res.samples["stack"].tolist(), res.samples["activity"].tolist()


def test_workers_rooted_at_the_region_the_main_thread_opened():
    p = proc(
        [
            (0, 10, IN_REGION + START),  # main: in the region's work
            (0, 50, [(APP, 0x400)] + START),  # main: between regions
            (1, 10, [(APP, 0x300), (APP, 0x100)] + WORKER),  # worker: the region's work
            (1, 12, WAITING + WORKER),  # worker: at the barrier, main in region
            (1, 51, WAITING + WORKER),  # worker: idle, main outside regions
            (2, 20, [(LIBC, 0x80), (LIBQ, 0x500), (LIBC, 0x60), (LIBC, 0x70)]),  # a library's
        ]
    )
    sm, stacks, acts = analyze(p)
    assert stacks == [
        "main;solve;solve._omp_fn.0;relax",
        "main",
        "main;solve;solve._omp_fn.0;relax",
        "main;solve;solve._omp_fn.0",
        "main;" + IDLE_WORKERS,
        "thread queue_worker",
    ]
    assert acts == ["compute", "compute", "compute", "omp_sync", "omp_sync", "thread_sync"]
    roots = [n["name"] for n in sm["call_tree"] if n["parent"] is None]
    assert roots == ["main", "thread queue_worker"]
    # the waiting worker's self time is the region's, where the advice will look. Shares
    # are of time, each sample standing for the time since its thread's previous one
    # (a thread's first: its median interval, or its interval setting, 2 ms): main 40 +
    # 40 ms, the worker 20.5 + 2 + 39, the library's thread 2: 143.5 ms
    fn = {f["name"]: f for f in sm["functions"]}
    assert fn["solve._omp_fn.0"]["by_activity_pct"] == {"omp_sync": pytest.approx(100 * 2 / 143.5)}
    # the idle node is no function of the inclusive table
    assert IDLE_WORKERS not in {f["name"] for f in sm["inclusive"]}
    assert {f["name"]: f["pct"] for f in sm["inclusive"]}["main"] == pytest.approx(
        100 * 141.5 / 143.5
    )


def test_worker_region_without_the_main_threads_way_into_it():
    # the main thread never sampled inside the region: the worker's region is put under
    # the function that opened it, named after it (solve._omp_fn.0 -> solve)
    p = proc([(0, 10, [(APP, 0x400)] + START), (1, 10, [(APP, 0x300), (APP, 0x100)] + WORKER)])
    _, stacks, _ = analyze(p)
    assert stacks == ["main", "solve;solve._omp_fn.0;relax"]


def test_fortran_program_is_the_single_root():
    # gfortran's main calls MAIN__; samples in main alone (libgfortran's set-up) and a
    # frame-pointer walk that reached _start all go to the program
    p = proc(
        [
            (0, 1, [(APP, 0x300), (APP, 0x600), (APP, 0x400)] + START),
            (0, 2, [(LIBC, 0x10), (APP, 0x400)] + START),
            (0, 3, [(APP, 0x300), (APP, 0x600), (APP, 0x400), (APP, 0x700)]),
        ],
        threads=1,
    )
    sm, stacks, _ = analyze(p)
    assert stacks == ["MAIN__;relax", "MAIN__", "MAIN__;relax"]
    assert [n["name"] for n in sm["call_tree"] if n["parent"] is None] == ["MAIN__"]


def test_a_sample_after_a_wait_for_the_core_stands_for_the_wait():
    """The sampler's timer is wall-clock, but a thread that lost its core takes the
    signal only when it runs again: one sample, where it was descheduled, for the whole
    wait. Main samples every 2 ms in relax (0-18 ms), then once in solve after a 60 ms
    wait (at 78 ms): solve stands for 60 of the 80 ms (75 %), not 1 of 11 samples."""
    relax = [(APP, 0x300), (APP, 0x200), (APP, 0x400)] + START
    solve = [(APP, 0x200), (APP, 0x400)] + START
    p = proc([(0, ms, relax) for ms in range(0, 20, 2)] + [(0, 78, solve)], threads=1)
    sm, _, _ = analyze(p)
    fn = {f["name"]: f["pct"] for f in sm["functions"]}
    # relax: 10 samples x 2 ms (its first: the median interval); solve: 60 ms
    assert fn["solve"] == pytest.approx(75) and fn["relax"] == pytest.approx(25)
    assert sm["samples"] == 11  # counts stay counts

"""Activities of samples (analysis/samples/ classify): hand-made sample records whose
innermost frames name known I/O, allocation and synchronisation functions, with the
names glibc gives them with and without its debug symbols."""

import numpy as np
import pytest

from perfweave._format import ACTIVITIES as RUNTIME_ACTIVITIES
from perfweave.analysis import samples
from perfweave.analysis.samples.classification import ACTIVITIES, classify
from perfweave.analysis.samples.names import activity_of
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE
from perfweave.symbols import Location

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
GOMP = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
APP = "/home/u/app"
# the activities a runtime records, as one before "wait" was appended wrote them
RECORDED = RUNTIME_ACTIVITIES[: RUNTIME_ACTIVITIES.index("wait")]


class Sym:
    """Offsets name functions: NAMES[module][offset] = (function, inlined into, ...)."""

    def __init__(self, names):
        self.names = names

    def resolve(self, module, offsets):
        out = []
        for o in offsets:
            fn, *outer = self.names.get(module, {}).get(o, ("",))
            out.append(Location(module, o, fn, "", 0, tuple((f, "", 0) for f in outer)))
        return out


def proc(samples, activities=RECORDED):
    """samples: [(activity, [(object, offset), ...innermost first])]."""
    objects = [LIBC, GOMP, APP]
    rec = np.zeros(len(samples), SAMPLE_DTYPE)
    rec["object"] = -1
    for i, (activity, frames) in enumerate(samples):
        rec["activity"][i] = activity
        rec["depth"][i] = len(frames)
        for k, (m, o) in enumerate(frames):
            rec["object"][i, k] = objects.index(m)
            rec["offset"][i, k] = o
    return ProcessSamples("rank-0", {"rank": 0, "activities": activities}, rec, objects)


def names(p, sym):
    activities = list(ACTIVITIES)  # the indexes' names, with those first seen appended
    [act] = classify([p], sym, activities)
    return [activities[a] for a in act]


@pytest.mark.parametrize(
    "name,activity",
    [
        # with debug symbols (libc6-dbg) and without (dynamic symbols), C++ demangled
        ("__GI___libc_write", "io"),
        ("__libc_write", "io"),
        ("write", "io"),
        ("__write", "io"),
        ("__GI_fsync", "io"),
        ("fdatasync", "io"),
        ("__pread64_nocancel", "io"),
        ("__lseek64", "io"),
        ("_IO_new_file_xsputn", "io"),
        ("_IO_file_write", "io"),
        ("__fstatat64_time64", "io"),
        ("openat64", "io"),
        ("write@@GLIBC_2.2.5", "io"),
        ("_int_malloc", "alloc"),
        ("_int_free", "alloc"),
        ("malloc_consolidate", "alloc"),
        ("__GI___libc_free", "alloc"),
        ("__libc_calloc", "alloc"),
        ("posix_memalign", "alloc"),
        ("__GI___mmap64", "alloc"),
        ("__GI_munmap", "alloc"),
        ("__brk", "alloc"),
        ("operator new(unsigned long)", "alloc"),
        ("operator delete[](void*)", "alloc"),
        ("__GI___lll_lock_wait", "thread_sync"),
        ("pthread_mutex_lock", "thread_sync"),
        ("__futex_abstimed_wait_common64", "thread_sync"),
        ("___pthread_cond_wait", "thread_sync"),
        ("pthread_barrier_wait", "thread_sync"),
        ("__pthread_clockjoin_ex", "thread_sync"),
        ("sem_wait@@GLIBC_2.34", "thread_sync"),
        ("pthread_spin_lock", "thread_sync"),
        # OpenMP's own waits (libgomp): a kind of their own
        ("gomp_team_barrier_wait_end", "omp_sync"),
        ("gomp_mutex_lock_slow", "omp_sync"),
        ("GOMP_barrier", "omp_sync"),
        ("omp_set_lock", "omp_sync"),
        ("std::condition_variable::wait(std::unique_lock<std::mutex>&)", "thread_sync"),
        # computation
        ("__memmove_avx_unaligned_erms", None),
        ("spin", None),
        ("__libc_start_call_main", None),
        ("writer_loop", None),
        ("free_energy", None),
        ("", None),
    ],
)
def test_names(name, activity):
    assert activity_of(name) == activity


def test_gomp_static_waits_only_in_libgomp():
    assert activity_of("do_wait", GOMP) == "omp_sync"
    assert activity_of("do_wait", APP) is None


def test_openmp_runtime_frames_are_openmp_sync():
    """A stripped libgomp's internal functions have no name: a frame in the OpenMP
    runtime is OpenMP synchronisation all the same (a worker at a barrier: libc's
    syscall, then libgomp), except the OpenMP API's queries the program makes."""
    sym = Sym(
        {
            LIBC: {
                0x10: ("syscall",),
                0x20: ("__GI___clock_gettime",),
                0x30: ("__GI___lll_lock_wait",),
            },
            GOMP: {0x1000: ("",), 0x2000: ("GOMP_parallel",), 0x3000: ("omp_get_wtime",)},
            APP: {0x100: ("solve._omp_fn.0",), 0x200: ("solve",)},
        }
    )
    p = proc(
        [
            (0, [(LIBC, 0x10), (GOMP, 0x1000), (GOMP, 0x1000)]),  # worker waiting for work
            (0, [(GOMP, 0x1000), (APP, 0x100), (GOMP, 0x1000)]),  # spinning at the barrier
            (0, [(GOMP, 0x1000), (GOMP, 0x2000), (APP, 0x200)]),  # master at the join
            (0, [(LIBC, 0x20), (GOMP, 0x3000), (APP, 0x100)]),  # omp_get_wtime: the
            (0, [(APP, 0x100), (GOMP, 0x1000)]),  # program's; own work
            (0, [(LIBC, 0x30), (APP, 0x100)]),  # a pthread lock: not OpenMP
        ]
    )
    assert names(p, sym) == [
        "omp_sync",
        "omp_sync",
        "omp_sync",
        "compute",
        "compute",
        "thread_sync",
    ]


def test_frames_and_activities():
    sym = Sym(
        {
            LIBC: {
                0x10: ("__GI___libc_write",),
                0x20: ("memcpy",),
                0x30: ("futex_wait", "__GI___lll_lock_wait"),
                0x40: ("_int_malloc",),
                0x50: ("__GI___libc_malloc",),
                0x60: ("",),
            },
            APP: {0x100: ("solve",), 0x200: ("malloc",)},
        }
    )
    p = proc(
        [
            (0, [(LIBC, 0x10), (APP, 0x100)]),  # write, called by the program
            (0, [(APP, 0x100), (LIBC, 0x10)]),  # own frame first: computing
            (0, [(LIBC, 0x20), (LIBC, 0x40), (APP, 0x100)]),  # memcpy inside malloc: alloc
            (0, [(LIBC, 0x30), (APP, 0x100)]),  # inlined futex wait in a lock
            (0, [(LIBC, 0x20), (APP, 0x100), (LIBC, 0x40)]),  # memcpy from the program
            (0, [(LIBC, 0x60), (LIBC, 0x50)]),  # unnamed, then malloc
            (0, [(LIBC, 0x20), (LIBC, 0x20), (LIBC, 0x20), (LIBC, 0x40)]),  # beyond 3 frames
            (0, [(APP, 0x200)]),  # a static program's malloc
            (1, [(LIBC, 0x10), (APP, 0x100)]),  # inside MPI: stays MPI
            (7, [(LIBC, 0x30)]),  # sleeping stays sleep
            (0, []),  # no frames: compute
        ]
    )
    assert names(p, sym) == [
        "io",
        "compute",
        "alloc",
        "thread_sync",
        "compute",
        "alloc",
        "compute",
        "alloc",
        "mpi_p2p",
        "sleep",
        "compute",
    ]


def test_unknown_activities_are_kept_by_name():
    p = proc(
        [(0, [(APP, 0x100)]), (8, [(LIBC, 0x10)]), (9, [(APP, 0x100)]), (-1, [(APP, 0x100)])],
        RECORDED + ["wait", "gpu"],
    )
    sym = Sym({LIBC: {0x10: ("write",)}, APP: {0x100: ("solve",)}})
    assert names(p, sym) == ["compute", "wait", "gpu", "compute"]  # out of range: compute
    assert ACTIVITIES.index("wait") > ACTIVITIES.index("sleep")  # appended, stable


def test_analyze_reports_activities_everywhere():
    sym = Sym(
        {
            LIBC: {
                0x10: ("__GI_fsync",),
                0x40: ("_int_malloc",),
                0x30: ("futex_wait", "__GI___lll_lock_wait"),
            },
            APP: {0x100: ("solve",), 0x110: ("main",)},
        }
    )
    # 10 samples: 4 computing in solve, 3 in fsync, 2 in malloc, 1 on a lock, all from solve
    p = proc(
        [(0, [(APP, 0x100), (APP, 0x110)])] * 4
        + [(0, [(LIBC, 0x10), (APP, 0x100), (APP, 0x110)])] * 3
        + [(0, [(LIBC, 0x40), (APP, 0x100), (APP, 0x110)])] * 2
        + [(0, [(LIBC, 0x30), (APP, 0x100), (APP, 0x110)])]
    )
    sm = samples.analyze([p], symbolizer=sym).to_json()
    a = sm["activity_pct"]
    assert (a["compute"], a["io"], a["alloc"], a["thread_sync"]) == (40, 30, 20, 10)
    assert a["mpi_coll"] == 0 and sm["activities"][:4] == ACTIVITIES[:4]
    assert sm["recorded_activities"] == RECORDED
    [solve] = [r for r in sm["functions"] if r["name"] == "solve"]
    assert solve["by_activity_pct"] == {"compute": 40, "io": 30, "alloc": 20, "thread_sync": 10}
    [main] = [r for r in sm["inclusive"] if r["name"] == "main"]
    assert main["by_activity_pct"]["io"] == 30
    [node] = [n for n in sm["call_tree"] if n["name"] == "solve"]
    assert node["by_activity_pct"]["alloc"] == 20
    assert sm["activity_functions"]["io"] == [{"name": "fsync", "pct": 30}]
    assert sm["activity_functions"]["thread_sync"] == [{"name": "lll_lock_wait", "pct": 10}]


def test_a_result_does_not_depend_on_what_was_analysed_before():
    """Two runs of later runtimes, each recording one activity this version does not
    know ("gpu", "dma"), analysed one after the other in one process, in both orders:
    each result is the one it has alone, its activities this version's plus its own."""
    sym = Sym({APP: {0x100: ("solve",)}})
    n = len(RECORDED)
    runs = {
        extra: proc([(0, [(APP, 0x100)])] * 3 + [(n, [(APP, 0x100)])], RECORDED + [extra])
        for extra in ("gpu", "dma")
    }

    def analysed(order):
        return {x: samples.analyze([runs[x]], symbolizer=sym).to_json() for x in order}

    first, second = analysed(["gpu", "dma"]), analysed(["dma", "gpu"])
    assert first == second
    for extra, js in first.items():
        assert js["activities"] == ACTIVITIES + [extra]  # as alone: no other run's name
        assert js["activity_pct"][extra] == 25 and js["activity_pct"]["compute"] == 75
    assert names(runs["gpu"], sym) == ["compute"] * 3 + ["gpu"]
    assert names(runs["dma"], sym) == ["compute"] * 3 + ["dma"]

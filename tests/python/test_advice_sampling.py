"""Advice from samples (analysis/advice.py, rules over analysis/samples/): sample
records made by hand per rank go through the sampling analysis; each rule fires on the
situation built, names the rank, function, line and share, and stays quiet below its
threshold."""

import numpy as np

from perfweave._format import ACTIVITIES as RUNTIME_ACTIVITIES
from perfweave.analysis import advice, samples
from perfweave.model.samples import ProcessSamples
from perfweave.dtypes import SAMPLE_DTYPE
from perfweave.symbols import Location

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
APP = "/home/u/solver"
# the activities a runtime records, as one before "wait" was appended wrote them
RECORDED = RUNTIME_ACTIVITIES[: RUNTIME_ACTIVITIES.index("wait")]
# offset -> (function, line) of the program; offset -> function of libc
CODE = {
    0x100: ("relax", 120),
    0x108: ("relax", 121),
    0x200: ("main", 30),
    0x300: ("dump", 55),
    0x400: ("build_list", 70),
    0x500: ("accumulate", 90),
}
LIB = {
    0x10: "__GI___libc_write",
    0x18: "__GI_fsync",
    0x20: "_int_malloc",
    0x28: "__GI_munmap",
    0x30: "__GI___lll_lock_wait",
    0x38: "__memmove_avx_unaligned",
}


class Sym:
    def resolve(self, module, offsets):
        if module == LIBC:
            return [Location(module, o, LIB[o]) for o in offsets]
        return [Location(module, o, CODE[o][0], "/src/solver.c", CODE[o][1]) for o in offsets]


def rank_samples(rank, groups):
    """groups: [(count, activity, [offset, ...innermost first])]: libc offsets < 0x100."""
    n = sum(g[0] for g in groups)
    rec = np.zeros(n, SAMPLE_DTYPE)
    rec["object"] = -1
    i = 0
    for count, activity, frames in groups:
        for _ in range(count):
            rec["activity"][i], rec["depth"][i] = RECORDED.index(activity), len(frames)
            for k, o in enumerate(frames):
                rec["object"][i, k] = 0 if o < 0x100 else 1
                rec["offset"][i, k] = o
            i += 1
    return ProcessSamples(f"rank-{rank}", {"rank": rank, "activities": RECORDED}, rec, [LIBC, APP])


def report(procs, mpi=False):
    # an MPI profile's rules (below their thresholds here) need only these keys
    profile = {"mpi": mpi, "mpi_pct": {"min": 30.0, "mean": 30.0, "max": 30.0}}
    return {"mpi_profile": profile, "samples": samples.analyze(procs, symbolizer=Sym()).to_json()}


def by_rule(d):
    out = {}
    for a in advice.advise(d):
        out.setdefault(a["rule"], []).append(a)
    return out


def imbalanced(slow):
    """4 ranks of 100 samples: relax (line 120; 10 % at 121) `slow` samples on rank 3,
    40 on the others; the rest in MPI_Barrier from main."""
    procs = []
    for r in range(4):
        n = slow if r == 3 else 40
        procs.append(
            rank_samples(
                r,
                [
                    (n * 9 // 10, "compute", [0x100, 0x200]),
                    (n - n * 9 // 10, "compute", [0x108, 0x200]),
                    (100 - n, "mpi_coll", [0x200]),
                ],
            )
        )
    return report(procs, mpi=True)


def test_sampled_imbalance_names_rank_function_and_line():
    # relax: 40, 40, 40, 80 % of each rank's samples: mean 50, rank 3 60 % above it
    [a] = by_rule(imbalanced(80))["sampled_imbalance"]
    assert a["evidence"]["rank"] == 3 and a["evidence"]["function"] == "relax"
    assert a["evidence"]["line"] == 120 and abs(a["evidence"]["above_mean_pct"] - 60) < 1e-9
    assert (
        "rank 3 computes 60 % longer than the mean in relax() at solver.c:120 "
        "(80 % of its samples there against a mean of 50 % over 4 ranks, 40 % at the "
        "least)"
    ) in a["text"]
    assert "MPI takes 50 % of the samples" in a["text"]
    assert "dynamic load balancing" in a["text"]
    # main is imbalanced too, but in MPI: not named
    # 40, 40, 40, 46 %: mean 41.5, (max - mean) / max 0.10 < 0.15
    assert "sampled_imbalance" not in by_rule(imbalanced(46))


def test_sampled_io():
    # 30 % fsync + 10 % write from dump (line 55), 60 % computing in relax
    p = rank_samples(
        0,
        [
            (60, "compute", [0x100, 0x200]),
            (30, "compute", [0x18, 0x300, 0x200]),
            (10, "compute", [0x10, 0x300, 0x200]),
        ],
    )
    [a] = by_rule(report([p]))["sampled_io"]
    assert abs(a["severity"] - 40) < 1e-9 and a["evidence"]["function"] == "dump"
    assert a["text"].startswith(
        "I/O takes 40 % of the samples, in fsync (30 %), write (10 %), "
        "most from dump() at solver.c:55: I/O-bound there."
    )
    assert "fewer, larger writes" in a["text"]
    # a run without the I/O profile (on by default) is told how to get it; one with it is not
    assert a["text"].endswith("this run has no I/O profile; run again without --no-io.")
    d = report([p])
    d["io"] = {"files": []}
    [a] = by_rule(d)["sampled_io"]
    assert "I/O profile" not in a["text"] and "--no-io" not in a["text"]
    # 8 %: below the threshold (10 %)
    p = rank_samples(0, [(92, "compute", [0x100, 0x200]), (8, "compute", [0x18, 0x300])])
    assert "sampled_io" not in by_rule(report([p]))


def test_sampled_alloc():
    # 25 % _int_malloc + 15 % munmap from build_list, a memmove inside malloc counts too
    p = rank_samples(
        0,
        [
            (55, "compute", [0x100, 0x200]),
            (25, "compute", [0x20, 0x400, 0x200]),
            (15, "compute", [0x28, 0x400, 0x200]),
            (5, "compute", [0x38, 0x20, 0x400]),
        ],
    )
    [a] = by_rule(report([p]))["sampled_alloc"]
    assert abs(a["evidence"]["pct"] - 45) < 1e-9 and a["evidence"]["function"] == "build_list"
    assert a["text"].startswith(
        "Memory allocation takes 45 % of the samples, in malloc (30 %), "
        "munmap (15 %), most from build_list() at solver.c:70"
    )
    assert "M_MMAP_THRESHOLD" in a["text"] and "reuse the buffers" in a["text"]
    p = rank_samples(0, [(95, "compute", [0x100]), (5, "compute", [0x20, 0x400])])
    assert "sampled_alloc" not in by_rule(report([p]))


def test_sampled_thread_sync():
    # 2 threads of 100 samples: one computes in accumulate, the other waits on its lock
    p = rank_samples(0, [(100, "compute", [0x500]), (100, "compute", [0x30, 0x500])])
    [a] = by_rule(report([p]))["sampled_thread_sync"]
    assert a["text"].startswith(
        "Threads wait on synchronisation 50 % of the samples, in mutex "
        "locks (pthread_mutex_lock) (50 %), most from accumulate() "
        "at solver.c:90: contention between threads."
    )
    assert "critical section" in a["text"]
    p = rank_samples(0, [(100, "compute", [0x500]), (5, "compute", [0x30, 0x500])])
    assert "sampled_thread_sync" not in by_rule(report([p]))


def test_sampled_mpi_only_without_mpi_profile():
    procs = [
        rank_samples(
            r,
            [(70, "compute", [0x100, 0x200]), (20, "mpi_coll", [0x200]), (10, "mpi_p2p", [0x200])],
        )
        for r in range(2)
    ]
    [a] = by_rule(report(procs))["sampled_mpi"]
    assert a["text"].startswith(
        "MPI takes 30 % of the samples (collectives 20 %, "
        "point-to-point 10 %), most called from main() at solver.c:30"
    )
    assert "collectives" in a["text"] and "no MPI profile" in a["text"]
    # with an MPI profile, its own rules speak
    assert "sampled_mpi" not in by_rule(report(procs, mpi=True))
    # above --full-profile-ranks only the compact profile was written: the samples still
    # place the MPI time, and the advice says why it uses them
    d = report(procs)
    d["compact"] = {"ranks": 2}
    [a] = by_rule(d)["sampled_mpi"]
    assert "only the compact MPI profile was written" in a["text"]
    # 15 %: below the threshold (20 %)
    procs = [rank_samples(0, [(85, "compute", [0x100]), (15, "mpi_coll", [0x200])])]
    assert "sampled_mpi" not in by_rule(report(procs))


def test_no_samples_no_sampled_advice():
    for sm in (None, {"error": "unreadable"}):
        d = {"mpi_profile": {"mpi": False}, "samples": sm}
        assert not [a for a in advice.advise(d) if a["rule"].startswith("sampled")]


def test_sampled_omp_sync_is_openmp_imbalance_not_contention():
    # 3 OpenMP threads of 100 samples in the region solve._omp_fn.0 of a stripped
    # libgomp: 140 computing, 160 in the runtime (at the loop's barrier, unnamed code)
    gomp = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"

    class OmpSym(Sym):
        def resolve(self, module, offsets):
            if module == gomp:
                return [Location(module, o) for o in offsets]
            return super().resolve(module, offsets)

    p = rank_samples(0, [(140, "compute", [0x100, 0x200]), (160, "compute", [0x40, 0x100])])
    p.objects = [gomp, APP]
    sm = samples.analyze([p], symbolizer=OmpSym()).to_json()
    assert round(sm["activity_pct"]["omp_sync"]) == 53 and "thread_sync" not in {
        k for k, v in sm["activity_pct"].items() if v
    }
    rules = by_rule(
        {
            "mpi_profile": {"mpi": False, "mpi_pct": {"min": 0.0, "mean": 0.0, "max": 0.0}},
            "samples": sm,
        }
    )
    assert "sampled_thread_sync" not in rules
    [a] = rules["sampled_omp_sync"]
    assert a["text"].startswith(
        "Threads wait in the OpenMP runtime 53 % of the samples, most in "
        "relax() at solver.c:120: OpenMP barrier/wait: threads wait "
        "at the end of parallel regions and loops for the slowest, "
        "an imbalance among threads."
    )
    assert "schedule(dynamic)" in a["text"] and "contention" not in a["text"]
    assert "critical" not in a["text"]  # no OpenMP lock was seen

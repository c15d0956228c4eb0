"""MPI+OpenMP programs under sampling (C and Fortran, built with -g -fopenmp, under
each MPI): each rank's parallel loop gives thread 0 three times the others' work, so
the other threads wait at the loop's barrier. The programs measure, per rank, the wall
time of their regions, their threads' work and the span from the first region's start
to the last one's end (omp_get_wtime, CLOCK_MONOTONIC, the samples' clock); from those:
  - worker threads are rooted where the program opened the parallel region: one root
    per program (C: main; Fortran: the program's name, not gfortran's main/MAIN__),
    and < 5 % of samples without any frame of the program's (root "?");
  - the time in the OpenMP runtime is OpenMP synchronisation (omp_sync), at the share
    of the threads' time the program's own clocks leave unworked, not lock contention;
    the advice says OpenMP imbalance;
  - frames in the stripped libgomp are named only by a dynamic symbol whose size
    contains them (nm -D -S), else libgomp.so.1+0xOFFSET."""

import os
import re
import subprocess

import numpy as np
import pytest
from harness import PERFWEAVE, Run, activity_pct, sampled_life, share_bound, tree_nodes
import perfweave
from perfweave.readers.samples import read_samples
from perfweave.symbols import Symbolizer

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
RANKS, THREADS, SECONDS = 2, 3, 2
LINE = re.compile(
    r"rank (\d+) threads (\d+) run_s ([\d.]+) region_s ([\d.]+) "
    r"work_s ([\d.]+) from ([\d.]+) to ([\d.]+) serial_to ([\d.]+)"
)
CASES = {
    "c": ("omp_mpi_imbalance.c", "main", "sweep._omp_fn.0", ("main", "sweep")),
    "fortran": (
        "omp_mpi_stencil.f90",
        "program stencil",
        "program stencil._omp_fn.0",
        ("program stencil",),
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def omp_run(request, mpi, build, tmp_path_factory):
    """One run per MPI and language, shared by the tests below."""
    source, root, region, opener = CASES[request.param]
    prog = build(mpi, source, ("-fopenmp",))
    exp = tmp_path_factory.mktemp("omp") / "exp"
    cmd = [
        PERFWEAVE,
        "run",
        "-o",
        str(exp),
        *SAMPLE,
        "--",
        *mpi.launch(RANKS),
        str(prog),
        str(SECONDS),
        str(THREADS),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout}\n{proc.stderr}"
    r = Run(exp, proc)
    truth = {}
    for ln in r.proc.stdout.splitlines():
        m = LINE.fullmatch(ln)
        assert m, r.proc.stdout
        rank, n = int(m[1]), int(m[2])
        assert n == THREADS
        truth[rank] = dict(
            zip(("run", "region", "work", "t0", "t1", "t2"), map(float, m.groups()[2:]))
        )
    assert sorted(truth) == list(range(RANKS)), r.proc.stdout
    return r, truth, root, region, opener


def test_workers_rooted_at_the_parallel_region(omp_run):
    r, truth, root, region, opener = omp_run
    exp = r.open()
    roots = [p[0] for p in tree_nodes(exp) if len(p) == 1]
    assert roots == [root], roots  # one root per program
    df = exp.samples()
    # samples without any frame of the program's (was 8-10 %, 49 % seen): at most the
    # main threads' time outside the span the programs timed (start-up in MPI_Init, the
    # loader, MPI_Finalize, exit); the workers, idle after it, are under the root
    total = df["seconds"].sum()
    outside = 100 * sum(sampled_life(r.exp, k)[0] - (t["t2"] - t["t0"]) for k, t in truth.items())
    outside = max(0.0, outside / total)
    no_frame = 100 * df.loc[df["stack"] == "", "seconds"].sum() / total
    assert no_frame <= outside + share_bound(outside, len(df)), (no_frame, outside)
    stacks = df["stack"][df["stack"] != ""]
    # every stack from the program's root; one of 7791 was not, once, in openmpi-fortran:
    # MPI_Init's opening of a component whose constructor sleeps, through perfweave's
    # sleep wrappers, is 32 frames deep down to main, and a sample one or two frames
    # deeper lost main and the program's frame (a sample kept the innermost 32; it now
    # keeps the outermost too: test_sampling.py::test_stacks_deeper_than_a_sample_keep_
    # the_program_root)
    rooted = stacks.str.split(";").str[0].eq(root)
    assert rooted.all(), stacks[~rooted].value_counts().head()
    # the workers' samples (threads other than each process's first, its main thread):
    # in the regions' span, under the main thread's way into them (main -> sweep ->
    # sweep._omp_fn.0) or where it forks and joins them (main -> sweep); after it, while
    # the main thread works alone (0.3 s) and in MPI, idle under the root
    into, fork = ";".join(opener + (region,)), ";".join(opener)
    workers = df[df["thread"] > 0]
    # every worker lives through the regions' span at least
    span = 100 * (THREADS - 1) * sum(t["t1"] - t["t0"] for t in truth.values()) / total
    got = 100 * workers["seconds"].sum() / total
    assert got >= span - share_bound(span, len(df)), (got, span)
    in_region = workers["stack"].str.startswith(into) | workers["stack"].eq(fork)
    idle = workers["stack"].eq(f"{root};[idle OpenMP threads]")
    # all but a stray sample or two: a sample in a function's first or last instructions,
    # where the frame chain skips its caller, loses the region frame (1 of 4832 seen,
    # `main;relax`, in a clean-clone run)
    placed = (in_region | idle).mean()
    assert placed > 0.998, workers["stack"][~(in_region | idle)].value_counts()
    t_start = {p.rank: p.meta["t_start"] / 1e9 for p in read_samples(r.exp)}
    for rank, t in truth.items():
        mine = workers["rank"] == rank
        t_abs = workers["time_s"] + t_start[rank]
        during = mine & (t_abs > t["t0"]) & (t_abs < t["t1"])
        # the serial work, less a sampling interval's jitter at each end; both spans have
        # samples (as many as the load lets the workers run: ~500 and ~50 on an idle
        # machine, 39 in the second seen beside other jobs)
        after = mine & (t_abs > t["t1"] + 0.02) & (t_abs < t["t2"] - 0.02)
        assert during.sum() and after.sum(), (during.sum(), after.sum())
        assert in_region[during].mean() > 0.97, workers["stack"][during].value_counts()
        assert idle[after].mean() > 0.9, workers["stack"][after].value_counts()
    assert root in r.text_report()


def test_openmp_barrier_is_openmp_sync_at_the_measured_share(omp_run):
    r, truth, root, region, opener = omp_run
    df = perfweave.open(r.exp).samples()
    t_start = {p.rank: p.meta["t_start"] / 1e9 for p in read_samples(r.exp)}
    least = 0.0  # omp_sync's seconds at least, from the spans' shares' lower bounds
    for rank, t in truth.items():
        mine = df[df["rank"] == rank]
        t_abs = mine["time_s"] + t_start[rank]
        window = mine[(t_abs >= t["t0"]) & (t_abs <= t["t1"])]
        assert len(window), t  # ~1000 samples on an idle machine
        # every thread lives through the span; the unworked part of the threads' time
        # is waiting in the OpenMP runtime (at the loops' barriers, and between regions)
        expected = 1 - t["work"] / (THREADS * t["run"])
        assert 0.25 < expected < 0.75, t  # the imbalance is there
        # of the time (samples weighted by the time each stands for): counted, the
        # waiting threads, woken by every sample, outweighed the working ones that lost
        # their core on a busy machine (0.55 against 0.42 seen at load 11)
        sync = window["activity"].eq("omp_sync")
        share = window.loc[sync, "seconds"].sum() / window["seconds"].sum()
        assert abs(share - expected) < 0.12, (rank, share, expected, t)
        assert window["activity"].eq("thread_sync").mean() < 0.02
        least += (expected - 0.12) * window["seconds"].sum()
    act = activity_pct(perfweave.open(r.exp))
    assert act["omp_sync"] >= 100 * least / df["seconds"].sum(), (act, least)
    assert act.get("thread_sync", 0) < 2, act
    # the split is of the app time's samples (MPI_Init and MPI_Finalize left out): the
    # report's alone (its time split and the advice), read from its JSON
    sm = r.report()["samples"]
    app = sm["app_activity_pct"]
    assert sm["time_split"]["threads"] == pytest.approx(app["omp_sync"] + app.get("thread_sync", 0))
    advice = r.report()["advice"]
    [omp] = [a for a in advice if a["rule"] == "sampled_omp_sync"]
    assert "OpenMP barrier" in omp["text"] and "imbalance among threads" in omp["text"]
    assert "schedule(dynamic)" in omp["text"]
    assert not any(a["rule"] == "sampled_thread_sync" for a in advice), advice
    assert not any("contention" in a["text"] for a in advice), advice
    assert f"OpenMP sync {act['omp_sync']:.1f} %" in r.text_report()


def _dynsyms(lib):
    """{name: [(start, size)]} of a library's dynamic function symbols (nm -D -S)."""
    out = subprocess.run(
        ["nm", "-D", "-S", "--defined-only", lib], capture_output=True, text=True, check=True
    ).stdout
    syms = {}
    for ln in out.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "TtWwi":
            syms.setdefault(f[3].split("@")[0], []).append((int(f[0], 16), int(f[1], 16)))
    return syms


def test_libgomp_frames_named_only_within_symbol_size(omp_run):
    r = omp_run[0]
    sym = Symbolizer()
    named = unnamed = 0
    for p in read_samples(r.exp):
        gomp = [i for i, m in enumerate(p.objects) if os.path.basename(m).startswith("libgomp")]
        assert gomp, p.objects
        syms = _dynsyms(p.objects[gomp[0]])
        rec = p.records
        valid = np.arange(rec["object"].shape[1])[None, :] < rec["depth"][:, None]
        offs = np.unique(rec["offset"][valid & (rec["object"] == gomp[0])])
        for L in sym.resolve(p.objects[gomp[0]], offs.tolist()):
            if not L.function:
                unnamed += 1
                assert L.short() == f"{os.path.basename(L.object)}+{L.offset:#x}"
                continue
            named += 1
            assert any(s <= L.offset - 1 < s + n for s, n in syms.get(L.function, ())), (
                L.function,
                hex(L.offset),
                syms.get(L.function),
            )
    # the stripped runtime's internal functions (barrier waits) have no name; its entry
    # points the program calls (GOMP_parallel) keep theirs
    assert named and unnamed, (named, unnamed)

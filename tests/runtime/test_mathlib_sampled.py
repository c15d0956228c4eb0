"""The math libraries in the samples (analysis/samples/ MATHLIB) against the program's
own clock (tests/runtime/programs/ml_sampled.c: rounds of 20 ms of dgemm_ from solve(),
10 ms of its own arithmetic): the math libraries' share of the app time, dgemm_ as their
routine and the calling line named, under the reference BLAS and OpenBLAS (whose threads
are the library's time too), OpenBLAS's kernels of several processors counted for dgemm_;
and the same program linked with a static BLAS (the reference libblas.a, OpenBLAS's
libopenblas64.a), whose dgemm_ the wrappers never see: the report says the library is
linked statically."""

import os

import pytest

from harness import outside_share, reported, sampled_life, share_bound, site_lines
from perfweave.analysis.samples.names import served_routine
from perfweave.readers.samples import read_samples
from perfweave.symbols import Symbolizer

LIB = "/usr/lib/x86_64-linux-gnu"
ALTERNATIVES = {"reference": f"{LIB}/lapack:{LIB}/blas", "openblas": f"{LIB}/openblas-pthread"}
SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
# Debian 12's only static OpenBLAS (libopenblas64-pthread-dev, which scripts/install-deps.sh
# installs): 64-bit integers, the usual names
OPENBLAS_STATIC = f"{LIB}/openblas64-pthread/libopenblas64.a"
STATIC = {
    "reference": ("-l:libblas.a", "-lgfortran"),
    "openblas": ("-DBLAS_INT=long", OPENBLAS_STATIC, "-lpthread"),
}


def shares(r, gemm_s, own_s):
    """The main thread's dgemm_ and own work, % of the sampler's life by the program's
    clock, and the rest (its start-up, printing, exit: compute or I/O)."""
    life, _ = sampled_life(r.exp)
    return 100 * gemm_s / life, 100 * own_s / life, outside_share(r.exp, gemm_s + own_s)


@pytest.fixture(params=sorted(ALTERNATIVES))
def blas(request, monkeypatch):
    for d in ALTERNATIVES[request.param].split(":"):
        assert os.path.isdir(d), f"{d} is missing (scripts/install-deps.sh installs it)"
    monkeypatch.setenv("LD_LIBRARY_PATH", ALTERNATIVES[request.param])
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    return request.param


def test_math_share_routine_and_caller(build, run_pw, blas):
    prog = build(None, "ml_sampled.c", ("-lblas",))
    r = run_pw([prog, 1.5], SAMPLE)
    gemm_s, own_s, calls = reported(r.proc, "gemm_s", "own_s", "calls")
    gemm, own, outside = shares(r, gemm_s, own_s)  # the main thread's, by its clock
    rep = r.report()  # the time split and the math section are the report's
    sm = rep["samples"]
    act = sm["app_activity_pct"]
    split = sm["time_split"]
    assert split["math libraries"] == pytest.approx(act["mathlib"])
    if blas == "reference":
        # one thread: the math share is dgemm_'s share of the main thread's time
        bound = share_bound(gemm, sm["app_samples"], margin=5)
        assert abs(act["mathlib"] - gemm) < bound, (act, gemm, bound)
        assert own - bound < act["compute"] < own + outside + bound, (act, own, outside)
    else:
        # OpenBLAS's second thread computes (or waits for work): the library's time too
        assert act["mathlib"] > gemm - 5, (act, gemm)
    m = rep["mathlib"]
    routines = {x["routine"]: x for x in m["sampled"]["routines"]}
    top = routines["dgemm_"]
    if blas == "reference":
        assert m["sampled"]["routines"][0]["routine"] == "dgemm_", m["sampled"]
        assert top["math_pct"] > 80, m["sampled"]
    else:
        # OpenBLAS's worker (sampled from its start, which is before perfweave's) runs
        # gemm parts and waits for work in the library: its samples are the library's
        # own routine, with no frame outside it
        rest = sum(x["math_pct"] for k, x in routines.items() if k != "dgemm_")
        assert top["math_pct"] + rest > 95, m["sampled"]
    assert top["calls"] == calls  # the wrappers' calls of the routine sampled
    line = site_lines("ml_sampled.c")["gemm"]
    main = [c for c in top["callers"] if c["function"] == "solve"]
    assert main and main[0]["name"] == f"solve (ml_sampled.c:{line})", top["callers"]
    # OpenBLAS may run a gemm of this size in its second thread: those samples, with
    # no frame outside the library, are its threads'
    threads = [c["routine_pct"] for c in top["callers"] if c["name"] == "[threads of the library]"]
    assert main[0]["routine_pct"] + sum(threads) > 95, top["callers"]
    assert not m["static"]
    text = " ".join(r.text_report().split())  # sentences wrapped to 100 columns
    assert f"math libraries {act['mathlib']:.1f} %" in text
    if blas == "reference":  # the sentence names the top routine's top caller
        assert f"of that from solve (ml_sampled.c:{line})" in text
    assert f"solve (ml_sampled.c:{line})" in text


@pytest.mark.parametrize("static", sorted(STATIC))
def test_static_library_detected(build, run_pw, monkeypatch, static):
    """OpenBLAS's kernels have no unwind tables (the stack ends there, with no wrapper to
    go on from) and its worker thread runs them: they count for dgemm_, the routine the
    program is seen calling, and its threads' own routine is no routine to claim."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    prog = build(None, "ml_sampled.c", STATIC[static])
    r = run_pw([prog, 1.0], SAMPLE)
    gemm_s, own_s, _ = reported(r.proc, "gemm_s", "own_s", "calls")
    assert not (r.exp / "mathlib").exists()  # no call through the wrappers
    rep = r.report()
    act = rep["samples"]["app_activity_pct"]
    gemm, _, _ = shares(r, gemm_s, own_s)
    if static == "reference":
        assert abs(act["mathlib"] - gemm) < share_bound(gemm, rep["samples"]["app_samples"], 5)
    else:  # its second thread computes or waits for work: the library's time too
        assert act["mathlib"] > gemm - 5, (act, gemm)
    m = rep["mathlib"]
    assert m["calls"] == 0
    [st] = m["static"]
    assert st["routine"] == "dgemm_" and st["object"] == str(prog)
    # every math sample of the main thread is dgemm_'s: its share of the app time is its
    # thread's share of the samples (at least compute / (100 - gemm): all compute is its
    # own) times gemm, by its clock
    [top] = [x for x in m["sampled"]["routines"] if x["routine"] == "dgemm_"]
    assert top["static"] and st["pct"] == top["pct"], m["sampled"]
    assert top["pct"] > gemm * act["compute"] / (100 - gemm) - 5, (top, act, gemm)
    assert f"linked statically into {prog.name}" in st["text"]
    [adv] = [a for a in m["advice"] if a["rule"] == "static_library"]
    assert adv["text"] == st["text"]
    text = " ".join(r.text_report().split())
    assert "no call of it was seen: the library is linked statically" in text


def test_openblas_worker_threads_are_sampled_as_the_librarys(build, run_pw, monkeypatch):
    """OpenBLAS starts its worker threads in its constructor, before perfweave's runs
    (no pthread_create of the program's to catch): the samples module finds them running
    at its start and samples them from then on. With a gemm size that OpenBLAS splits over
    its 2 threads, the worker's samples are math-library time, its stack all the library's
    ("[threads of the library]"), and the program's dgemm_ is still named from solve."""
    monkeypatch.setenv("LD_LIBRARY_PATH", ALTERNATIVES["openblas"])
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    prog = build(None, "ml_sampled.c", ("-DN=400", "-lblas"))
    r = run_pw([prog, 1.5], SAMPLE)
    s = r.open().samples()
    main = s["thread"].min()
    workers = s[s["thread"] != main]
    assert len(workers) > 50, s.groupby("thread").size()
    assert (workers["activity"] == "mathlib").mean() > 0.95, workers["activity"].value_counts()
    sampled = r.report()["mathlib"]["sampled"]
    callers = {c["name"] for x in sampled["routines"] for c in x["callers"]}
    assert "[threads of the library]" in callers, sampled
    line = site_lines("ml_sampled.c")["gemm"]
    assert f"solve (ml_sampled.c:{line})" in callers, sampled


# OPENBLAS_CORETYPE values, the suffix OpenBLAS gives their kernels, and the instructions
# they need. HASWELL's, ZEN's and SANDYBRIDGE's gemm kernels are assembly without unwind
# tables (no FDE in libopenblas.so.0's .eh_frame), SKYLAKEX's are C with them.
CORETYPES = {
    "Haswell": ("HASWELL", {"avx2", "fma"}),
    "Zen": ("ZEN", {"avx2", "fma"}),
    "SkylakeX": ("SKYLAKEX", {"avx512f", "avx512dq", "avx512bw", "avx512vl"}),
    "Sandybridge": ("SANDYBRIDGE", {"avx"}),
}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        return set(next((x for x in f if x.startswith("flags")), ":").split(":")[1].split())


# those this processor runs (on one without AVX-512, SKYLAKEX's kernels would fault)
RUNNABLE = sorted(c for c, (_, need) in CORETYPES.items() if need <= cpu_flags())


@pytest.mark.parametrize("core", RUNNABLE)
def test_openblas_kernels_of_each_processor(build, run_pw, monkeypatch, core):
    """Whatever kernel OpenBLAS runs, its samples are dgemm_'s, the routine the program
    calls through the wrapper: no static-library claim; the main thread's samples in a
    kernel without unwind tables still have the calling line (the sampler goes on from
    the wrapper's frame)."""
    monkeypatch.setenv("LD_LIBRARY_PATH", ALTERNATIVES["openblas"])
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    monkeypatch.setenv("OPENBLAS_CORETYPE", core)
    monkeypatch.setenv("OPENBLAS_VERBOSE", "2")
    prog = build(None, "ml_sampled.c", ("-lblas",))
    r = run_pw([prog, 0.6], SAMPLE)
    gemm_s, own_s, calls = reported(r.proc, "gemm_s", "own_s", "calls")
    # the processor OpenBLAS took (its own word, OPENBLAS_VERBOSE=2), and the kernels
    # sampled, if any on a busy machine, are that processor's (dgemm_kernel_,
    # dgemm_beta_, dgemm_oncopy_, ... _CORE), by the samples' frames in the library
    assert f"Core: {core}" in r.proc.stderr, r.proc.stderr
    [p] = read_samples(r.exp)
    lib = [i for i, o in enumerate(p.objects) if os.path.basename(o) == "libopenblas.so.0"]
    offs = p.records["offset"][p.records["object"] == lib[0]]
    names = {x.function for x in Symbolizer().resolve(p.objects[lib[0]], sorted(set(offs)))}
    suffix = f"_{CORETYPES[core][0]}"
    ours = {n for n in names if n.endswith(suffix)}
    assert all(served_routine(n) == "dgemm_" for n in ours), names
    others = {n for n in names if n.rsplit("_", 1)[-1] in {c for c, _ in CORETYPES.values()}}
    assert others == ours, names
    exp = r.open()
    s = exp.samples()
    main = s[(s["thread"] == s["thread"].min()) & (s["activity"] == "mathlib")]
    assert len(main), s.groupby(["thread", "activity"], observed=True).size()
    lost = main[~main["stack"].str.contains("solve")]
    assert len(lost) <= 1, lost["stack"].value_counts()
    m = exp.report()["mathlib"]
    assert not m["static"], m["static"]
    assert not [a for a in m["advice"] if a["rule"] == "static_library"]
    routines = {x["routine"]: x for x in m["sampled"]["routines"]}
    top = routines["dgemm_"]
    assert top["calls"] == calls and top["unwrapped_pct"] == 0
    # the rest: the worker waiting between calls, in the library's own code
    assert set(routines) <= {"dgemm_", "libopenblas.so.0"}, routines
    # every math sample of the main thread is dgemm_'s (test_static_library_detected)
    act = exp.report()["samples"]["app_activity_pct"]
    gemm, _, _ = shares(r, gemm_s, own_s)
    assert act["mathlib"] > gemm - 5, (act, gemm)
    assert top["pct"] > gemm * act["compute"] / (100 - gemm) - 5, (top, act, gemm)

"""The sampler's stack walks read only memory they know is there, whatever the interrupted
code left in its registers and stack: code built without frame pointers (gfortran -O2,
MPI libraries) keeps anything in the frame-pointer register. NPB CG (Fortran, -O2) under
Open MPI kept an array offset times 8, -8, there in its hottest loop; the frame walk's bound
"fp + 16 <= top of the stack" wrapped to 8 <= top, it read address 0 inside the signal
handler (every signal blocked there, so the fault killed the rank at once, nothing saved),
and 1 rank in 4 of 60 runs died of SIGSEGV (16 of 60 with --no-sample-libunwind).

hostile_frames meets each such value for 40 ms of CPU time under 1 ms sampling, with the
frame-pointer walk and with libunwind, which falls back to it where the code has no unwind
information: every value is met by at least 10 samples, and before the fix the first
sample at -8, at -16, or on a frame whose saved pointer is -16 killed the process (6 of 6
runs, both unwinders). The CG pattern itself (cg_like.f90: mpif.h, -O2, many small
nonblocking exchanges and reductions) runs for seconds under 1 ms sampling with each
unwinder and each MPI; the samples are read with the Python API (perfweave.open) and the
samples' files (read_samples), the MPI calls from the profile."""

import platform
from collections import Counter

import numpy as np
import pytest

from harness import rank_counts
from perfweave.readers.profile import read_profile
from perfweave.readers.samples import read_samples

UNWINDERS = {"libunwind": [], "frame pointers": ["--no-sample-libunwind"]}
HOSTILE = (
    "minus8",
    "minus16",
    "last_page",
    "kernel",
    "user_top",
    "null_page",
    "below_sp",
    "stack_top",
    "chain_minus16",
    "chain_kernel",
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="hostile_frames.c is x86-64 code")
@pytest.mark.parametrize("unwinder", sorted(UNWINDERS))
def test_any_frame_pointer_value_is_walked_safely(build, run_pw, unwinder):
    prog = build(
        None, "hostile_frames.c", ("-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables")
    )
    opts = ["--sample-interval-ms", "1", "--sample-capacity", "20000"] + UNWINDERS[unwinder]
    r = run_pw([prog, 40], opts, timeout=60, check=False)
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == "held 10 values\n"
    [p] = read_samples(r.exp)
    assert p.meta["unwinder"] == unwinder
    # each value held 40 ms of CPU time: at least 26 expiries of a 1 ms +-50 % timer while
    # the program runs (~40 seen each); 10 leaves room for a timer that lands late
    leaves = Counter(r.open().samples()["leaf"])
    assert all(leaves[f"spin_{name}"] >= 10 for name in HOSTILE), leaves
    if unwinder == "libunwind":
        # libunwind follows the chained frames to a return address without code, fails
        # there, and the frame-pointer walk takes the sample: default mode meets it too
        assert p.meta["unwind_fallbacks"] >= 10, p.meta["unwind_fallbacks"]


def mpi_calls_by_rank(exp, functions):
    """{rank: {function: calls}} from the run's profile"""
    pf = read_profile(exp / "profile.pwprof")
    sites, names = pf.arrays["sites"], pf.header["functions"]
    out = {}
    for rank, fn, count in zip(sites["rank"], sites["fn"], sites["count"]):
        if names[fn] in functions:
            row = out.setdefault(int(rank), dict.fromkeys(functions, 0))
            row[names[fn]] += int(count)
    return out


CG_CALLS = ("MPI_Irecv", "MPI_Isend", "MPI_Send", "MPI_Waitall", "MPI_Wait", "MPI_Allreduce")


@pytest.mark.parametrize("unwinder", sorted(UNWINDERS))
def test_cg_pattern_under_sampling(mpi, build, run_pw, unwinder):
    """3 s of the CG pattern at 1 ms on 2 cores: ~7,000 samples taken with 4 Open MPI
    ranks, ~2,900 with 2 MPICH ranks, about 20,000 over the four runs. A crash that kills
    1 in 15 runs of NPB CG class W (~280 samples each at the default 10 ms) kills each
    sample with a chance of 1 - (14/15)^(1/280) = 2.5e-4 or more; if samples of this
    pattern meet it as often, the four runs miss it with a probability of
    (1 - 2.5e-4)^20000 = 0.7 % (one Open MPI run: 17 %). The cause found is met by every
    sample of hostile_frames (above), whatever the compiler does with this program."""
    prog = build(mpi, "cg_like.f90", ("-O2", "-fallow-argument-mismatch"))
    ranks = 4 if mpi.name == "openmpi" else 2  # MPICH's ranks spin: one a core
    opts = ["--sample-interval-ms", "1", "--sample-capacity", "20000"] + UNWINDERS[unwinder]
    r = run_pw(mpi.launch(ranks) + [prog, 3], opts, timeout=120, check=False)
    assert r.proc.returncode == 0, r.proc.stdout + r.proc.stderr
    # rank 0's verdict, among the ranks' lines in any order
    [verdict] = [ln.split() for ln in r.proc.stdout.splitlines() if not ln.startswith("rank ")]
    assert verdict[0] == "rounds" and verdict[-1] == "verified", r.proc.stdout
    # every rank saved its samples (a rank killed in the handler saves nothing), and
    # took them all along: at least one a 10 ms over the 3 s (most time is in MPI calls,
    # whose samples a sampler crash would meet as well)
    procs = read_samples(r.exp)
    assert sorted(p.meta["rank"] for p in procs) == list(range(ranks))
    for p in procs:
        assert p.meta["unwinder"] == unwinder
        assert sum(t["taken"] for t in p.meta["threads"]) > 300, p.meta["threads"]
    # the kernel's samples against the wall time each rank spent in it by its own clock:
    # a sample per 1 ms of it on average while the rank's samples come on time (a gap
    # of at most the longest interval, 1.5 ms, and 0.1 ms for the handler). A rank that
    # waited for a core gets the signal of its timer when it resumes, in the MPI call it
    # left, and re-arms from there, so its samples fall in step with its resumptions and
    # miss the computing that follows each (beside two busy loops, Open MPI's 4 ranks:
    # ~78 % of the gaps late, no sample in conj_grad of 4,400 though each rank's clock
    # gave it 17 ms of 3.5 s; on an idle machine 1-2 % late and 0.96 sample per ms).
    # Those ranks' share is not asserted: what this test is for, a run where every rank
    # lives and saves, is, above and below.
    printed = rank_counts(r.proc.stdout)
    kernel_ms = {rank: printed[rank]["kernel_us"] / 1000 for rank in range(ranks)}
    on_time = []
    for p in procs:
        t = np.sort(p.records[p.records["thread"] == 0]["t"])
        if (np.diff(t) > 1_600_000).mean() <= 0.25:
            on_time.append(p.meta["rank"])
    samples = r.open().samples()
    compute = samples[samples["leaf"] == "conj_grad"].groupby("rank").size()
    compute = {rank: int(compute.get(rank, 0)) for rank in on_time}
    assert all(n > 0 for rank, n in compute.items() if kernel_ms[rank] >= 30), (compute, kernel_ms)
    assert sum(compute.values()) >= sum(kernel_ms[rank] for rank in on_time) / 3, (
        compute,
        kernel_ms,
    )
    # the MPI calls of each rank, as the program counted them
    assert mpi_calls_by_rank(r.exp, CG_CALLS) == {
        rank: {fn: printed[rank][fn] for fn in CG_CALLS} for rank in range(ranks)
    }

"""The MPI_Pcontrol region in the profile (ranks' region_intervals, region_ns,
region_mpi_ns): programs/pcontrol_prof.c marks two intervals, makes MPI calls inside,
between and before them, and brackets with its own clock (CLOCK_MONOTONIC, the one the
runtime reads) what the runtime measures."""

import re

from harness import PERFWEAVE  # noqa: F401  (the harness sets up the MPI environment)

from perfweave.readers.profile import read_profile

LINE = re.compile(
    r"rank (\d+) inner_ns (\d+) outer_ns (\d+) mpi_ns (\d+) before_ns (\d+) calls (\d+)"
)
# The runtime times a call in ticks converted at the run's measured ns per tick: its
# relative error is well under 1e-4 (1e-3 allowed) plus a nanosecond of rounding a call.
RATE = 1e-3
# What the program's clock holds around an MPI call beyond the wrapper's reading: the
# wrapper's own work before and after it (about a microsecond), and a preemption of the
# rank between the two readings, which the program cannot tell apart (a rank waits for a
# core for up to a few ms at this machine's load): 2 ms for the region's 4 calls.
AROUND_NS = 2_000_000


def ranks_of(run_pw, mpi, build, *args):
    prog = build(mpi, "pcontrol_prof.c")
    r = run_pw(mpi.launch(2) + [prog, 20, *args])
    own = {int(m[1]): [int(x) for x in m.groups()[1:]] for m in LINE.finditer(r.proc.stdout)}
    assert sorted(own) == [0, 1], r.proc.stdout
    ranks = read_profile(r.exp / "profile.pwprof").arrays["ranks"]
    return {int(x["rank"]): x for x in ranks}, own


def test_region_in_profile(mpi, build, run_pw):
    """Two intervals; the region's length between the program's inner and outer bracket
    of its Pcontrol calls; its MPI time the program's around its region calls, less the
    wrappers' edges; the calls before the first MPI_Pcontrol in mpi_ns only."""
    ranks, own = ranks_of(run_pw, mpi, build)
    for k in (0, 1):
        r = ranks[k]
        inner, outer, mpi_own, before, calls = own[k]
        assert r["region_intervals"] == 2
        # (the program's readings are rounded to ns from double seconds: 2 ns)
        assert inner - 2 <= r["region_ns"] <= outer + 2, (inner, r["region_ns"], outer)
        assert r["region_ns"] <= r["app_ns"]
        got = int(r["region_mpi_ns"])
        assert mpi_own - AROUND_NS <= got <= mpi_own * (1 + RATE) + 2 * calls, (got, mpi_own)
        # rank 0 computes T, rank 1 3T in each interval: rank 0 waits 2T in the barrier,
        # far above the tolerance, so a region MPI time of the whole run would show
        if k == 0:
            assert got > 2 * 20e6
        # the calls before the first MPI_Pcontrol are MPI time outside the region (their
        # first calls hold the library's lazy set-up in the program's time only)
        pre = int(r["mpi_ns"]) - got
        assert 0 < pre <= before * (1 + RATE) + 4, (pre, before)


def test_no_region_without_pcontrol(mpi, build, run_pw):
    """A run without MPI_Pcontrol has no region: its fields are 0."""
    ranks, _ = ranks_of(run_pw, mpi, build, "none")
    for r in ranks.values():
        assert (r["region_intervals"], r["region_ns"], r["region_mpi_ns"]) == (0, 0, 0)
        assert r["mpi_ns"] > 0

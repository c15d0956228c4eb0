"""The MPI_Pcontrol region in the profile (ranks' region_intervals, region_ns,
region_mpi_ns): programs/pcontrol_prof.c marks two intervals, makes MPI calls inside,
between and before them, and brackets with its own clock (CLOCK_MONOTONIC, the one the
runtime reads) what the runtime measures."""

import json
import re
import shutil
import subprocess

import numpy as np
from harness import PERFWEAVE

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
    return {int(x["rank"]): x for x in ranks}, own, r


def test_region_in_profile(mpi, build, run_pw):
    """Two intervals; the region's length between the program's inner and outer bracket
    of its Pcontrol calls; its MPI time the program's around its region calls, less the
    wrappers' edges; the calls before the first MPI_Pcontrol in mpi_ns only."""
    ranks, own, run = ranks_of(run_pw, mpi, build)
    for k in (0, 1):
        r = ranks[k]
        inner, outer, mpi_own, before, calls = own[k]
        assert r["region_intervals"] == 2
        assert inner <= r["region_ns"] <= outer, (inner, r["region_ns"], outer)
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
    ranks, _, run = ranks_of(run_pw, mpi, build, "none")
    for r in ranks.values():
        assert (r["region_intervals"], r["region_ns"], r["region_mpi_ns"]) == (0, 0, 0)
        assert r["mpi_ns"] > 0
    assert run.report()["mpi_profile"]["region"] is None
    assert "of interest: MPI_Pcontrol" not in run.text_report()


def test_report_names_the_region(mpi, build, run_pw):
    """perfweave report's line: the intervals, the longest rank's region of its app
    time (the report's own subject: its JSON's mpi_profile.region and its text)."""
    ranks, _, run = ranks_of(run_pw, mpi, build)
    g = run.report()["mpi_profile"]["region"]
    assert g["intervals"] == 2
    assert g["region_s"] == max(int(r["region_ns"]) for r in ranks.values()) / 1e9
    assert g["app_s"] == max(int(r["app_ns"]) for r in ranks.values()) / 1e9
    line = [x for x in run.text_report().splitlines() if x.startswith("  region ")]
    assert len(line) == 1 and "of interest: MPI_Pcontrol, 2 intervals, " in line[0], line


IV = re.compile(r"rank (\d+) interval \d+ open (\d+) in (\d+) out (\d+) closed (\d+)")


def union_ns(intervals):
    """Length of the union of [a, b) intervals."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total, end = total + b - a, b
        elif b > end:
            total, end = total + b - end, b
    return total


def pop_json(exp):
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(exp)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_pop_from_profile_matches_trace(mpi, build, run_pw, tmp_path):
    """perfweave pop on the experiment without its traces takes LB and CommE from the
    profile's regions, SerE and TE n/a; on the traced run they match the trace's within
    the bounds of the program's readings around its MPI_Pcontrol calls: both tools read
    the marks between them (the useful time), and the runtimes differ by the ranks' skew
    at the marks (the trace's is the union of every rank's intervals, the profile's the
    longest rank's region)."""
    prog = build(mpi, "pcontrol_prof.c")
    r = run_pw(mpi.launch(2) + [prog, 20], options=["--trace"])
    iv = {}
    for m in IV.finditer(r.proc.stdout):
        iv.setdefault(int(m[1]), []).append(tuple(int(x) for x in m.groups()[1:]))
    assert sorted(iv) == [0, 1] and all(len(v) == 2 for v in iv.values()), r.proc.stdout
    bare = tmp_path / "no-trace"
    shutil.copytree(r.exp, bare, ignore=shutil.ignore_patterns("traces"))
    traced, prof = pop_json(r.exp), pop_json(bare)
    assert prof["region"]["marked"] and traced["region"]["marked"]
    for ideal in ("replay", "critical_path"):
        assert prof["ideal"][ideal]["t_ideal_s"] is None
        assert prof["ideal"][ideal]["note"] == "needs --trace"
    assert "serialisation_efficiency" not in prof["multiplicative"]
    assert any("SerE and TE n/a" in n for n in prof["notes"])
    # the ranks share one host's clock (the offsets of both tools are 0 there)
    inner = [(i, o) for v in iv.values() for _, i, o, _ in v]
    outer = [(a, c) for v in iv.values() for a, _, _, c in v]
    t_trace = traced["region"]["runtime_s"] * 1e9
    t_prof = prof["region"]["runtime_s"] * 1e9
    assert union_ns(inner) - 2 <= t_trace <= union_ns(outer) + 2
    longest_in = max(sum(o - i for _, i, o, _ in v) for v in iv.values())
    longest_out = max(sum(c - a for a, _, _, c in v) for v in iv.values())
    assert longest_in - 2 <= t_prof <= longest_out + 2
    # each tool's marks lie inside the program's readings around each MPI_Pcontrol
    edge = max(sum((i - a) + (c - o) for a, i, o, c in v) for v in iv.values()) / 1e9
    u_t = np.array(traced["useful"]["seconds"])
    u_p = np.array(prof["useful"]["seconds"])
    assert np.abs(u_p - u_t).max() <= edge + 1e-6, (u_p, u_t, edge)
    mul_t, mul_p = traced["multiplicative"], prof["multiplicative"]
    assert abs(mul_p["load_balance"] - mul_t["load_balance"]) <= 2 * (edge + 1e-6) / u_t.max()
    skew = (union_ns(outer) - longest_in) / 1e9  # the most the runtimes can differ
    t_lo = min(t_trace, t_prof) / 1e9
    bound = u_t.max() * skew / t_lo**2 + (edge + 1e-6) / t_lo
    ce_p, ce_t = mul_p["communication_efficiency"], mul_t["communication_efficiency"]
    assert abs(ce_p - ce_t) <= bound, (ce_p, ce_t, bound)

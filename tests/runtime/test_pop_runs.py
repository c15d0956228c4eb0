"""perfweave pop on programs whose POP metrics are arithmetic (programs/pop_cases.c):
each rank prints its own compute time in the region and its elapsed time, and the
expected metrics are derived from those numbers of the same run."""

import json
import re
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
from harness import PERFWEAVE

from perfweave.clock import to_ns
from perfweave.readers import trace as rt
from perfweave.dtypes import EVENT_TYPES

T_MS = 20  # the programs' unit of computation
TOL = 0.01  # issue 33 point 6: POP numbers within 0.01 of the arithmetic
# The programs spin on the wall clock, and their ranks' time outside MPI also holds the
# time they wait for a core: on this machine (load average 9 on 2 cores while the
# tests ran) a rank descheduled for tens of ms between two calls moves the values by
# construction far (seen: the pipeline's SerE 0.41 for 0.25). So the program's own
# account is checked only for the case's shape, halfway between the value by
# construction and the value without the effect (shaped()), and the metrics against
# that account within TOL.


def shaped(value, construction, without):
    return abs(value - construction) < abs(without - construction) / 2


# A rank preempted between its own clock reading and the wrapper's (the call's enter or
# leave) moves that time between useful and MPI in one account and not the other (seen
# 4 ms in a run; SerE 0.824 for the program's 0.807 beside two busy loops). The program's
# readings bracket the tool's: around each MPI call it reads its clock before the
# wrapper's enter and after its leave, and around each MPI_Pcontrol before and after the
# tool's mark. So a burst of the tool's useful time holds the program's, and a rank's
# useful time exceeds its own account by at most
#   excess = (its time around its region's calls - the tool's time in them, from the
#             trace) + its time around its MPI_Pcontrol calls,
# both measured in the same run; the critical path by at most the ranks' excesses
# summed (a path holds each rank's bursts once at most), and the region's span by the
# marks at its two ends; the tool's times also carry its tick rate's error, bounded by
# its region's length against the program's. The metrics are checked within TOL of the
# bounds these give.
EPS_S = 2e-5  # the program prints microseconds; the tool converts ticks at a measured rate


def measured(stderr):
    """{rank: (useful, clock, elapsed, first, last, calls, marks)} that the program
    printed (its account of the region, seconds)."""
    out = {}
    num = r"([\d.-]+)"
    pat = (
        rf"rank (\d+) useful {num} clock {num} elapsed {num} first {num} last {num} "
        rf"calls {num} marks {num}"
    )
    for m in re.finditer(pat, stderr):
        out[int(m.group(1))] = tuple(float(m.group(i)) for i in range(2, 9))
    return out


def traced_call_time(exp, rank):
    """The tool's time in the rank's MPI calls inside its region (s, from its trace)."""
    rd = rt.read_rank(exp, rank)
    ev = rd.records
    pc = ev[ev["type"] == EVENT_TYPES["PCONTROL"]]
    calls = ev[ev["type"] == EVENT_TYPES["CALL"]]
    t0 = calls["t0"].astype(np.int64)
    t1 = calls["t1"].astype(np.int64)  # (its end)
    inside = np.zeros(len(calls), bool)
    opened = None
    for t, level in zip(pc["t0"].tolist(), pc["tag"].tolist()):
        if level != 0 and opened is None:
            opened = t
        elif level == 0 and opened is not None:
            inside |= (t0 >= opened) & (t0 < t)
            opened = None
    # one host: no offset to rank 0, as the tool's analyses take it (clock.host_clocks),
    # rather than the drift between two noisy offsets, which would scale the durations
    c = dict(rd.meta["clock"], offset_init_ns=0, offset_fini_ns=0)
    meta = dict(rd.meta, clock=c)
    return float((to_ns(meta, t1[inside]) - to_ns(meta, t0[inside])).sum()) / 1e9


def pop_of(mpi, build, run_pw, case, ranks):
    """perfweave pop's JSON of the case, and what the program measured as arrays: useful
    time and clock per rank, the region's span over all ranks (the ranks share one
    host's CLOCK_MONOTONIC; one interval), and the Bounds the run gives (above)."""
    prog = build(mpi, "pop_cases.c")
    r = run_pw(mpi.launch(ranks) + [prog, case, T_MS], options=["--trace"])
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(r.exp)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    own = measured(r.proc.stderr)
    assert sorted(own) == list(range(ranks)), r.proc.stderr
    u, c, e, f, last, calls, marks = (np.array([own[k][i] for k in range(ranks)]) for i in range(7))
    # The tool converts its counter's ticks to ns at a rate it measured, which can be off
    # by a reading's preemption over the calibration's span; its region lies within the
    # program's readings around the marks, so its length against the program's bounds
    # that rate (k: the tool's seconds per true second).
    e_tool = np.array(
        [sum(b - a for a, b in doc["region"]["intervals"][str(k)]) for k in range(ranks)]
    )
    k_lo, k_hi = e_tool / (e + marks + EPS_S), e_tool / np.maximum(e - EPS_S, 1e-9)
    tool_calls = np.array([traced_call_time(r.exp, k) for k in range(ranks)])
    # the wrapper's time lies within the program's around each call
    assert (tool_calls / k_hi <= calls + EPS_S).all(), (tool_calls, calls, k_hi)
    x = Bounds(
        lo=k_lo * u - EPS_S,
        hi=k_hi * (u + calls + marks) - tool_calls + EPS_S,
        excess=calls - tool_calls / k_hi + marks,
        marks=marks,
        k_lo=float(k_lo.min()),
        k_hi=float(k_hi.max()),
    )
    return doc, u, c, last.max() - f.min(), r, x


@dataclass
class Bounds:
    """What the run says the tool's numbers can be: per rank its useful time's bounds
    (lo, hi, s), the true time by which its useful time may exceed the program's
    (excess), the time around its MPI_Pcontrol marks; the tool's seconds per true second
    (k_lo, k_hi, over the ranks)."""

    lo: np.ndarray
    hi: np.ndarray
    excess: np.ndarray
    marks: np.ndarray
    k_lo: float
    k_hi: float


def factor(doc, key, ideal="critical_path", variant="multiplicative"):
    v = doc[variant].get(key)
    return v if v is not None else doc["ideal"][ideal][variant][key]


def within(value, lo, hi, what):
    assert lo - TOL <= value <= hi + TOL, f"{what} {value} not in [{lo}, {hi}] +- {TOL}"


def check(doc, u, c, x, elapsed=None):
    """The factors against the program's own account: LB = mean/max useful, SerE = max
    useful / max clock, TE = max clock / elapsed; the ideal runtime both ways (the
    program's clock is the critical path; on an ideal network, the replay's too), each
    within TOL of the bounds x of the run (a path holds each rank's excess once)."""
    got = np.array(doc["useful"]["seconds"])
    assert (got >= x.lo).all() and (got <= x.hi).all(), (got, x.lo, x.hi, u)
    lo_u, hi_u = np.maximum(x.lo, 0), x.hi
    within(factor(doc, "load_balance"), lo_u.mean() / hi_u.max(), hi_u.mean() / lo_u.max(), "LB")
    c_lo, c_hi = clock_bounds(x, c)
    for ideal in ("critical_path", "replay"):
        se = factor(doc, "serialisation_efficiency", ideal)
        within(se, lo_u.max() / c_hi, hi_u.max() / c_lo, f"SerE ({ideal})")
    assert doc["region"]["marked"]
    if elapsed is not None:
        t_lo, t_hi = runtime_bounds(x, elapsed)
        assert t_lo * (1 - TOL) <= doc["region"]["runtime_s"] <= t_hi * (1 + TOL)
        for ideal in ("critical_path", "replay"):
            te = factor(doc, "transfer_efficiency", ideal)
            within(te, *te_bounds(x, c, elapsed), f"TE ({ideal})")


def clock_bounds(x, c):
    """The tool's critical path of useful time can be (s): the program's, in the tool's
    seconds, plus every rank's excess."""
    return x.k_lo * c.max() - EPS_S, x.k_hi * (c.max() + x.excess.sum()) + EPS_S


def te_bounds(x, c, elapsed):
    """The tool's Transfer Efficiency can be: its critical path's bounds over its
    runtime's (the program's span, its ends moved by the marks at most)."""
    c_lo, c_hi = clock_bounds(x, c)
    t_lo, t_hi = runtime_bounds(x, elapsed)
    return c_lo / t_hi, c_hi / t_lo


def runtime_bounds(x, elapsed):
    """The tool's runtime can be: the program's span, its ends moved by a mark each."""
    return x.k_lo * elapsed - EPS_S, x.k_hi * (elapsed + 2 * x.marks.max()) + EPS_S


def test_late_sender_pair(mpi, build, run_pw):
    """Rank 0 computes 5T and sends, rank 1 computes T and receives: LB = 0.6, and the
    critical path is rank 0's computation: SerE ~ 1, TE ~ 1."""
    doc, u, c, e, _, x = pop_of(mpi, build, run_pw, "sendrecv", 2)
    check(doc, u, c, x, e)
    assert shaped(u.mean() / u.max(), 0.6, 1.0)  # the program did its part
    assert shaped(u.max() / c.max(), 1.0, 0.5)


def test_pipeline(mpi, build, run_pw):
    """4 ranks, rank k waits for k-1 in every iteration: the critical path holds every
    rank's computation, SerE = 1/4."""
    doc, u, c, e, _, x = pop_of(mpi, build, run_pw, "pipeline", 4)
    check(doc, u, c, x, e)
    assert shaped(u.max() / c.max(), 0.25, 1.0)


def test_broadcast_serialises_root_and_others(mpi, build, run_pw):
    """The root computes before MPI_Bcast, the others after: SerE = T / 2T."""
    doc, u, c, e, _, x = pop_of(mpi, build, run_pw, "bcast", 4)
    check(doc, u, c, x, e)
    assert shaped(u.max() / c.max(), 0.5, 1.0)


def test_pcontrol_region(mpi, build, run_pw):
    """Work (1+2k)T inside MPI_Pcontrol(1) .. MPI_Pcontrol(0) (twice), (2P-1-2k)T
    outside: LB = P / (2P-1) in the region; the trace holds every rank's Pcontrol calls
    with their levels."""
    P = 4
    doc, u, c, _, r, x = pop_of(mpi, build, run_pw, "pcontrol", P)  # (runtime: a union)
    for k in range(P):
        ev = rt.read_rank(r.exp, k).records
        pc = ev[ev["type"] == EVENT_TYPES["PCONTROL"]]
        assert pc["tag"].tolist() == [0, 1, 0, 1, 0]  # the warm-up's, then the region's
    assert doc["region"]["marked"]
    assert [len(v) for v in doc["region"]["intervals"].values()] == [2] * P
    check(doc, u, c, x)
    assert shaped(u.mean() / u.max(), P / (2 * P - 1), 1.0)
    # the ideal run keeps the Pcontrol levels where they fall in its computation: its
    # region is marked again, holds the same useful time (same load balance), and lies
    # within the replay's ideal span (which also holds the waits between the intervals)
    ideal = r.exp.parent / (r.exp.name + "-ideal")
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", "--ideal-trace", str(ideal), str(r.exp)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    t_ideal = json.loads(p.stdout)["ideal"]["replay"]["t_ideal_s"]
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(ideal)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    again = json.loads(p.stdout)
    assert again["region"]["marked"]
    assert 0 < again["region"]["runtime_s"] <= t_ideal * 1.001
    lb = doc["multiplicative"]["load_balance"]
    assert again["multiplicative"]["load_balance"] == pytest.approx(lb, abs=TOL)


def test_exchange_transfer_efficiency(mpi, build, run_pw):
    """Balanced ranks exchanging 64 MiB per iteration: on an ideal network only the
    useful time is left, TE = T_ideal / T within 2 % (T_ideal: the program's clock)."""
    doc, u, c, e, _, x = pop_of(mpi, build, run_pw, "exchange", 2)
    assert c.max() / e < 0.9  # the transfers take time: TE is not 1 by accident
    check(doc, u, c, x, e)
    lo, hi = te_bounds(x, c, e)
    for ideal in ("critical_path", "replay"):
        te = factor(doc, "transfer_efficiency", ideal)
        assert lo * 0.98 <= te <= hi * 1.02, (te, lo, hi)

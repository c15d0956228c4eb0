"""--trace of one-sided communication: every RMA operation (and its request-based form)
on every kind of window in every kind of epoch, counted exactly in the trace (read with
perfweave's trace reader), in the profile and by perfweave analyze. Fetch_and_op and
Compare_and_swap used to crash the traced program: their window event read a request
argument they do not have (issue 13, point 1)."""

import json
import subprocess
from collections import Counter

import numpy as np

from harness import PERFWEAVE, by_name
from perfweave.readers import trace as rt
from perfweave.dtypes import EVENT_TYPES as T

BLOCKING = [
    "MPI_Put",
    "MPI_Get",
    "MPI_Accumulate",
    "MPI_Get_accumulate",
    "MPI_Fetch_and_op",
    "MPI_Compare_and_swap",
]
REQUEST = ["MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate"]
CREATE = ["MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_create_dynamic"]
# bytes (sent, received) of one call: 2 ints moved, 1 by the atomics
BYTES = {
    "MPI_Put": (8, 0),
    "MPI_Rput": (8, 0),
    "MPI_Get": (0, 8),
    "MPI_Rget": (0, 8),
    "MPI_Accumulate": (8, 0),
    "MPI_Raccumulate": (8, 0),
    "MPI_Get_accumulate": (8, 8),
    "MPI_Rget_accumulate": (8, 8),
    "MPI_Fetch_and_op": (4, 4),
    "MPI_Compare_and_swap": (4, 4),
}


def rank_events(exp, rank):
    """(calls per function, [(function, sub-event record)]) of one rank's trace."""
    rf = rt.read_rank(exp, rank)
    assert rf.complete, rf.notes
    names = rf.meta["functions"]
    typ = rf.records["type"]
    is_call = typ == T["CALL"]
    owner = np.cumsum(is_call) - 1  # the call each record belongs to
    fn_of_call = rf.records["fn"][is_call]
    calls = Counter(names[f] for f in fn_of_call.tolist())
    subs = [
        (names[fn_of_call[owner[i]]], rf.records[i])
        for i in np.flatnonzero(~is_call)
        if owner[i] >= 0
    ]
    return calls, subs


def analyze(exp):
    res = subprocess.run(
        [PERFWEAVE, "analyze", "--json", str(exp)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_every_rma_operation_traced(mpi, build, run_pw):
    prog = build(mpi, "rma_all.c")
    nranks = 4
    r = run_pw(mpi.launch(nranks) + [prog], options=["--trace"])
    expect = {
        **{f: 16 for f in BLOCKING},
        **{f: 8 for f in REQUEST},
        "MPI_Wait": 32,
        "MPI_Win_fence": 8,
        "MPI_Win_lock": 8,
        "MPI_Win_unlock": 8,
        **{
            f: 4
            for f in (
                "MPI_Win_post",
                "MPI_Win_start",
                "MPI_Win_complete",
                "MPI_Win_wait",
                "MPI_Win_lock_all",
                "MPI_Win_unlock_all",
                "MPI_Win_flush",
                "MPI_Win_flush_all",
                "MPI_Win_flush_local",
                "MPI_Win_flush_local_all",
                "MPI_Win_free",
            )
        },
        **{f: 1 for f in CREATE},
    }
    for rank in range(nranks):
        calls, subs = rank_events(r.exp, rank)
        for f, n in expect.items():
            assert calls[f] == n, (rank, f, calls[f], n)
        target = (rank + 1) % nranks
        rma = [(f, e) for f, e in subs if e["type"] == T["RMA"]]
        assert Counter(f for f, _ in rma) == {f: expect[f] for f in BLOCKING + REQUEST}
        for f, e in rma:
            assert (e["peer"], e["bytes"], e["t1"]) == (target, *BYTES[f]), (rank, f)
            # request-based operations carry their request key, the others none
            assert bool(e["flags"] & 1) == (f in REQUEST) and (e["t0"] != 0) == (f in REQUEST)
        # four windows, each with 6 x 4 + 4 x 2 operations of this rank
        assert sorted(Counter(int(e["tag"]) for _, e in rma).values()) == [32] * 4
        wins = [(f, e) for f, e in subs if e["type"] == T["WIN"]]
        assert [f for f, _ in wins] == [x for c in CREATE for x in (c, "MPI_Win_free")]
        sync = Counter(f for f, e in subs if e["type"] == T["WSYNC"])
        assert sync == {
            f: n
            for f, n in expect.items()
            if f.startswith("MPI_Win_") and f not in CREATE and f != "MPI_Win_free"
        }
        flushes = [e for f, e in subs if f == "MPI_Win_flush"]
        assert all(e["peer"] == target for e in flushes)
        locks = [e for f, e in subs if f == "MPI_Win_lock" and e["type"] == T["WSYNC"]]
        assert sorted((int(e["peer"]), bool(e["flags"] & 16)) for e in locks) == sorted(
            [(target, True)] * 4 + [(rank, False)] * 4
        )

    prof = by_name(r.open().mpi_functions())
    for f, n in expect.items():  # every rank made n calls: n x ranks, on all ranks
        assert (prof[f]["calls"], prof[f]["ranks"]) == (n * nranks, nranks), f
    for f, (s, rv) in BYTES.items():
        assert (prof[f]["bytes_sent"], prof[f]["bytes_recv"]) == (
            s * expect[f] * nranks,
            rv * expect[f] * nranks,
        ), f

    res = analyze(r.exp)
    assert res["complete"] is True and res["notes"] == []
    c = res["counts"]
    # 2 fences per window on every rank: 8 fence instances; one access and one exposure
    # epoch per rank and window
    assert (c["fences"], c["access_epochs"], c["exposure_epochs"]) == (8, 16, 16)


def test_fortran_atomics_traced(mpi, build, run_pw):
    prog = build(mpi, "rma_atomics.f90")
    nranks = 3
    r = run_pw(mpi.launch(nranks) + [prog], options=["--trace"])
    for rank in range(nranks):
        calls, subs = rank_events(r.exp, rank)
        assert (calls["MPI_Fetch_and_op"], calls["MPI_Compare_and_swap"]) == (5, 4)
        assert (calls["MPI_Win_fence"], calls["MPI_Win_flush"], calls["MPI_Win_lock"]) == (2, 3, 2)
        rma = [(f, e) for f, e in subs if e["type"] == T["RMA"]]
        assert Counter(f for f, _ in rma) == {"MPI_Fetch_and_op": 5, "MPI_Compare_and_swap": 4}
        for f, e in rma:
            assert (e["peer"], e["bytes"], e["t1"], e["flags"], e["t0"]) == (
                (rank + 1) % nranks,
                4,
                4,
                0,
                0,
            )
    prof = by_name(r.open().mpi_functions())
    assert (prof["MPI_Fetch_and_op"]["calls"], prof["MPI_Fetch_and_op"]["ranks"]) == (
        5 * nranks,
        nranks,
    )
    assert (prof["MPI_Compare_and_swap"]["calls"], prof["MPI_Compare_and_swap"]["ranks"]) == (
        4 * nranks,
        nranks,
    )
    assert analyze(r.exp)["complete"] is True

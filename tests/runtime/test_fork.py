"""A rank that forks a child (system(), a helper, a worker): the child is a process of
its own. Its calls are its own data (procs/HOST.PID.pwprof and its modules' files under
its pid), and neither the child's calls nor a second copy of the rank's calls before the
fork (the tables the child inherits) end up in the rank's data. Ground truth: the
program's own counts (P and C sched_yield calls, B barriers), with the example module
(--example) counting sched_yield."""

import json

import numpy as np

import perfweave
from perfweave.readers.profile import read_profile

P, B, C = 300, 20, 700


def test_a_forked_child_has_its_own_data_never_the_ranks(mpi, build, run_pw):
    prog = build(mpi, "fork_child_calls.c")
    r = run_pw(mpi.launch(2) + [prog, P, B, C], ["--example"])
    out = r.proc.stdout.split()
    pids = {int(out[i + 1]): int(out[i + 3]) for i in range(len(out)) if out[i] == "rank"}
    child = int(out[out.index("child") + 1])
    assert sorted(pids) == [0, 1] and child not in pids.values()
    exp = perfweave.open(r.exp)
    assert not exp.profile.partial and not (r.exp / "partial").exists()
    prof = exp.profile
    yields = np.isin(prof.sites["fn"], prof.function_ids("example"))
    barriers = np.isin(prof.sites["fn"], [prof.functions.index("MPI_Barrier")])
    for rank in (0, 1):
        mine = prof.sites["rank"] == rank
        assert int(prof.sites["count"][mine & yields].sum()) == P, rank
        assert int(prof.sites["count"][mine & barriers].sum()) == B + 1, rank
    # the child: one process profile of its own, with its C calls and no MPI call
    [proc] = list((r.exp / "procs").iterdir())
    assert proc.name.endswith(f".{child}.pwprof")
    pf = read_profile(proc)
    fns = [pf.header["functions"][f] for f in pf.arrays["sites"]["fn"]]
    assert set(fns) == {"sched_yield"} and int(pf.arrays["sites"]["count"].sum()) == C
    assert pf.arrays["ranks"]["pid"].tolist() == [child]
    # the example module's files: one per rank with its own count, one for the child
    ex = perfweave.open(r.exp).example
    got = sorted((p.rank, p.pid, p.calls) for p in ex.processes)
    assert got == [(-1, child, C), (0, pids[0], P), (1, pids[1], P)]
    job = json.loads((r.exp / "example" / "job.json").read_text())
    assert job["calls"] == 2 * P

"""Ranks that end without saving keep their profile (issue 37, points 5 and 10): a rank's
call-site tables are pages of its tables/HOST.PID.pwtab, so SIGKILL (a launcher's
escalation, the out-of-memory killer) or an MPI library's _exit (Open MPI's ranks once
their mpirun is gone) leaves every count up to that moment, read as the rank's data,
marked killed. Ground truth: the programs' own counts, by construction (killed_at.c) or
reported after each iteration (ring_forever.c, tests/runtime/test_trace_killed.py)."""

import json
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from harness import PERFWEAVE, bare
from test_full_disk import tmpfs  # noqa: F401 - the fixture
from test_trace_killed import NRANKS, WARMUP, progress, run_and_kill

from perfweave._format import STATES
from perfweave.readers.experiment import open_experiment, rank_ranges
from perfweave.readers.table_description import table_descriptions
from perfweave.readers.tables import read_tables

N, P, C = 50, 40, 30  # killed_at.c: ring exchanges, sched_yield calls, the child's
SITES = 64  # killed_at.c: distinct MPI_Comm_rank call sites, rank + 1 calls from each


def count(prof, mine, name):
    """Calls of function name in the profile's sites selected by mine."""
    return int(prof.sites["count"][mine & (prof.sites["fn"] == prof.functions.index(name))].sum())


def check_ring(prof, rank, done, allreduce=True):
    """ring_forever.c's rank: every iteration it reported done and at most the one in
    flight, each one MPI_Sendrecv of 8 bytes (histogram bucket 4: 8-15 bytes); an
    MPI_Allreduce every 8 iterations."""
    mine = prof.sites["rank"] == rank
    sendrecv = count(prof, mine, "MPI_Sendrecv")
    assert done <= sendrecv <= done + 1, (rank, done, sendrecv)
    fn = prof.functions.index("MPI_Sendrecv")
    s = prof.sites[mine & (prof.sites["fn"] == fn)]
    assert int(s["bytes_sent"].sum()) == int(s["bytes_recv"].sum()) == 8 * sendrecv
    h = prof.hist[(prof.hist["rank"] == rank) & (prof.hist["fn"] == fn)]
    assert h["bucket"].tolist() == [4] and int(h["count"][0]) == sendrecv
    if allreduce:
        assert done // 8 <= count(prof, mine, "MPI_Allreduce") <= (done + 1) // 8


def test_ranks_killed_after_known_calls_keep_their_counts(mpi, build, run_pw):
    """Every rank makes known calls, rank 0 forks a child that makes its own, then all
    die of SIGKILL: each rank's counts are exact (per call site, bytes, histogram), the
    child's are its own (none in rank 0's, which it inherited as shared memory), and the
    exit status is the launcher's as without perfweave."""
    prog = build(mpi, "killed_at.c")
    cmd = mpi.launch(NRANKS) + [prog, "kill", N, P, C]
    ref = bare(cmd)
    r = run_pw(cmd, ["--example", "--no-sample"], check=False)
    assert r.proc.returncode == ref.returncode != 0, (r.proc.stderr, ref.stderr)
    assert "has no data" not in r.proc.stderr and "written to" in r.proc.stderr, r.proc.stderr
    child = int(r.proc.stdout.split("child ")[1].split()[0])
    exp = open_experiment(r.exp)
    prof = exp.profile
    assert prof.partial and sorted(prof.ranks["rank"].tolist()) == list(range(NRANKS))
    states = {STATES[s] for s in prof.ranks["state"]}
    # a launcher may stop a rank (SIGTERM: it saves) once another died
    assert "killed" in states and states <= {"killed", "signal"}, states
    yields = np.isin(prof.sites["fn"], prof.function_ids("example"))
    for rank in range(NRANKS):
        mine = prof.sites["rank"] == rank
        assert count(prof, mine, "MPI_Init") == 1
        assert int(prof.sites["count"][mine & yields].sum()) == P, rank
        check_ring(prof, rank, N, allreduce=False)
        ranks = prof.sites[mine & (prof.sites["fn"] == prof.functions.index("MPI_Comm_rank"))]
        # the SITES call sites, rank + 1 calls each, and MPI_Comm_rank's first call
        assert sorted(ranks["count"].tolist()) == [1] + [rank + 1] * SITES, rank
        assert len(set(ranks["offset"].tolist())) == SITES + 1 and (ranks["object"] >= 0).all()
        assert count(prof, mine, "MPI_Barrier") <= 1
    # the child: a process of its own, its C calls only, killed too
    (proc,) = exp.processes.ranks
    assert proc["pid"] == child and STATES[proc["state"]] == "killed"
    own = exp.processes.sites
    names = {exp.processes.functions[f] for f in own["fn"]}
    assert names == {"sched_yield"} and int(own["count"].sum()) == C
    # the report says which ranks' data is partial, and how
    rep = subprocess.run(
        [PERFWEAVE, "report", "--json", str(r.exp)], capture_output=True, text=True, timeout=120
    )
    assert rep.returncode == 0 and not rep.stderr, rep.stderr
    js = json.loads(rep.stdout)
    assert js["state"] == "partial"
    per_rank = {p["rank"]: p["state"] for p in js["mpi_profile"]["per_rank"]}
    assert per_rank == {int(r): STATES[s] for r, s in zip(prof.ranks["rank"], prof.ranks["state"])}
    killed = sorted(r for r, s in per_rank.items() if s == "killed")
    said = f"rank{'' if len(killed) == 1 else 's'} {rank_ranges(killed)} ended without saving"
    assert any(n.startswith(said) for n in js["notes"]), js["notes"]


def test_a_killed_child_of_ranks_that_end_well(mpi, build, run_pw):
    """Rank 0's forked child dies of SIGKILL, the ranks end with MPI_Finalize: the profile
    is complete (every rank's exact calls, none of the child's), and the child is a
    process of its own read from its tables (killed, its C calls), as a child that ends
    well is from its procs/ file."""
    prog = build(mpi, "killed_at.c")
    r = run_pw(mpi.launch(NRANKS) + [prog, "child-kill", N, P, C], ["--example", "--no-sample"])
    child = int(r.proc.stdout.split("child ")[1].split()[0])
    h = os.uname().nodename
    exp = open_experiment(r.exp)
    prof = exp.profile
    assert not prof.partial and (prof.ranks["state"] == 0).all()
    yields = np.isin(prof.sites["fn"], prof.function_ids("example"))
    for rank in range(NRANKS):
        assert int(prof.sites["count"][(prof.sites["rank"] == rank) & yields].sum()) == P
    (proc,) = exp.processes.ranks
    assert proc["pid"] == child and STATES[proc["state"]] == "killed"
    assert int(exp.processes.sites["count"].sum()) == C
    # the child's tables file is all that is left of the tables: the ranks removed theirs
    assert sorted(p.name for p in (r.exp / "tables").iterdir()) == [
        f"{h}.{child}.json",
        f"{h}.{child}.pwtab",
    ]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT-twice"])
def test_ranks_killed_mid_run_keep_counts_up_to_their_last_report(mpi, build, tmp_path, how):
    """SIGKILL to each rank while the ring runs (the default mode: sampling on), or Ctrl-C
    twice (MPICH's launcher then kills the ranks still saving, Open MPI's gives up on
    them): every rank's data, marked killed (or signal, saved by its handler), holds every
    iteration it reported done and at most the one in flight."""
    prog = build(mpi, "ring_forever.c")
    exp = tmp_path / "exp"
    base = tmp_path / "ring"
    cmd = [PERFWEAVE, "run", "-o", str(exp), "--", *mpi.launch(NRANKS), str(prog), str(base)]
    status, done = run_and_kill(cmd, base, how)
    assert min(done) >= WARMUP
    # the ranks may outlive their launcher for a moment (Open MPI's, once it gave up)
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for _, pid in progress(base)):
        assert time.monotonic() < deadline, "the ranks outlived their launcher by a minute"
        time.sleep(0.05)
    done = [d for d, _ in progress(base)]
    prof = open_experiment(exp).profile
    assert prof.partial and sorted(prof.ranks["rank"].tolist()) == list(range(NRANKS))
    states = {STATES[s] for s in prof.ranks["state"]}
    assert states == {"killed"} if how == "SIGKILL" else states <= {"killed", "signal"}
    for rank in range(NRANKS):
        check_ring(prof, rank, done[rank])
    # time up to the last recorded call: the rank's app time covers its MPI time
    assert (prof.ranks["app_ns"] >= prof.ranks["mpi_ns"]).all()
    assert (prof.ranks["mpi_ns"] > 0).all()


def test_a_run_read_while_it_goes_on(mpi, build, tmp_path):
    """perfweave.open of a running experiment reads its ranks' tables as they are, says so,
    and each rank has done at least what it had reported before the read."""
    prog = build(mpi, "ring_forever.c")
    exp, base = tmp_path / "exp", tmp_path / "ring"
    cmd = [PERFWEAVE, "run", "-o", str(exp), "--", *mpi.launch(NRANKS), str(prog), str(base)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while min(d for d, _ in progress(base)) < WARMUP:
            assert proc.poll() is None and time.monotonic() < deadline, progress(base)
            time.sleep(0.05)
        done = [d for d, _ in progress(base)]
        prof = open_experiment(exp).profile
    finally:  # the ranks (in process groups of their own under Open MPI), the launcher
        for _, pid in progress(base):
            if pid > 0:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert prof.partial and sorted(prof.ranks["rank"].tolist()) == list(range(NRANKS))
    assert any("the run has not finished" in n for n in prof.notes), prof.notes
    for rank in range(NRANKS):
        mine = prof.sites["rank"] == rank
        assert count(prof, mine, "MPI_Sendrecv") >= done[rank]


def test_launcher_stopped_by_timeout_keeps_every_ranks_data(mpi, build, tmp_path):
    """`timeout -s TERM T perfweave run -- mpirun ...` (issue 37, 10b): timeout signals its
    process group, perfweave run passes the signal on, so the launcher gets it twice; Open
    MPI's mpirun then gives up on its ranks at once and exits, and its ranks end with
    _exit when they lose it: no handler runs, nothing is saved. Every rank's data is
    there all the same (its tables), under both MPIs, and the report reads it."""
    prog = build(mpi, "ring_forever.c")
    exp = tmp_path / "exp"
    base = tmp_path / "ring"
    cmd = [PERFWEAVE, "run", "-o", str(exp), "--", *mpi.launch(4), str(prog), str(base)]
    res = subprocess.run(
        ["timeout", "-s", "TERM", "6", *cmd], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 124, res.stderr
    # iterations each rank reported done, and its pid (ring_forever.c: at the start of its
    # file), once it is gone: Open MPI's ranks outlive their mpirun for a moment
    done = [struct.unpack("<qq", (tmp_path / f"ring.{r}").read_bytes()[:16]) for r in range(4)]
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for _, pid in done):
        assert time.monotonic() < deadline, "the ranks outlived their launcher by a minute"
        time.sleep(0.05)
    done = [struct.unpack("<q", (tmp_path / f"ring.{r}").read_bytes()[:8])[0] for r in range(4)]
    assert min(done) > 0, done  # the ring ran before the signal
    assert "has no data" not in res.stderr and "written to" in res.stderr, res.stderr
    prof = open_experiment(exp).profile
    assert prof.partial and sorted(prof.ranks["rank"].tolist()) == [0, 1, 2, 3]
    assert {STATES[s] for s in prof.ranks["state"]} <= {"killed", "signal"}
    for rank in range(4):
        check_ring(prof, rank, done[rank])
    rep = subprocess.run(
        [PERFWEAVE, "report", str(exp)], capture_output=True, text=True, timeout=120
    )
    assert rep.returncode == 0 and "state      partial" in rep.stdout, rep.stderr


def test_tables_on_a_full_disk_never_kill_the_program(mpi, build, tmpfs):  # noqa: F811
    """The experiment on a tmpfs of 48 pages: room for experiment.json and each rank's
    tables head and description (6 pages), and a few of their slot pages (each rank's 66
    call sites want some 60 pages): the program
    runs to its end as without perfweave (a slot page without disk space is private
    memory, never a SIGBUS); at a normal end the profile has every count, exact; killed,
    the tables hold the sites that found room, each with its exact count, and the report
    says the others are missing."""
    prog = build(mpi, "killed_at.c")
    quiet = ["--no-sample", "--node-interval", "0"]
    for mode in ("end", "kill"):
        disk = tmpfs(192, mode)
        exp = disk / "exp"
        cmd = mpi.launch(NRANKS) + [str(prog), mode, str(N), "0", "-1"]
        ref = bare(cmd)
        res = subprocess.run(
            [PERFWEAVE, "run", "-o", str(exp), *quiet, "--", *cmd],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == ref.returncode, (res.stderr, ref.stderr)
        assert "Traceback" not in res.stderr and "Bus error" not in res.stderr, res.stderr
        prof = open_experiment(exp).profile
        fn = prof.functions.index("MPI_Comm_rank")
        if mode == "end":
            assert not prof.partial and not (exp / "tables").exists()
            for rank in range(NRANKS):
                mine = prof.sites["rank"] == rank
                ranks = prof.sites[mine & (prof.sites["fn"] == fn)]
                assert sorted(ranks["count"].tolist()) == [1] + [rank + 1] * SITES, rank
                check_ring(prof, rank, N, allreduce=False)
            continue
        tables = {}
        for p in table_descriptions(exp):
            pf = read_tables(p)
            tables[int(pf.arrays["ranks"]["rank"][0])] = pf
        assert sorted(tables) == list(range(NRANKS))
        assert any(pf.notes for pf in tables.values()), "every page found room: a bigger disk"
        notes = open_experiment(exp).profile.notes
        assert any("found no disk space" in n for n in notes), notes
        for rank in range(NRANKS):
            mine = prof.sites["rank"] == rank
            ranks = prof.sites[mine & (prof.sites["fn"] == fn)]
            assert set(ranks["count"].tolist()) <= {1, rank + 1}, rank
            assert len(ranks) < SITES + 1 or not tables[rank].notes
            sendrecv = count(prof, mine, "MPI_Sendrecv")
            assert sendrecv in (0, N), (rank, sendrecv)
            h = prof.hist[prof.hist["rank"] == rank]
            assert set(h["bucket"].tolist()) <= {4} and set(h["count"].tolist()) <= {N}

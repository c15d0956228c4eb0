"""Live snapshots of a running job (issue 35 point 4, docs/snapshots.md): perfweave
snapshot makes every rank write its profile so far into snapshots/N/ and run on; the
readers read the newest (or a chosen one) as a marked partial experiment. Ground truth:
the program's own counts, written by each rank just before it pauses outside MPI
(snapshot_waits.c), so the snapshot's counts are exact."""

import json
import re
import subprocess
import time

import perfweave
from perfweave._format import STATES
from harness import PERFWEAVE, site_lines

NRANKS, N = 3, 40  # snapshot_waits.c: phase p makes p * N iterations
FUNCTIONS = ("MPI_Irecv", "MPI_Send", "MPI_Wait", "MPI_Allreduce")


def wait_for(paths, proc, timeout=120):
    """The files' contents once every one exists (the job still running)."""
    end = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"timed out waiting for {paths}"
        time.sleep(0.05)
    return [p.read_text() for p in paths]


def rank_counts(exp):
    """{rank: (calls of each of FUNCTIONS)} from the experiment's profile."""
    prof = exp.profile
    out = {}
    for rank in range(NRANKS):
        mine = prof.sites["rank"] == rank
        out[rank] = tuple(
            int(prof.sites["count"][mine & (prof.sites["fn"] == prof.functions.index(f))].sum())
            for f in FUNCTIONS
        )
    return out


def pw(*args):
    """perfweave ARGS' output; it must succeed."""
    res = subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def snapshot(exp):
    return json.loads(pw("snapshot", "--json", "--wait", "60", exp))


def test_snapshots_count_exactly_what_each_rank_did(mpi, build, tmp_path):
    """Two snapshots of a job paused twice outside MPI: each one's counts per rank are the
    program's own at that pause, exactly; the report marks the newest as a snapshot of a
    running job with every rank answered; the job's output and exit status are the
    program's, and its final experiment is complete with every call."""
    prog = build(mpi, "snapshot_waits.c")
    sync = tmp_path / "sync"
    sync.mkdir()
    exp = tmp_path / "exp"
    cmd = [PERFWEAVE, "run", "-o", str(exp), "--snapshot-poll", "100", "--"]
    cmd += mpi.launch(NRANKS) + [str(prog), str(sync), str(N), "2"]
    # stdin a pipe kept open until the end (harness.run_with_stdin_open: MPICH's mpiexec)
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        expected = {}
        for phase in (1, 2):
            texts = wait_for([sync / f"counts-{r}-{phase}" for r in range(NRANKS)], proc)
            expected[phase] = {r: tuple(map(int, t.split())) for r, t in enumerate(texts)}
            answer = snapshot(exp)
            assert (answer["snapshot"], answer["answered"], answer["world_size"]) == (
                phase,
                NRANKS,
                NRANKS,
            ), answer
            assert proc.poll() is None  # the job runs on
            live = perfweave.open(exp)  # the newest snapshot while the run goes on
            assert live.snapshot["number"] == phase and live.snapshot["count"] == phase
            assert live.snapshot["answered"] == live.snapshot["world_size"] == NRANKS
            assert rank_counts(live) == expected[phase]
            assert set(live.profile.ranks["state"].tolist()) == {STATES.index("running")}
            (sync / f"go-{phase}").write_text("")
        # the first snapshot is kept, and chosen by number
        assert rank_counts(perfweave.open(exp, snapshot=1)) == expected[1]
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    calls = sum(expected[2][0])
    assert sorted(out.split("\n")[:-1]) == [f"rank {r} done {calls}" for r in range(NRANKS)]
    # phase 1: N iterations, phase 2: 2 N more
    assert all(expected[1][r] == (N,) * 4 and expected[2][r] == (3 * N,) * 4 for r in range(NRANKS))
    final = perfweave.open(exp)
    assert final.snapshot is None and not final.profile.partial
    assert rank_counts(final) == expected[2]
    # the run section's keys are the report's own
    run = json.loads(pw("report", "--json", "--snapshot", "2", exp))
    assert run["state"] == "snapshot" and run["snapshot"]["number"] == 2
    assert run["notes"][0].startswith("snapshot 2 of 2 of a running job, taken at ")
    assert f"{NRANKS} of {NRANKS} ranks answered" in run["notes"][0]


def test_hung_rank_reported_while_the_job_runs_on(mpi, build, tmp_path):
    """--hang 2: rank 1 stuck in MPI_Recv from rank 0 (which computes until the test lets
    it go) is reported while the job runs: the stderr line, hangs/ in the experiment, and
    the report's Hung ranks section naming MPI_Recv at its line, peer rank 0 on
    MPI_COMM_WORLD, rank 0 computing and rank 2 in MPI_Barrier; then the job ends with the
    program's own output and exit status."""
    prog = build(mpi, "hang_recv.c")
    sync = tmp_path / "sync"
    sync.mkdir()
    exp = tmp_path / "exp"
    cmd = [PERFWEAVE, "run", "-o", str(exp), "--hang", "2", "--"]
    cmd += mpi.launch(NRANKS) + [str(prog), str(sync)]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        hangs = exp / "hangs"
        end = time.monotonic() + 120
        # rank 1's report and every rank's answer, while the job still runs
        while not (
            list(hangs.glob("rank-1-*.json"))
            and all((hangs / "state" / f"rank-{r}.json").exists() for r in range(NRANKS))
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "no hang report"
            time.sleep(0.05)
        assert time.monotonic() - started >= 2  # not before 2 s in the call
        assert proc.poll() is None
        time.sleep(0.5)  # the answers to a later ask (rank 2's own hang), if any
        (sync / "go").write_text("")
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, err
    assert sorted(out.split("\n")[:-1]) == [f"rank {r} done" for r in range(NRANKS)]
    assert re.search(r"perfweave: hang: rank 1 has been in MPI_Recv for \d+ s", err), err
    reported = json.loads(pw("report", "--json", exp))["hangs"]["hangs"]
    rank1 = [h for h in reported if h["rank"] == 1]
    assert len(rank1) == 1, reported
    h = rank1[0]
    assert h["function"] == "MPI_Recv" and h["hang_s"] == 2 and h["seconds"] >= 2
    assert (h["peer_role"], h["peer"]) == ("peer", 0)
    assert h["comm"] == {"world": True, "size": NRANKS, "ranks": list(range(NRANKS))}
    assert h["site"]["function"] == "main" and h["site"]["file"].endswith("hang_recv.c")
    assert h["site"]["line"] == site_lines("hang_recv.c")["recv"]
    others = {o["rank"]: o for o in h["others"]}
    assert others[0]["what"] == "computing"
    assert others[2]["what"] == "MPI_Barrier" and others[2]["seconds"] >= 0
    # rank 2, in MPI_Barrier as long, is a hung rank too
    assert [x["function"] for x in reported if x["rank"] == 2] == ["MPI_Barrier"]
    text = pw("report", exp)
    assert "Hung ranks (--hang)" in text and "rank 0: computing" in text

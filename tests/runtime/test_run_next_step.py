"""perfweave run's last line names the next step from what the run holds: a traced run
gives its ranks and events and asks for perfweave analyze (perfweave-wait counts them,
runtime/launch/wait.c); `perfweave --quiet run` says nothing when all went well, and the
program's output and status pass unchanged either way."""

from harness import PERFWEAVE, run_with_stdin_open

RANKS = 3
# barrier_late.c calls MPI_Init, MPI_Comm_rank, MPI_Comm_size, two MPI_Barrier and
# MPI_Finalize: six events a rank
EVENTS = 6 * RANKS


def test_traced_run_names_analyze(mpi, build, run_pw):
    prog = build(mpi, "barrier_late.c")
    r = run_pw(mpi.launch(RANKS) + [prog], ["--trace"])
    lines = [ln for ln in r.proc.stderr.splitlines() if ln.startswith("perfweave")]
    assert lines == [
        f"perfweave: experiment {r.exp}",
        f"perfweave: experiment written to {r.exp} (perfweave report {r.exp}); traced "
        f"{RANKS} ranks, {EVENTS} events \u2192 run `perfweave analyze {r.exp}`",
    ]
    assert sorted(ln.split()[1] for ln in r.proc.stdout.splitlines()) == ["0", "1", "2"]


def test_quiet_run_says_nothing(mpi, build, tmp_path):
    prog = build(mpi, "barrier_late.c")
    exp = tmp_path / "q"
    for quiet in (["--quiet", "run"], ["run", "--quiet"]):
        cmd = [PERFWEAVE, *quiet, "--trace", "-o", exp, "--", *mpi.launch(RANKS), prog]
        proc = run_with_stdin_open(list(map(str, cmd)), timeout=180)
        assert proc.returncode == 0, proc.stderr
        assert [ln for ln in proc.stderr.splitlines() if ln.startswith("perfweave")] == []
        assert len(proc.stdout.splitlines()) == RANKS
        assert (exp / "profile.pwprof").is_file() and len(
            list((exp / "traces").glob("*.events"))
        ) == RANKS
        exp = tmp_path / "q2"

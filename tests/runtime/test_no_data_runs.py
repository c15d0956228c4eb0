"""Runs whose ranks recorded nothing, or only some of them, are said so at once: perfweave
run's last line gives the count and the likely causes, experiment.json keeps them
(state, reason, ranks), the program's exit status is kept, and report, analyze, export
and the Python API repeat the recorded reason instead of guessing. What the report says
(its state and notes, its lines) is read from the report: that is the subject; what a run
recorded is read through the Python API (perfweave.open)."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import PERFWEAVE, PROGRAMS, bare

import perfweave
from perfweave.errors import PerfweaveError

KILLED = "killed before saving (SIGKILL, as launchers send when a rank fails)"


def our_lines(proc):
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("perfweave")]


def meta_of(run):
    return json.loads((run.exp / "experiment.json").read_text())


def tool(*args):
    return subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=120)


def assert_empty(run, reason, ranks, status):
    """perfweave run said `reason` in its last line and recorded it; every reader says it
    again."""
    exp = run.exp
    assert run.proc.returncode == status, run.proc.stderr
    assert our_lines(run.proc) == [
        f"perfweave: experiment {exp}",
        f"perfweave: experiment {exp} has no data: {reason}",
    ]
    assert "experiment written" not in run.proc.stderr
    meta = meta_of(run)
    assert (meta["state"], meta["reason"], meta["ranks"]) == ("empty", reason, ranks)
    assert meta["exit_status"] == {"code": status}
    rep = tool("report", exp)
    assert (rep.returncode, rep.stdout) == (2, "")
    assert rep.stderr == f"perfweave: error: {exp}: no profile data: {reason}\n"
    with pytest.raises(PerfweaveError) as err:
        perfweave.open(exp)
    assert str(err.value) == f"{exp}: no profile data: {reason}"


def test_failed_launch(mpi, run_pw, tmp_path):
    """The launcher cannot start the program: nothing ran, and its exit code is kept."""
    cmd = mpi.launch(2) + [tmp_path / "no-such-program"]
    ref = bare(cmd)
    assert ref.returncode != 0
    r = run_pw(cmd, options=("--trace",), check=False)
    launcher = os.path.basename(mpi.run)
    reason = (
        "0 of 2 ranks recorded data and no process loaded perfweave's runtime: the "
        f"launch failed before the program started ({launcher} exited with code "
        f"{ref.returncode})"
    )
    assert_empty(r, reason, {"recorded": 0, "expected": 2, "missing": "0-1"}, ref.returncode)
    assert sorted(p.name for p in r.exp.iterdir()) == ["experiment.json"]
    # with --trace, the tools that read traces say why there are none
    for args in (("analyze",), ("export", "--format", "chrome")):
        res = tool(*args, r.exp)
        assert (res.returncode, res.stdout) == (2, "")
        assert res.stderr == f"perfweave: error: {r.exp}: no traces: {reason}\n"


def without_preload(mpi):
    """Launcher options that set PERFWEAVE_EXPERIMENT empty in every task, so that the
    runtime stays out of them as when a launcher or batch policy does not pass the
    environment: Open MPI's -x, Hydra's -genv (the last of a name wins). Not LD_PRELOAD:
    a user's LD_PRELOAD on the launch line is kept behind perfweave's library
    (test_launch_options.py)."""
    if mpi.name == "openmpi":
        return [mpi.launch(2)[0], "-x", "PERFWEAVE_EXPERIMENT="] + mpi.launch(2)[1:]
    return [mpi.launch(2)[0], "-genv", "PERFWEAVE_EXPERIMENT", ""] + mpi.launch(2)[1:]


def test_environment_not_passed(mpi, build, run_pw):
    """The preload does not reach the tasks: the program runs as without perfweave."""
    prog = build(mpi, "counts.c")
    ref = bare(mpi.launch(2) + [prog])
    assert ref.returncode == 0, ref.stderr
    r = run_pw(without_preload(mpi) + [prog], check=False)
    assert (
        sorted(r.proc.stdout.splitlines())
        == sorted(ref.stdout.splitlines())
        == ["counts rank 0 done", "counts rank 1 done"]
    )
    reason = (
        "0 of 2 ranks recorded data and no process loaded perfweave's runtime: its "
        "environment (LD_PRELOAD, PERFWEAVE_EXPERIMENT) did not reach the tasks (a "
        "launcher's or batch system's policy such as srun --export=NONE)"
    )
    assert_empty(r, reason, {"recorded": 0, "expected": 2, "missing": "0-1"}, 0)

    # the preload reaches the tasks but a wrapper takes it out before the MPI program
    r = run_pw(mpi.launch(2) + ["env", "-u", "LD_PRELOAD", prog], check=False)
    reason = (
        "0 of 2 ranks recorded data though 2 processes loaded perfweave's runtime: "
        "the runtime was taken out before the MPI program started (a wrapper or "
        "launcher option resetting LD_PRELOAD), or the program is statically linked"
    )
    assert_empty(r, reason, {"recorded": 0, "expected": 2, "missing": "0-1"}, 0)


def test_a_wrappers_io_is_not_the_programs_data(mpi, build, run_pw, tmp_path):
    """With the I/O profile, every process that loads the runtime makes a store: a shell
    wrapper that appends to a log before it execs the MPI program without the runtime
    leaves a store that counted its calls, but it has no rank, so it is not the program's
    data: the run has no data (not "partial: the io module kept ..."), and every reader
    says it again. The wrappers' stores are there all the same, with their I/O."""
    prog = build(mpi, "counts.c")
    log = tmp_path / "wrapper.log"
    wrapper = f'for i in 1 2 3 4 5; do echo x >> {log}; done; exec env -u LD_PRELOAD "$0"'
    ref = bare(mpi.launch(2) + ["sh", "-c", wrapper, prog])
    assert ref.returncode == 0, ref.stderr
    log.unlink()
    r = run_pw(mpi.launch(2) + ["sh", "-c", wrapper, prog], options=("--io",), check=False)
    assert (
        sorted(r.proc.stdout.splitlines())
        == sorted(ref.stdout.splitlines())
        == ["counts rank 0 done", "counts rank 1 done"]
    )
    meta = meta_of(r)
    assert (meta["state"], meta["kept"]) == ("empty", [])
    reason = meta["reason"]
    assert re.fullmatch(
        r"0 of 2 ranks recorded data though \d+ processes loaded perfweave's runtime: the "
        r"runtime was taken out before the MPI program started \(a wrapper or launcher "
        r"option resetting LD_PRELOAD\), or the program is statically linked",
        reason,
    ), reason
    assert_empty(r, reason, {"recorded": 0, "expected": 2, "missing": "0-1"}, 0)
    # the wrappers' stores: each opened the log 5 times, rankless (the log: 2 x 5 lines)
    from perfweave.readers.io import read_io

    assert log.read_text() == "x\n" * 10
    io = read_io(r.exp)
    mine = io.records[io.records["file"] == io.files.index(str(log))]
    assert mine["opens"].sum() == 10
    assert set(mine["rank"].tolist()) == set(io.processes["rank"].tolist()) == {-1}


def test_static_program(mpi, build, run_pw):
    """LD_PRELOAD cannot enter a statically linked program: said as the cause, with the
    program's exit code."""
    prog = build(None, "serial.c", ("-static",))
    r = run_pw([prog, "3"], check=False)
    assert r.proc.stdout == "serial says hello\n"
    reason = (
        f"no process recorded data: {prog} is statically linked, so perfweave's "
        f"runtime (loaded through LD_PRELOAD) cannot enter it ({prog.name} exited "
        "with code 3)"
    )
    assert_empty(r, reason, {"recorded": 0}, 3)
    r = run_pw(mpi.launch(2) + [prog, "0"], check=False)
    reason = (
        f"0 of 2 ranks recorded data: {prog} is statically linked, so perfweave's "
        "runtime (loaded through LD_PRELOAD) cannot enter it"
    )
    assert_empty(r, reason, {"recorded": 0, "expected": 2, "missing": "0-1"}, 0)


def test_program_without_mpi_is_data(mpi, build, run_pw):
    """A program without MPI records its processes: that is its data, written as
    always."""
    prog = build(None, "serial.c")
    for cmd, processes in (([prog, "0"], 1), (mpi.launch(2) + [prog, "0"], 2)):
        r = run_pw(cmd)
        assert our_lines(r.proc)[-1] == (
            f"perfweave: experiment written to {r.exp} (perfweave report {r.exp})"
        )
        meta = meta_of(r)
        assert meta["state"] == "finished" and "reason" not in meta and "ranks" not in meta
        assert len(r.open().profile.ranks) == processes  # a row per process
    # a program linked with MPI run in a mode that never calls MPI_Init (heap_sites.c
    # without its "mpi" argument): its processes' profiles are its data too, with what
    # its modules counted (the heap record's three sites, its own counts)
    prog = build(mpi, "heap_sites.c")
    for cmd, processes in (([prog], 1), (mpi.launch(2) + [prog], 2)):
        r = run_pw(cmd, ["--heap"])
        meta = meta_of(r)
        assert meta["state"] == "finished" and "reason" not in meta, meta
        exp = r.open()
        assert len(exp.profile.ranks) == processes
        counts = exp.table("heap", "sites").groupby("function")["count"].sum()
        assert [counts.get(f"alloc_{s}") for s in "abc"] == [n * processes for n in (100, 10000, 7)]


def test_rank_without_preload(mpi, build, tmp_path):
    """Rank 1 of 2 runs without the preload. Rank 0 then waits in perfweave's start-up
    (MPI_Comm_dup of MPI_COMM_WORLD, right after MPI_Init) for a peer that never comes:
    perfweave run says so while the run goes on, once rank 0 has waited
    PERFWEAVE_STARTUP_WAIT seconds (1 here). The run is ended from outside, like a
    user's kill, with SIGTERM to rank 0, which saves its data; the launcher then ends
    rank 1. One of two ranks saved its data, said in one line with the cause."""
    from perfweave.readers.recorded import ACT_STARTING, activity_ranks

    prog = build(mpi, "initialised.c")
    exp = tmp_path / "exp"
    cmd = [
        PERFWEAVE,
        "run",
        "-o",
        str(exp),
        "--",
        *mpi.launch(2),
        str(PROGRAMS / "drop_preload.sh"),
        "1",
        str(prog),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, PERFWEAVE_STARTUP_WAIT="1"),
    )
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            m = re.fullmatch(r"rank 1 initialised \(pid (\d+)\)\n", line)
            if m:
                break
        assert m, seen
        # rank 0's MPI_Init returned with rank 1's: it comes to perfweave's start-up
        deadline = time.monotonic() + 60
        while ACT_STARTING not in activity_ranks(exp).values():
            assert time.monotonic() < deadline, activity_ranks(exp)
            time.sleep(0.1)
        # perfweave run looks every 0.25 s and tells after 1 s
        time.sleep(3)
        # the processes that loaded the runtime: rank 0, and rank 1's wrapper (same pid)
        (pids,) = [set(map(int, p.read_text().split())) for p in (exp / "timeline").glob("*.pids")]
        (rank0,) = pids - {int(m.group(1))}
        os.kill(rank0, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert [p.name for p in (exp / "partial").iterdir()] == ["rank-0.pwprof"], (seen, err)
    meta = json.loads((exp / "experiment.json").read_text())
    status = meta["exit_status"]
    assert proc.returncode == (-status["signal"] if "signal" in status else status["code"])
    launcher = os.path.basename(mpi.run)
    ended = (
        f"; {launcher} was killed by signal {status['signal']}"
        if "signal" in status
        else f"; {launcher} exited with code {status['code']}"
        if status["code"]
        else ""
    )
    reason = (
        "only 1 of 2 ranks recorded data (none from rank 1): perfweave's runtime "
        "did not reach its task, for which 1 rank waited in perfweave's start-up "
        f"(statically linked, or LD_PRELOAD reset by a wrapper){ended}"
    )
    assert [ln for ln in err.splitlines() if ln.startswith("perfweave")] == [
        f"perfweave: experiment {exp}",
        "perfweave: 1 rank has waited 1 s in perfweave's start-up for ranks without its "
        "runtime (statically linked, or LD_PRELOAD reset by a wrapper); the run cannot go "
        "on: stop it, and launch every rank under perfweave (docs/launching.md)",
        f"perfweave: experiment {exp} is partial: {reason} (perfweave report {exp})",
    ]
    assert (meta["state"], meta["reason"], meta["ranks"]) == (
        "partial",
        reason,
        {"expected": 2, "recorded": 1, "missing": "1"},
    )
    rep = tool("report", "--json", exp)
    assert rep.returncode == 0, rep.stderr
    rep = json.loads(rep.stdout)
    assert rep["state"] == "partial" and rep["mpi_profile"]["ranks"] == 1
    assert reason in rep["notes"]
    assert not any(n.startswith("no data from") for n in rep["notes"])
    assert (
        "note       only 1 of 2 ranks recorded data (none from rank 1)"
        in tool("report", exp).stdout
    )


def test_mpmd_launch_with_a_static_program_is_refused(mpi, build, tmp_path):
    """A launch of several programs (mpirun's ':', srun's --multi-prog) of which one is
    statically linked would hang: the ranks of the others wait for its ranks in
    perfweave's start-up. perfweave run refuses it in one line before launching; a
    launch whose programs are all static, or all dynamic, goes on."""
    from perfweave.launch.command import check_mpmd, mpmd_programs

    static = str(build(None, "serial.c", ("-static",)))
    dynamic = str(build(mpi, "initialised.c"))
    cmd = mpi.launch(1) + [dynamic, ":", "-n", "1", static, "0"]
    assert mpmd_programs(cmd) == [dynamic, static]
    conf = tmp_path / "multi.conf"
    conf.write_text(f"# ranks program\n0 {dynamic}\n1-3 {static} 0\n")
    srun = ["srun", "-n", "4", "--multi-prog", str(conf)]
    assert mpmd_programs(srun) == [dynamic, static]
    message = (
        f"perfweave: error: {static} is statically linked: its ranks cannot load "
        "perfweave's runtime (LD_PRELOAD), and the ranks of the other programs "
        "would wait for them at start-up; link it dynamically, or measure the "
        "programs in separate jobs\n"
    )
    for command in (cmd, srun):
        exp = tmp_path / f"exp-{len(command)}"
        res = subprocess.run(
            [PERFWEAVE, "run", "-o", str(exp), "--", *map(str, command)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (res.returncode, res.stdout, res.stderr) == (2, "", message)
        assert not exp.exists()
    # every program static, or every one dynamic: nothing to refuse
    check_mpmd(mpi.launch(1) + [static, ":", "-n", "1", static])
    check_mpmd(mpi.launch(1) + [dynamic, ":", "-n", "1", dynamic])
    assert mpmd_programs(mpi.launch(2) + [dynamic, "a", "b"]) == [dynamic]

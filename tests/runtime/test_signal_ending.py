"""Ctrl-C to the launcher (SIGINT to mpiexec or mpirun, which sends it on to every rank)
while the ranks compute: every rank saves its data, marked partial (state signal), and
the launcher reports what it reports without perfweave.

Without perfweave each rank dies of the signal when it is sent. With perfweave each first
saves, for a time of its own: MPICH's proxy killed the ranks still saving with SIGKILL as
soon as the first died and reported 2 | 9 = 11 ("Segmentation fault", though no rank
faulted), and the killed ranks kept only their call-site tables (no partial/ profile).
Without runtime/core/ending.c, 2 of 30 MPICH runs failed a check below on a quiet machine
and 11 of 30 beside two busy loops; with it (the ranks of a node end together, at a moment
they agree once the last has saved) 0 of 30 each, and 0 of 30 under Open MPI. MPICH's runs
take half a second: RUNS["mpich"] of them miss a 2-in-30 failure rate with a probability
of (28/30)^20 = 25 %, an 11-in-30 one with (19/30)^20 = 0.01 %; Open MPI's mpirun, which
never killed a rank still saving, takes 2.5 s a run. Hydra's own report stays a race: it
says 0 when the ranks ended before it collected any status (5 of 30 runs without
perfweave)."""

import json
import os
import re
import select
import signal
import struct
import subprocess
import time
from pathlib import Path

from harness import PERFWEAVE
from perfweave.readers.profile import read_profile

RANKS = 3
RUNS = {"mpich": 20, "openmpi": 3}
STATE_SIGNAL = 3  # docs/format.md, ranks.state


def rounds_done(base):
    """Each rank's rounds of computation, from the files compute_forever writes"""
    out = []
    for r in range(RANKS):
        try:
            out.append(struct.unpack("<q", (base.parent / f"{base.name}.{r}").read_bytes()[:8])[0])
        except (OSError, struct.error):
            out.append(-1)
    return out


def launcher_of(proc):
    """The launcher's pid: proc's, or under perfweave run its child's"""
    if os.path.basename(proc.args[0]) != "perfweave":
        return proc.pid
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == proc.pid:
            return int(entry)
    raise AssertionError(f"perfweave run {proc.pid} has no child")


def ctrl_c_to_launcher(cmd, base):
    """Run cmd, SIGINT to its launcher once every rank computes; its exit status"""
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while min(rounds_done(base)) < 20:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, rounds_done(base)
            time.sleep(0.02)
        os.kill(launcher_of(proc), signal.SIGINT)
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ctrl_c_to_the_launcher_while_ranks_compute(mpi, build, tmp_path):
    prog = build(mpi, "compute_forever.c")
    # a Ctrl-C the launcher passes on: MPICH 2 (SIGINT's number), or 0 when Hydra
    # collected no status before its cleanup; Open MPI 1
    expected = {"mpich": {2, 0}, "openmpi": {1}}[mpi.name]
    bare = ctrl_c_to_launcher(mpi.launch(RANKS) + [prog, tmp_path / "bare"], tmp_path / "bare")
    assert bare in expected
    for run in range(RUNS[mpi.name]):
        exp, base = tmp_path / f"exp{run}", tmp_path / f"pw{run}"
        cmd = [PERFWEAVE, "run", "-o", exp, "--", *mpi.launch(RANKS), prog, base]
        status = ctrl_c_to_launcher(list(map(str, cmd)), base)
        launcher = json.loads((exp / "experiment.json").read_text())["exit_status"]
        assert launcher == {"code": status}
        assert status in expected, (run, status)
        # every rank saved its data: none was killed while saving
        files = [exp / "partial" / f"rank-{r}.pwprof" for r in range(RANKS)]
        assert all(f.exists() for f in files), (run, status, sorted(os.listdir(exp)))
        states = [int(read_profile(f).arrays["ranks"]["state"][0]) for f in files]
        assert states == [STATE_SIGNAL] * RANKS, (run, states)
        assert not (exp / "ending").exists()  # the runtime's, removed by perfweave run


def ending_wait_ns(name):
    """A wait of runtime/core/ending.c (PW_ENDING_<NAME>_NS), read from the source."""
    src = (Path(__file__).resolve().parents[2] / "runtime" / "core" / "ending.c").read_text()
    return int(re.search(rf"#define PW_ENDING_{name}_NS (\d+)LL", src).group(1))


def test_a_rank_signalled_alone_ends_once_saved(mpi, build, tmp_path):
    """A rank alone on its node has nobody to end with: it dies of the signal as soon as
    it has saved, as it would without the waiting above. Every other way out of
    ending.c waits first: PW_ENDING_DELAY_NS (100 ms) to a moment agreed with ranks that
    saved too, begun after its save, or to PW_ENDING_GRACE_NS (200 ms) past its signal
    for ranks that run on and may get theirs. Measured to its death, as the test's own
    CLOCK_MONOTONIC sees it through a pidfd, from the moment its saved record was
    assembled (ranks.t_end, CLOCK_MONOTONIC; about 1 ms on a quiet machine) and from the
    signal's sending: each below the wait that no rank that waited can beat. (A fixed
    50 ms bound failed once at 51.5 ms in a full suite beside two busy loops: the rank's
    save, its wake-up and the test's, on two loaded cores.)"""
    prog = build(mpi, "compute_forever.c")
    exp, base = tmp_path / "exp", tmp_path / "pw"
    cmd = [PERFWEAVE, "run", "-o", exp, "--", *mpi.launch(1), prog, base]
    proc = subprocess.Popen(
        list(map(str, cmd)),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while rounds_done(base)[0] < 20:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pid = struct.unpack("<q", (base.parent / f"{base.name}.0").read_bytes()[8:16])[0]
        fd = os.pidfd_open(pid)
        try:
            sent = time.monotonic_ns()
            os.kill(pid, signal.SIGINT)
            select.select([fd], [], [], 30)
            died = time.monotonic_ns()
        finally:
            os.close(fd)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    ranks = read_profile(exp / "partial" / "rank-0.pwprof").arrays["ranks"]
    assert int(ranks["state"][0]) == STATE_SIGNAL
    after_save_ms = (died - int(ranks["t_end"][0])) / 1e6
    after_signal_ms = (died - sent) / 1e6
    assert 0 < after_save_ms < ending_wait_ns("DELAY") / 1e6, after_save_ms
    assert after_save_ms < after_signal_ms < ending_wait_ns("GRACE") / 1e6, after_signal_ms

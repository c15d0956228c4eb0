"""Traced runs ended by a signal (issue 13, point 10): a batch system's SIGTERM to the
launcher, a user's Ctrl-C (SIGINT to the whole process group) and SIGKILL to the ranks
themselves. Every rank's trace must hold at least the iterations the program itself
reported done (ring_forever.c writes its count after each one), readable and marked as
partial, and the caller must see the launcher's own exit status (the same run without
perfweave, killed the same way, is the reference)."""

import ctypes
import errno
import json
import os
import signal
import struct
import subprocess
import time

import numpy as np
import pytest

from harness import PERFWEAVE
from perfweave.readers import trace as rt
from perfweave.dtypes import EVENT_TYPES as T

NRANKS = 3
WARMUP = 300  # iterations every rank completes before the signal


def progress(base, tids=False):
    """(iterations done, pid) of each rank, from the files the program writes; with
    tids, (done, pid, thread id of its sleeping thread)."""
    out = []
    for r in range(NRANKS):
        try:
            done, pid, tid = struct.unpack(
                "<qqq", (base.parent / f"{base.name}.{r}").read_bytes()[:24]
            )
        except (OSError, struct.error):
            done, pid, tid = -1, 0, 0
        out.append((done, pid, tid) if tids else (done, pid))
    return out


def tgkill(pid, tid, sig):
    """Send sig to thread tid of process pid."""
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_tgkill = 234  # x86-64
    if libc.syscall(SYS_tgkill, pid, tid, sig) != 0 and ctypes.get_errno() != errno.ESRCH:
        raise OSError(ctypes.get_errno(), "tgkill")


def run_and_kill(cmd, base, how):
    """Start cmd in its own session, wait until every rank has done WARMUP iterations,
    signal it as `how` says; (exit status, iterations done per rank when it ended)."""
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while min(d for d, _ in progress(base)) < WARMUP:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, f"no progress: {progress(base)}"
        time.sleep(0.05)
    if how == "SIGTERM":  # a batch system's time limit: to the launcher
        os.kill(proc.pid, signal.SIGTERM)
    elif how == "SIGINT-thread":  # to each rank, handled on a thread other than main's
        for _, pid, tid in progress(base, tids=True):
            tgkill(pid, tid, signal.SIGINT)
    elif how == "SIGINT":  # Ctrl-C: to the terminal's whole process group
        os.killpg(proc.pid, signal.SIGINT)
    elif how == "SIGINT-twice":  # Ctrl-C again before the ranks are done: launchers kill
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
    else:  # the ranks themselves, without warning
        for _, pid in progress(base):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # the launcher killed it when a peer died
                pass
    try:
        status = proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return status, [d for d, _ in progress(base)]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL", "SIGINT-thread"])
def test_killed_traced_run_keeps_its_trace(mpi, build, tmp_path, how):
    """SIGINT-thread: each rank's SIGINT handled on a thread of its own that is not the
    main thread (MPICH's progress thread, in a real run), while the main thread goes on
    calling MPI: the main thread must not get further than what is saved (it waits at
    the end of its call until the signal ends the process)."""
    prog = build(mpi, "ring_forever.c")
    extra = ["thread"] if how == "SIGINT-thread" else []
    bare_status, _ = run_and_kill(
        mpi.launch(NRANKS) + [str(prog), str(tmp_path / "bare"), *extra], tmp_path / "bare", how
    )
    exp = tmp_path / "exp"
    status, done = run_and_kill(
        [
            PERFWEAVE,
            "run",
            "-o",
            str(exp),
            "--trace",
            "--",
            *mpi.launch(NRANKS),
            str(prog),
            str(tmp_path / "traced"),
            *extra,
        ],
        tmp_path / "traced",
        how,
    )
    # perfweave run ends as the launcher did, and says so in experiment.json
    launcher = json.loads((exp / "experiment.json").read_text())["exit_status"]
    assert status == (-launcher["signal"] if "signal" in launcher else launcher["code"])
    if how == "SIGKILL" or mpi.name == "openmpi":
        # the status a run without perfweave ends with. (MPICH's launcher ORs its ranks'
        # statuses and kills the ranks still alive once one has died of the signal: a
        # rank still in perfweave's handler, writing its partial profile, makes a Ctrl-C
        # 2 | 9 = 11, which it reports as a segmentation fault.)
        assert status == bare_status, (status, bare_status)
    assert min(done) >= WARMUP
    states = {}
    for r in range(NRANKS):
        rf = rt.read_rank(exp, r)
        assert not rf.complete and rf.notes
        names = rf.meta["functions"]
        calls = rf.records["fn"][rf.records["type"] == T["CALL"]]
        sendrecv = int(np.count_nonzero(calls == names.index("MPI_Sendrecv")))
        # every iteration the rank reported done, and at most the one in flight
        assert done[r] <= sendrecv <= done[r] + 1, (r, done[r], sendrecv)
        sends = rf.records[rf.records["type"] == T["SEND"]]
        assert len(sends) >= done[r] and (sends["peer"] == (r + 1) % NRANKS).all()
        states[r] = rf.meta["state"]
    if how == "SIGKILL":
        assert set(states.values()) == {"killed"}
    else:  # the handler ran, unless the launcher killed the rank while it wrote
        assert set(states.values()) <= {"signal", "killed"}
    res = subprocess.run(
        [PERFWEAVE, "analyze", "--json", str(exp)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["complete"] is False
    assert {r["rank"]: r["state"] for r in out["ranks"]} == states
    assert sum("killed" in n or "without MPI_Finalize" in n for n in out["notes"]) == NRANKS
    assert out["counts"]["messages"] >= NRANKS * WARMUP
    if how == "SIGKILL":  # no rank wrote a profile: their call-site tables are read
        rep = subprocess.run(
            [PERFWEAVE, "report", "--json", str(exp)], capture_output=True, text=True, timeout=120
        )
        assert rep.returncode == 0 and not rep.stderr, rep.stderr
        js = json.loads(rep.stdout)
        assert js["state"] == "partial"
        assert {r["rank"]: r["state"] for r in js["mpi_profile"]["per_rank"]} == states
        assert any(f"ranks 0-{NRANKS - 1} ended without saving" in n for n in js["notes"])

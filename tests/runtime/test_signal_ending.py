"""Ctrl-C to the launcher (SIGINT to mpiexec or mpirun, which sends it on to every rank)
while the ranks compute: every rank saves its data, marked partial (state signal), and
the launcher reports what it reports without perfweave.

Without perfweave each rank dies of the signal when it is sent. With perfweave each first
saves, for a time of its own: MPICH's proxy killed the ranks still saving with SIGKILL as
soon as the first died and reported 2 | 9 = 11 ("Segmentation fault", though no rank
faulted) or 9, and the killed ranks saved nothing: half of the runs failed a check below
before the fix (10 runs: 11 once, a rank lost 4 times), so RUNS runs miss it with a
probability of about 0.5^6 = 1.6 % (the test failed 5 times in 5 then). Now the ranks of a
node end together, at a moment they agree once the last has saved (runtime/core/ending.c):
0 failures in 200 runs beside a busy loop. Hydra's own report stays a race: it says 0 when
the ranks ended before it collected any status (3 of 30 runs without perfweave)."""

import json
import os
import signal
import struct
import subprocess
import time

from harness import PERFWEAVE
from perfweave.readers.profile import read_profile

RANKS = 3
RUNS = 6
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
    for run in range(RUNS):
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

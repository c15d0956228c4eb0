"""A one-node Slurm for the tests (issue 22): Debian's slurm-wlm and munge, installed by
`make test` (scripts/install-deps.sh), run by the test session itself with everything in
a temporary directory: munged with its own key and socket, slurmctld and slurmd on ports
free on this machine (two test sessions side by side do not meet), the node with this
machine's host name and `nproc` CPUs. Tasks beyond the CPUs need `srun -O`; the partition
lets jobs share CPUs, so a job is not held while the previous one completes.

The `slurm` fixture starts the daemons once per session, waits until the node is idle,
puts SLURM_CONF in the environment (every srun, sbatch, salloc the tests start, and
perfweave, use this cluster) and stops the daemons by PID at the end.

KillWait (SIGTERM to SIGKILL when a step is cancelled) is Slurm's default, 30 s: with 5 s,
a rank still saving its data after srun's double Ctrl-C was killed on a loaded machine
(two busy loops beside the suite), and srun ended with 137 instead of 130.
"""

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "salloc", "sinfo")
STARTUP_S = 60
SLURM_PREFIXES = ("SLURM_", "SRUN_", "SBATCH_", "SALLOC_")


def free_ports(n):
    """n TCP ports free now (the kernel picks them; held until all are picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_conf(d, user, host, cpus, ports):
    conf = d / "slurm.conf"
    conf.write_text(f"""\
ClusterName=perfweave-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=30
InactiveLimit=0
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
""")
    return conf


@dataclass
class Slurm:
    conf: Path
    dir: Path

    def logs(self):
        """The daemons' logs, for a failed assertion's message."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted((self.dir / "log").glob("*"))
        )


def _node_state(env):
    res = subprocess.run(
        ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env, timeout=30
    )
    return res.stdout.strip() if res.returncode == 0 else None


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    for tool in DAEMONS:
        assert shutil.which(tool), f"{tool} is not installed (make test installs it)"
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool", "log"):
        (d / sub).mkdir()
    (d / "munge").chmod(0o700)
    host = socket.gethostname().split(".")[0]
    conf = write_conf(d, getpass.getuser(), host, len(os.sched_getaffinity(0)), free_ports(2))
    # a test session inside a Slurm job: its job's variables are not this cluster's
    outer = {k: v for k, v in os.environ.items() if k.startswith(SLURM_PREFIXES)}
    env = {k: v for k, v in os.environ.items() if k not in outer}
    env["SLURM_CONF"] = str(conf)
    subprocess.run(["mungekey", "-c", "-k", str(d / "munge" / "key")], check=True)
    started = []

    def start(name, *args):
        log = open(d / "log" / f"{name}.out", "w")
        started.append(
            subprocess.Popen(
                [name, *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )
        log.close()

    try:
        # -F / -D: in the foreground, so that the PID the test holds is the daemon's
        start(
            "munged",
            "-F",
            "-f",
            f"--socket={d}/munge/socket",
            f"--key-file={d}/munge/key",
            f"--pid-file={d}/munge/pid",
            f"--seed-file={d}/munge/seed",
            f"--log-file={d}/log/munged.log",
        )
        deadline = time.monotonic() + STARTUP_S
        while not (d / "munge" / "socket").exists():
            assert time.monotonic() < deadline, "munged did not start:\n" + Slurm(conf, d).logs()
            time.sleep(0.1)
        start("slurmctld", "-D", "-i", "-f", str(conf))
        start("slurmd", "-D", "-f", str(conf))
        while _node_state(env) != "idle":
            for p in started:
                assert p.poll() is None, f"{p.args[0]} exited:\n" + Slurm(conf, d).logs()
            assert time.monotonic() < deadline, (
                "the Slurm node is not idle:\n" + Slurm(conf, d).logs()
            )
            time.sleep(0.2)
        for k in outer:
            del os.environ[k]
        os.environ["SLURM_CONF"] = str(conf)
        try:
            yield Slurm(conf, d)
        finally:
            del os.environ["SLURM_CONF"]
            os.environ.update(outer)
    finally:
        for p in reversed(started):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

"""Live snapshots of a running job (docs/snapshots.md): the request that every process
of the job polls (EXP/snapshots/request, runtime/core/snapshot.c) and the wait for their
answers (EXP/snapshots/N/partial/rank-R.pwprof, procs/HOST.PID.pwprof)."""

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from perfweave.errors import FormatError, PerfweaveError
from perfweave.readers.experiment import SNAPSHOT_FORMAT, read_meta, snapshot_numbers
from perfweave.readers.profile import read_profile
from perfweave.writing import write_atomic


def request(path):
    """Ask every process of the run in experiment path for a snapshot: its folder and
    description (snapshots/N/snapshot.json), then the request the processes poll. N."""
    path = Path(path)
    meta = read_meta(path)
    if meta.get("state") not in ("running", None):
        raise PerfweaveError(
            f"{path}: the run has ended (state {meta.get('state')}): nothing to snapshot; "
            f"perfweave report {path} reads its data"
        )
    if int(meta.get("options", {}).get("snapshot_poll", 1)) <= 0:
        raise PerfweaveError(f"{path}: the run was started with --snapshot-poll 0: no snapshots")
    numbers = snapshot_numbers(path)
    number = numbers[-1] + 1 if numbers else 1
    folder = path / "snapshots" / str(number)
    now = time.time()
    doc = {
        "format": SNAPSHOT_FORMAT,
        "version": 1,
        "snapshot": number,
        "requested_time": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
        "requested_epoch": now,
    }
    try:
        folder.mkdir(parents=True)
        write_atomic(folder / "snapshot.json", json.dumps(doc, indent=1) + "\n")
        # the number last, whole (renamed into place): a process reads it or the last one
        write_atomic(path / "snapshots" / "request", f"{number}\n")
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot request a snapshot: {e.strerror or e}") from None
    return number


def answers(path, number):
    """(ranks that answered snapshot number, the job's size, other processes)."""
    folder = Path(path) / "snapshots" / str(number)
    ranks = sorted((folder / "partial").glob("rank-*.pwprof"))
    world = 0
    for f in ranks[:1]:
        try:
            world = int(read_profile(f).header.get("world_size", 0))
        except FormatError:
            world = 0
    procs = list((folder / "procs").glob("*.pwprof"))
    return len(ranks), world, len(procs)


def wait(path, number, timeout):
    """Wait until every rank answered snapshot number (or, without MPI ranks, until the
    answers stop coming for two polling periods), timeout seconds at most; answers()."""
    meta = read_meta(path)
    poll = max(int(meta.get("options", {}).get("snapshot_poll", 1000)), 1) / 1000
    end = time.monotonic() + timeout
    last, still = None, 0.0
    while True:
        got = answers(path, number)
        ranks, world, procs = got
        if world and ranks >= world:
            return got
        if got == last and (ranks or procs):
            still += 0.05
            if not world and still >= 2 * poll:
                return got
        else:
            last, still = got, 0.0
        if time.monotonic() >= end:
            return got
        time.sleep(0.05)

"""What the processes of a run left in its experiment, told from file names and headers
alone: perfweave run's verdict at the end of a run (launch/verdict.py) and the readers'
(readers/experiment.py).

No numpy, dataclasses or pathlib here or in what this imports: the verdict runs in an
interpreter started after the command ended, and its imports are the run's cost
(docs/performance.md, "The launch path"; tests/python/test_launch_path.py).
"""

import os
import re

from perfweave.errors import FormatError
from perfweave.readers.files import parse_json, read_bytes, read_json, read_line
from perfweave.readers.profile_header import read_header
from perfweave.readers.table_description import unsaved
from perfweave.writing import read_unwritten


class Recorded:
    """What the processes of a run left in its experiment (recorded)."""

    def __init__(self):
        self.complete = False  # profile.pwprof or .pwcompact: every rank reached MPI_Finalize
        self.ranks = set()  # ranks with data of their own (a killed rank's: its tables)
        self.world_size = 0  # MPI_COMM_WORLD's size as those ranks recorded it
        self.processes = 0  # processes without MPI that saved a profile (procs/) or tables
        self.started = 0  # processes that loaded the runtime (timeline/HOST.pids)
        self.in_init = 0  # processes that called MPI and never got through MPI_Init
        self.starting = 0  # processes past MPI_Init, never through perfweave's start-up


# files of one rank: partial profile, trace, samples (docs/format.md "The directory")
_RANK_FILE = re.compile(r"(?:partial|traces|samples)/rank-(\d+)\.")


def recorded(path):
    """Recorded of experiment path. A file that could not be written (its mark) counts as
    data recorded: its process ran with the runtime."""
    rec = Recorded()
    names = [u["file"] for u in read_unwritten(path)]
    for sub in ("partial", "traces", "samples", "procs"):
        d = os.path.join(path, sub)
        if os.path.isdir(d):
            names += [f"{sub}/{name}" for name in os.listdir(d)]
    # every rank reached MPI_Finalize: the reduced profile, or above --full-profile-ranks
    # the compact one alone (written, or marked)
    full = [n for n in ("profile.pwprof", "profile.pwcompact") if n in names]
    full += [
        n for n in ("profile.pwprof", "profile.pwcompact") if os.path.exists(os.path.join(path, n))
    ]
    rec.complete = bool(full)
    for name in names:
        m = _RANK_FILE.match(name)
        if m:
            rec.ranks.add(int(m.group(1)))
        elif name.startswith("procs/") and name.endswith(".pwprof"):
            rec.processes += 1
    sizes = [
        _world_size(os.path.join(path, n))
        for n in names
        if n.startswith("partial/")
        and n.endswith(".pwprof")
        or n.startswith("traces/")
        and n.endswith(".json")
    ]
    sizes += [_world_size(os.path.join(path, n)) for n in full]
    for found in unsaved(path):
        if isinstance(found, tuple):  # a process killed before it saved: its tables
            doc = found[1]
            if doc["rank"] >= 0:
                rec.ranks.add(doc["rank"])
                sizes.append(doc.get("world_size", 0))
            else:
                rec.processes += 1
    rec.world_size = max(sizes, default=0)
    pids = set()
    for p in _timeline_files(path, ".pids"):
        try:
            pids.update(w for w in read_bytes(p).split() if w.isdigit())
        except (FormatError, OSError):
            pass
    rec.started = len(pids)
    states = list(activity_ranks(path).values())
    rec.in_init = states.count(ACT_IN_INIT)
    rec.starting = states.count(ACT_STARTING)
    return rec


def _timeline_files(path, suffix):
    """The files of experiment path's timeline/ whose names end in suffix (none when
    there is no such folder)."""
    d = os.path.join(path, "timeline")
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return [os.path.join(d, n) for n in names if n.endswith(suffix)]


# timeline/HOST.PID.act: int64 magic, pid; int32 rank, version; ... (runtime/core/pw.h).
# rank: the process's rank, or: in MPI_Init (-2); past it, in perfweave's start-up (-3)
ACT_MAGIC, ACT_IN_INIT, ACT_STARTING = 0x7077616374763100, -2, -3


def activity_ranks(path):
    """{activity page (timeline/HOST.PID.act): its rank field} of experiment path's
    processes, as they are now (the pages are written while the run goes on); pages
    that cannot be read are left out."""
    out = {}
    for p in _timeline_files(path, ".act"):
        r = _activity_rank(p)
        if r is not None:
            out[os.path.basename(p)] = r
    return out


def _activity_rank(f):
    """The rank field of a process's activity page (None: unreadable)."""
    try:
        head = read_bytes(f)[:24]
    except (FormatError, OSError):
        return None
    if len(head) < 24 or int.from_bytes(head[:8], "little", signed=True) != ACT_MAGIC:
        return None
    return int.from_bytes(head[16:20], "little", signed=True)


def _world_size(f):
    """MPI_COMM_WORLD's size in a profile's or compact profile's header or a trace JSON (0:
    unreadable)."""
    try:
        if f.endswith(".pwprof"):
            doc = read_header(f)
        elif f.endswith(".pwcompact"):  # its first line, JSON (readers/compact.py)
            doc = parse_json(read_line(f), f, "compact profile header")
        else:
            doc = read_json(f, "trace description")
    except (FormatError, FileNotFoundError):
        return 0
    size = doc.get("world_size")
    return size if isinstance(size, int) and not isinstance(size, bool) else 0


def rank_ranges(values):
    """[0, 1, 2, 5] -> '0-2,5'."""
    out, start, prev = [], None, None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = v
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(out)

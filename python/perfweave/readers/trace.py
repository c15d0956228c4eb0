"""Reader of event traces (docs/format.md, "Traces"): `traces/rank-R.events` (fixed
40-byte records, read with numpy) and `traces/rank-R.json` (definitions).

`read_rank` returns one rank's records as written, checked: a trailing partial record,
records of unknown type, calls whose end precedes their start and sub-events that do not
follow a call are dropped, each with a note, and the rank is marked incomplete. A rank
whose JSON is missing (killed outright) keeps its events; its clock calibration is then
borrowed from another rank of the same host, with a note.

Turning records into the tables the analysis works on is model/trace.py's job.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.errors import FormatError, PerfweaveError
from perfweave.readers.dtypes import EVENT_DTYPE, EVENT_TYPES, TRACE_VERSION, TypeSet
from perfweave.readers.files import check, read_array, read_json, short

TRACE_FORMAT = "perfweave-trace"
_NAME = re.compile(r"rank-(\d+)\.(events|json)$")
T = EVENT_TYPES


@dataclass
class RankFile:
    """One rank's trace as recorded: records in file order and the rank's JSON."""
    rank: int
    records: np.ndarray
    thread: np.ndarray                 # thread of each record (from the flush table)
    meta: dict
    complete: bool = True
    notes: list = field(default_factory=list)
    types: np.ndarray = None           # records["type"], contiguous (None: not taken yet)

    @property
    def path_hint(self):
        return f"rank {self.rank}"


def trace_dir(exp):
    return Path(exp) / "traces"


def list_ranks(exp):
    """Ranks with a trace file (events or JSON) in the experiment, sorted."""
    d = trace_dir(exp)
    if not d.is_dir():
        raise PerfweaveError(f"{exp}: no traces in this experiment (run with "
                             "perfweave run --trace)")
    ranks = set()
    for p in d.iterdir():
        m = _NAME.match(p.name)
        if m:
            ranks.add(int(m.group(1)))
    if not ranks:
        raise PerfweaveError(f"{d}: no rank trace files")
    return sorted(ranks)


def record_count(exp, rank):
    """Records in a rank's events file (0 if it has none)."""
    try:
        return (trace_dir(exp) / f"rank-{rank}.events").stat().st_size // EVENT_DTYPE.itemsize
    except OSError:
        return 0


_RANKS = [int]
# the keys readers use, with their types (docs/format.md "rank-R.json")
META_SCHEMA = {"rank": int, "world_size": int, "host": str, "pid": int, "state": str,
               "functions": [str], "families": [str],
               "clock": {"ticks": [int], "ns": [int], "offset_init_ns": int,
                         "offset_init_err_ns": int, "offset_fini_ns": int,
                         "offset_fini_err_ns": int, "t_init_ns": int, "t_fini_ns": int},
               "comms": [{"id": int, "name": str, "ranks": _RANKS, "remote": _RANKS,
                          "parent": int, "seq": int}],
               "windows": [{"id": int, "comm": int, "seq": int}],
               "groups": [{"id": int, "ranks": _RANKS}],
               "regions": [{"name": str}],
               "objects": [{"path": str, "buildid": str, "start": int, "end": int,
                            "base": int}],
               "flushes": [{"thread": int, "first": int, "count": int}],
               "records": int, "lost": int}


def read_meta(exp, rank):
    path = trace_dir(exp) / f"rank-{rank}.json"
    try:
        meta = read_json(path, "trace description")
    except FileNotFoundError:
        return None, f"rank {rank}: {path.name} is missing (the rank was killed before it " \
                     "could write it); its events are used alone"
    except FormatError as e:
        return None, f"rank {rank}: {path.name} is unreadable ({_reason(e)}); its events " \
                     "are used alone"
    if meta.get("format") != TRACE_FORMAT:
        return None, f"rank {rank}: {path.name} is not a perfweave trace description"
    if meta.get("version") != TRACE_VERSION:
        raise FormatError(f"{path}: trace format version {short(meta.get('version'))} is not "
                          f"supported (this perfweave reads {TRACE_VERSION})")
    try:
        check(meta, META_SCHEMA, path, "trace description")
        _check_meta(meta)
    except FormatError as e:
        return None, f"rank {rank}: {path.name} is corrupt ({_reason(e)}); its events are " \
                     "used alone"
    return meta, None


def _reason(e):
    """A FormatError's message without the path it starts with."""
    return str(e).split(": ", 1)[-1]


def _check_meta(meta):
    """What the schema cannot say: the clock's calibration points, world ranks in range,
    the ids that records and other keys refer to."""
    def bad(what):
        raise FormatError(f"corrupt trace description ({what})")
    c = meta.get("clock")
    if c is not None and (len(c.get("ticks", [0, 1])) != 2 or len(c.get("ns", [0, 1])) != 2):
        bad("clock: two calibration points")
    world = meta.get("world_size")
    if world is not None and not 0 < world <= 1 << 24:
        bad("world_size")
    hi = world if world else 1 << 24
    for key in ("comms", "groups"):
        for item in meta.get(key, []):
            for r in item.get("ranks", []) + item.get("remote", []):
                if not 0 <= r < hi:
                    bad(f"{key}: rank {r}")
    if not 0 <= meta.get("rank", 0) < hi:
        bad("rank")
    if len(meta.get("functions", [])) != len(meta.get("families", meta.get("functions", []))):
        bad("functions and families differ in length")
    for key, item_keys in (("objects", ("start", "end", "base")),
                           ("flushes", ("first", "count")), ("comms", ("id",)),
                           ("windows", ("id", "comm")), ("groups", ("id",))):
        if not all(set(item_keys) <= x.keys() for x in meta.get(key, [])):
            bad(f"{key}: {', '.join(item_keys)} missing")
    if meta.get("records", 0) < 0 or meta.get("lost", 0) < 0:
        bad("records or lost")


KNOWN = TypeSet(*T)
SPANS = TypeSet("CALL", "FLUSH")
SUB = TypeSet("SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "WIN", "RMA", "WSYNC")
# records a sub-event may follow: its call, or the call's other sub-events
SUB_OK = TypeSet("CALL", "SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "WIN", "RMA", "WSYNC")


def read_rank(exp, rank, meta_note=None):
    """Read and check one rank's records (RankFile), mapped read-only from the file.
    Never raises for damaged data of a rank: it is reported in the notes and the rank
    marked incomplete. meta_note: read_meta's answer, when the caller has it already."""
    notes = []
    meta, note = meta_note if meta_note is not None else read_meta(exp, rank)
    complete = meta is not None and meta.get("state") == "complete"
    if note:
        notes.append(note)
    elif meta.get("state") != "complete":
        notes.append(f"rank {rank}: the run ended without MPI_Finalize on this rank "
                     f"(state {meta.get('state')}); its trace stops there")
    path = trace_dir(exp) / f"rank-{rank}.events"
    try:
        raw = map_file(path)
    except FormatError as e:
        raw = np.zeros(0, np.uint8)
        notes.append(f"rank {rank}: {path.name}: {_reason(e)}")
        complete = False
    except FileNotFoundError:
        raw = np.zeros(0, np.uint8)
        notes.append(f"rank {rank}: {path.name} is missing")
        complete = False
    except OSError as e:
        raw = np.zeros(0, np.uint8)
        notes.append(f"rank {rank}: cannot read {path.name} ({e.strerror})")
        complete = False
    n = len(raw) // EVENT_DTYPE.itemsize
    if len(raw) % EVENT_DTYPE.itemsize:
        notes.append(f"rank {rank}: {path.name} ends with a partial record "
                     f"({len(raw) % EVENT_DTYPE.itemsize} bytes, ignored): truncated")
        complete = False
    rec = raw[:n * EVENT_DTYPE.itemsize].view(EVENT_DTYPE)
    types = np.ascontiguousarray(rec["type"])
    if meta is not None and meta.get("records", n) != n:
        notes.append(f"rank {rank}: {path.name} holds {n} records, its JSON says "
                     f"{meta.get('records')}: truncated or overwritten")
        complete = False
    if meta is not None and meta.get("lost"):
        notes.append(f"rank {rank}: {meta['lost']} events could not be written "
                     "(trace file not writable or disk full)")
        complete = False
    thread = _threads(meta, n)
    ok = _check(rec, types, thread, meta)
    if ok is not None:
        notes.append(f"rank {rank}: {int(len(ok) - ok.sum())} corrupt records dropped "
                     f"from {path.name}")
        complete = False
        rec, types, thread = rec[ok], types[ok], thread[ok]
    return RankFile(rank, rec, thread, meta or {}, complete, notes, types)


def map_file(path):
    """The bytes of a file as a read-only numpy array over a mapping of it
    (readers/files.py: only a regular file)."""
    return read_array(path)


def _threads(meta, n):
    thread = np.zeros(n, np.int32)
    if meta:
        for f in meta.get("flushes", []):
            a, c = int(f.get("first", 0)), int(f.get("count", 0))
            if 0 <= a <= n:
                thread[a:min(a + c, n)] = int(f.get("thread", 0))
    return thread


def _check(rec, types, thread, meta):
    """The records that cannot be right: None if there are none (damaged traces are
    rare, and this runs on every record: each rule is first tested on the whole trace
    at once), else the mask of the records to keep."""
    n = len(rec)
    if not n:
        return None
    nfn = len(meta.get("functions", [])) if meta else 1 << 16
    bad = np.zeros(n, bool)
    if types.min() < min(KNOWN.codes) or types.max() > max(KNOWN.codes):
        bad |= ~KNOWN(types)
    neg = rec["t1"] < rec["t0"]
    if neg.any():
        bad |= neg & SPANS(types)
    big = rec["fn"] >= nfn
    if big.any():
        bad |= big & (types == T["CALL"])
    # a sub-event follows its call (or the call's other sub-events) in the same thread
    sub = SUB(types)
    orphan = np.empty(n, bool)
    orphan[0] = sub[0]
    np.greater(sub[1:], SUB_OK(types[:-1]), out=orphan[1:])     # sub and not ok before
    if (thread != thread[0]).any():              # several threads
        first = np.flatnonzero(thread[1:] != thread[:-1]) + 1
        orphan[first] = sub[first]
    if orphan.any():
        bad |= orphan
    if not bad.any():
        return None
    ok = ~bad
    # a sub-event after a dropped record is dropped with it: repeat until stable
    while True:
        prev_good = np.zeros(n, bool)
        prev_good[1:] = ok[:-1]
        more = ok & sub & ~prev_good
        if not more.any():
            break
        ok &= ~more
    return ok

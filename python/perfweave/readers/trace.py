"""Reader of event traces (docs/format.md, "Traces"): `traces/rank-R.events` (16-byte
compact records since version 5, decoded by readers/trace_compact.py; fixed 40-byte
records before, and as perfweave import writes them, mapped) and `traces/rank-R.json`
(definitions).

`read_rank` returns one rank's records as written, checked: a trailing partial record,
records of unknown type, calls whose end precedes their start and sub-events that do not
follow a call are dropped, each with a note, and the rank is marked incomplete. In a
version 2 file the records are those each block's BLOCK record counts as committed (the
rest of a block is unused or was being written when the rank was killed). A rank killed
outright (its JSON still says "running", or is missing) keeps its records up to the last
committed one and is marked "killed"; without a JSON its clock calibration is borrowed
from another rank of the same host, with a note.

Turning records into the tables the analysis works on is model/trace.py's job.
"""

import mmap
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfweave.errors import FormatError, PerfweaveError
from perfweave._format import FILES, JSON
from perfweave.dtypes import EVENT_DTYPE, EVENT_TYPES, SPANS, SUB, TRACE_VERSION, TypeSet
from perfweave.model.trace import RankRecords
from perfweave.readers.experiment import read_meta as read_experiment_meta, state_reason
from perfweave.readers.files import check, read_array, read_json, short
from perfweave.readers import trace_compact as compact
from perfweave.readers.names import renamed_families

TRACE_FORMAT = FILES["trace"].magic
_NAME = re.compile(r"rank-(\d+)\.(events|json)$")
# 1: records back to back, no BLOCK or COLL_DONE records; 1 and 2: the MPI family "file"
# named "io" (renamed as read: read_meta); before 4: no OS thread ids (BLOCK's peer -1)
# 5: compact records (readers/trace_compact.py; files are told apart by their content)
# and PCONTROL records
READ_VERSIONS = (1, 2, 3, 4, TRACE_VERSION)
T = EVENT_TYPES


def trace_dir(exp):
    return Path(exp) / "traces"


def list_ranks(exp):
    """Ranks with a trace file (events or JSON) in the experiment, sorted."""
    d = trace_dir(exp)
    if not d.is_dir():
        try:
            why = state_reason(read_experiment_meta(exp))
        except PerfweaveError:  # FormatError too: no description to go by
            why = None
        if why:  # perfweave run's verdict: no rank recorded anything, traces included
            raise PerfweaveError(f"{exp}: no traces: {why}")
        raise PerfweaveError(
            f"{exp}: no traces in this experiment (run with perfweave run --trace)"
        )
    ranks = set()
    for p in d.iterdir():
        m = _NAME.match(p.name)
        if m:
            ranks.add(int(m.group(1)))
    if not ranks:
        raise PerfweaveError(f"{d}: no rank trace files")
    return sorted(ranks)


def record_count(exp, rank):
    """Records in a rank's events file (0 if it has none); in a compact file (version 5),
    its record slots: at least its events."""
    path = trace_dir(exp) / f"rank-{rank}.events"
    try:
        size = path.stat().st_size
        if not stat.S_ISREG(path.stat().st_mode):
            return 0  # a FIFO would block the read: read_rank says what it is
        with open(path, "rb") as f:
            first = np.frombuffer(f.read(2 * compact.SIZE), np.uint8)
    except OSError:
        return 0
    return size // (compact.SIZE if compact.is_compact(first) else EVENT_DTYPE.itemsize)


_RANKS = [int]
# what the declared keys (format.h JSON(trace, ...): _format.JSON["trace"]) hold, where
# their declared type says only "list" or "object" (docs/format.md "rank-R.json")
META_SCHEMA = {
    "clock": {
        "ticks": [int],
        "ns": [int],
        "offset_init_ns": int,
        "offset_init_err_ns": int,
        "offset_fini_ns": int,
        "offset_fini_err_ns": int,
        "t_init_ns": int,
        "t_fini_ns": int,
    },
    "comms": [
        {"id": int, "name": str, "ranks": _RANKS, "remote": _RANKS, "parent": int, "seq": int}
    ],
    "windows": [{"id": int, "comm": int, "seq": int}],
    "groups": [{"id": int, "ranks": _RANKS}],
    "regions": [{"name": str}],
    "objects": [{"path": str, "buildid": str, "start": int, "end": int, "base": int}],
    "flushes": [{"thread": int, "first": int, "count": int}],
}
SCHEMA = {**JSON["trace"], **META_SCHEMA}


def read_meta(exp, rank):
    path = trace_dir(exp) / f"rank-{rank}.json"
    try:
        meta = read_json(path, "trace description")
    except FileNotFoundError:
        return (
            None,
            f"rank {rank}: {path.name} is missing (the rank was killed before it "
            "could write it); its events are used alone",
        )
    except FormatError as e:
        return (
            None,
            f"rank {rank}: {path.name} is unreadable ({_reason(e)}); its events are used alone",
        )
    if meta.get("format") != TRACE_FORMAT:
        return None, f"rank {rank}: {path.name} is not a perfweave trace description"
    if meta.get("version") not in READ_VERSIONS:
        raise FormatError(
            f"{path}: trace format version {short(meta.get('version'))} is not "
            f"supported (this perfweave reads {', '.join(map(str, READ_VERSIONS))})"
        )
    try:
        check(meta, SCHEMA, path, "trace description")
        _check_meta(meta)
        if meta["version"] < 3 and "families" in meta:
            meta["families"] = renamed_families(meta["families"])
    except FormatError as e:
        return (
            None,
            f"rank {rank}: {path.name} is corrupt ({_reason(e)}); its events are used alone",
        )
    if meta.get("state") == "running":  # written at MPI_Init, never replaced
        from perfweave import writing

        rel = f"traces/{path.name}"
        why = next((u["reason"] for u in writing.read_unwritten(exp) if u["file"] == rel), None)
        if why:  # the end's version could not be written
            return dict(meta, state="unwritten"), (
                f"rank {rank}: its final {path.name} could not be written ({why}): its "
                "records are used with the definitions of MPI_Init (communicators or "
                "windows created later are unknown)"
            )
        meta = dict(meta, state="killed")
        return meta, (
            f"rank {rank}: killed while running (SIGKILL, or a signal perfweave "
            "could not catch): its trace holds the records committed before, "
            "and communicators or windows created after MPI_Init are unknown"
        )
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
    for key, item_keys in (
        ("objects", ("path", "start", "end", "base")),
        ("flushes", ("first", "count")),
        ("comms", ("id",)),
        ("windows", ("id", "comm")),
        ("groups", ("id",)),
    ):
        if not all(set(item_keys) <= x.keys() for x in meta.get(key, [])):
            bad(f"{key}: {', '.join(item_keys)} missing")
    if meta.get("records", 0) < 0 or meta.get("lost", 0) < 0:
        bad("records or lost")


KNOWN = TypeSet(*(t for t in T if t != "BLOCK"))
# records a sub-event may follow: its call, or the call's other sub-events
SUB_OK = TypeSet(
    "CALL", "SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "WIN", "RMA", "WSYNC", "COLL_DONE"
)


@dataclass
class RankSource:
    """One rank's events file mapped, not yet read: the committed records as spans of
    the mapping (first, count, thread) in file order, and what read_rank notes about the
    file. read_rank gathers and checks them at once; `pieces` hands them out a bounded
    number at a time, and `Checker` checks them so, for readers that keep one chunk in
    memory (interop's exports). A compact file (version 5) opened for those is decoded
    piece by piece (`parts`, readers/trace_compact.py Parts): `records` and `spans` are
    then None and [], and `final_notes` has the notes of damage found while decoding."""

    rank: int
    records: np.ndarray  # EVENT_DTYPE over the whole mapping
    spans: list
    meta: dict  # as read (None: missing or unreadable)
    complete: bool
    notes: list
    mapping: object = None  # the mmap the records are read from, if mapped
    parts: object = None  # trace_compact.Parts of a compact file read in pieces
    late: int = 0  # where the notes of damage found in pieces go among notes

    def release(self, first, count, itemsize=EVENT_DTYPE.itemsize):
        """Let the pages of records [first, first + count) (of itemsize bytes) go from
        this process's memory (they stay in the page cache, and come back if read
        again): a reader that has copied them keeps its resident memory to what it
        holds, not to the part of the file it has read."""
        if self.mapping is None or count <= 0:
            return
        page = mmap.PAGESIZE
        a = first * itemsize // page * page
        b = min(-(-(first + count) * itemsize // page) * page, len(self.mapping))
        if b > a:
            self.mapping.madvise(mmap.MADV_DONTNEED, a, b - a)

    def threads(self):
        """The threads with records, in order."""
        if self.parts is not None:
            return self.parts.threads()
        return sorted({t for _, c, t in self.spans if c})

    def pieces(self, thread, size):
        """The committed records of thread (a generator) as (records, parts, last): parts
        [(first, count, follows)] of records, about size records in all (what Checker
        takes), follows whether a part comes right after the one before in the thread's
        file order, last whether it is the thread's last piece. The pages of a piece's
        records are let go when the next one is asked for."""
        if self.parts is not None:
            yield from self.parts.pieces(thread, size)
            return
        spans = [s for s in self.spans if s[1]]
        mine = [
            (a, c, i > 0 and spans[i - 1][2] == th)
            for i, (a, c, th) in enumerate(spans)
            if th == thread
        ]
        parts, n = [], 0
        for k, (a, c, f) in enumerate(mine):
            pos = a
            while pos < a + c:
                m = min(a + c - pos, size - n)
                parts.append((pos, m, f or pos > a))
                n += m
                pos += m
                last = k == len(mine) - 1 and pos == a + c
                if n >= size or last:
                    yield self.records, parts, last
                    for first, count, _ in parts:
                        self.release(first, count)
                    parts, n = [], 0

    def final_notes(self):
        """The notes, with those of damage that reading the pieces found (after a pass
        over every thread's pieces)."""
        late = self.parts.late_notes() if self.parts is not None else []
        return self.notes[: self.late] + late + self.notes[self.late :]

    def gather(self):
        """(records, thread of each record): the committed records in file order (one
        copy where there are blocks, else a view of the mapping)."""
        spans = [s for s in self.spans if s[1]]
        if (
            spans
            and spans[0][0] == 0
            and all(a == b + c for (a, _, _), (b, c, _) in zip(spans[1:], spans))
        ):
            # back to back from the start (version 1): a view of the mapping
            n = spans[-1][0] + spans[-1][1]
            thread = np.repeat(
                np.array([t for _, _, t in spans], np.int32), [c for _, c, _ in spans]
            )
            return self.records[:n], thread
        if not spans:
            return self.records[:0], np.zeros(0, np.int32)
        parts = [self.records[a : a + c] for a, c, _ in spans]
        out = np.concatenate(parts) if len(parts) > 1 else parts[0]
        thread = np.repeat(np.array([t for _, _, t in spans], np.int32), [c for _, c, _ in spans])
        return out, thread


def open_rank(exp, rank, meta_note=None, pieces=False):
    """The RankSource of one rank: its events file mapped read-only, its committed
    spans found, and the notes read_rank makes before checking records. pieces: a
    compact file is to be read piece by piece (RankSource.pieces), not decoded whole."""
    notes = []
    meta, note = meta_note if meta_note is not None else read_meta(exp, rank)
    complete = meta is not None and meta.get("state") == "complete"
    if note:
        notes.append(note)
    elif meta.get("state") != "complete":
        notes.append(
            f"rank {rank}: the run ended without MPI_Finalize on this rank "
            f"(state {meta.get('state')}); its trace stops there"
        )
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
    if compact.is_compact(raw) and pieces:
        return _compact_parts(raw, rank, path.name, meta, complete, notes)
    if compact.is_compact(raw):  # version 5: decoded into event records
        rec, spans, block_notes = compact.decode(raw, rank, path.name)
        notes += block_notes
        complete = complete and not block_notes
        _check_count(meta, rank, path.name, len(rec), notes)
        return RankSource(rank, rec, spans, meta, complete and not _counted(meta, len(rec)), notes)
    n = len(raw) // EVENT_DTYPE.itemsize
    if len(raw) % EVENT_DTYPE.itemsize:
        notes.append(
            f"rank {rank}: {path.name} ends with a partial record "
            f"({len(raw) % EVENT_DTYPE.itemsize} bytes, ignored): truncated"
        )
        complete = False
    rec = raw[: n * EVENT_DTYPE.itemsize].view(EVENT_DTYPE)
    if n and rec["type"][0] == T["BLOCK"]:
        spans, block_notes = _spans(rec, rank, path.name)
        notes += block_notes
        complete = complete and not block_notes
        n = sum(c for _, c, _ in spans)
    else:
        spans = _flush_spans(meta, n)
    _check_count(meta, rank, path.name, n, notes)
    complete = complete and not _counted(meta, n)
    return RankSource(rank, rec, spans, meta, complete, notes, _mapping(raw))


def _compact_parts(raw, rank, name, meta, complete, notes):
    """open_rank's RankSource of a compact file read piece by piece: the notes of
    compact.decode but those of damage found in decoding (RankSource.final_notes)."""
    n = len(raw) // compact.SIZE
    if len(raw) % compact.SIZE:
        notes.append(compact.partial_note(raw, rank, name))
        complete = False
    c = raw[: n * compact.SIZE].view(compact.CEVENT)
    spans, block_notes = compact.blocks(c, rank, name)
    src = RankSource(rank, None, [], meta, complete, notes, _mapping(raw))
    src.parts = compact.Parts(c, spans, rank, name, lambda a, k: src.release(a, k, compact.SIZE))
    block_notes += src.parts.census_notes()
    notes += block_notes
    src.late = len(notes)
    events = sum(src.parts.events)
    _check_count(meta, rank, name, events, notes)
    src.complete = complete and not block_notes and not _counted(meta, events)
    return src


def _counted(meta, n):
    """Whether the JSON's counts make the rank incomplete: records other than the file's
    n, or events lost."""
    return meta is not None and (
        (meta.get("state") != "killed" and meta.get("records", n) != n) or bool(meta.get("lost"))
    )


def _check_count(meta, rank, name, n, notes):
    """The notes of _counted."""
    if meta is not None and meta.get("state") != "killed" and meta.get("records", n) != n:
        notes.append(
            f"rank {rank}: {name} holds {n} records, its JSON says "
            f"{meta.get('records')}: truncated or overwritten"
        )
    if meta is not None and meta.get("lost"):
        notes.append(
            f"rank {rank}: {meta['lost']} events could not be written "
            "(trace file not writable or disk full)"
        )


def _mapping(array):
    """The mmap object under an array made by read_array, or None."""
    base = array.base
    while base is not None:
        if isinstance(base, memoryview):
            base = base.obj
        if isinstance(base, mmap.mmap):
            return base if hasattr(mmap, "MADV_DONTNEED") else None
        base = getattr(base, "base", None)
    return None


def read_rank(exp, rank, meta_note=None):
    """Read and check one rank's records (RankRecords), mapped read-only from the file.
    Never raises for damaged data of a rank: it is reported in the notes and the rank
    marked incomplete. meta_note: read_meta's answer, when the caller has it already."""
    src = open_rank(exp, rank, meta_note)
    meta, notes, complete = src.meta, src.notes, src.complete
    rec, thread = src.gather()
    types = np.ascontiguousarray(rec["type"])
    ok = _check(rec, types, thread, meta)
    if ok is not None:
        notes.append(dropped_note(rank, int(len(ok) - ok.sum())))
        complete = False
        rec, types, thread = rec[ok], types[ok], thread[ok]
    return RankRecords(rank, rec, thread, meta or {}, complete, notes, types)


def dropped_note(rank, n):
    return f"rank {rank}: {n} corrupt records dropped from rank-{rank}.events"


_ITEM = np.dtype((np.void, EVENT_DTYPE.itemsize))  # a record as opaque bytes


class Checker:
    """read_rank's checks (_check) on one thread's records chunk by chunk, with the same
    result: a rule that looks at the record before (a sub-event must follow its call,
    in file order and in the same thread) sees the last record of the chunk before
    through a stand-in record put first. Chunks of one thread come in file order;
    `dropped` counts the records dropped so far."""

    def __init__(self, src):
        self.src = src
        self.meta = src.meta
        self.dropped = 0
        self.prev = None  # (type, kept) of the last record checked, per thread

    def new_thread(self):
        self.prev = None

    def __call__(self, parts, records, before=None):
        """The kept records of parts [(first, count, follows)] of records: follows
        says the part comes right after the one before in file order (same thread).
        before: records already checked to put first (the end of the chunk before),
        without a copy of the chunk to join them."""
        n = sum(c for _, c, _ in parts)
        b = 0 if before is None else len(before)
        # before, then a stand-in for the record checked last, then the parts
        full = np.empty(b + n + 1, EVENT_DTYPE)
        if b:
            full[:b] = before
        body = full[b:]
        pseudo = np.empty(n + 1, np.int32)  # a new number where file order breaks
        pos, group = 1, 0
        # copied as opaque items: a memcpy, ten times what numpy's copy of a structured
        # array field by field takes
        items, into = records.view(_ITEM), body.view(_ITEM)
        for a, c, follows in parts:
            into[pos : pos + c] = items[a : a + c]
            group += not follows
            pseudo[pos : pos + c] = group
            pos += c
        body[0] = np.zeros(1, EVENT_DTYPE)[0]
        pseudo[0] = 0
        typ, kept = self.prev if self.prev is not None else (T["ENTER"], True)
        # a kept call or sub-event lets a sub-event follow; a dropped record drops the
        # sub-events after it (an ENTER lets none follow, and is always kept)
        body[0]["type"] = (T["CALL"] if typ in SUB_OK.codes else T["ENTER"]) if kept else 255
        types = np.ascontiguousarray(body["type"])
        ok = _check(body, types, pseudo, self.meta)
        if n:
            self.prev = (int(types[-1]), ok is None or bool(ok[-1]))
        if ok is not None:
            self.dropped += int(n - ok[1:].sum())
            kept = body[1:][ok[1:]]
            return np.concatenate([before, kept]) if b else kept
        if b:
            # the records before move over the stand-in (they are few: a call's tail)
            full[1 : b + 1] = full[:b].copy()
        return full[1:]


def map_file(path):
    """The bytes of a file as a read-only numpy array over a mapping of it
    (readers/files.py: only a regular file)."""
    return read_array(path)


def rank_threads(exp, rank, meta):
    """The threads that wrote records in rank's trace, without reading the records: the
    BLOCK headers of a file with blocks, else the flush table of its JSON (meta)."""
    threads = {
        int(f.get("thread", 0)) for f in (meta or {}).get("flushes") or [] if isinstance(f, dict)
    }
    try:
        raw = map_file(trace_dir(exp) / f"rank-{rank}.events")
    except (OSError, FormatError):
        raw = np.zeros(0, np.uint8)
    if compact.is_compact(raw):
        c = raw[: len(raw) // compact.SIZE * compact.SIZE].view(compact.CEVENT)
        spans, _ = compact.blocks(c, rank, "")
        # a block's THREAD record is no event
        return sorted({t for _, n, t in spans if n > 1} | threads | {0})
    rec = raw[: len(raw) // EVENT_DTYPE.itemsize * EVENT_DTYPE.itemsize].view(EVENT_DTYPE)
    if len(rec) and rec["type"][0] == T["BLOCK"]:
        spans, _ = _spans(rec, rank, "")
        threads = {t for _, c, t in spans if c}
    return sorted(threads | {0})


def rank_thread_ids(exp, rank):
    """{thread: its OS thread id} of rank's trace, from its BLOCK records (version 4);
    threads without one (older traces, imported ones) are left out."""
    try:
        raw = map_file(trace_dir(exp) / f"rank-{rank}.events")
    except (OSError, FormatError):
        return {}
    if compact.is_compact(raw):
        return compact.thread_ids(raw)
    rec = raw[: len(raw) // EVENT_DTYPE.itemsize * EVENT_DTYPE.itemsize].view(EVENT_DTYPE)
    out, pos = {}, 0
    while pos < len(rec) and rec["type"][pos] == T["BLOCK"] and rec["t1"][pos] > 0:
        if rec["peer"][pos] > 0:
            out.setdefault(int(rec["tag"][pos]), int(rec["peer"][pos]))
        pos += 1 + int(rec["t1"][pos])
    return out


def _spans(rec, rank, name):
    """The committed records of a version 2-4 file as spans (first, count, thread) in
    file order, and notes on what was not right."""
    return compact.blocks(rec, rank, name, ("type", "t0", "t1", "tag"))


def _flush_spans(meta, n):
    """Spans (first, count, thread) of a version 1 file: the flush table's runs of
    records, thread 0 between them (as _threads assigns them)."""
    thread = _threads(meta, n)
    if not n:
        return []
    starts = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
    ends = np.r_[starts[1:], n]
    return [(int(a), int(b - a), int(thread[a])) for a, b in zip(starts, ends)]


def _threads(meta, n):
    thread = np.zeros(n, np.int32)
    if meta:
        for f in meta.get("flushes", []):
            a, c = int(f.get("first", 0)), int(f.get("count", 0))
            if 0 <= a <= n:
                thread[a : min(a + c, n)] = int(f.get("thread", 0))
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
    np.greater(sub[1:], SUB_OK(types[:-1]), out=orphan[1:])  # sub and not ok before
    if (thread != thread[0]).any():  # several threads
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

"""Chrome's Trace Event Format (chrome://tracing, ui.perfetto.dev) from an experiment's
event traces: one process per rank, one thread per recording thread, a complete event
("ph": "X") per MPI call, user region, trace buffer flush and I/O segment (the io
module's segment trace, `--io --trace`: "write out.0001", category "io"), and a flow
arrow from each send to the call that completed its receive. Messages are identified as `perfweave
analyze` matches them (source, destination, communicator, tag, sequence number).

Times are microseconds since the first event of the trace (its time on rank 0's clock,
in ns, is in "otherData"): CLOCK_MONOTONIC nanoseconds as microseconds would need more
digits than a double holds.

The file is written rank by rank, each rank read in chunks of records (RankStream), as
it is made: memory follows neither the trace nor the records of a rank, but what
carries from one chunk to the next (open requests, channels, open user regions). Each
kind of event is a layout (_Rows) filled with a chunk's columns; _format writes the
events by the C loop of libperfweave-json.so, or with numpy where that library is not
built (_Matrix), and a thread of its own writes them to the file (_Sink). No Python
object is made per event.
"""

import ctypes
import functools
import json
import os
import queue
import shutil
import tempfile
import threading
import time

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave.interop import (
    FLUSH_REGION,
    SUB,
    last_index,
    load,
    output_file,
    pair_regions,
    region_names,
)
from perfweave.model.grouping import rank_in_group
from perfweave._format import IO_LAYERS, IO_OPS
from perfweave.clock import global_ns, to_ns
from perfweave.model.trace import F, T, comm_keys, latest_post
from perfweave.readers.io import read_io
from perfweave.dtypes import TypeSet
from perfweave.symbols import Symbolizer

_SUBNAMES = {v: k for k, v in T.items()}
TAGGED = TypeSet("SEND", "RECV", "IRECV")
RECEIVED = TypeSet("COLL", "RMA")


# ASCII of two decimal digits, as the little-endian uint16 "dd"
_PAIRS = np.array([(48 + i // 10) | (48 + i % 10) << 8 for i in range(100)], np.uint16)
# ASCII of three decimal digits, zero-padded
_TRIPLES = np.array(
    [[48 + i // 100, 48 + i // 10 % 10, 48 + i % 10] for i in range(1000)], np.uint8
)
# lowercase hex of one byte, as the little-endian uint16 "xx"
_HEX_DIGITS = np.array(
    [ord("%x" % (i >> 4)) | ord("%x" % (i & 15)) << 8 for i in range(256)], np.uint16
)
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


def _decimal(v, neg=None):
    """Integers as an (n, width) byte matrix of ASCII, right-aligned: blanks, then a
    '-' for negative values (or where neg is set: "-0"), then the digits; width fits
    the widest value."""
    v = np.asarray(v, np.int64)
    n = len(v)
    neg = v < 0 if neg is None else neg
    a = np.abs(v)
    nd = np.ones(n, np.int64)
    top = int(a.max()) if n else 0
    for p in _POW10[_POW10 <= top].tolist():
        nd += a >= p
    sign = bool(neg.any())
    width = (int(nd.max()) if n else 1) + sign
    # two digits per step, zero-padded to an even width
    pairs = (width + 1) // 2
    m = np.empty((n, pairs), np.uint16)
    x = a.copy()
    for k in range(pairs - 1, -1, -1):
        x, d = np.divmod(x, 100)
        m[:, k] = _PAIRS[d]
    m = m.view(np.uint8)[:, 2 * pairs - width :]
    # leading zeros become blanks (and the sign), added modulo 256 from a table per
    # number of digits
    pos = np.arange(width)
    lead = pos[None, :] < (width - np.arange(width + 1))[:, None]
    delta = np.where(lead, 256 - 16, 0).astype(np.uint8)  # '0' -> ' '
    minus = delta.copy()
    minus[np.arange(1, width), width - 1 - np.arange(1, width)] = 256 - 3  # '0' -> '-'
    table = np.concatenate([delta, minus])
    m += table[nd + neg * (width + 1)]
    return m


# part kinds of a layout: the order of runtime/interop/json_rows.c's enum
_LIT, _NAME, _INT, _HEX, _US = range(5)
# the widest text of a number part: an int64 with its sign; 16 hex digits; an int64 of
# microseconds, '.' and three decimals
_WIDEST = {_INT: 20, _HEX: 16, _US: 24}


class _Rows:
    """n JSON events of one layout: its parts in order (literal text, a name from a
    table of JSON strings, an integer, 16 hex digits, nanoseconds as microseconds), each
    in every row or where its column of flags (present) says, with the column of each
    part's values. _format writes rows of one or several layouts: by the loop of
    libperfweave-json.so (runtime/interop/json_rows.c) where it is built, else as
    fixed-width rows of bytes built with whole-column numpy operations (_Matrix)."""

    def __init__(self, n):
        self.n = n
        self.parts = []  # (kind, literal bytes or column, table, present)

    def _add(self, kind, data, table=None, present=None):
        if present is not None:
            present = np.ascontiguousarray(present, bool)
        self.parts.append((kind, data, table, present))

    def lit(self, text, present=None):
        self._add(_LIT, text.encode(), present=present)

    def name(self, table, index, present=None):
        """table: JSON strings (quoted, escaped); index: which one, per row."""
        self._add(
            _NAME,
            np.ascontiguousarray(index, np.int64),
            [s.encode() for s in table] or [b'""'],
            present,
        )

    def int(self, values, present=None):
        """Integers (a '-' before negative ones)."""
        v = np.asarray(values).astype(np.int64)
        if present is not None:
            v = np.where(present, v, 0)
        self._add(_INT, np.ascontiguousarray(v), present=present)

    def hex(self, values):
        """Unsigned 64-bit values as 16 lowercase hex digits."""
        self._add(_HEX, np.ascontiguousarray(np.asarray(values).astype(np.uint64)))

    def us(self, ns, present=None):
        """Nanoseconds as microseconds with three decimals."""
        self._add(_US, np.ascontiguousarray(ns, np.int64), present=present)

    def widest(self):
        """The most bytes a row can take."""
        return sum(
            len(d) if k == _LIT else max(len(s) for s in t) if k == _NAME else _WIDEST[k]
            for k, d, t, _ in self.parts
        )


def _format(rows, which=None, buffer=None):
    """The events of several layouts (_Rows) back to back, in the order given by which
    (per event, the index of its layout; None: all of rows[0]), as bytes-like; buffer(n)
    gives the bytes to write them in (default: new ones)."""
    lib = _json_rows()
    if lib is None:
        return _Matrix.interleave(rows, which)
    n = rows[0].n if which is None else len(which)
    if not n:
        return b""
    parts, keep = [], []
    for r in rows:
        for kind, data, table, present in r.parts:
            p = _Part(kind=kind, len=len(data) if kind == _LIT else 0)
            if kind == _LIT:
                p.data = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p)
                keep.append(data)
            elif kind == _NAME:
                blob = b"".join(table)
                offsets = np.r_[0, np.cumsum([len(s) for s in table])].astype(np.int64)
                p.data = ctypes.cast(ctypes.c_char_p(blob), ctypes.c_void_p)
                p.offsets, p.index, p.ntable = offsets.ctypes.data, data.ctypes.data, len(table)
                keep += [blob, offsets]
            else:
                p.data = data.ctypes.data
            if present is not None:
                p.present = present.ctypes.data
            parts.append(p)
    nparts = np.array([len(r.parts) for r in rows], np.int64)
    if which is None:
        cap = n * rows[0].widest()
    else:
        counts = np.bincount(which, minlength=len(rows))
        cap = sum(int(c) * r.widest() for c, r in zip(counts.tolist(), rows))
    out = (buffer or _new_buffer)(cap)
    w = None if which is None else np.ascontiguousarray(which, np.int8)
    got = lib(
        out.ctypes.data,
        cap,
        (_Part * len(parts))(*parts),
        nparts.ctypes.data,
        len(rows),
        None if w is None else w.ctypes.data,
        n,
    )
    if got == ctypes.c_size_t(-1).value:
        raise RuntimeError("pw_json_rows: a row did not fit")  # a bug, not the user's
    return out[:got]


def _new_buffer(n):
    return np.empty(n, np.uint8)


class _Part(ctypes.Structure):
    """struct pw_part of runtime/interop/json_rows.c."""

    _fields_ = [
        ("kind", ctypes.c_int64),
        ("data", ctypes.c_void_p),
        ("offsets", ctypes.c_void_p),
        ("index", ctypes.c_void_p),
        ("present", ctypes.c_void_p),
        ("len", ctypes.c_int64),
        ("ntable", ctypes.c_int64),
    ]


@functools.lru_cache(maxsize=None)
def _json_rows():
    """pw_json_rows of libperfweave-json.so, or None where that library is not built (or
    was built for other part kinds); _format then builds rows with numpy."""
    from perfweave.launch import library_dir

    try:
        lib = ctypes.CDLL(str(library_dir() / "libperfweave-json.so"))
    except OSError:
        return None
    if lib.pw_json_kinds() != _US + 1 or lib.pw_json_part_size() != ctypes.sizeof(_Part):
        return None
    fn = lib.pw_json_rows
    fn.restype = ctypes.c_size_t
    fn.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.POINTER(_Part),
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    return fn


class _Matrix:
    """The numpy formatter of layouts (_Rows), where libperfweave-json.so is not built:
    each part becomes an (n, w) byte matrix of whole-column operations, numbers
    right-aligned in fields as wide as the largest value of the block, names padded
    after their closing quote, absent parts blanks (JSON allows the blanks); no Python
    object is made per event."""

    def __init__(self, rows):
        self.n = rows.n
        self.parts = []  # (bytes of a literal, or an (n, w) matrix; present)
        for kind, data, table, present in rows.parts:
            if kind == _LIT:
                self.parts.append((data, present))
            elif kind == _NAME:
                w = max(len(s) for s in table)
                t = np.full((len(table), w), 32, np.uint8)
                for i, s in enumerate(table):
                    t[i, : len(s)] = np.frombuffer(s, np.uint8)
                items = t.view(f"V{w}")[:, 0][data]
                self.parts.append((items.view(np.uint8).reshape(self.n, w), present))
            elif kind == _INT:
                self.parts.append((_decimal(data), present))
            elif kind == _HEX:
                b = data.astype(">u8").view(np.uint8).reshape(self.n, 8)
                self.parts.append((_HEX_DIGITS[b].view(np.uint8), None))
            else:
                a = np.abs(data)
                neg = data < 0
                if present is not None:
                    a, neg = np.where(present, a, 0), neg & present
                self.parts.append((_decimal(a // 1000, neg), present))
                self.parts.append((b".", present))
                self.parts.append((_TRIPLES[a % 1000], present))

    def width(self):
        return sum(len(p) if isinstance(p, bytes) else p.shape[1] for p, _ in self.parts)

    def fill(self, out):
        """Write the rows into out, an (n, >= width) byte matrix; columns after the
        layout's width become blanks."""
        tmpl = np.full(out.shape[1], 32, np.uint8)
        c = 0
        for p, _ in self.parts:
            w = len(p) if isinstance(p, bytes) else p.shape[1]
            if isinstance(p, bytes):
                tmpl[c : c + w] = np.frombuffer(p, np.uint8)
            c += w
        out[:] = tmpl
        c = 0
        for p, present in self.parts:
            w = len(p) if isinstance(p, bytes) else p.shape[1]
            # one w-byte item per row: much faster than w columns of bytes
            col = out[:, c : c + w].view(f"V{w}")[:, 0]
            if not isinstance(p, bytes):
                col[...] = np.ascontiguousarray(p).view(f"V{w}")[:, 0]
            if present is not None:
                col[~np.asarray(present, bool)] = np.full(w, 32, np.uint8).view(f"V{w}")[0]
            c += w

    @staticmethod
    def interleave(rows, which):
        """The rows of several layouts back to back in the order given by which (None:
        all of rows[0]) as one byte matrix; narrower rows end in blanks."""
        mats = [_Matrix(r) for r in rows]
        if which is None:
            which = np.zeros(rows[0].n, np.int64)
        width = max(m.width() for m in mats)
        out = np.empty((len(which), width), np.uint8)
        for k, m in enumerate(mats):
            sel = np.flatnonzero(which == k)
            if not len(sel):
                continue
            if len(sel) == len(which):
                m.fill(out)
            else:
                part = np.empty((len(sel), width), np.uint8)
                m.fill(part)
                out[sel] = part
        return out


def _quoted(names):
    return [json.dumps(str(n)) for n in names]


def export(exp, out=None, force=False, symbolizer=None):
    """Write experiment exp's traces as Chrome trace JSON to out (default
    EXP/export/trace.json). Returns a summary dict (path, events, records, seconds)."""
    t_start = time.perf_counter()
    X = load(exp)
    path = output_file(exp, out, "trace.json", force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ends = tempfile.mkdtemp(prefix=f".{path.name}.flows.", dir=path.parent)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    # one for every rank of the export: it keeps what it found (addr2line runs once)
    symbolizer = symbolizer or Symbolizer()
    try:
        origin, channels, found = _first_pass(X, ends, path)
        segments = _io_segments(X)
        if any(len(s) for s in segments.values()):
            origin = min(origin, min(int(s["t0"].min()) for s in segments.values() if len(s)))
        return _second_pass(X, path, ends, origin, channels, found, symbolizer, t_start, segments)
    finally:
        shutil.rmtree(ends, ignore_errors=True)


def _cannot_write(path, e):
    return PerfweaveError(f"{path}: cannot write ({e.strerror or e})")


def _second_pass(X, path, ends, origin, channels, found, symbolizer, t_start, segments):
    """Write the file: every rank's events, then what describes the trace."""
    counts = {"events": 0, "calls": 0, "flows": 0, "records": 0}
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp.", dir=path.parent)
    except OSError as e:
        raise _cannot_write(path, e) from None
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as raw:
            f = _Sink(raw)
            try:
                f.write(b'{"traceEvents":[\n')
                first = True
                for r in X.ranks:
                    first = _rank(f, X, found[r], origin, symbolizer, counts, first)
                    first = _segments(f, r, segments.get(r), origin, counts, first)
                    first = _flows(f, found[r], origin, channels, counts, first)
                other = {
                    "generator": "perfweave export --format chrome",
                    "experiment": str(X.path),
                    "origin_ns": origin,
                    "clock": "ns on rank 0's CLOCK_MONOTONIC; ts = (t - origin_ns) / 1000",
                    "notes": X.notes,
                }
                f.write(
                    b'\n],"displayTimeUnit":"ns","otherData":' + json.dumps(other).encode() + b"}\n"
                )
            finally:
                f.close()
        os.replace(tmp, path)
    except OSError as e:
        raise _cannot_write(path, e) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {
        "path": str(path),
        "events": counts["events"],
        "calls": counts["calls"],
        "flows": counts["flows"],
        "records": counts["records"],
        "io_segments": counts.get("segments", 0),
        "ranks": len(X.ranks),
        "seconds": time.perf_counter() - t_start,
        "notes": X.notes,
    }


# what a flow event needs of one end of a message, kept on disk between the passes
_END = np.dtype(
    [
        ("chan", np.uint64),
        ("seq", np.int64),
        ("thread", np.int64),
        ("ts", np.int64),
        ("bytes", np.int64),
    ]
)
# a message end of the first pass until its number is known and it is written: its
# place in the order of posting (k1, thread, idx), whether k1 is known (a receive
# completed before the pass met its post: not yet), the post it waits for (kind: 0 a
# post number, 1 a request key; value), its own k1 if that post never comes, and whether
# it goes to the file (messages to and from real ranks)
_PENDING = np.dtype(
    _END.descr
    + [
        ("k1", np.int64),
        ("idx", np.int64),
        ("ready", bool),
        ("kind", np.int8),
        ("value", np.int64),
        ("own", np.int64),
        ("out", bool),
    ]
)
_PENDING_ITEM = np.dtype((np.void, _PENDING.itemsize))
assert _PENDING.descr[: len(_END.descr)] == _END.descr
_NEVER = np.iinfo(np.int64).min  # a user region's end: not left in its thread
_LAST = np.iinfo(np.int64).max
FIRST_TIMED = TypeSet("CALL", "FLUSH", "ENTER")


def _first_pass(X, ends, path):
    """What the file needs before its first event, from a pass over the ranks that
    keeps little: the time (ns, rank 0's clock) of the trace's first timed record, and
    the channels of messages with their numbers of sends and receives (_Channels).
    Each rank's message ends are numbered here (_RankPass) and written to directory
    ends for _flows, with the ends of its user regions, rather than found again there."""
    first, found = [], {}
    sends, recvs = [], []
    for r in X.ranks:
        p = _RankPass(X.stream(r), ends, path)
        p.run()
        if p.t_min is not None and p.meta.get("clock"):
            # ticks become ns by an increasing linear map: the first stays the first
            first.append(int(to_ns(p.meta, p.t_min)[0]))
        sends.append(p.messages[0].counts.table())
        recvs.append(p.messages[1].counts.table())
        found[r] = p
    return (min(first) if first else 0), _Channels(sends, recvs), found


class _RankPass:
    """The first pass over one rank, chunk by chunk (RankStream), and what it leaves
    for the second: the rank's threads, the end of its user regions (a file per
    thread, the end of each ENTER in order), its message ends (a file per kind and
    thread, in the order of the records).

    A message's number on its channel counts the rank's earlier messages of the
    channel in the order of posting, as perfweave analyze numbers them
    (model/trace.py _messages): the order of the records with one thread (a receive
    posted by an MPI_Irecv at the place of its post), of the calls' enter times with
    several (then thread, then record). A receive's channel is known at its
    completion (MPI_ANY_SOURCE), after later posts may have completed: messages wait
    here until no message posted before them can still come (the watermark: the
    position every thread has reached, and the oldest open receive request), then are
    numbered in order and written. With several threads, the threads' chunks are read
    side by side, the thread that is behind in time first. What is carried: open
    requests, per channel its count, messages waiting for an earlier one, open user
    regions; not the rank."""

    def __init__(self, stream, ends, path):
        self.stream, self.rank, self.meta = stream, stream.rank, stream.meta
        self.ends, self.path = ends, path
        self.timed = len(stream.threads()) > 1
        _, ckeys = comm_keys(self.meta)
        self.comm_keys = np.r_[np.int64(0), ckeys].astype(np.int64)
        self.t_min = None  # ticks: the first CALL, FLUSH or ENTER
        self.seen = set()  # threads with records
        self.enter_max = None  # ns: the last ENTER's time
        self.stacks, self.nenter = {}, {}  # per thread: open ENTERs (their number), ENTERs
        self.fds, self.sizes = {}, {}
        self.messages = (_Messages(self, "sends"), _Messages(self, "recvs"))
        self.posts = (_Posts(), _Posts())  # open receive requests by number, by key
        self.threads = [0]
        self.end_of_rank = 0

    def file(self, name):
        return os.path.join(self.ends, f"{name}-{self.rank}.bin")

    def put(self, name, data, offset=None):
        """Write bytes to file name (at its end, or at offset)."""
        try:
            if name not in self.fds:
                self.fds[name] = os.open(self.file(name), os.O_WRONLY | os.O_CREAT, 0o600)
                self.sizes[name] = 0
            if offset is None:
                offset = self.sizes[name]
                self.sizes[name] += len(data)
            os.pwrite(self.fds[name], data, offset)
        except OSError as e:
            raise _cannot_write(self.path, e) from None

    def run(self):
        stream = self.stream
        stream.begin()
        threads = stream.threads()
        chunks = {t: stream.thread_chunks(t, base=0) for t in threads}
        # per thread: no later message of it is posted before this (a record's index
        # with one thread, a call's enter time with several)
        reached = {t: _NEVER for t in threads}
        try:
            while chunks:
                t = min(chunks, key=lambda u: (reached[u], u))
                c = next(chunks[t], None)
                if c is None:
                    del chunks[t]
                    reached[t] = _LAST
                else:
                    reached[t] = max(reached[t], self.chunk(c))
                if not chunks:
                    # the rank's end: requests never completed posted no message
                    self.messages[1].give_up_waiting()
                    self.posts = (_Posts(), _Posts())
                below = min(reached.values(), default=_LAST)
                self.messages[0].settle(below)
                self.messages[1].settle(min([below] + [p.oldest() for p in self.posts]))
        finally:
            for fd in self.fds.values():
                os.close(fd)
        stream.end()
        self.threads = sorted(self.seen | {0})
        self.end_of_rank = (
            stream.t_end if self.enter_max is None else max(stream.t_end, self.enter_max)
        )

    def chunk(self, c):
        """Take one chunk (of one thread); returns how far its thread has come."""
        rec, typ, n = c.rec, c.rec["type"], len(c.rec)
        t = int(c.thread[0])
        self.seen.add(t)
        pos = c.base + np.arange(n)
        firsts = rec["t0"][FIRST_TIMED(typ)]
        if len(firsts):
            m = firsts.min(keepdims=True)
            self.t_min = m if self.t_min is None else np.minimum(self.t_min, m)
        is_call = typ == T["CALL"]
        # the call of each record (a sub-event follows its call in the chunk)
        owner = np.maximum(last_index(is_call), 0)
        # where each record's message stands in the order of posting
        k = c.t0[owner] if self.timed else pos
        self._regions(c, t, typ)
        self._sends(c, t, typ, pos, owner, k)
        self._recvs(c, t, typ, pos, owner, k)
        if self.timed:
            return int(c.t0[is_call].max()) if is_call.any() else _NEVER
        return c.base + n

    def _local_comm(self, comm):
        lc = comm.astype(np.int64) + 1
        lc[(lc < 0) | (lc >= len(self.comm_keys))] = 0
        return lc

    def _rows(self, c, t, i, pos, k, peer, src, dst):
        rec = c.rec
        rows = np.zeros(len(i), _PENDING)
        rows["chan"] = _hash(
            src, dst, self.comm_keys[self._local_comm(rec["comm"][i])], rec["tag"][i]
        )
        rows["seq"], rows["thread"], rows["idx"] = -1, t, pos[i]
        rows["k1"], rows["own"], rows["ready"], rows["out"] = k[i], k[i], True, peer >= 0
        return rows

    def _sends(self, c, t, typ, pos, owner, k):
        S = np.flatnonzero((typ == T["SEND"]) & (c.rec["peer"] >= 0))
        peer = c.rec["peer"][S]
        rows = self._rows(c, t, S, pos, k, peer, np.full(len(S), self.rank), peer)
        rows["ts"] = c.t0[owner[S]]
        self.messages[0].add(rows)

    def _recvs(self, c, t, typ, pos, owner, k):
        rec = c.rec
        P = np.flatnonzero(typ == T["IRECV"])
        V = np.flatnonzero(typ == T["RECV"])
        peer = rec["peer"][V]
        rows = self._rows(c, t, V, pos, k, peer, peer, np.full(len(V), self.rank))
        # the arrow ends inside the receiving call, just before its end
        cb, ce = c.t0[owner[V]], c.t1[owner[V]]
        rows["ts"], rows["bytes"] = ce - np.minimum(1, ce - cb), rec["bytes"][V]
        # a receive with a request was posted by the MPI_Irecv of its post: by number
        # (the runtime's), else by request key (imported traces)
        done = rec["t0"][V] != 0
        rows["kind"] = np.where(rec["t1"][V] > 0, 0, 1)
        rows["value"] = np.where(rows["kind"] == 0, rec["t1"][V], rec["t0"][V])
        rows["ready"] = ~done
        pending = self.messages[1]
        waiting = np.flatnonzero(~pending.rows["ready"])
        pnum = rec["t1"][P] > 0
        for kind, posted in ((0, pnum), (1, ~pnum)):
            here = np.flatnonzero(done & (rows["kind"] == kind))
            old = waiting[pending.rows["kind"][waiting] == kind]
            pi = P[posted]
            found, ok = self.posts[kind].link(
                rec["t1" if kind == 0 else "t0"][pi],
                k[pi],
                pi,
                np.r_[rows["value"][here], pending.rows["value"][old]],
                np.r_[V[here], np.full(len(old), _LAST)],
            )
            rows["k1"][here[ok[: len(here)]]] = found[: len(here)][ok[: len(here)]]
            rows["ready"][here[ok[: len(here)]]] = True
            if not self.timed:
                # one thread: a completion meets its post after it; none: unlinked
                rows["ready"][here] = True
            got = old[ok[len(here) :]]
            pending.rows["k1"][got] = found[len(here) :][ok[len(here) :]]
            pending.rows["ready"][got] = True
        pending.add(rows)

    def _regions(self, c, t, typ):
        """The end of each ENTER of the chunk (the time of its LEAVE, or _NEVER) to the
        thread's regions file; ENTERs left open wait on a stack for theirs."""
        enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
        ei = np.flatnonzero(enter)
        if not len(ei) and not leave.any():
            return
        stack = self.stacks.get(t, np.zeros(0, np.int64))
        s = len(stack)
        partner, _, _ = pair_regions(
            np.r_[np.ones(s, bool), enter], np.r_[np.zeros(s, bool), leave]
        )
        first = self.nenter.get(t, 0)
        pc = partner[s + ei]
        end = np.where(pc >= 0, c.t0[np.maximum(pc - s, 0)], _NEVER)
        name = f"regions-{t}"
        self.put(name, end.astype(np.int64).tobytes())
        closed = partner[:s] >= 0
        for o, e in zip(stack[closed].tolist(), c.t0[partner[:s][closed] - s].tolist()):
            self.put(name, np.int64(e).tobytes(), offset=8 * o)
        self.stacks[t] = np.r_[stack[~closed], first + np.flatnonzero(pc < 0)]
        self.nenter[t] = first + len(ei)
        if len(ei):
            m = int(c.t0[ei].max())
            self.enter_max = m if self.enter_max is None else max(self.enter_max, m)


class _Posts:
    """Open receive requests of one kind (by post number, or by request key): the
    value that names each and its place in the order of posting."""

    def __init__(self):
        self.value = np.zeros(0, np.int64)
        self.k1 = np.zeros(0, np.int64)

    def oldest(self):
        return int(self.k1.min()) if len(self.k1) else _LAST

    def link(self, pv, pk, porder, dv, dorder):
        """Post the requests (values pv, places pk, record order porder) and complete
        those of values dv (record order dorder; _LAST for completions met before):
        each completion takes the latest post of its value before it, which is no
        longer open. Returns (place of each completion's post, found)."""
        nold = len(self.value)
        allv = np.r_[self.value, np.asarray(pv, np.int64)]
        allk = np.r_[self.k1, np.asarray(pk, np.int64)]
        npost = len(allv)
        if not len(dv):
            self.value, self.k1 = allv, allk
            return np.zeros(0, np.int64), np.zeros(0, bool)
        order = np.r_[np.full(nold, -1, np.int64), porder]
        post = latest_post(allv, order, dv, dorder)
        used = np.zeros(npost, bool)
        used[post[post >= 0]] = True
        self.value, self.k1 = allv[~used], allk[~used]
        return np.where(post >= 0, allk[np.maximum(post, 0)], 0), post >= 0


class _Messages:
    """One rank's sends (or receives) between their record and their file: numbered on
    their channel (_Counters) when no message can still come before them, and written
    (per thread, in the order of its records) once every earlier one of the thread
    has its number."""

    def __init__(self, owner, which):
        self.owner, self.which = owner, which
        self.rows = np.zeros(0, _PENDING)
        self.counts = _Counters()

    def add(self, rows):
        if len(self.rows):
            rows = np.concatenate([self.rows.view(_PENDING_ITEM), rows.view(_PENDING_ITEM)]).view(
                _PENDING
            )
        self.rows = rows

    def give_up_waiting(self):
        """The rank's end: a completion whose post never came was posted by itself."""
        w = ~self.rows["ready"]
        self.rows["k1"][w] = self.rows["own"][w]
        self.rows["ready"][w] = True

    def settle(self, below):
        """Number the messages posted before below (the watermark); write those that
        can be."""
        p = self.rows
        todo = np.flatnonzero(p["ready"] & (p["seq"] < 0) & (p["k1"] < below))
        if len(todo):
            todo = todo[np.lexsort((p["idx"][todo], p["thread"][todo], p["k1"][todo]))]
            out = p["out"][todo]
            p["seq"][todo[~out]] = 0  # not to the file, on no real rank's channel
            p["seq"][todo[out]] = self.counts.number(p["chan"][todo[out]])
        if not len(p):
            return
        keep = np.ones(len(p), bool)
        for t in np.unique(p["thread"]).tolist():
            i = np.flatnonzero(p["thread"] == t)
            waits = np.flatnonzero(p["seq"][i] < 0)
            i = i[: waits[0]] if len(waits) else i
            if len(i):
                keep[i] = False
                # the _END fields lead each _PENDING row: its first bytes
                e = p.view(_PENDING_ITEM)[i[p["out"][i]]]
                ends = e.view(np.uint8).reshape(len(e), _PENDING.itemsize)[:, : _END.itemsize]
                self.owner.put(f"{self.which}-{t}", ends.tobytes())
        if not keep.all():
            self.rows = p.view(_PENDING_ITEM)[keep].view(_PENDING)


class _Counters:
    """Messages so far per channel (64-bit channel hash -> count), as sorted arrays."""

    def __init__(self):
        self.keys = np.zeros(0, np.uint64)
        self.n = np.zeros(0, np.int64)

    def number(self, chan):
        """The numbers of messages of channels chan, given in the order of posting."""
        u, inv = np.unique(chan, return_inverse=True)
        inv = inv.reshape(-1)
        j = np.clip(np.searchsorted(self.keys, u), 0, max(len(self.keys) - 1, 0))
        known = (self.keys[j] == u) if len(self.keys) else np.zeros(len(u), bool)
        base = np.where(known, self.n[j] if len(self.keys) else 0, 0)
        seq = base[inv] + rank_in_group(inv, len(u))
        cnt = np.bincount(inv, minlength=len(u))
        self.n[j[known]] += cnt[known]
        if not known.all():
            keys = np.r_[self.keys, u[~known]]
            n = np.r_[self.n, cnt[~known]]
            o = np.argsort(keys, kind="stable")
            self.keys, self.n = keys[o], n[o]
        return seq

    def table(self):
        return self.keys, self.n


class _Channels:
    """Messages per channel as sent and as received, over all ranks: message k of a
    channel has both ends when k is below both counts (an arrow without its other end
    is left out)."""

    def __init__(self, sends, recvs):
        def merge(parts):
            if not parts:
                return np.zeros(0, np.uint64), np.zeros(0, np.int64)
            u = np.concatenate([p[0] for p in parts])
            n = np.concatenate([p[1] for p in parts])
            uu, inv = np.unique(u, return_inverse=True)
            out = np.zeros(len(uu), np.int64)
            np.maximum.at(out, inv.reshape(-1), n)
            return uu, out

        self.sends, self.recvs = merge(sends), merge(recvs)

    @staticmethod
    def _count(table, chan):
        keys, n = table
        if not len(keys):
            return np.zeros(len(chan), np.int64)
        j = np.clip(np.searchsorted(keys, chan), 0, len(keys) - 1)
        return np.where(keys[j] == chan, n[j], 0)

    def matched(self, chan, seq):
        return seq < np.minimum(self._count(self.sends, chan), self._count(self.recvs, chan))


class _Sink:
    """The output file, written by a thread of its own: the bytes of one chunk go to
    the file (the kernel, the disk) while the next chunk is read and formatted. Holds
    at most QUEUED blocks; `buffer` hands out the buffers _format fills for it in turn
    (QUEUED + 2: one being filled, one being written, the queued ones), kept from one
    block to the next so their pages stay mapped, none reused while in use. A failed
    write is raised by the next call."""

    QUEUED = 2

    def __init__(self, f):
        self.f, self.error = f, None
        self.q = queue.Queue(self.QUEUED)
        self.buffers = [np.zeros(0, np.uint8) for _ in range(self.QUEUED + 2)]
        self.turn = 0
        self.thread = threading.Thread(target=self._run, name="chrome-writer", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            data = self.q.get()
            try:
                if data is None:
                    return
                if self.error is None:
                    self.f.write(data)
            except Exception as e:  # kept for the main thread, which waits on q
                self.error = e
            finally:
                self.q.task_done()

    def _check(self):
        if self.error is not None:
            raise self.error

    def buffer(self, n):
        """n bytes or more for a block that will be written by write() before the next
        call of buffer() (or not at all)."""
        k = self.turn = (self.turn + 1) % len(self.buffers)
        if len(self.buffers[k]) < n:
            self.buffers[k] = np.empty(max(n, 2 * len(self.buffers[k])), np.uint8)
        return self.buffers[k]

    def write(self, data):
        self._check()
        self.q.put(data)

    def copy(self, src):
        """Append file object src (after what is queued)."""
        self.q.join()
        self._check()
        shutil.copyfileobj(src, self.f, 1 << 20)

    def close(self):
        """Wait for the queued writes; raise the first that failed."""
        self.q.put(None)
        self.thread.join()
        self._check()


def _write(f, data, first):
    """Write a chunk of events (each starting with ',' unless it is the very first);
    data: bytes or a byte matrix (written as it is, without a copy)."""
    data = memoryview(data).cast("B")
    if not len(data):
        return first
    if first:
        data = data[1:]
    f.write(data)
    return False


def _meta_events(r, threads):
    out = [
        {"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}},
        {"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}},
    ]
    for t in threads:
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": r,
                "tid": int(t),
                "args": {"name": "master thread" if t == 0 else f"thread {t}"},
            }
        )
    return "".join("," + json.dumps(e, separators=(",", ":")) for e in out).encode()


def _rank(f, X, p, origin, symbolizer, counts, first):
    """Rank p.rank's events chunk by chunk (RankStream): its MPI calls as they come;
    its flushes and user regions, which follow all its calls in the file, to temporary
    files until then."""
    r = p.rank
    first = _write(f, _meta_events(r, p.threads), first)
    counts["events"] += 2 + len(p.threads)
    # the first pass's stream: its file open, its spans found; a second pass anew
    stream = p.stream
    fnames = _quoted(list(stream.functions) + ["?"])
    regions = {}  # thread -> its file of the ends of its ENTERs
    try:
        later = [tempfile.TemporaryFile(dir=p.ends) for _ in range(2)]
    except OSError as e:
        raise _cannot_write(p.path, e) from None
    try:
        for c in stream.chunks():
            counts["records"] += len(c.rec)
            first = _calls(f, c, fnames, origin, counts, first)
            _spans(later, c, p, regions, origin, symbolizer, counts)
        for t in later:
            t.seek(0)
            f.copy(t)
    finally:
        for t in later + list(regions.values()):
            t.close()
    X.notes.extend(stream.finish_notes())
    return first


def _calls(f, c, fnames, origin, counts, first):
    """The MPI calls of one chunk, with what they did."""
    rec, typ, thr = c.rec, c.rec["type"], c.thread
    # each sub-record belongs to the CALL before it (in the chunk: RankStream)
    is_call = typ == T["CALL"]
    is_sub = SUB(typ) & (last_index(is_call) >= 0)
    kept = is_call | is_sub
    # a call's events list closes at its last sub-record
    nxt_sub = np.r_[is_sub[1:], False]
    has_sub = is_call & nxt_sub
    last_sub = is_sub & ~nxt_sub
    sub_names = _quoted([_SUBNAMES.get(k, "?") for k in range(256)])
    idx = np.flatnonzero(kept)
    if not len(idx):
        return first
    call = is_call[idx]
    c_, u = idx[call], idx[~call]
    # an MPI call: {"name":..,"cat":"MPI","ph":"X","pid":..,"tid":..,"ts":..,"dur":..
    # then "args":{"events":[ if it did something, else }
    R = _Rows(len(c_))
    R.lit(',{"name":')
    R.name(fnames, np.minimum(rec["fn"][c_].astype(np.int64), len(fnames) - 1))
    R.lit(f',"cat":"MPI","ph":"X","pid":{int(c.rank)},"tid":')
    R.int(thr[c_])
    R.lit(',"ts":')
    R.us(c.t0[c_] - origin)
    R.lit(',"dur":')
    R.us(np.maximum(c.t1[c_] - c.t0[c_], 0))
    hs = has_sub[c_]
    R.lit(',"args":{"events":[', hs)
    R.lit("}", ~hs)
    # what it did: {"type":..[,"peer":..][,"tag":..][,"bytes":..][,"bytes_received":..]
    # [,"nonblocking":true]} then , or ]}}
    st = typ[u]
    Q = _Rows(len(u))
    Q.lit('{"type":')
    Q.name(sub_names, st)
    peer = rec["peer"][u]
    Q.lit(',"peer":', peer >= 0)
    Q.int(peer, peer >= 0)
    tagged = TAGGED(st)
    Q.lit(',"tag":', tagged)
    Q.int(rec["tag"][u], tagged)
    nb = rec["bytes"][u]
    Q.lit(',"bytes":', nb != 0)
    Q.int(nb, nb != 0)
    got = np.where(RECEIVED(st), rec["t1"][u], 0)
    Q.lit(',"bytes_received":', got != 0)
    Q.int(got, got != 0)
    Q.lit(',"nonblocking":true', (rec["flags"][u] & F["NONBLOCKING"]) != 0)
    ls = last_sub[u]
    Q.lit("},", ~ls)
    Q.lit("}]}}", ls)
    first = _write(f, _format([R, Q], (~call).astype(np.int8), f.buffer), first)
    counts["calls"] += len(c_)
    counts["events"] += len(c_)
    return first


def _io_segments(X):
    """{rank: the I/O segments of its process} (names, tracks and times of rank 0's
    clock): t0, t1, tid, name, bytes, offset, layer. A segment goes on the track of the
    trace's thread that has its OS thread id (the trace's BLOCK records name it), so a
    thread's I/O and its MPI calls share one track; a thread the trace does not know (no
    MPI event) gets a track of its own, its OS id, as does every thread but the main one
    of a trace older than version 4."""
    io = read_io(X.path)
    X.notes.extend(io.notes)
    g = io.segments
    if not len(g):
        return {}
    base = [f.rsplit("/", 1)[-1] for f in io.files]
    names = _quoted([f"{op} {b}" for op in IO_OPS for b in base])
    out = {}
    for r in X.ranks:
        s = g[g["rank"] == r]
        meta = X.metas.get(r) or {}
        if not len(s) or not meta.get("clock"):
            continue
        known = X.thread_ids(r)
        if not known:  # an older trace: its thread 0 is the process's main thread
            known = {0: int(io.processes["pid"][s["process"][0]])}
        tids = np.array(list(known.values()), np.int64)
        threads = np.array(list(known.keys()), np.int64)
        at = np.minimum(np.searchsorted(np.sort(tids), s["tid"]), len(tids) - 1)
        order = np.argsort(tids)
        hit = tids[order][at] == s["tid"]
        out[r] = {
            "t0": global_ns(meta, s["t0_ns"]),
            "t1": global_ns(meta, s["t1_ns"]),
            "tid": np.where(hit, threads[order][at], s["tid"]),
            "own": ~hit,
            "name": s["op"].astype(np.int64) * len(base) + s["file"],
            "names": names,
            "bytes": s["bytes"],
            "offset": s["offset"],
            "layer": s["layer"],
        }
    return out


def _segments(f, r, s, origin, counts, first):
    """Rank r's I/O segments as complete events ("cat": "io") with their bytes, offset
    and layer; a track of their own for threads the trace does not know."""
    if s is None:
        return first
    other = np.unique(s["tid"][s["own"]])
    meta = [
        {
            "ph": "M",
            "name": "thread_name",
            "pid": r,
            "tid": int(t),
            "args": {"name": f"I/O of thread {t}"},
        }
        for t in other.tolist()
    ]
    first = _write(
        f, "".join("," + json.dumps(e, separators=(",", ":")) for e in meta).encode(), first
    )
    R = _Rows(len(s["t0"]))
    R.lit(',{"name":')
    R.name(s["names"], s["name"])
    R.lit(f',"cat":"io","ph":"X","pid":{int(r)},"tid":')
    R.int(s["tid"])
    R.lit(',"ts":')
    R.us(s["t0"] - origin)
    R.lit(',"dur":')
    R.us(np.maximum(s["t1"] - s["t0"], 0))
    R.lit(',"args":{"bytes":')
    R.int(s["bytes"])
    R.lit(',"offset":')
    R.int(s["offset"])
    R.lit(',"layer":')
    R.name(_quoted(IO_LAYERS), s["layer"])
    R.lit("}}")
    counts["events"] += len(meta) + len(s["t0"])
    counts["segments"] = counts.get("segments", 0) + len(s["t0"])
    return _write(f, _format([R]), first)


def _complete(f, counts, name_table, names, cat, pid, tid, t0, t1, args=None):
    """Complete events ("ph": "X") of one category; args: {"bytes": ...} values."""
    R = _Rows(len(t0))
    R.lit(',{"name":')
    R.name(name_table, names)
    R.lit(f',"cat":"{cat}","ph":"X","pid":{int(pid)},"tid":')
    R.int(tid)
    R.lit(',"ts":')
    R.us(t0)
    R.lit(',"dur":')
    R.us(np.maximum(t1 - t0, 0))
    if args is not None:
        R.lit(',"args":{"bytes":')
        R.int(args)
        R.lit("}")
    R.lit("}")
    counts["events"] += len(t0)
    _write(f, _format([R]), False)


def _spans(later, c, p, regions, origin, symbolizer, counts):
    """Trace buffer flushes (the tracer's own time) to later[0] and user regions to
    later[1], of one chunk; a region's end is in its thread's file of the first pass."""
    rec, typ, thr = c.rec, c.rec["type"], c.thread
    s = np.flatnonzero(typ == T["FLUSH"])
    if len(s):
        _complete(
            later[0],
            counts,
            _quoted([FLUSH_REGION]),
            np.zeros(len(s), int),
            "perfweave",
            c.rank,
            thr[s],
            c.t0[s] - origin,
            c.t1[s] - origin,
            rec["bytes"][s],
        )
    enter = typ == T["ENTER"]
    ei = np.flatnonzero(enter)
    if not len(ei):
        return
    t = int(thr[0])
    if t not in regions:
        try:
            regions[t] = open(p.file(f"regions-{t}"), "rb")
        except OSError as e:
            raise _cannot_write(p.path, e) from None
    end = np.fromfile(regions[t], np.int64, count=len(ei))
    end = np.where(end == _NEVER, p.end_of_rank, end)
    rnames, _, _ = region_names(c, enter, symbolizer)
    table, which = np.unique(rnames.astype(str), return_inverse=True)
    _complete(
        later[1],
        counts,
        _quoted(table.tolist()),
        which.reshape(-1),
        "user",
        c.rank,
        thr[ei],
        c.t0[ei] - origin,
        end - origin,
    )


def _hash(*cols):
    """A 64-bit hash per row of integer columns (splitmix64 steps)."""
    h = np.full(len(cols[0]), 0x9E3779B97F4A7C15, np.uint64)
    with np.errstate(over="ignore"):
        for v in cols:
            h ^= np.asarray(v).astype(np.int64).view(np.uint64)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0x94D049BB133111EB)
    return h


def _flows(f, p, origin, channels, counts, first):
    """Flow events of rank p.rank: "s" at each send's call, "f" just before the end of
    the call that completed each receive, read from the first pass's files in chunks.
    Both ends compute the message's id alone from its channel and number, so ranks are
    written one at a time."""
    from perfweave.interop import CHUNK_RECORDS

    r = p.rank
    for which in ("sends", "recvs"):
        for t in p.threads:
            name = p.file(f"{which}-{t}")
            if not os.path.exists(name):
                continue
            left = os.path.getsize(name) // _END.itemsize
            with open(name, "rb") as src:
                while left:
                    e = np.fromfile(src, _END, count=min(left, CHUNK_RECORDS))
                    left -= len(e)
                    if not len(e):
                        break
                    first = _flow_rows(
                        f, r, which, e[channels.matched(e["chan"], e["seq"])], origin, counts, first
                    )
    return first


def _flow_rows(f, r, which, e, origin, counts, first):
    if not len(e):
        return first
    R = _Rows(len(e))
    R.lit(
        ',{"name":"message","cat":"p2p","ph":"%s","id":"0x'
        % ("s" if which == "sends" else 'f","bp":"e')
    )
    R.hex(_hash(e["chan"], e["seq"]))
    R.lit(f'","pid":{int(r)},"tid":')
    R.int(e["thread"])
    R.lit(',"ts":')
    R.us(e["ts"] - origin)
    if which == "sends":
        R.lit("}")
        counts["flows"] += len(e)
    else:
        R.lit(',"args":{"bytes":')
        R.int(e["bytes"])
        R.lit("}}")
    counts["events"] += len(e)
    return _write(f, _format([R], buffer=f.buffer), first)

"""OTF2 archives through the `otf2` package (PyPI): `export` writes an experiment's traces
as an OTF2 archive, `import_archive` turns an OTF2 archive (Score-P's, or one written by
`export`) into an experiment that `perfweave analyze` reads. What maps to what, and what
is lost either way, is in docs/interop.md.

The otf2 package hands events over one Python call at a time. Both directions therefore
prepare everything they can as numpy columns first (which record becomes which OTF2
event, its arguments, the order of a location's events) and leave only the calls into
the library to the loop. The loops use the package's `_otf2` layer (the functions its
own `EventWriter` and `BufferedEventReader` call) rather than building an event object
per event, which halves the time per event. The export's loop is in C where
libperfweave-otf2.so is built (runtime/interop/otf2_bulk.c: one call per block of
events, 3 times faster again); one ctypes call per event where it is not.

The export holds one chunk of a rank's records at a time (interop.RankStream): a
location's events are sorted a chunk at a time with those held back from the chunks
before, and written as far as no later chunk can come before them (_Location); what
the events of a chunk need from other chunks is carried (_Carry) or found by a first
pass over the rank (_Exporter._first_pass). The archive is the same, byte for byte, as
with the whole rank at once.
"""

import collections
import contextlib
import ctypes
import datetime as _dt
import functools
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave import __version__
from perfweave.errors import PerfweaveError
from perfweave.interop import (
    FLUSH_REGION,
    SUB,
    TIMED,
    blocking_twin,
    default_output,
    derived_flags,
    family,
    function_traits,
    irecv_completions,
    is_collective,
    is_p2p,
    last_index,
    load,
    need_otf2,
    pair_regions,
    region_names,
)
from perfweave.model.trace import F, T, _to_ns, classify
from perfweave.readers.dtypes import EVENT_DTYPE, TRACE_VERSION
from perfweave.readers.trace import TRACE_FORMAT
from perfweave.symbols import Symbolizer

NS = 10**9
U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max
# Events sort at one time stamp by (class, ...): leaves of regions with a duration, then
# enters (the longest first, so that they nest), then leaves of zero-length regions.
CLS_LEAVE, CLS_ENTER, CLS_LEAVE0 = 0, 1, 2
LATE = 1 << 40  # order key of sub-events written just before their call's Leave

# attributes that carry what an OTF2 event has no field for (docs/interop.md)
ATTRIBUTES = (
    (
        "flags",
        "UINT8",
        "perfweave record flags (PW_EVF_*) where they differ from the ones "
        "the event and its MPI function imply",
    ),
    (
        "peer",
        "INT32",
        "world rank: requested source of a receive request, or a peer that "
        "is not a member of the event's communicator",
    ),
    ("tag", "INT32", "requested tag of a receive request (-1: MPI_ANY_TAG)"),
    ("bytes", "UINT64", "buffer size of a receive request; bytes written by a trace buffer flush"),
    ("comm", "COMM", "communicator of a receive request; undefined: the record has none"),
)

# OTF2 event kinds written by export
(
    K_ENTER,
    K_LEAVE,
    K_SEND,
    K_ISEND,
    K_RECV,
    K_IRECV,
    K_IRECV_REQ,
    K_ISEND_DONE,
    K_COLL_BEGIN,
    K_COLL_END,
    K_WIN_CREATE,
    K_WIN_DESTROY,
    K_PUT,
    K_GET,
    K_ATOMIC,
    K_RMA_COLL_BEGIN,
    K_RMA_COLL_END,
    K_GROUP_SYNC,
    K_ACQUIRE,
    K_RELEASE,
    K_RMA_SYNC,
    K_PROGRAM_BEGIN,
    K_PROGRAM_END,
    K_NBC_REQUEST,
    K_NBC_COMPLETE,
) = range(25)

_COLL_OPS = {
    "MPI_Barrier": "BARRIER",
    "MPI_Bcast": "BCAST",
    "MPI_Gather": "GATHER",
    "MPI_Gatherv": "GATHERV",
    "MPI_Scatter": "SCATTER",
    "MPI_Scatterv": "SCATTERV",
    "MPI_Allgather": "ALLGATHER",
    "MPI_Allgatherv": "ALLGATHERV",
    "MPI_Alltoall": "ALLTOALL",
    "MPI_Alltoallv": "ALLTOALLV",
    "MPI_Alltoallw": "ALLTOALLW",
    "MPI_Allreduce": "ALLREDUCE",
    "MPI_Reduce": "REDUCE",
    "MPI_Reduce_scatter": "REDUCE_SCATTER",
    "MPI_Scan": "SCAN",
    "MPI_Exscan": "EXSCAN",
    "MPI_Reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    # OTF2 has no neighbourhood operations: the nearest all-to-all kind
    "MPI_Neighbor_allgather": "ALLGATHER",
    "MPI_Neighbor_allgatherv": "ALLGATHERV",
    "MPI_Neighbor_alltoall": "ALLTOALL",
    "MPI_Neighbor_alltoallv": "ALLTOALLV",
    "MPI_Neighbor_alltoallw": "ALLTOALLW",
}
_WIN_OPS = (
    "CREATE_HANDLE",
    "DESTROY_HANDLE",
    "ALLOCATE",
    "DEALLOCATE",
    "CREATE_HANDLE_AND_ALLOCATE",
    "DESTROY_HANDLE_AND_DEALLOCATE",
)
_PUTS = {"MPI_Put", "MPI_Rput"}
_GETS = {"MPI_Get", "MPI_Rget"}
_ATOMIC_TYPE = {
    "MPI_Compare_and_swap": "COMPARE_AND_SWAP",
    "MPI_Fetch_and_op": "FETCH_AND_ACCUMULATE",
    "MPI_Get_accumulate": "FETCH_AND_ACCUMULATE",
    "MPI_Rget_accumulate": "FETCH_AND_ACCUMULATE",
}


def _v(enum):
    """The number of one of the otf2 package's enum values (ctypes integers)."""
    return int(enum.value)


def region_role(otf2, name):
    """OTF2 region role of an MPI function, as Score-P gives them."""
    R = otf2.RegionRole
    cat, role = classify(name)
    twin = blocking_twin(name)
    if twin == "MPI_Barrier":
        return R.BARRIER
    if is_collective(name):
        c2, r2 = classify(twin)
        return {
            "n2n": R.COLL_ALL2ALL,
            "12n": R.COLL_ONE2ALL,
            "n21": R.COLL_ALL2ONE,
            "scan": R.COLL_OTHER,
        }.get(r2, R.COLL_ALL2ALL if "all" in twin.lower() or "Neighbor" in twin else R.COLL_OTHER)
    if is_p2p(name) and name not in ("MPI_Start", "MPI_Startall", "MPI_Request_free", "MPI_Cancel"):
        return R.POINT2POINT
    if cat == "rma_comm":
        return R.RMA if name in _PUTS | _GETS else R.ATOMIC
    if cat == "io":
        return R.FILE_IO
    if cat == "mgmt_file":
        return R.FILE_IO_METADATA
    if name in ("MPI_Win_allocate", "MPI_Win_allocate_shared"):
        return R.ALLOCATE
    return R.FUNCTION


# ---------------------------------------------------------------- errors


def _errors(otf2, _otf2):
    from otf2.error import TraceReaderError, TraceWriterError

    return (
        _otf2.Error,
        TraceReaderError,
        TraceWriterError,
        KeyError,
        IndexError,
        TypeError,
        ValueError,
        AttributeError,
    )


@contextlib.contextmanager
def _library_messages(into):
    """The OTF2 library prints each error it meets on stderr itself: collect that text,
    to be quoted in one line of ours when the operation fails, and passed on unchanged
    when it succeeds."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield into
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        ok = False
        try:
            yield into
            ok = True
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            into.extend(line for line in text.splitlines() if line.strip())
            if ok and text:
                sys.stderr.write(text)


def _why(exc, messages):
    """The most telling reason of a failure: the library's first error message."""
    for line in messages:
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    text = str(exc).strip()
    return text or type(exc).__name__


# ---------------------------------------------------------------- export


def _anchor(out):
    out = Path(out)
    if out.suffix != ".otf2":
        out = out / "traces.otf2"
    return out


def export(exp, out=None, force=False, symbolizer=None):
    """Write the traces of experiment exp as an OTF2 archive whose anchor file is out
    (default EXP/export/traces.otf2; a directory means DIR/traces.otf2). Returns a
    summary dict (anchor, events, locations, seconds, notes)."""
    otf2, _otf2 = need_otf2("OTF2 export")
    errors = _errors(otf2, _otf2)
    X = load(exp)
    anchor = _anchor(out or default_output(exp, "traces.otf2"))
    name = anchor.name[: -len(".otf2")]
    if not name:
        raise PerfweaveError(f"{anchor}: the anchor file needs a name (NAME.otf2)")
    parent = anchor.parent
    targets = [parent / f"{name}.otf2", parent / f"{name}.def", parent / name]
    existing = [p for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise PerfweaveError(f"{anchor}: already exists (--force replaces it)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp.", dir=parent))
    except OSError as e:
        raise PerfweaveError(f"{parent}: cannot write there ({e.strerror})") from None
    t_start = time.perf_counter()
    messages = []
    try:
        try:
            with _library_messages(messages):
                ex = _Exporter(otf2, _otf2, X, symbolizer)
                nevents, nloc, notes = ex.write(tmp, name)
                nrecords = ex.nrecords
        except errors as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({_why(e, messages)})"
            ) from None
        except OSError as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({e.strerror or e})"
            ) from None
        try:
            for p in existing:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
            for p in targets:
                os.replace(tmp / p.name, p)
        except OSError as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({e.strerror or e})"
            ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "anchor": str(anchor),
        "events": nevents,
        "records": nrecords,
        "locations": nloc,
        "ranks": len(X.ranks),
        "seconds": time.perf_counter() - t_start,
        "notes": X.notes + notes,
    }


def _lookup(mapping, keys, default=-1):
    """mapping[key] for every key of an integer array (default where missing)."""
    keys = np.asarray(keys).astype(np.int64)
    if not mapping:
        return np.full(len(keys), default, np.int64)
    k = np.array(sorted(mapping), np.int64)
    v = np.array([mapping[x] for x in k.tolist()], np.int64)
    j = np.clip(np.searchsorted(k, keys), 0, len(k) - 1)
    return np.where(k[j] == keys, v[j], default)


class _Lookup:
    """A vectorised map from (local id, world rank) to the rank in that communicator (or
    its remote group for an intercommunicator)."""

    def __init__(self, lists, world):
        self.w = max(int(world), 1)
        keys, vals = [], []
        for cid, members in enumerate(lists):
            m = np.asarray(members, np.int64)
            keys.append(cid * self.w + m)
            vals.append(np.arange(len(m), dtype=np.int64))
        self.keys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        vals = np.concatenate(vals) if vals else np.zeros(0, np.int64)
        o = np.argsort(self.keys, kind="stable")
        self.keys, self.vals = self.keys[o], vals[o]

    def __call__(self, cid, world):
        """(value for OTF2 as uint32, peer attribute needed): negative world ranks keep
        their int32 bits (-1 is OTF2's undefined rank); a world rank that is no member is
        written undefined and carried by the peer attribute."""
        cid = np.asarray(cid, np.int64)
        world = np.asarray(world, np.int64)
        out = (world & U32).astype(np.uint64)
        need = np.zeros(len(world), bool)
        pos = (world >= 0) & (cid >= 0) & (world < self.w)
        if len(self.keys) and pos.any():
            key = cid * self.w + world
            j = np.clip(np.searchsorted(self.keys, key), 0, len(self.keys) - 1)
            found = pos & (self.keys[j] == key)
            out[found] = self.vals[j[found]].astype(np.uint64)
            lost = (world >= 0) & ~found
        else:
            lost = world >= 0
        out[lost] = U32
        need |= lost
        return out, need


CHUNK = 256 * 1024  # OTF2's smallest chunk: buffers per location are small


class _Chunks:
    """Memory for the OTF2 library's buffers, so that it writes as it goes: without
    these callbacks it keeps every event of every location in memory until the archive
    is closed. An event buffer gets one chunk; when it asks for a second, the answer is
    none, which makes the library flush the buffer to its file and give its chunks back
    (free_all). Chunks are kept for reuse rather than returned to malloc. (The otf2
    package's own prototypes for these callbacks lack the user data argument, hence
    the ctypes types here; the callbacks stay referenced by this object, which lives as
    long as the archive.)"""

    EVENTS = 3  # OTF2_FILETYPE_EVENTS

    def __init__(self, handle):
        from _otf2.Config import conf

        alloc_t = ctypes.CFUNCTYPE(
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_uint8,
            ctypes.c_uint64,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_uint64,
        )
        free_t = ctypes.CFUNCTYPE(
            None,
            ctypes.c_void_p,
            ctypes.c_uint8,
            ctypes.c_uint64,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_bool,
        )

        class Callbacks(ctypes.Structure):
            _fields_ = [("allocate", alloc_t), ("free_all", free_t)]

        self.used, self.free = {}, {}
        self.callbacks = Callbacks(alloc_t(self.allocate), free_t(self.free_all))
        fn = conf.lib.OTF2_Archive_SetMemoryCallbacks
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(Callbacks), ctypes.c_void_p]
        if fn(ctypes.cast(handle, ctypes.c_void_p), ctypes.byref(self.callbacks), None):
            raise PerfweaveError("the OTF2 library refused perfweave's memory callbacks")

    def allocate(self, data, file_type, location, per_buffer, size):
        held = self.used.setdefault((file_type, location), [])
        if file_type == self.EVENTS and held:
            return None  # flush first
        pool = self.free.setdefault(size, [])
        chunk = pool.pop() if pool else ctypes.create_string_buffer(size)
        held.append(chunk)
        return ctypes.addressof(chunk)

    def free_all(self, data, file_type, location, per_buffer, final):
        for chunk in self.used.pop((file_type, location), []):
            self.free.setdefault(len(chunk), []).append(chunk)


def _direct(wrapper, _otf2):
    """The OTF2 library function that an `_otf2` writer wrapper calls, with the same
    prototype, as a ctypes function of its own that returns the error code. The
    wrapper sets the prototype and an error-checking hook at every call, which is most
    of the time of writing an event; this one is set up once, and the writer handle and
    attribute lists go as plain addresses."""
    import inspect
    import re

    from _otf2.Config import conf

    try:
        src = inspect.getsource(wrapper)
        name = re.search(r"conf\.lib\.(OTF2_\w+)", src).group(1)
        types = eval(
            re.search(r"\.argtypes = (\[.*\])", src).group(1),  # noqa: S307
            sys.modules[wrapper.__module__].__dict__,
        )
    except (OSError, TypeError, AttributeError, NameError, SyntaxError):
        # an otf2 package whose wrappers read otherwise: call the wrapper (slower)
        writer = ctypes.POINTER(_otf2.EvtWriter)

        def call(h, al, *args):
            wrapper(ctypes.cast(h, writer), al, *args)
            return 0

        return call

    def simple(t):
        # the package's enums are subclasses of ctypes' integers: the integer itself
        return next((b for b in t.__mro__ if b.__module__ == "ctypes"), t)

    proto = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, *[simple(t) for t in types[2:]]
    )
    return proto((name, conf.lib))


def _closed():
    """close() of an event writer already closed (_Exporter._write_location)."""


def _abandon(w):
    """Close writer w of an export that failed (a full disk: an event file that could
    not be written) as far as the library lets it, and never again: the otf2 package
    would close it, and each event writer, once more when it is collected, and print
    the library's refusal as an ignored exception. The caller removes the files."""
    for ew in list(getattr(w, "_event_writers", {}).values()):
        try:
            ew.close()
        except Exception:  # the library's error types, whatever the failure
            pass
        ew.close = _closed
    try:
        w.close()
    except Exception:
        pass
    w.close = _closed


BULK = 1 << 16  # events per call of the C loop


@functools.lru_cache(maxsize=None)
def _bulk_writer():
    """pw_otf2_write of libperfweave-otf2.so (runtime/interop/otf2_bulk.c): the export's
    per-event loop in C, one call per block of a location's events instead of one ctypes
    call per event. None where that library is not built or was built for other event
    kinds; the export then calls the OTF2 library per event (_Exporter._write_each)."""
    from perfweave.launch import library_dir

    try:
        lib = ctypes.CDLL(str(library_dir() / "libperfweave-otf2.so"))
    except OSError:
        return None
    if lib.pw_otf2_kinds() != K_NBC_COMPLETE + 1:
        return None
    fn = lib.pw_otf2_write
    fn.restype = ctypes.c_size_t
    fn.argtypes = (
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        + [ctypes.c_void_p] * 9
        + [ctypes.POINTER(ctypes.c_int)]
    )
    return fn


_FirstPass = collections.namedtuple("_FirstPass", "window mins irecv")
# per function (names, then one entry for an unknown function), communicator, window
# and group of one rank: what its chunks' events look up (_Exporter._rank_tables)
_RankTables = collections.namedtuple(
    "_RankTables",
    "names traits op atype put get lock unlock roles comm_ref look win_ref win_comm groups",
)
_SORT = ("k", "grp", "sec", "cls", "time")  # np.lexsort's order: time first


def _irecv_attributes(rec, pending):
    """Which IRECV records of a chunk of one thread need attributes, in order: those
    whose completing RECV (irecv_completions: the first RECV of the same request after
    it) differs from the request, or that none completes. A request completed in a
    later chunk waits in pending (request key -> [(answers, position, record)]) and is
    decided there: what a thread carries is its requests still open."""
    typ = rec["type"]
    keyed = np.flatnonzero((typ == T["RECV"]) & (rec["t0"] != 0))
    if len(keyed) and pending:
        keys, first = np.unique(rec["t0"][keyed], return_index=True)
        for k, j in zip(keys.tolist(), keyed[first].tolist()):
            got = tuple(int(rec[f][j]) for f in _REQUEST)
            for answers, pos, req in pending.pop(k, ()):
                answers[pos] = got != req
    ir = np.flatnonzero(typ == T["IRECV"])
    need = np.ones(len(ir), bool)
    if len(ir):
        comp = irecv_completions(typ, rec["t0"], np.zeros(len(rec), np.int8))[ir]
        found = comp >= 0
        a, b = comp[found], ir[found]
        need[found] = ~np.logical_and.reduce([rec[f][a] == rec[f][b] for f in _REQUEST])
        for pos in np.flatnonzero(~found).tolist():
            # the fields as numbers: a record would hold its whole chunk in memory
            req = tuple(int(rec[f][ir[pos]]) for f in _REQUEST)
            pending.setdefault(int(rec["t0"][ir[pos]]), []).append((need, pos, req))
    return need


_REQUEST = ("peer", "tag", "bytes", "comm")  # what a receive request asked for


class _Specs:
    """Attribute lists of the events not written yet, by key (an event's "attr")."""

    def __init__(self):
        self.items, self.next = {}, 0

    def add(self, spec):
        self.items[self.next] = spec
        self.next += 1
        return self.next - 1

    def extend(self, specs):
        keys = np.arange(self.next, self.next + len(specs))
        self.items.update(zip(keys.tolist(), specs))
        self.next += len(specs)
        return keys

    def __getitem__(self, key):
        return self.items[key]

    def drop(self, keys):
        for k in keys[keys >= 0].tolist():
            self.items.pop(k, None)


class _Carry:
    """What the events of a rank's chunk need from the chunks before it: per thread,
    the user regions still open and the place in the first pass's answers on receive
    requests; per rank, nonblocking collectives started and not completed yet, the
    group of the access and exposure epochs open per window, and counts for notes."""

    def __init__(self):
        self.started = {}  # (request key, post number) -> what its completion needs
        self.openers = {}  # "win_start"/"win_post" -> {window: group}
        self.regions = {}  # user region definitions met (name, file, line, named)
        self.lost = self.unpaired = self.lost_events = 0
        self.lost_records = False
        self.tables = None  # _RankTables, made at the rank's first sub-event
        self.new_thread(None)

    def new_thread(self, irecv):
        self.stack = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
        self.irecv, self.irecv_at = irecv, 0

    def irecv_attributes(self, n):
        """The first pass's answers for the next n IRECV records of the thread."""
        a = self.irecv_at
        bits = np.unpackbits(self.irecv[a // 8 : (a + n + 7) // 8 + 1])[a % 8 : a % 8 + n]
        self.irecv_at += n
        return bits.astype(bool)

    def notes(self, r, notes):
        if self.lost:
            notes.append(
                f"rank {r}: {self.lost} LEAVE records without their ENTER (the "
                "trace started inside those functions) are not exported"
            )
        if self.unpaired:
            notes.append(
                f"rank {r}: {self.unpaired} LEAVE records without their ENTER are not exported"
            )
        if self.lost_records:
            notes.append(
                f"rank {r}: {self.lost_events} events were lost when recording "
                "(LOST records); OTF2 has no event for that and the archive does "
                "not mention them"
            )


class _Location:
    """The event writer of one location, fed a chunk's events at a time (add): they are
    sorted with those held back from earlier chunks, and the ones before the earliest
    time a later chunk of the thread can have an event at (the first pass's watermark,
    mins) are written. Events of one time stamp are written together, so the order is
    that of sorting the location's events all at once."""

    def __init__(self, ex, w, r, t, fp):
        self.ex, self.w, self.key, self.thread = ex, w, (r, t), t
        self.mins = fp.mins.get(t, np.zeros(0, np.int64))
        self.seen = 0
        self.held = None
        self.ew = None
        self.n = 0
        self.first = self.last = None

    def add(self, cols, resolved):
        self.seen += 1
        held = self.held
        if held is not None and len(resolved[0]):
            # Enters held whose Leave this chunk found: their keys as the rank at once
            # gives them
            wait = np.flatnonzero((held["kind"] == K_ENTER) & (held["sec"] == -I64_MAX))
            if len(wait):
                o = np.argsort(resolved[0])
                ks, ends = resolved[0][o], resolved[1][o]
                j = np.clip(np.searchsorted(ks, held["grp"][wait]), 0, len(ks) - 1)
                hit = ks[j] == held["grp"][wait]
                held["sec"][wait[hit]] = -ends[j[hit]]
        if cols is None:
            cols = held
        elif held is not None:
            cols = {k: np.concatenate([held[k], cols[k]]) for k in cols}
        if cols is None or not len(cols["time"]):
            self.held = None
            return 0
        order = np.lexsort([cols[k] for k in _SORT])
        cols = {k: v[order] for k, v in cols.items()}
        cut = len(order)
        if self.seen < len(self.mins):
            cut = int(np.searchsorted(cols["time"], self.mins[self.seen], "left"))
        self.held = {k: v[cut:] for k, v in cols.items()} if cut < len(order) else None
        return self._write({k: v[:cut] for k, v in cols.items()})

    def _write(self, c):
        n = len(c["time"])
        if not n:
            return 0
        if c["time"][0] < 0:
            raise PerfweaveError(
                f"rank {self.ex.locations[self.key].group.name}: negative "
                "time stamps on rank 0's clock; the trace's clock "
                "calibration is broken"
            )
        if self.ew is None:
            self.ew = self.w.event_writer_from_location(self.ex.locations[self.key])
        self.ex._write_batch(self.w, self.ew, c)
        self.ex.attr_specs.drop(c["attr"])
        self.n += n
        self.first = int(c["time"][0]) if self.first is None else self.first
        self.last = int(c["time"][-1])
        return n

    def close(self):
        n = self._write(self.held) if self.held is not None else 0
        self.held = None
        if self.ew is None and self.thread == 0:  # the master thread's, even empty
            self.ew = self.w.event_writer_from_location(self.ex.locations[self.key])
        if self.ew is not None:
            # Closed as soon as its events are written, not with the archive: the
            # library keeps each open event file's bytes in a write buffer of its own
            # (4 MiB, beside the chunks of _Chunks) until the file is closed, so memory
            # grew by up to 4 MiB per location. Closing writes the rest and frees it,
            # and the location's local definition writer with its chunk (the package's
            # EventWriter.close). The writer stays in the package's table, closed: at
            # the archive's close the package closes every writer of that table, and
            # opens one for each location missing from it, which would truncate the
            # location's event file.
            self.ew.close()
            self.ew.close = _closed
        if self.n:
            # the bookkeeping otf2's EventWriter.write does per event
            self.ex.locations[self.key]._number_of_events_written = self.n
            self.w._update_timestamps(self.first)
            self.w._update_timestamps(self.last)
        return n


class _Exporter:
    def __init__(self, otf2, _otf2, X, symbolizer=None):
        self.otf2, self._otf2, self.X = otf2, _otf2, X
        # one for every rank and chunk of the export: it keeps what it found
        self.symbolizer = symbolizer or Symbolizer()
        self.notes = []

    # ---- definitions ----

    def _definitions(self, w):
        otf2, X = self.otf2, self.X
        d = w.definitions
        self.d = d
        d.paradigm(otf2.Paradigm.MPI, "MPI", otf2.ParadigmClass.PROCESS)
        self.attr = {}
        for key, typ, desc in ATTRIBUTES:
            a = d.attribute(f"perfweave:{key}", desc, getattr(otf2.Type, typ))
            self.attr[key] = (a._ref, getattr(otf2.Type, typ), typ)
        machine = d.system_tree_node(X.meta.get("host") or "machine", class_name="machine")
        nodes = {}
        metas = {r: (m or {}) for r, m in X.metas.items()}
        self.locations = {}
        masters = []
        for r in range(X.world_size):
            host = metas[r].get("host") or "unknown" if r in metas else "unknown"
            if host not in nodes:
                nodes[host] = d.system_tree_node(host, class_name="node", parent=machine)
            lg = d.location_group(
                f"MPI Rank {r}",
                location_group_type=otf2.LocationGroupType.PROCESS,
                system_tree_parent=nodes[host],
            )
            threads = X.threads(r) if r in metas else [0]
            for t in threads:
                loc = d.location(
                    "Master thread" if t == 0 else f"Thread {t}",
                    type=otf2.LocationType.CPU_THREAD,
                    group=lg,
                )
                self.locations[(r, t)] = loc
            masters.append(self.locations[(r, 0)])
        d.group(
            "MPI ranks",
            group_type=otf2.GroupType.COMM_LOCATIONS,
            paradigm=otf2.Paradigm.MPI,
            members=masters,
        )
        self.groups = {}
        self._communicators()
        self._windows()
        # post/start groups
        self.rank_groups = {}
        for r, m in metas.items():
            self.rank_groups[r] = [
                self._group(g.get("ranks", []))._ref for g in m.get("groups", [])
            ]
        # regions: MPI functions, the flush, user regions (made when first met); the
        # functions a rank calls are found with one pass over its records
        self.mpi_regions = {}
        self.passes = {}
        for r in X.ranks:
            used, names, self.passes[r] = self._first_pass(r)
            for nm in (names[f] for f in used if f < len(names)):
                if nm not in self.mpi_regions:
                    self.mpi_regions[nm] = d.region(
                        nm,
                        canonical_name=nm,
                        region_role=region_role(otf2, nm),
                        paradigm=otf2.Paradigm.MPI,
                    )._ref
        self.flush_region = d.region(
            FLUSH_REGION,
            region_role=otf2.RegionRole.ARTIFICIAL,
            paradigm=otf2.Paradigm.MEASUREMENT_SYSTEM,
        )._ref
        self.user_regions = {}
        cmd = [str(a) for a in X.meta.get("command") or []]
        program = X.meta.get("program") or (cmd[0] if cmd else "?")
        # under a launcher the program's arguments are the words after the program
        base = os.path.basename(program)
        at = next((i for i, a in enumerate(cmd) if a == program or os.path.basename(a) == base), 0)
        self.program = d.strings.get_ref(program)
        self.program_args = [d.strings.get_ref(a) for a in cmd[at + 1 :]]
        status = X.meta.get("exit_status") or {}
        self.exit_status = int(
            status.get("code", 128 + status.get("signal", 0) if "signal" in status else 0)
        )

    def _group(self, members):
        key = tuple(int(m) for m in members)
        g = self.groups.get(key)
        if g is None:
            g = self.d.group(
                f"group {len(self.groups)}",
                group_type=self.otf2.GroupType.COMM_GROUP,
                paradigm=self.otf2.Paradigm.MPI,
                members=list(key),
            )
            self.groups[key] = g
        return g

    def _communicators(self):
        """One OTF2 Comm per communicator: the same one on every rank is recognised by its
        members and creation order (model/trace.py comm_key). They are defined in order of
        that creation number, so that an importer that numbers communicators with equal
        members in definition order gets the same numbers back."""
        X = self.X
        found = {}  # key -> (seq, first appearance, name, parent key, members, remote)
        self.local_comm = {}
        for r, meta in X.metas.items():
            meta = meta or {}
            keys = []
            for c in meta.get("comms", []):
                m = tuple(int(x) for x in c.get("ranks", []))
                rem = tuple(int(x) for x in c.get("remote", []) or [])
                seq = int(c.get("seq", 0))
                key = (m, rem, seq)
                keys.append(key)
                if key not in found:
                    found[key] = [seq, len(found), c.get("name"), None, m, rem]
            for c, key in zip(meta.get("comms", []), keys):
                p = c.get("parent", -1)
                if isinstance(p, int) and 0 <= p < len(keys) and found[key][3] is None:
                    found[key][3] = keys[p]
            self.local_comm[r] = keys
        world_key = (tuple(range(X.world_size)), (), 0)
        if world_key not in found:
            found[world_key] = [0, -1, "MPI_COMM_WORLD", None, world_key[0], ()]
        self.comms = {}
        names = set()
        for key in sorted(found, key=lambda k: (found[k][0], found[k][1])):
            seq, _, name, parent, m, rem = found[key]
            if not name or name in names:
                name = f"{name or 'comm'} #{len(self.comms)}"
            names.add(name)
            par = self.comms.get(parent) if parent else None
            # an intercommunicator is its local group on each side: the otf2 package
            # writes no InterComm definition (its class has the fields of Comm too), and
            # peers in the remote group go as perfweave:peer attributes
            c = self.d.comm(name, group=self._group(m), parent=par)
            self.comms[key] = c
        self.world_comm = self.comms[world_key]

    def _windows(self):
        otf2, X = self.otf2, self.X
        found = {}
        order = {k: i for i, k in enumerate(self.comms)}
        for r, meta in X.metas.items():
            ck = self.local_comm[r]
            for wdef in (meta or {}).get("windows", []):
                c = wdef.get("comm", -1)
                if not (isinstance(c, int) and 0 <= c < len(ck)):
                    continue
                found.setdefault((ck[c], int(wdef.get("seq", 0))), None)
        self.wins = {}
        for key in sorted(found, key=lambda k: (order[k[0]], k[1])):
            self.wins[key] = self.d.rma_win(
                f"window {len(self.wins)}",
                self.comms[key[0]],
                otf2.RmaWinFlag.CREATE_DESTROY_EVENTS,
            )

    def _user_region(self, name, file, line, named):
        key = (name, file, int(line))
        ref = self.user_regions.get(key)
        if ref is None:
            otf2 = self.otf2
            ref = self.d.region(
                name,
                canonical_name=name,
                region_role=otf2.RegionRole.FUNCTION,
                paradigm=otf2.Paradigm.USER if named else otf2.Paradigm.COMPILER,
                source_file=file or None,
                begin_line_number=int(line),
            )._ref
            self.user_regions[key] = ref
        return ref

    # ---- events ----

    def _first_pass(self, r):
        """What writing rank r's events needs to know ahead, from a pass over its chunks
        (RankStream): the functions it calls, its application time, per thread the
        earliest time of each chunk's events (_Location's watermark) and which receive
        requests need attributes (_irecv_attributes). Returns (used function ids,
        function names, _FirstPass)."""
        stream = self.X.stream(r)
        used = set()
        mins, irecv = {}, {}
        pending = {}
        t = None
        for c in stream.chunks():
            typ = c.rec["type"]
            if c.thread[0] != t:
                t = int(c.thread[0])
                mins[t], irecv[t], pending = [], [], {}
            used.update(np.unique(c.rec["fn"][typ == T["CALL"]]).tolist())
            timed = TIMED(typ)
            mins[t].append(int(c.t0[timed].min()) if timed.any() else I64_MAX)
            irecv[t].append(_irecv_attributes(c.rec, pending))
        fp = _FirstPass(
            (stream.t_begin, stream.t_end),
            {t: np.minimum.accumulate(np.array(m[::-1], np.int64))[::-1] for t, m in mins.items()},
            {t: np.packbits(np.concatenate(b)) for t, b in irecv.items()},
        )
        return sorted(used), stream.functions, fp

    def write(self, directory, name):
        otf2 = self.otf2
        w = otf2.writer.Writer(
            str(directory),
            archive_name=name,
            timer_resolution=NS,
            chunk_size_events=CHUNK,
            chunk_size_definitions=CHUNK,
        )
        self.chunks = _Chunks(w._handle)
        try:
            w.creator = f"perfweave {__version__}"
            w.description = f"perfweave experiment {self.X.path}"
            self._definitions(w)
            total = 0
            self.nrecords = 0
            for r in self.X.ranks:  # one chunk of a rank in memory at a time
                total += self._rank(w, r)
            if w._first_timestamp is not None and self.X.meta.get("start_epoch"):
                # wall-clock time of the first event: the launch, at best
                w._realtime_timestamp = float(self.X.meta["start_epoch"])
        except BaseException:
            _abandon(w)
            raise
        w.close()
        return total, len(self.locations), self.notes

    def _rank(self, w, r):
        """Write rank r's events location by location, chunk by chunk (RankStream):
        each chunk's events are sorted with those held back from earlier chunks, and
        the ones earlier than any later chunk's can be are written (_Location)."""
        fp = self.passes.pop(r)
        stream = self.X.stream(r)
        stream.t_begin, stream.t_end = fp.window
        self.attr_specs = _Specs()  # attribute lists of the events held
        carry = _Carry()
        total = 0
        loc = None
        for c in stream.chunks():
            t = int(c.thread[0])
            if loc is None or loc.thread != t:
                if loc is not None:
                    total += loc.close()
                elif t != 0 and (r, 0) in self.locations:
                    total += _Location(self, w, r, 0, fp).close()
                loc = _Location(self, w, r, t, fp)
                carry.new_thread(fp.irecv.get(t))
            cols, resolved = self._columns(c, carry)
            total += loc.add(cols, resolved)
        if loc is not None:
            total += loc.close()
        elif (r, 0) in self.locations:
            total += _Location(self, w, r, 0, fp).close()
        self.X.notes.extend(stream.finish_notes())
        self.nrecords += stream.records
        carry.notes(r, self.notes)
        return total

    def _write_batch(self, w, ew, c):
        """Write sorted event columns c to event writer ew (the C loop where it is
        built)."""
        n = len(c["time"])
        if not n:
            return
        h = ctypes.cast(ew.handle, ctypes.c_void_p).value
        bulk = _bulk_writer()
        fns = self._bulk_functions() if bulk is not None else None
        if fns is not None:
            self._write_bulk(bulk, fns, h, c, n)
        else:
            self._write_each(h, c)

    def _write_one(self, h, al, kd, t, args):
        fn, nargs = self._writers()[kd]
        rc = fn(h, al, t, *args[:nargs])
        if rc:
            raise self._otf2.Error(self._otf2.ErrorCode(rc))

    def _write_each(self, h, c):
        """One ctypes call per event: where the C loop (_bulk_writer) is not built."""
        _otf2 = self._otf2
        table = self._writers()
        E, L = table[K_ENTER][0], table[K_LEAVE][0]
        attrs = self.attr_specs
        A = [c[f"a{i}"].tolist() for i in range(1, 7)]
        for t, kd, a1, a2, a3, a4, a5, a6, ai in zip(
            c["time"].tolist(), c["kind"].tolist(), *A, c["attr"].tolist()
        ):
            al = self._attribute_list(attrs[ai]) if ai >= 0 else None
            if kd == K_ENTER:
                rc = E(h, al, t, a1)
            elif kd == K_LEAVE:
                rc = L(h, al, t, a1)
            else:
                fn, nargs = table[kd]
                rc = fn(h, al, t, *(a1, a2, a3, a4, a5, a6)[:nargs])
            if al is not None:
                _otf2.AttributeList_Delete(al)
            if rc:
                raise _otf2.Error(_otf2.ErrorCode(rc))

    def _write_bulk(self, bulk, fns, h, c, n):
        """The events in blocks of BULK through the C loop; its attribute lists are made
        per block (so few are alive at once) and ProgramBegin, whose strings the loop
        does not know, is written from here where the loop stops at it."""
        _otf2 = self._otf2
        attrs = self.attr_specs
        kind = np.ascontiguousarray(c["kind"], np.uint8)
        cols = [np.ascontiguousarray(c["time"], np.uint64)] + [
            np.ascontiguousarray(c[f"a{i}"], np.uint64) for i in range(1, 7)
        ]
        at = c["attr"]
        err = ctypes.c_int(0)
        for s in range(0, n, BULK):
            e = min(n, s + BULK)
            has = np.flatnonzero(at[s:e] >= 0)
            lists = {}
            ptrs = np.zeros(e - s, np.uint64)
            try:
                for j, ai in zip(has.tolist(), at[s:e][has].tolist()):
                    lists[j] = self._attribute_list(attrs[ai])
                    ptrs[j] = ctypes.cast(lists[j], ctypes.c_void_p).value
                i = s
                while i < e:
                    i += bulk(
                        h,
                        fns,
                        e - i,
                        kind.ctypes.data + i,
                        *[x.ctypes.data + 8 * i for x in cols],
                        ptrs.ctypes.data + 8 * (i - s),
                        ctypes.byref(err),
                    )
                    if err.value:
                        raise _otf2.Error(_otf2.ErrorCode(err.value))
                    if i < e:
                        self._write_one(
                            h,
                            lists.get(i - s),
                            int(kind[i]),
                            int(cols[0][i]),
                            tuple(int(x[i]) for x in cols[1:]),
                        )
                        i += 1
            finally:
                for al in lists.values():
                    _otf2.AttributeList_Delete(al)

    def _bulk_functions(self):
        """The addresses of the OTF2 library's writer functions, by kind, for the C loop
        (NULL for ProgramBegin, written from Python); None where the library the otf2
        package loaded lacks one of them."""
        if getattr(self, "_fns", None) is None:
            from _otf2.Config import conf

            fns = (ctypes.c_void_p * len(self._wrapped()))()
            try:
                for kind, (fn, _) in self._wrapped().items():
                    if kind != K_PROGRAM_BEGIN:
                        fns[kind] = ctypes.cast(
                            getattr(conf.lib, "OTF2_" + fn.__name__), ctypes.c_void_p
                        ).value
            except AttributeError:
                fns = False
            self._fns = fns
        return self._fns or None

    def _attribute_list(self, spec):
        _otf2 = self._otf2
        al = _otf2.AttributeList_New()
        for key, value in spec:
            ref, typ, tname = self.attr[key]
            v = _otf2.AttributeValue()
            if tname == "COMM":
                v.commRef = value
            else:
                setattr(v, tname.lower(), int(value))
            _otf2.AttributeList_AddAttribute(al, ref, typ, v)
        return al

    def _writers(self):
        """kind -> (writer function, number of arguments after the time): the OTF2
        library's functions called through ctypes (_direct), but ProgramBegin."""
        if getattr(self, "_table", None) is None:
            table = self._wrapped()
            for kind, (fn, nargs) in table.items():
                if kind != K_PROGRAM_BEGIN:
                    table[kind] = (_direct(fn, self._otf2), nargs)
            self._table = table
        return self._table

    def _wrapped(self):
        """kind -> (writer function of _otf2, number of arguments after the time)."""
        o = self._otf2
        program, args = self.program, self.program_args
        return {
            K_ENTER: (o.EvtWriter_Enter, 1),
            K_LEAVE: (o.EvtWriter_Leave, 1),
            K_SEND: (o.EvtWriter_MpiSend, 4),
            K_ISEND: (o.EvtWriter_MpiIsend, 5),
            K_RECV: (o.EvtWriter_MpiRecv, 4),
            K_IRECV: (o.EvtWriter_MpiIrecv, 5),
            K_IRECV_REQ: (o.EvtWriter_MpiIrecvRequest, 1),
            K_ISEND_DONE: (o.EvtWriter_MpiIsendComplete, 1),
            K_COLL_BEGIN: (o.EvtWriter_MpiCollectiveBegin, 0),
            K_COLL_END: (o.EvtWriter_MpiCollectiveEnd, 5),
            K_WIN_CREATE: (o.EvtWriter_RmaWinCreate, 1),
            K_WIN_DESTROY: (o.EvtWriter_RmaWinDestroy, 1),
            K_PUT: (o.EvtWriter_RmaPut, 4),
            K_GET: (o.EvtWriter_RmaGet, 4),
            K_ATOMIC: (o.EvtWriter_RmaAtomic, 6),
            K_RMA_COLL_BEGIN: (o.EvtWriter_RmaCollectiveBegin, 0),
            K_RMA_COLL_END: (o.EvtWriter_RmaCollectiveEnd, 6),
            K_GROUP_SYNC: (o.EvtWriter_RmaGroupSync, 3),
            K_ACQUIRE: (o.EvtWriter_RmaAcquireLock, 4),
            K_RELEASE: (o.EvtWriter_RmaReleaseLock, 3),
            K_RMA_SYNC: (o.EvtWriter_RmaSync, 3),
            K_PROGRAM_BEGIN: (
                lambda h, al, t: o.EvtWriter_ProgramBegin(
                    ctypes.cast(h, ctypes.POINTER(o.EvtWriter)), al, t, program, args
                ),
                0,
            ),
            K_PROGRAM_END: (o.EvtWriter_ProgramEnd, 1),
            K_NBC_REQUEST: (o.EvtWriter_NonBlockingCollectiveRequest, 1),
            K_NBC_COMPLETE: (o.EvtWriter_NonBlockingCollectiveComplete, 6),
        }

    def _columns(self, rt, carry):
        """The OTF2 events of one chunk of a thread (RankStream) as columns: sort keys
        (time, cls, sec, grp, k), kind, up to six arguments, attribute list (key of
        attr_specs). carry holds what a chunk leaves to the next (_Carry). Returns the
        columns and (indices, ends) of regions entered in earlier chunks that end in
        this one (_Location fixes the keys of their Enter events still held). Record
        indices (grp) count in the whole rank (rt.base): the keys are those the whole
        rank at once would give."""
        rec, typ = rt.rec, rt.rec["type"]
        n = len(rec)
        parts = []
        specs = self.attr_specs
        G = rt.base
        resolved = (np.zeros(0, np.int64), np.zeros(0, np.int64))

        def part(idx, time, cls, sec, grp, k, kind, args=(), attr=None):
            m = len(idx)
            # broadcast views, copied once by the concatenation at the end
            p = {
                "time": np.asarray(time, np.int64),
                "cls": np.broadcast_to(np.asarray(cls, np.int64), (m,)),
                "sec": np.asarray(sec, np.int64),
                "grp": np.asarray(grp, np.int64),
                "k": np.broadcast_to(np.asarray(k, np.int64), (m,)),
                "kind": np.broadcast_to(np.asarray(kind, np.int64), (m,)),
                "attr": np.broadcast_to(np.int64(-1), (m,)) if attr is None else attr,
            }
            for i in range(6):
                a = args[i] if i < len(args) else 0
                p[f"a{i + 1}"] = np.broadcast_to(np.asarray(a).astype(np.uint64, copy=False), (m,))
            parts.append(p)

        t0, t1 = rt.t0, rt.t1
        fn_names = rt.functions
        fn_ref = np.array([self.mpi_regions.get(nm, U32) for nm in fn_names] + [U32], np.uint64)

        # ---- MPI calls and trace buffer flushes: Enter and Leave ----
        ci = np.flatnonzero(typ == T["CALL"])
        fnc = rec["fn"][ci].astype(np.int64)
        unknown = fnc >= len(fn_names)
        if unknown.any():
            raise PerfweaveError(
                f"rank {rt.rank}: calls of function ids beyond its function "
                "list; the trace is corrupt"
            )
        reg = fn_ref[fnc]
        part(ci, t0[ci], CLS_ENTER, -t1[ci], G + ci, 0, K_ENTER, (reg,))
        part(
            ci,
            t1[ci],
            np.where(t1[ci] > t0[ci], CLS_LEAVE, CLS_LEAVE0),
            -t0[ci],
            -(G + ci),
            0,
            K_LEAVE,
            (reg,),
        )
        fi = np.flatnonzero(typ == T["FLUSH"])
        if len(fi):
            attr = specs.extend([(("bytes", int(b)),) for b in rec["bytes"][fi].tolist()])
            part(fi, t0[fi], CLS_ENTER, -t1[fi], G + fi, 0, K_ENTER, (self.flush_region,), attr)
            part(
                fi,
                t1[fi],
                np.where(t1[fi] > t0[fi], CLS_LEAVE, CLS_LEAVE0),
                -t0[fi],
                -(G + fi),
                0,
                K_LEAVE,
                (self.flush_region,),
            )

        # ---- user regions ----
        enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
        if enter.any() or leave.any():
            # the regions still open before this chunk come first, as ENTERs
            sidx, st0, sref = carry.stack
            m = len(sidx)
            ext = lambda open_, mine: np.r_[open_, mine]  # noqa: E731
            p, _, u = pair_regions(ext(np.ones(m, bool), enter), ext(np.zeros(m, bool), leave))
            gidx, et0 = ext(sidx, G + np.arange(n)), ext(st0, t0)
            partner = np.where(p >= 0, gidx[np.maximum(p, 0)], -1)
            lost = u[m:]
            carry.lost += int(lost.sum())
            names, files, lines = region_names(rt, enter | leave, self.symbolizer)
            el = np.flatnonzero(enter | leave)
            named = rec["comm"][el] >= 0
            refs = np.zeros(n, np.uint64)
            cache = carry.regions
            for i, nm, fl, ln, nd in zip(
                el.tolist(), names.tolist(), files.tolist(), lines.tolist(), named.tolist()
            ):
                key = (nm, fl, ln, nd)
                r = cache.get(key)
                if r is None:
                    r = cache[key] = self._user_region(nm, fl, ln, nd)
                refs[i] = r
            pe = np.where(p >= 0, et0[np.maximum(p, 0)], I64_MAX)
            ei = np.flatnonzero(enter)
            # an Enter whose Leave is in a later chunk: I64_MAX as for one that never
            # ends, until _Location learns its end (resolved)
            part(ei, t0[ei], CLS_ENTER, -pe[m + ei], G + ei, 0, K_ENTER, (refs[ei],))
            done = np.flatnonzero(p[:m] >= 0)
            resolved = (sidx[done], pe[done])
            still = np.flatnonzero(p < 0)
            still = still[(still < m) | enter[np.maximum(still - m, 0)]]
            carry.stack = (gidx[still], et0[still], ext(sref, refs)[still])
            li = np.flatnonzero(leave & ~lost & (p[m:] >= 0))
            carry.unpaired += int((leave & ~lost & (p[m:] < 0)).sum())
            start = et0[p[m + li]]
            part(
                li,
                t0[li],
                np.where(t0[li] > start, CLS_LEAVE, CLS_LEAVE0),
                -start,
                -partner[m + li],
                0,
                K_LEAVE,
                (refs[li],),
            )

        # ---- what the calls did ----
        self._sub_events(rt, part, specs, carry)

        # ---- the application's time: ProgramBegin / ProgramEnd on the master thread ----
        if n and G == 0 and rt.thread[0] == 0:  # the rank's first chunk is thread 0's
            z = np.zeros(1, np.int64)
            idx = np.zeros(1, np.int64)
            part(idx, [rt.t_begin], CLS_ENTER, [I64_MIN], z, 0, K_PROGRAM_BEGIN)
            part(
                idx,
                [rt.t_end],
                CLS_ENTER,
                [I64_MIN],
                z,
                1,
                K_PROGRAM_END,
                (self.exit_status if rt.meta.get("state") == "complete" else 1,),
            )
        lostrec = np.flatnonzero(typ == T["LOST"])
        if len(lostrec):
            carry.lost_events += int(rec["bytes"][lostrec].sum())
            carry.lost_records = True
        if not parts:
            return None, resolved
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, resolved

    def _rank_tables(self, rt):
        """What _sub_events looks up per function, communicator, window and group of
        rank rt.rank (_RankTables): the same for every chunk of the rank."""
        otf2, names = self.otf2, rt.functions

        def per_name(value, last, dtype):
            return np.array([value(nm) for nm in names] + [last], dtype)

        keys = self.local_comm.get(rt.rank, [])
        wdefs = rt.meta.get("windows", [])
        return _RankTables(
            names=names,
            traits=function_traits(names),
            op=per_name(
                lambda nm: _v(
                    getattr(otf2.CollectiveOp, _COLL_OPS.get(blocking_twin(nm), "ALLREDUCE"))
                ),
                _v(otf2.CollectiveOp.BARRIER),
                np.uint64,
            ),
            atype=per_name(
                lambda nm: _v(getattr(otf2.RmaAtomicType, _ATOMIC_TYPE.get(nm, "ACCUMULATE"))),
                _v(otf2.RmaAtomicType.ACCUMULATE),
                np.uint64,
            ),
            put=per_name(lambda nm: nm in _PUTS, False, bool),
            get=per_name(lambda nm: nm in _GETS, False, bool),
            lock=per_name(lambda nm: nm in ("MPI_Win_lock", "MPI_Win_lock_all"), False, bool),
            unlock=per_name(lambda nm: nm in ("MPI_Win_unlock", "MPI_Win_unlock_all"), False, bool),
            roles=[classify(nm)[1] for nm in names],
            comm_ref=np.array(
                [self.comms[k]._ref for k in keys] + [self.world_comm._ref], np.uint64
            ),
            look=_Lookup([c.get("ranks", []) for c in rt.meta.get("comms", [])], self.X.world_size),
            win_ref=np.array(
                [
                    self.wins.get((keys[wd["comm"]], int(wd.get("seq", 0))))._ref
                    if 0 <= wd.get("comm", -1) < len(keys)
                    else U32
                    for wd in wdefs
                ]
                + [U32],
                np.uint64,
            ),
            win_comm=np.array([wd.get("comm", -1) for wd in wdefs] + [-1], np.int64),
            groups=np.array(self.rank_groups.get(rt.rank, []) + [U32], np.uint64),
        )

    def _sub_events(self, rt, part, specs, carry):
        otf2 = self.otf2
        rec, typ = rt.rec, rt.rec["type"]
        call = last_index(typ == T["CALL"])
        si = np.flatnonzero(SUB(typ) & (call >= 0))
        if not len(si):
            return
        c = call[si]
        fn = rec["fn"][c].astype(np.int64)
        if carry.tables is None:
            carry.tables = self._rank_tables(rt)
        tab = carry.tables
        traits = tab.traits
        st = typ[si]
        flags = rec["flags"][si].astype(np.int64)
        peer = rec["peer"][si].astype(np.int64)
        tag = rec["tag"][si].astype(np.int64)
        comm = rec["comm"][si].astype(np.int64)
        nbytes = rec["bytes"][si].astype(np.int64)
        r0 = rec["t0"][si].astype(np.int64)
        r1 = rec["t1"][si].astype(np.int64)

        def per_fn(table):
            """A per-function table of _RankTables, per event."""
            return table[np.minimum(fn, len(tab.names))]

        comm_ref, look, win_ref, win_comm = tab.comm_ref, tab.look, tab.win_ref, tab.win_comm
        groups = tab.groups
        ncomm = len(comm_ref) - 1
        has_comm = (comm >= 0) & (comm < ncomm)
        cref = comm_ref[np.where(has_comm, comm, ncomm)]
        # a record without a communicator is written on MPI_COMM_WORLD, peer as world rank
        local, need_peer = look(np.where(has_comm, comm, -1), peer)
        no_comm = ~has_comm & np.isin(st, [T["SEND"], T["RECV"], T["COLL"]])
        local = np.where(no_comm, (peer & U32).astype(np.uint64), local)
        need_peer &= ~no_comm
        winid = np.where(np.isin(st, [T["WIN"], T["RMA"], T["WSYNC"]]), tag, -1)
        nwin = len(win_ref) - 1
        okwin = (winid >= 0) & (winid < nwin)
        wref = win_ref[np.where(okwin, winid, nwin)]
        wlocal, wneed = look(win_comm[np.where(okwin, winid, nwin)], peer)
        tag32 = (tag & U32).astype(np.uint64)
        b64 = nbytes.astype(np.uint64)
        key64 = r0.astype(np.uint64)
        recv64 = r1.astype(np.uint64)

        kind = np.full(len(si), -1, np.int64)
        kind2 = np.full(len(si), -1, np.int64)  # a second event (the begin of a pair)
        late = np.zeros(len(si), bool)  # written at the call's end
        A = [np.zeros(len(si), np.uint64) for _ in range(6)]
        nb_event = np.zeros(len(si), bool)
        excl = np.zeros(len(si), bool)

        def setargs(mask, *cols):
            for i, col in enumerate(cols):
                A[i][mask] = np.broadcast_to(np.asarray(col).astype(np.uint64), (len(si),))[mask]

        # point-to-point
        s = st == T["SEND"]
        nb = s & ((flags & F["NONBLOCKING"]) != 0)
        kind[s & ~nb] = K_SEND
        kind[nb] = K_ISEND
        nb_event |= nb
        setargs(s, local, cref, tag32, b64, key64)
        r = st == T["RECV"]
        kr = r & (r0 != 0)
        kind[r & ~kr] = K_RECV
        kind[kr] = K_IRECV
        late |= r
        setargs(r, local, cref, tag32, b64, key64)
        ir = st == T["IRECV"]
        kind[ir] = K_IRECV_REQ
        nb_event |= ir
        setargs(ir, key64)
        sd = st == T["SEND_DONE"]
        kind[sd] = K_ISEND_DONE
        late |= sd
        setargs(sd, key64)
        # collectives: begin at the call's enter, end at its leave
        co = st == T["COLL"]
        op_col = per_fn(tab.op)
        # a nonblocking one as Score-P writes it: NonBlockingCollectiveRequest when it is
        # started, NonBlockingCollectiveComplete (with what the collective was) in the
        # call that completes it (its COLL_DONE: same request key and post number)
        nbc = co & ((flags & F["NONBLOCKING"]) != 0) & (r0 != 0)
        co &= ~nbc
        kind[co] = K_COLL_END
        kind2[co] = K_COLL_BEGIN
        late |= co
        setargs(co, op_col, cref, local, b64, recv64)
        kind[nbc] = K_NBC_REQUEST
        late |= nbc
        setargs(nbc, key64)
        cd = st == T["COLL_DONE"]
        kind[cd] = K_NBC_COMPLETE
        late |= cd
        post = np.full(len(si), -1, np.int64)
        if cd.any():
            started = {
                (int(k), int(n)): j
                for j, k, n in zip(
                    np.flatnonzero(nbc).tolist(), r0[nbc].tolist(), tag[nbc].tolist()
                )
            }
            post[cd] = [
                started.get((int(k), int(n)), -1) for k, n in zip(r0[cd].tolist(), r1[cd].tolist())
            ]
        pj = np.maximum(post, 0)
        found = cd & (post >= 0)
        # what a start needs to give its completion, from this chunk or an earlier one
        s_op, s_local, s_b64, s_recv = op_col[pj], local[pj], b64[pj], recv64[pj]
        s_need, s_peer = need_peer[pj], peer[pj]
        if cd.any() or nbc.any():
            for j in np.flatnonzero(cd & ~found).tolist():
                got = carry.started.pop((int(r0[j]), int(r1[j])), None)
                if got is not None:
                    found[j] = True
                    s_op[j], s_local[j], s_b64[j], s_recv[j], s_need[j], s_peer[j] = got
            done = {(int(k), int(n)) for k, n in zip(r0[cd].tolist(), r1[cd].tolist())}
            for j, k, n in zip(np.flatnonzero(nbc).tolist(), r0[nbc].tolist(), tag[nbc].tolist()):
                if (int(k), int(n)) not in done:
                    carry.started[(int(k), int(n))] = (
                        op_col[j],
                        local[j],
                        b64[j],
                        recv64[j],
                        need_peer[j],
                        peer[j],
                    )
        # a completion whose start is not in the trace: a barrier of unknown size
        setargs(
            cd,
            np.where(found, s_op, _v(otf2.CollectiveOp.BARRIER)),
            cref,
            np.where(found, s_local, U32),
            np.where(found, s_b64, 0),
            np.where(found, s_recv, 0),
            key64,
        )
        done_peer = found & s_need
        # windows
        wi = st == T["WIN"]
        free = wi & ((flags & F["FREE"]) != 0)
        kind[wi & ~free] = K_WIN_CREATE
        kind[free] = K_WIN_DESTROY
        late |= wi & ~free
        setargs(wi, wref)
        # one-sided operations
        rm = st == T["RMA"]
        put = rm & per_fn(tab.put) & (r1 == 0)
        get = rm & per_fn(tab.get) & (nbytes == 0)
        atom = rm & ~put & ~get
        kind[put] = K_PUT
        kind[get] = K_GET
        kind[atom] = K_ATOMIC
        setargs(put, wref, wlocal, b64, key64)
        setargs(get, wref, wlocal, recv64, key64)
        setargs(atom, wref, wlocal, per_fn(tab.atype), b64, recv64, key64)
        # window synchronisation
        ws = st == T["WSYNC"]

        def role_in(*wanted):
            # per function, then per event: comparing strings per event is most of the
            # time
            return per_fn(np.array([r in wanted for r in tab.roles] + [False]))

        fence = ws & role_in("win_fence")
        gsync = ws & role_in("win_post", "win_start", "win_complete", "win_wait", "win_test")
        lock = ws & per_fn(tab.lock)
        unlock = ws & per_fn(tab.unlock)
        other = ws & ~fence & ~gsync & ~lock & ~unlock
        kind[fence] = K_RMA_COLL_END
        kind2[fence] = K_RMA_COLL_BEGIN
        level = _v(otf2.RmaSyncLevel.PROCESS) | _v(otf2.RmaSyncLevel.MEMORY)
        setargs(fence, _v(otf2.CollectiveOp.BARRIER), level, wref, U32, 0, 0)
        kind[gsync] = K_GROUP_SYNC
        # the group of an epoch's closing call is that of the call that opened it
        gid = np.where(gsync & role_in("win_post", "win_start"), r1, -1)
        for opener, closers in (
            ("win_start", ["win_complete"]),
            ("win_post", ["win_wait", "win_test"]),
        ):
            idx = np.flatnonzero(ws & role_in(opener, *closers))
            if not len(idx):
                continue
            o = np.lexsort((idx, winid[idx]))
            sidx = idx[o]
            is_open = role_in(opener)[sidx]
            last = last_index(is_open)
            same = (last >= 0) & (winid[sidx[np.maximum(last, 0)]] == winid[sidx])
            close = ~is_open & same
            gid[sidx[close]] = r1[sidx[np.maximum(last, 0)][close]]
            # an epoch opened in an earlier chunk
            opened = carry.openers.setdefault(opener, {})
            for j in sidx[~is_open & ~same].tolist():
                gid[j] = opened.get(int(winid[j]), -1)
            for j in sidx[is_open].tolist():
                opened[int(winid[j])] = int(r1[j])
        ng = len(groups) - 1
        gref = groups[np.where((gid >= 0) & (gid < ng), gid, ng)]
        setargs(gsync, _v(otf2.RmaSyncLevel.PROCESS), wref, gref)
        kind[lock] = K_ACQUIRE
        ex = lock & ((flags & F["EXCLUSIVE"]) != 0)
        excl |= ex & (peer >= 0)
        setargs(
            lock,
            wref,
            wlocal,
            0,
            np.where(ex, _v(otf2.LockType.EXCLUSIVE), _v(otf2.LockType.SHARED)),
        )
        kind[unlock] = K_RELEASE
        setargs(unlock, wref, wlocal, 0)
        kind[other] = K_RMA_SYNC
        setargs(other, wref, wlocal, _v(otf2.RmaSyncType.MEMORY))
        late |= ws & ~fence

        # attributes: what the events cannot say
        dflags = derived_flags(traits, fn, st, nb_event, excl)
        want = {}
        bad_flags = flags != dflags
        peer_attr = np.zeros(len(si), bool)
        peer_attr |= (s | r | co) & need_peer
        peer_attr |= (rm | lock | unlock | other) & wneed
        peer_attr |= (fence | gsync | wi) & (peer >= 0)
        comm_attr = no_comm & (s | r)
        # a receive request says what it asked for only where its receive differs
        # (_irecv_attributes, found by the first pass)
        ir_attr = ir.copy()
        if ir.any():
            ir_attr[ir] = carry.irecv_attributes(int(ir.sum()))
        for j in np.flatnonzero(bad_flags | peer_attr | comm_attr | ir_attr | done_peer).tolist():
            spec = []
            if bad_flags[j]:
                spec.append(("flags", int(flags[j])))
            if done_peer[j]:
                spec.append(("peer", int(s_peer[j])))
            if ir_attr[j]:
                spec += [
                    ("peer", int(peer[j])),
                    ("tag", int(tag[j])),
                    ("bytes", int(nbytes[j]) & U64),
                    ("comm", int(cref[j]) if has_comm[j] else U32),
                ]
            elif peer_attr[j]:
                spec.append(("peer", int(peer[j])))
            if comm_attr[j]:
                spec.append(("comm", U32))
            want[j] = tuple(spec)
        attr = np.full(len(si), -1, np.int64)
        for j, spec in want.items():
            attr[j] = specs.add(spec)

        # order inside the call: record order; an event meant for the call's enter that
        # follows one written at its end is written at the end too
        em = np.concatenate([np.flatnonzero(kind2 >= 0), np.arange(len(si))])
        first = np.r_[np.ones(int((kind2 >= 0).sum()), bool), np.zeros(len(si), bool)]
        o = np.lexsort((~first, em))
        em, first = em[o], first[o]
        ekind = np.where(first, kind2[em], kind[em])
        elate = np.where(first, False, late[em])
        ec = c[em]
        grp_start = np.r_[True, ec[1:] != ec[:-1]] if len(ec) else np.zeros(0, bool)
        cs = np.cumsum(elate)
        base = np.repeat(
            cs[grp_start] - elate[grp_start], np.diff(np.r_[np.flatnonzero(grp_start), len(ec)])
        )
        elate = (cs - base) > 0
        ordinal = np.arange(len(em)) - np.repeat(
            np.flatnonzero(grp_start), np.diff(np.r_[np.flatnonzero(grp_start), len(ec)])
        )
        ok = ekind >= 0
        em, ec, ekind, elate, ordinal, first = (
            x[ok] for x in (em, ec, ekind, elate, ordinal, first)
        )
        ta, tb = rt.t0[ec], rt.t1[ec]
        time_ = np.where(elate, tb, ta)
        cls = np.where(elate, np.where(tb > ta, CLS_LEAVE, CLS_LEAVE0), CLS_ENTER)
        sec = np.where(elate, -ta, -tb)
        grp = np.where(elate, -(rt.base + ec), rt.base + ec)
        k = np.where(elate, ordinal - LATE, ordinal + 1)
        args = [np.where(first, np.uint64(0), a[em]).astype(np.uint64) for a in A]
        at = np.where(first, -1, attr[em])
        part(si[em], time_, cls, sec, grp, k, ekind, args, at)


# ---------------------------------------------------------------- import


def _resolve_archive(path):
    p = Path(path)
    if p.is_dir():
        cand = p / "traces.otf2"
        if cand.is_file():
            return cand
        found = sorted(p.glob("*.otf2"))
        if len(found) == 1:
            return found[0]
        raise PerfweaveError(f"{p}: no OTF2 anchor file (NAME.otf2) in this directory")
    if not p.exists():
        raise PerfweaveError(f"{p}: no such OTF2 archive")
    if p.suffix != ".otf2":
        raise PerfweaveError(f"{p}: not an OTF2 anchor file (expected NAME.otf2)")
    return p


# event kinds read (columns a..e hold their fields in OTF2's order)
(
    R_ENTER,
    R_LEAVE,
    R_SEND,
    R_ISEND,
    R_ISEND_DONE,
    R_IRECV_REQ,
    R_RECV,
    R_IRECV,
    R_COLL_BEGIN,
    R_COLL_END,
    R_WIN_CREATE,
    R_WIN_DESTROY,
    R_RMA_COLL_BEGIN,
    R_RMA_COLL_END,
    R_GROUP_SYNC,
    R_ACQUIRE,
    R_RELEASE,
    R_RMA_SYNC,
    R_PUT,
    R_GET,
    R_ATOMIC,
    R_FLUSH,
    R_PROGRAM_BEGIN,
    R_PROGRAM_END,
    R_NBC_REQUEST,
    R_NBC_COMPLETE,
) = range(26)
_READ = {  # callback name -> (kind, number of fields, positions of enum fields)
    "Enter": (R_ENTER, 1, ()),
    "Leave": (R_LEAVE, 1, ()),
    "MpiSend": (R_SEND, 4, ()),
    "MpiIsend": (R_ISEND, 5, ()),
    "MpiIsendComplete": (R_ISEND_DONE, 1, ()),
    "MpiIrecvRequest": (R_IRECV_REQ, 1, ()),
    "MpiRecv": (R_RECV, 4, ()),
    "MpiIrecv": (R_IRECV, 5, ()),
    "MpiCollectiveBegin": (R_COLL_BEGIN, 0, ()),
    "MpiCollectiveEnd": (R_COLL_END, 5, (0,)),
    "RmaWinCreate": (R_WIN_CREATE, 1, ()),
    "RmaWinDestroy": (R_WIN_DESTROY, 1, ()),
    "RmaCollectiveBegin": (R_RMA_COLL_BEGIN, 0, ()),
    "RmaCollectiveEnd": (R_RMA_COLL_END, 6, (0, 1)),
    "RmaGroupSync": (R_GROUP_SYNC, 3, (0,)),
    "RmaAcquireLock": (R_ACQUIRE, 4, (3,)),
    "RmaReleaseLock": (R_RELEASE, 3, ()),
    "RmaSync": (R_RMA_SYNC, 3, (2,)),
    "RmaPut": (R_PUT, 4, ()),
    "RmaGet": (R_GET, 4, ()),
    "RmaAtomic": (R_ATOMIC, 6, (2,)),
    "BufferFlush": (R_FLUSH, 1, ()),
    "NonBlockingCollectiveRequest": (R_NBC_REQUEST, 1, ()),
    "NonBlockingCollectiveComplete": (R_NBC_COMPLETE, 6, (0,)),
}
# the kinds of MPI events: every kind read but regions, buffer flushes and the program's
# begin and end
_MPI_KINDS = np.setdiff1d(
    np.arange(R_NBC_COMPLETE + 1), [R_ENTER, R_LEAVE, R_FLUSH, R_PROGRAM_BEGIN, R_PROGRAM_END]
)


class _Collector:
    """Callbacks of the OTF2 global event reader: each event becomes a tuple (sequence
    number, location, time, fields...) in the list of its kind; fields that are
    definitions stay references. Attributes are read only where perfweave writes them."""

    def __init__(self, _otf2, attr_names, flush_regions):
        self._otf2 = _otf2
        self.seq = itertools.count()
        self.lists = {k: [] for k in range(26)}
        self.attrs = [None]  # index 0: no attributes
        self.attr_names = attr_names
        self.flush = flush_regions
        self.other = {}  # (kind, location) -> events of no record type

    def _attributes(self, al):
        if not self.attr_names:  # not written by perfweave: nothing to look for
            return 0
        o = self._otf2
        n = o.AttributeList_GetNumberOfElements(al)
        if not n:
            return 0
        out = {}
        for i in range(n):
            ref, typ, val = o.AttributeList_GetAttributeByIndex(al, i)
            key = self.attr_names.get(ref)
            if key is None:
                continue
            if key == "comm":
                out[key] = val.commRef
            elif key == "flags":
                out[key] = val.uint8
            elif key == "bytes":
                out[key] = val.uint64
            else:
                out[key] = val.int32
        if not out:
            return 0
        self.attrs.append(out)
        return len(self.attrs) - 1

    def callbacks(self):
        """{callback name: function} for every event kind the library can report."""
        nxt = self.seq.__next__
        L = self.lists
        cb = {}
        attrs = self._attributes
        flush = self.flush

        def enter(loc, t, ud, al, region, _a=L[R_ENTER].append):
            _a((nxt(), loc, t, region, attrs(al) if region in flush else 0))

        def leave(loc, t, ud, al, region, _a=L[R_LEAVE].append):
            _a((nxt(), loc, t, region, 0))

        cb["Enter"], cb["Leave"] = enter, leave
        for name, (kind, nf, enums) in _READ.items():
            if name in cb:
                continue
            if enums:
                cb[name] = self._with_enums(enums, nxt, L[kind].append, attrs)
            else:
                cb[name] = self._generic(kind, nf, nxt, L[kind].append, attrs)

        def program_begin(loc, t, ud, al, name, args, _a=L[R_PROGRAM_BEGIN].append):
            _a((nxt(), loc, t, 0))

        def program_end(loc, t, ud, al, status, _a=L[R_PROGRAM_END].append):
            _a((nxt(), loc, t, 0))

        cb["ProgramBegin"], cb["ProgramEnd"] = program_begin, program_end
        return cb

    @staticmethod
    def _generic(kind, nf, nxt, append, attrs):
        if nf == 0:
            return lambda loc, t, ud, al: append((nxt(), loc, t, attrs(al)))
        if nf == 1:
            return lambda loc, t, ud, al, a: append((nxt(), loc, t, a, attrs(al)))
        if nf == 3:
            return lambda loc, t, ud, al, a, b, c: append((nxt(), loc, t, a, b, c, attrs(al)))
        if nf == 4:
            return lambda loc, t, ud, al, a, b, c, d: append((nxt(), loc, t, a, b, c, d, attrs(al)))
        if nf == 5:
            return lambda loc, t, ud, al, a, b, c, d, e: append(
                (nxt(), loc, t, a, b, c, d, e, attrs(al))
            )
        return lambda loc, t, ud, al, a, b, c, d, e, f: append(
            (nxt(), loc, t, a, b, c, d, e, f, attrs(al))
        )

    @staticmethod
    def _with_enums(positions, nxt, append, attrs):
        # the otf2 package hands enum fields over as ctypes values
        def add(loc, t, ud, al, *fields):
            f = list(fields)
            for i in positions:
                f[i] = f[i].value
            append((nxt(), loc, t, *f, attrs(al)))

        return add

    def counter(self, name):
        """A callback that counts the events of kind name, per location."""
        other = self.other

        def count(loc, *args):
            key = (name, loc)
            other[key] = other.get(key, 0) + 1

        return count


def _table(lists):
    """All events read as one table sorted by (location, read order). Each event's
    sequence number is its row in read order."""
    n = sum(len(rows) for rows in lists.values())
    if not n:
        return None
    signed = ("loc", "time", "kind", "attr")
    tab = {
        k: np.zeros(n, np.int64 if k in signed else np.uint64)
        for k in ("loc", "time", "kind", "a", "b", "c", "d", "e", "f", "attr")
    }
    for kind, rows in lists.items():
        if not rows:
            continue
        arr = np.array(rows, dtype=np.uint64)
        at = arr[:, 0].astype(np.int64)
        tab["loc"][at] = arr[:, 1].view(np.int64)
        tab["time"][at] = arr[:, 2].view(np.int64)
        tab["kind"][at] = kind
        for i, key in enumerate("abcdef"[: arr.shape[1] - 4]):
            tab[key][at] = arr[:, 3 + i]
        tab["attr"][at] = arr[:, -1].view(np.int64)
    o = np.argsort(tab["loc"], kind="stable")
    return {k: v[o] for k, v in tab.items()}


def import_archive(archive, out):
    """Convert the OTF2 archive archive (its anchor file, or a directory holding one) into
    the experiment directory out. Returns a summary dict (experiment, events, ranks,
    seconds, notes)."""
    otf2, _otf2 = need_otf2("OTF2 import")
    errors = _errors(otf2, _otf2)
    anchor = _resolve_archive(archive)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PerfweaveError(f"{out}: already exists; choose another -o")
    t_start = time.perf_counter()
    messages = []
    try:
        with _library_messages(messages):
            reader = otf2.reader.Reader(str(anchor))
            try:
                imp = _Importer(otf2, _otf2, reader, anchor)
                imp.creator = _otf2.Reader_GetCreator(reader.handle) or ""
                imp.read()
            finally:
                reader.close()
    except errors as e:
        raise PerfweaveError(
            f"{anchor}: not a readable OTF2 archive ({_why(e, messages)})"
        ) from None
    except OSError as e:
        raise PerfweaveError(f"{anchor}: cannot read ({e.strerror or e})") from None
    t_read = time.perf_counter()
    imp.build()
    imp.write(out)
    t_end = time.perf_counter()
    return {
        "experiment": str(out),
        "events": imp.nevents,
        "records": imp.nrecords,
        "ranks": imp.world,
        "seconds": t_end - t_start,
        "read_seconds": t_read - t_start,
        "notes": imp.notes,
        "skipped_locations": imp.skipped_locations,
        "skipped_events": imp.skipped_events,
    }


def _location_kind(loc):
    """What an OTF2 location is to perfweave: "thread" (a CPU thread of a process: its
    events become the records of one thread of a rank), "accelerator stream" or
    "metric location" (no record type holds their events: skipped and counted)."""
    typ = _v(loc.type)
    group_type = _v(loc.group.location_group_type)
    if typ == 3:  # OTF2_LOCATION_TYPE_METRIC
        return "metric location"
    if typ == 2 or group_type == 2:  # GPU / ACCELERATOR_STREAM, ACCELERATOR
        return "accelerator stream"
    return "thread"  # CPU_THREAD, or UNKNOWN in a process


class _Importer:
    def __init__(self, otf2, _otf2, reader, anchor):
        self.otf2, self._otf2, self.reader, self.anchor = otf2, _otf2, reader, anchor
        self.notes = []
        self.creator = ""  # the archive's creator (Score-P x.y, perfweave ...)

    # ---- definitions ----

    def _defs(self):
        otf2, d = self.otf2, self.reader.definitions
        cp = d.clock_properties
        self.res = int(cp.timer_resolution) or 1
        self.offset = int(cp.global_offset)
        self.length = int(cp.trace_length)
        self.realtime = int(cp.realtime_timestamp)
        # ranks: the MPI locations group lists each rank's master location, by rank
        rank_of_group = {}
        mpi_locs = None
        for g in d.groups:
            if g.group_type == otf2.GroupType.COMM_LOCATIONS and g.paradigm == otf2.Paradigm.MPI:
                mpi_locs = list(g.members)
        self.world_locs = mpi_locs
        if mpi_locs:
            for r, loc in enumerate(mpi_locs):
                rank_of_group[loc.group._ref] = r
        else:
            procs = [
                lg
                for lg in d.location_groups
                if lg.location_group_type == otf2.LocationGroupType.PROCESS
            ]
            for r, lg in enumerate(procs):
                rank_of_group[lg._ref] = r
        for lg in d.location_groups:
            parent = getattr(lg, "creating_location_group", None)
            if lg._ref not in rank_of_group and parent is not None and parent._ref in rank_of_group:
                rank_of_group[lg._ref] = rank_of_group[parent._ref]
        self.world = (max(rank_of_group.values()) + 1) if rank_of_group else 0
        self.loc_rank, self.loc_thread = {}, {}
        threads = {}
        masters = {loc._ref for loc in (mpi_locs or [])}
        locs = sorted(d.locations, key=lambda x: (x._ref not in masters, x._ref))
        self.hosts = {}
        self.skipped_locs = {}  # ref -> (name, what, rank or None)
        for loc in locs:
            r = rank_of_group.get(loc.group._ref)
            what = _location_kind(loc)
            if r is None or what != "thread":
                self.skipped_locs[loc._ref] = (
                    f"{loc.group.name}/{loc.name}",
                    "thread of no MPI rank" if what == "thread" else what,
                    r,
                )
                continue
            self.loc_rank[loc._ref] = r
            self.loc_thread[loc._ref] = threads.setdefault(r, 0)
            threads[r] += 1
            node = loc.group.system_tree_parent
            self.hosts.setdefault(r, node.name if node is not None else "unknown")
        self.threads = threads
        # world rank of a location (COMM_GROUP members are locations in the otf2 package)
        self.rank_of_member = {}
        for loc in d.locations:
            if loc._ref in self.loc_rank:
                self.rank_of_member[loc._ref] = self.loc_rank[loc._ref]

        def members(g):
            if not isinstance(g, otf2.definitions.Group):
                return None
            if g.group_type == otf2.GroupType.COMM_SELF:
                return None  # the rank itself
            out = []
            for m in g.members:
                ref = getattr(m, "_ref", m)
                out.append(self.rank_of_member.get(ref, -1) if hasattr(m, "_ref") else int(m))
            return out

        # regions
        self.region_name = {}
        self.region_kind = {}  # 0 user, 1 MPI call, 2 buffer flush
        for r in d.regions:
            name = r.name or f"region {r._ref}"
            self.region_name[r._ref] = name
            if name == FLUSH_REGION:
                k = 2
            elif name.startswith("MPI_") or (
                r.paradigm == otf2.Paradigm.MPI and r.region_role != otf2.RegionRole.ARTIFICIAL
            ):
                k = 1
            else:
                k = 0
            self.region_kind[r._ref] = k
        # communicators, windows, groups
        self.comm_def = {}  # ref -> ("comm", members|None) / ("inter", A, B)
        self.comm_name = {}
        self.comm_order = []
        for c in d.comms:
            groups = [getattr(c, k, None) for k in ("group", "groupA", "groupB")]
            if not any(
                isinstance(g, otf2.definitions.Group) and g.paradigm == otf2.Paradigm.MPI
                for g in groups
            ):
                continue  # the measurement system's own communicators
            if isinstance(c, otf2.definitions.InterComm):
                self.comm_def[c._ref] = ("inter", members(c.groupA) or [], members(c.groupB) or [])
            else:
                self.comm_def[c._ref] = ("comm", members(c.group))
            self.comm_name[c._ref] = c.name
            self.comm_order.append(c._ref)
        self.comm_parent = {
            c._ref: (c.parent._ref if getattr(c, "parent", None) is not None else None)
            for c in d.comms
            if c._ref in self.comm_def
        }
        self.win_comm = {w._ref: w.comm._ref for w in d.rma_wins if w.comm is not None}
        self.win_order = [w._ref for w in d.rma_wins]
        self.group_members = {
            g._ref: members(g)
            for g in d.groups
            if g.group_type in (otf2.GroupType.COMM_GROUP, otf2.GroupType.COMM_SELF)
        }
        self.attr_names = {
            a._ref: a.name[len("perfweave:") :]
            for a in d.attributes
            if a.name.startswith("perfweave:")
        }
        self.flush_regions = {ref for ref, k in self.region_kind.items() if k == 2}
        self.announced = sum(int(loc.number_of_events or 0) for loc in d.locations)

    # ---- events ----

    def read(self):
        _otf2 = self._otf2
        self._defs()
        col = _Collector(_otf2, self.attr_names, self.flush_regions)
        handle = self.reader._get_global_evt_reader_handle(None)
        # The library keeps only C function pointers; the otf2 package ties each one's
        # lifetime to the Python function it was made from. Every function handed over
        # therefore stays referenced here until the reader is closed, or the library
        # calls freed code at the first event of a kind (Metric, ThreadFork, ...).
        self._callbacks = []
        cbs = _otf2.GlobalEvtReaderCallbacks_New()
        try:
            ours = col.callbacks()
            for nm in dir(_otf2):
                if not (nm.startswith("GlobalEvtReaderCallbacks_Set") and nm.endswith("Callback")):
                    continue
                kind = nm[len("GlobalEvtReaderCallbacks_Set") : -len("Callback")]
                fn = ours.get(kind) or col.counter(kind)
                self._callbacks.append(fn)
                getattr(_otf2, nm)(cbs, fn)
            _otf2.GlobalEvtReader_SetCallbacks(handle, cbs, None)
        finally:
            _otf2.GlobalEvtReaderCallbacks_Delete(cbs)
        while _otf2.GlobalEvtReader_ReadEvents(handle, 1 << 20) == 1 << 20:
            pass
        self.col = col
        self.nevents = sum(len(v) for v in col.lists.values()) + sum(col.other.values())

    # ---- records ----

    def build(self):
        col = self.col
        tab = _table(col.lists)
        self.attrs = col.attrs
        notes = self.notes
        if self.announced and self.announced != self.nevents:
            notes.append(
                f"read {self.nevents} events, the archive's definitions announce {self.announced}"
            )
        self.ranks = {}
        if tab is None:
            tab = {k: np.zeros(0, np.int64) for k in ("loc", "time", "kind", "attr")}
            for k in "abcdef":
                tab[k] = np.zeros(0, np.uint64)
        self._skipped(tab)
        locs = tab["loc"]
        loc_ids = np.array(sorted(set(self.loc_rank)), np.int64)
        known = np.isin(locs, loc_ids)
        if (~known).any():
            tab = {k: v[known] for k, v in tab.items()}
        self.tab = tab
        self._functions()
        self._comms()
        self._windows()
        self.records = {}
        self.meta = {}
        bounds = (
            np.flatnonzero(np.r_[True, tab["loc"][1:] != tab["loc"][:-1]])
            if len(tab["loc"])
            else np.zeros(0, np.int64)
        )
        per_rank = {}
        for a, b in zip(bounds.tolist(), np.r_[bounds[1:], len(tab["loc"])].tolist()):
            loc = int(tab["loc"][a])
            per_rank.setdefault(self.loc_rank[loc], []).append((self.loc_thread[loc], a, b))
        self.counts = {"outside": 0, "nested": 0, "open": 0, "unmatched": 0, "nocomm": 0}
        for r in range(self.world):
            parts = sorted(per_rank.get(r, []))
            self._rank(r, parts)
        c = self.counts
        if c["outside"]:
            notes.append(
                f"{c['outside']} MPI events outside any MPI call: a perfweave record "
                "of what a call did needs its call (not imported)"
            )
        if c["nested"]:
            notes.append(
                f"{c['nested']} Enter/Leave events of MPI functions called inside "
                "another MPI function: folded into the outer call"
            )
        if c["open"]:
            notes.append(
                f"{c['open']} MPI calls never left before the trace ends: they end "
                "at the rank's last event"
            )
        if c["unmatched"]:
            notes.append(f"{c['unmatched']} Leave events without an Enter: not imported")
        if c["nocomm"]:
            notes.append(
                f"{c['nocomm']} events name a communicator or window the rank is not "
                "a member of: imported without it"
            )
        self.nrecords = sum(len(v[0]) for v in self.records.values())

    def _skipped(self, tab):
        """Count what is not imported: every location that is not a thread of a rank
        (accelerator streams, metric locations, threads of no rank) with all its events,
        and on the imported threads the events of kinds perfweave has no record for."""
        per_loc = {}
        if len(tab["loc"]):
            ids, n = np.unique(tab["loc"], return_counts=True)
            per_loc = dict(zip(ids.tolist(), n.tolist()))
        kinds = {}
        for (name, loc), n in self.col.other.items():
            if loc in self.loc_rank:
                kinds[name] = kinds.get(name, 0) + n
            else:
                per_loc[loc] = per_loc.get(loc, 0) + n
        self.skipped_locations = [
            {"location": name, "kind": what, "rank": r, "events": per_loc.get(ref, 0)}
            for ref, (name, what, r) in sorted(self.skipped_locs.items())
        ]
        self.skipped_events = dict(sorted(kinds.items()))
        by_kind = {}
        for s in self.skipped_locations:
            k = by_kind.setdefault(s["kind"], [0, 0, []])
            k[0] += 1
            k[1] += s["events"]
            k[2].append(s["location"])
        for what, (n, events, names) in by_kind.items():
            more = f", {n - 5} more" if n > 5 else ""
            self.notes.append(
                f"{n} {what}{'s' if n > 1 else ''} with {events} events not "
                f"imported ({', '.join(names[:5])}{more}): perfweave's traces "
                "have no place for them"
            )
        for name, n in self.skipped_events.items():
            what = "records unknown to this OTF2 version" if name == "Unknown" else f"{name} events"
            self.notes.append(f"{n} {what}: perfweave has no record for them (not imported)")

    def _functions(self):
        """The MPI functions and user regions the events enter, as perfweave numbers
        them (functions: names of MPI regions in the JSON; regions: user region names)."""
        tab = self.tab
        regs = np.unique(tab["a"][np.isin(tab["kind"], [R_ENTER, R_LEAVE])]).tolist()
        name = lambda r: self.region_name.get(r, f"region {r}")
        kind = {r: self.region_kind.get(r, 0) for r in regs}
        self.functions = []
        for r in regs:
            if kind[r] == 1 and name(r) not in self.functions:
                self.functions.append(name(r))
        self.regions = sorted({name(r) for r in regs if kind[r] == 0})
        if len(self.functions) > 65535:
            raise PerfweaveError(f"{self.anchor}: more than 65535 MPI functions")
        fidx = {f: i for i, f in enumerate(self.functions)}
        ridx = {f: i for i, f in enumerate(self.regions)}
        self.reg_kind = {r: kind[r] for r in regs}
        self.reg_fn = {r: fidx[name(r)] for r in regs if kind[r] == 1}
        self.reg_user = {r: ridx[name(r)] for r in regs if kind[r] == 0}
        init = [fidx[f] for f in ("MPI_Init", "MPI_Init_thread") if f in fidx]
        self.init_fns = np.array(init, np.int64)
        self.fini_fns = np.array([fidx["MPI_Finalize"]] if "MPI_Finalize" in fidx else [], np.int64)

    def _comms(self):
        """Each rank's communicators: those it is a member of, numbered as perfweave
        numbers them (seq: earlier ones with the same members, in definition order)."""
        self.rank_comms = {}
        for r in range(self.world):
            lst, local = [], {}
            seen = {}
            for ref in self.comm_order:
                d = self.comm_def[ref]
                if d[0] == "inter":
                    a, b = d[1], d[2]
                    if r in a:
                        ranks, remote = a, b
                    elif r in b:
                        ranks, remote = b, a
                    else:
                        continue
                else:
                    ranks = [r] if d[1] is None else d[1]
                    remote = []
                    if r not in ranks:
                        continue
                key = (tuple(ranks), tuple(remote))
                seq = seen.get(key, 0)
                seen[key] = seq + 1
                entry = {"id": len(lst), "ranks": list(ranks), "parent": -1, "seq": seq}
                if remote:
                    entry["remote"] = list(remote)
                if self.comm_name.get(ref):
                    entry["name"] = self.comm_name[ref]
                local[ref] = len(lst)
                lst.append(entry)
            for ref, i in local.items():
                p = self.comm_parent.get(ref)
                if p is not None and p in local:
                    lst[i]["parent"] = local[p]
            self.rank_comms[r] = (lst, local)

    def _windows(self):
        self.rank_wins = {}
        for r in range(self.world):
            lst, local = [], {}
            seq = {}
            comms = self.rank_comms[r][1]
            for ref in self.win_order:
                c = self.win_comm.get(ref)
                if c not in comms:
                    continue
                s = seq.get(c, 0)
                seq[c] = s + 1
                local[ref] = len(lst)
                lst.append({"id": len(lst), "comm": comms[c], "seq": s})
            self.rank_wins[r] = (lst, local)

    def _to_world(self, comm, value, rank, remote=True):
        """Ranks in communicator comm (refs) -> world ranks; values >= 2**31 are negative
        int32 values kept as they are (perfweave writes -1 and -2 that way)."""
        v = value.astype(np.int64)
        out = np.where(v >= 1 << 31, v - (1 << 32), -1)
        for ref in np.unique(comm).tolist():
            sel = (comm == ref) & (v < 1 << 31)
            if not sel.any():
                continue
            d = self.comm_def.get(ref)
            if d is None:
                continue
            if d[0] == "inter":
                a, b = d[1], d[2]
                m = np.asarray(
                    (b if rank in a else a) if remote else (a if rank in a else b), np.int64
                )
            elif d[1] is None:
                m = np.array([rank], np.int64)
            else:
                m = np.asarray(d[1], np.int64)
            ok = sel & (v < len(m))
            out[ok] = m[v[ok]]
        return out

    def _rank(self, r, parts):
        """The records of rank r from its locations' events (parts: (thread, a, b) slices
        of the table)."""
        tab = self.tab
        recs, flushes = [], []
        tb_cand = {}
        te_cand = {}
        all_t = []
        comm_local = self.rank_comms[r][1]
        win_local = self.rank_wins[r][1]
        groups, group_ids = [], {}
        for thread, a, b in parts:
            ev = {k: v[a:b] for k, v in tab.items()}
            out, info = self._thread(r, thread, ev, comm_local, win_local, groups, group_ids)
            first = sum(len(x) for x in recs)
            if len(out):
                recs.append(out)
                flushes.append({"thread": int(thread), "first": int(first), "count": int(len(out))})
            for k, v in info.items():  # the first thread that has it
                (tb_cand if k in ("init", "begin") else te_cand).setdefault(k, v)
            if len(ev["time"]):
                all_t += [int(ev["time"].min()), int(ev["time"].max())]
        rec = np.concatenate(recs) if recs else np.zeros(0, EVENT_DTYPE)
        tb = tb_cand.get("init", tb_cand.get("begin"))
        te = te_cand.get("fini", te_cand.get("end"))
        first = min(all_t) if all_t else self.offset
        last = max(all_t) if all_t else self.offset
        complete = "fini" in te_cand or "end" in te_cand
        ns = lambda t: int(_to_ns({"clock": self._clock(0, 0)}, np.array([t], np.int64))[0])
        clock = self._clock(ns(tb if tb is not None else first), ns(te if te is not None else last))
        comms = self.rank_comms[r][0]
        self.records[r] = (rec, flushes)
        self.meta[r] = {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "rank": r,
            "world_size": self.world,
            "host": self.hosts.get(r, "unknown"),
            "pid": 0,
            "state": "complete" if complete else "no-finalize",
            "functions": self.functions,
            "families": [family(f) for f in self.functions],
            "clock": clock,
            "comms": comms,
            "windows": self.rank_wins[r][0],
            "groups": [{"id": i, "ranks": g} for i, g in enumerate(groups)],
            "regions": [{"name": n} for n in self.regions],
            "objects": [],
            "flushes": flushes,
            "records": int(len(rec)),
            "lost": 0,
        }

    def _clock(self, t_init_ns, t_fini_ns):
        # ticks are OTF2's time stamps; ns = (t - offset) * 1e9 / resolution + offset in ns,
        # exact for a resolution of 1 ns
        ns0 = self.offset * NS // self.res
        return {
            "ticks": [self.offset, self.offset + self.res],
            "ns": [ns0, ns0 + NS],
            "offset_init_ns": 0,
            "offset_init_err_ns": 0,
            "offset_fini_ns": 0,
            "offset_fini_err_ns": 0,
            "t_init_ns": t_init_ns,
            "t_fini_ns": t_fini_ns,
        }

    def _thread(self, r, thread, ev, comm_local, win_local, groups, group_ids):
        """The records of one location, from its events in file order."""
        counts = self.counts
        n = len(ev["time"])
        kind = ev["kind"]
        t = ev["time"]
        info = {}
        enter, leave = kind == R_ENTER, kind == R_LEAVE
        reg = np.where(enter | leave, ev["a"], U32).astype(np.int64)
        rk = np.where(enter | leave, _lookup(self.reg_kind, reg, 0), -1)
        # ---- MPI calls: the outermost Enter/Leave of MPI regions ----
        me, ml = enter & (rk == 1), leave & (rk == 1)
        step = me.astype(np.int64) - ml.astype(np.int64)
        level = np.cumsum(step)
        low = np.minimum.accumulate(np.minimum(level, 0)) if n else level
        low_prev = np.r_[0, low[:-1]] if n else low
        bad = ml & (low < low_prev)
        if bad.any():
            counts["unmatched"] += int(bad.sum())
            ml = ml & ~bad
            step = me.astype(np.int64) - ml.astype(np.int64)
            level = np.cumsum(step)
        before = level - step
        start = me & (before == 0)
        end = ml & (level == 0)
        counts["nested"] += int(((me | ml) & ~start & ~end).sum())
        call_no = np.cumsum(start) - 1
        inside = (before > 0) | start  # at or after a call's Enter, before Leave
        si = np.flatnonzero(start)
        ei = np.flatnonzero(end)
        open_calls = len(si) - len(ei)
        if open_calls > 0:
            counts["open"] += open_calls
            ei = np.r_[ei, np.full(open_calls, n, np.int64)]
        t_end = np.r_[t, t[-1] if n else 0]
        call_t0, call_t1 = t[si], t_end[ei]
        fn = np.maximum(_lookup(self.reg_fn, reg[si], 0), 0)
        # application time: MPI_Init left, MPI_Finalize entered (else ProgramBegin/End)
        i = np.flatnonzero(np.isin(fn, self.init_fns) & (ei < n))
        if len(i):
            info["init"] = int(call_t1[i[0]])
        i = np.flatnonzero(np.isin(fn, self.fini_fns))
        if len(i):
            info["fini"] = int(call_t0[i[0]])
        pb = np.flatnonzero(kind == R_PROGRAM_BEGIN)
        pe = np.flatnonzero(kind == R_PROGRAM_END)
        if len(pb):
            info["begin"] = int(t[pb[0]])
        if len(pe):
            info["end"] = int(t[pe[-1]])

        out = []  # (anchor, order, records)
        # CALL records, written where the call ends (as the runtime writes them)
        crec = np.zeros(len(si), EVENT_DTYPE)
        crec["type"] = T["CALL"]
        crec["t0"], crec["t1"], crec["fn"] = call_t0, call_t1, fn
        crec["peer"], crec["comm"] = -1, -1
        out.append((ei, np.zeros(len(si), np.int64), crec))

        # ---- what the calls did ----
        mpi_ev = np.isin(kind, _MPI_KINDS)
        outside = mpi_ev & ~inside
        counts["outside"] += int(outside.sum())
        sub = np.flatnonzero(mpi_ev & inside)
        if len(sub):
            recs, keep = self._subs(
                r, ev, sub, call_no[sub], fn, comm_local, win_local, groups, group_ids
            )
            sub, recs = sub[keep], recs[keep]
            out.append((ei[call_no[sub]], 1 + sub, recs))

        # ---- user regions, buffer flushes ----
        ue, ul = enter & (rk == 0), leave & (rk == 0)
        partner, depth, unmatched = pair_regions(ue, ul)
        counts["unmatched"] += int(unmatched.sum())
        ul &= ~unmatched
        ui = np.flatnonzero(ue | ul)
        urec = np.zeros(len(ui), EVENT_DTYPE)
        urec["type"] = np.where(ue[ui], T["ENTER"], T["LEAVE"])
        urec["t0"] = t[ui]
        urec["tag"] = depth[ui]
        urec["peer"] = -1
        urec["comm"] = _lookup(self.reg_user, reg[ui], -1)
        out.append((ui, np.zeros(len(ui), np.int64), urec))
        fe, fl = enter & (rk == 2), leave & (rk == 2)
        fp, _, fun = pair_regions(fe, fl)
        counts["unmatched"] += int(fun.sum())
        fi = np.flatnonzero(fe)
        frec = np.zeros(len(fi), EVENT_DTYPE)
        frec["type"] = T["FLUSH"]
        frec["t0"] = t[fi]
        frec["t1"] = np.where(fp[fi] >= 0, t[np.maximum(fp[fi], 0)], t_end[-1])
        frec["bytes"] = [self.attrs[x].get("bytes", 0) if x else 0 for x in ev["attr"][fi].tolist()]
        frec["peer"], frec["comm"] = -1, -1
        out.append((fi, np.zeros(len(fi), np.int64), frec))
        bf = np.flatnonzero(kind == R_FLUSH)
        brec = np.zeros(len(bf), EVENT_DTYPE)
        brec["type"] = T["FLUSH"]
        brec["t0"], brec["t1"] = t[bf], ev["a"][bf].astype(np.int64)
        brec["peer"], brec["comm"] = -1, -1
        out.append((bf, np.zeros(len(bf), np.int64), brec))

        anchor = np.concatenate([o[0] for o in out])
        order = np.concatenate([o[1] for o in out])
        rec = np.concatenate([o[2] for o in out])
        o = np.lexsort((order, anchor))
        return rec[o], info

    def _subs(self, r, ev, sub, call, fn, comm_local, win_local, groups, group_ids):
        """Records of the MPI events sub (indices into the location's events) made in
        the calls call (indices into its calls, function fn)."""
        otf2 = self.otf2
        kind = ev["kind"][sub]
        a, b, c, d, e, f = (ev[k][sub] for k in "abcdef")
        attr = ev["attr"][sub]
        m = len(sub)
        rec = np.zeros(m, EVENT_DTYPE)
        rec["peer"], rec["comm"] = -1, -1
        keep = np.ones(m, bool)
        cfn = fn[call]
        traits = function_traits(self.functions)
        rtype = np.zeros(m, np.int64)
        nb_event = np.zeros(m, bool)
        excl = np.zeros(m, bool)

        def local_comm(refs):
            out = _lookup(comm_local, refs, -1)
            self.counts["nocomm"] += int(((out < 0) & (refs != U32)).sum())
            return out

        def world(comm_refs, vals):
            return self._to_world(comm_refs.astype(np.int64), vals, r)

        def sel(*kinds):
            return np.isin(kind, kinds)

        # point-to-point: (peer, comm, tag, length[, request])
        p2p = sel(R_SEND, R_ISEND, R_RECV, R_IRECV)
        if p2p.any():
            rtype[sel(R_SEND, R_ISEND)] = T["SEND"]
            rtype[sel(R_RECV, R_IRECV)] = T["RECV"]
            nb_event |= sel(R_ISEND)
            rec["peer"][p2p] = world(b[p2p], a[p2p])
            rec["comm"][p2p] = local_comm(b[p2p])
            rec["tag"][p2p] = (c[p2p] & U32).astype(np.uint32).view(np.int32)
            rec["bytes"][p2p] = d[p2p].view(np.int64)
            req = sel(R_ISEND, R_IRECV)
            rec["t0"][req] = e[req].view(np.int64)
        ir = sel(R_IRECV_REQ)
        rtype[ir] = T["IRECV"]
        nb_event |= ir
        rec["t0"][ir] = a[ir].view(np.int64)
        rec["peer"][ir], rec["tag"][ir] = -2, -1
        sd = sel(R_ISEND_DONE)
        rtype[sd] = T["SEND_DONE"]
        rec["t0"][sd] = a[sd].view(np.int64)

        # collectives: the begin is part of the record of the end
        def coll_fields(m):
            """root (world rank, -1 none), communicator, bytes sent and received of the
            collective events m (an end, or a nonblocking one's completion)"""
            rec["peer"][m] = np.where(c[m] == U32, -1, world(b[m], c[m]))
            rec["comm"][m] = local_comm(b[m])
            rec["bytes"][m] = d[m].view(np.int64)
            rec["t1"][m] = e[m].view(np.int64)

        co = sel(R_COLL_END)
        rtype[co] = T["COLL"]
        if co.any():
            coll_fields(co)
        keep &= ~sel(R_COLL_BEGIN, R_RMA_COLL_BEGIN)
        # nonblocking ones: the request starts the COLL, which takes what the collective
        # was from its completion (_from_posts); the completion is a COLL_DONE
        nq = sel(R_NBC_REQUEST)
        rtype[nq] = T["COLL"]
        rec["t0"][nq] = a[nq].view(np.int64)
        nc = sel(R_NBC_COMPLETE)
        rtype[nc] = T["COLL_DONE"]
        if nc.any():
            coll_fields(nc)
            rec["t0"][nc] = f[nc].view(np.int64)
        # windows and one-sided operations
        wk = sel(
            R_WIN_CREATE,
            R_WIN_DESTROY,
            R_PUT,
            R_GET,
            R_ATOMIC,
            R_GROUP_SYNC,
            R_ACQUIRE,
            R_RELEASE,
            R_RMA_SYNC,
            R_RMA_COLL_END,
        )
        win = np.where(sel(R_GROUP_SYNC), b, np.where(sel(R_RMA_COLL_END), c, np.where(wk, a, U32)))
        win = win.astype(np.int64)
        if wk.any():
            wl = _lookup(win_local, win, -1)
            wc = _lookup(self.win_comm, win, U32)
            self.counts["nocomm"] += int((wk & (wl < 0)).sum())
            rec["tag"][wk] = wl[wk]
            rec["comm"][wk] = _lookup(comm_local, wc[wk], -1)
            remote = sel(R_PUT, R_GET, R_ATOMIC, R_ACQUIRE, R_RELEASE, R_RMA_SYNC)
            if remote.any():
                rec["peer"][remote] = self._to_world(wc[remote], b[remote], r)
        cw = sel(R_WIN_CREATE)
        dw = sel(R_WIN_DESTROY)
        rtype[cw | dw] = T["WIN"]
        rec["flags"][dw] = F["FREE"]
        put, get, atom = sel(R_PUT), sel(R_GET), sel(R_ATOMIC)
        rtype[put | get | atom] = T["RMA"]
        rec["bytes"][put] = c[put].view(np.int64)
        rec["t0"][put | get] = d[put | get].view(np.int64)
        rec["t1"][get] = c[get].view(np.int64)
        rec["bytes"][atom] = d[atom].view(np.int64)
        rec["t1"][atom] = e[atom].view(np.int64)
        rec["t0"][atom] = f[atom].view(np.int64)
        # window synchronisation
        rce = sel(R_RMA_COLL_END)
        if rce.any():
            win_ops = {_v(getattr(otf2.CollectiveOp, x)) for x in _WIN_OPS}
            absorbed = rce & np.isin(a.astype(np.int64), list(win_ops))
            keep &= ~absorbed
            rtype[rce & ~absorbed] = T["WSYNC"]
        gs = sel(R_GROUP_SYNC)
        rtype[gs | sel(R_ACQUIRE, R_RELEASE, R_RMA_SYNC)] = T["WSYNC"]
        rec["t1"][rtype == T["WSYNC"]] = -1
        if gs.any():
            opener = np.array(
                [classify(x)[1] in ("win_post", "win_start") for x in self.functions] + [False]
            )[cfn]
            for j in np.flatnonzero(gs & opener).tolist():
                if int(c[j]) == U32 or int(c[j]) not in self.group_members:
                    continue
                mem = self.group_members[int(c[j])]
                key = tuple(mem if mem is not None else [r])
                gid = group_ids.get(key)
                if gid is None:
                    gid = group_ids[key] = len(groups)
                    groups.append(list(key))
                rec["t1"][j] = gid
        acq = sel(R_ACQUIRE)
        excl = acq & (d.astype(np.int64) == _v(self.otf2.LockType.EXCLUSIVE)) & (rec["peer"] >= 0)
        rec["type"] = rtype
        # flags the events imply, and what perfweave's attributes add
        rec["flags"] |= derived_flags(traits, cfn, rtype, nb_event, excl).astype(np.uint8)
        for j in np.flatnonzero(attr > 0).tolist():
            at = self.attrs[int(attr[j])]
            if "flags" in at:
                rec["flags"][j] = at["flags"]
            if "peer" in at:
                rec["peer"][j] = at["peer"]
            if "tag" in at:
                rec["tag"][j] = at["tag"]
            if "bytes" in at:
                rec["bytes"][j] = at["bytes"]
            if "comm" in at:
                rec["comm"][j] = comm_local.get(at["comm"], -1) if at["comm"] != U32 else -1
        # requests: a completion names its post's communicator, peer and tag
        self._from_posts(rec, ir, sd, attr, nq, nc)
        return rec, keep

    def _from_posts(self, rec, ir, sd, attr, nq, nc):
        """OTF2's MpiIsendComplete carries only the request: take communicator, peer and
        tag from the latest MpiIsend of that request before it (the runtime does the
        same). A NonBlockingCollectiveRequest takes what the collective was (its
        communicator, root, sizes) from the NonBlockingCollectiveComplete of its request
        after it. An MpiIrecvRequest without perfweave's attributes takes communicator,
        source, tag and size of the receive that completes it (irecv_completions)."""
        key = rec["t0"]
        n = len(rec)

        def latest(post, done):
            cand = np.flatnonzero(post | done)
            o = np.lexsort((cand, key[cand]))
            s = cand[o]
            last = last_index(post[s])
            prev = np.where(last >= 0, s[np.maximum(last, 0)], -1)
            ok = (last >= 0) & (key[np.maximum(prev, 0)] == key[s]) & done[s]
            return s[ok], prev[ok]

        sends = (rec["type"] == T["SEND"]) & ((rec["flags"] & F["NONBLOCKING"]) != 0)
        d, p = latest(sends, sd)
        for k in ("comm", "peer", "tag"):
            rec[k][d] = rec[k][p]
        cd, cp = latest(nq, nc)
        for k in ("comm", "peer", "bytes", "t1"):
            rec[k][cp] = rec[k][cd]
        for k, v in (("peer", -1), ("bytes", 0), ("t1", 0)):
            rec[k][nc] = v
        comp = irecv_completions(rec["type"], key, np.zeros(n, np.int64))
        bare = np.flatnonzero(ir & (attr <= 0))
        if len(bare):
            cb = comp[bare]
            ok = cb >= 0
            for k in ("comm", "peer", "tag", "bytes"):
                rec[k][bare[ok]] = rec[k][cb[ok]]
        # posts numbered in order, as the runtime numbers them; completions name theirs
        posts = np.flatnonzero(sends | (rec["type"] == T["IRECV"]) | nq)
        number = np.zeros(n, np.int64)
        number[posts] = np.arange(1, len(posts) + 1)
        rec["t1"][posts[~nq[posts]]] = number[posts[~nq[posts]]]
        rec["t1"][d] = rec["t1"][p]
        # a nonblocking collective holds its number in its tag
        rec["tag"][nq] = number[nq]
        rec["t1"][cd] = number[cp]
        irecv = np.flatnonzero((rec["type"] == T["IRECV"]) & (comp >= 0))
        rec["t1"][comp[irecv]] = rec["t1"][irecv]

    # ---- output ----

    def write(self, out):
        out = Path(out)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp.", dir=out.parent))
        except OSError as e:
            raise PerfweaveError(f"{out}: cannot create: {e.strerror}") from None
        try:
            traces = tmp / "traces"
            traces.mkdir()
            for r in range(self.world):
                rec, _ = self.records[r]
                rec.tofile(traces / f"rank-{r}.events")
                (traces / f"rank-{r}.json").write_text(json.dumps(self.meta[r]))
            (tmp / "experiment.json").write_text(json.dumps(self._experiment(), indent=1) + "\n")
            if out.is_dir():
                out.rmdir()
            os.replace(tmp, out)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise PerfweaveError(f"{out}: cannot write: {e.strerror or e}") from None

    def _experiment(self):
        now = time.time()
        if self.realtime != int(self.otf2.Undefined.TIMESTAMP.value) and self.realtime > 0:
            start = self.realtime / NS
        else:
            start = now
        wall = self.length / self.res
        iso = lambda s: _dt.datetime.fromtimestamp(s).astimezone().isoformat()
        return {
            "format": "perfweave-experiment",
            "version": 1,
            "perfweave_version": __version__,
            "command": [],
            "launched": [],
            "cwd": os.getcwd(),
            "host": next(iter(self.hosts.values()), "unknown"),
            "program": None,
            "launcher": None,
            "mpi_flavor": None,
            "runtime_library": None,
            "options": {},
            "start_time": iso(start),
            "start_epoch": start,
            "state": "finished",
            "end_epoch": start + wall,
            "end_time": iso(start + wall),
            "wall_seconds": wall,
            "exit_status": {"code": 0},
            "imported_from": str(Path(self.anchor).resolve()),
            "import_notes": list(self.notes),
            "import": {
                "format": "OTF2",
                "creator": self.creator,
                "events": int(self.nevents),
                "records": int(self.nrecords),
                "timer_resolution": self.res,
                "global_offset": self.offset,
                "skipped_locations": self.skipped_locations,
                "skipped_events": self.skipped_events,
            },
        }

"""OTF2 import, reading in C: the OTF2 library's global event reader calls the callbacks of
libperfweave-otf2.so (runtime/interop/otf2_read.c), which append each event to numpy
columns of one chunk (CHUNK events); this module hands the chunks over, takes back what
they hold after each OTF2_GlobalEvtReader_ReadEvents, and makes of them what
collector.Collector and event_table make one Python call per event: the table of the
events read (location, time, kind, fields a..f, attribute row, sorted by location and
read order), perfweave's attributes of the events that have them, and the events of
kinds perfweave has no record for, counted per kind and location. No Python runs per
event but where an event has perfweave's attributes (a dict each, as the collector's)."""

import ctypes
import functools

import numpy as np

from perfweave.interop.otf2.collector import _READ

CHUNK = 1 << 16  # events per call of the library's reader
R_COUNT = 26  # the kinds read (collector.R_*)
R_OTHER = 64  # kind column of events only counted: R_OTHER + the slot of their kind
# how otf2_read.c reads an attribute's value, by perfweave's name of it (as
# Collector._attributes: the rest are int32)
_HOW = {"comm": 0, "flags": 1, "bytes": 2}
# kinds the collector reads without _READ's table, by callback name
_OWN = {"Enter": 0, "Leave": 1, "ProgramBegin": 22, "ProgramEnd": 23}
_P = ctypes.c_void_p


class _Cols(ctypes.Structure):
    """struct cols of otf2_read.c."""

    _fields_ = [("loc", _P), ("time", _P), ("kind", _P), ("f", _P * 6), ("attr", _P)]

    def point(self, cols):
        """Point at numpy columns cols (COLUMNS)."""
        self.loc, self.time = cols["loc"].ctypes.data, cols["time"].ctypes.data
        self.kind, self.attr = cols["kind"].ctypes.data, cols["attr"].ctypes.data
        for i, k in enumerate("abcdef"):
            self.f[i] = cols[k].ctypes.data


def _columns(n):
    """Empty event columns of n rows, as collector.event_table's table."""
    cols = {k: np.zeros(n, np.int64) for k in ("loc", "time", "kind", "attr")}
    for k in "abcdef":
        cols[k] = np.zeros(n, np.uint64)
    return cols


class _Context(ctypes.Structure):
    """struct pw_otf2r of otf2_read.c, field for field."""

    _fields_ = [
        ("table", _Cols),
        ("locs", _P),
        ("start", _P),
        ("size", _P),
        ("fill", _P),
        ("nlocs", ctypes.c_uint64),
        ("chunk", _Cols),
        ("cap", ctypes.c_uint64),
        ("n", ctypes.c_uint64),
        ("aref", _P),
        ("akey", _P),
        ("ahow", _P),
        ("naref", ctypes.c_uint32),
        ("nkeys", ctypes.c_uint32),
        ("amask", _P),
        ("avals", _P),
        ("na", ctypes.c_uint64),
        ("abase", ctypes.c_int64),
        ("flush", _P),
        ("nflush", ctypes.c_uint64),
        ("n_elements", _P),
        ("by_index", _P),
        ("err", ctypes.c_int),
        ("last", ctypes.c_uint64),
    ]


@functools.lru_cache(maxsize=None)
def bulk_reader():
    """libperfweave-otf2.so with the import's callbacks (otf2_read.c), or None where it is
    not built, or was built for other event kinds or another context; the import then
    reads one Python call per event (collector.Collector)."""
    from perfweave.launch import library_dir

    try:
        lib = ctypes.CDLL(str(library_dir() / "libperfweave-otf2.so"))
        register = lib.pw_otf2r_register
    except (OSError, AttributeError):
        return None
    if lib.pw_otf2r_kinds() != R_COUNT:
        return None
    lib.pw_otf2r_size.restype = ctypes.c_size_t
    if lib.pw_otf2r_size() != ctypes.sizeof(_Context):
        return None
    register.restype = ctypes.c_int
    register.argtypes = [_P, ctypes.c_size_t, _P, _P]
    return lib


def _library(name, *args):
    """Function name of the OTF2 library the otf2 package loaded, with a prototype of ours
    (argument types args, an int result: the package's wrappers pass a Python object as
    user data, and check errors on every call)."""
    from _otf2.Config import conf

    return ctypes.CFUNCTYPE(ctypes.c_int, *args)((name, conf.lib))


def _kinds(_otf2):
    """The kinds of event the library can report, by callback name."""
    return [
        nm[len("GlobalEvtReaderCallbacks_Set") : -len("Callback")]
        for nm in dir(_otf2)
        if nm.startswith("GlobalEvtReaderCallbacks_Set") and nm.endswith("Callback")
    ]


def _slots(_otf2):
    """The kinds only counted, in the order of otf2_read.c's counters."""
    return [k for k in _kinds(_otf2) if k not in _OWN and k not in _READ]


def callbacks(lib, _otf2):
    """The library's OTF2_GlobalEvtReaderCallbacks_Set*Callback of every kind of event it
    can report and how otf2_read.c reads each (pw_otf2r_register's setters and which), or
    None where it cannot: more kinds than otf2_read.c has counters for, or a library
    without the function of one (the import reads through Python callbacks then)."""
    from _otf2.Config import conf

    kinds, slots = _kinds(_otf2), _slots(_otf2)
    if len(slots) > lib.pw_otf2r_slots():
        return None
    setters = (_P * len(kinds))()
    which = (ctypes.c_int * len(kinds))()
    for i, k in enumerate(kinds):
        fn = getattr(conf.lib, f"OTF2_GlobalEvtReaderCallbacks_Set{k}Callback", None)
        if fn is None:
            return None
        setters[i] = ctypes.cast(fn, _P).value
        if k in _OWN:
            which[i] = _OWN[k]
        elif k in _READ:
            which[i] = _READ[k][0]
        else:
            which[i] = R_OTHER + slots.index(k)
    return setters, which


class Reading:
    """The events of an archive read through otf2_read.c: read() fills table (as
    collector.event_table's, or None without events), attrs (as Collector.attrs),
    other (as Collector.other) and nevents.

    The table is sorted by location: each chunk's events go straight to their place in
    it, a block per location as large as the events its definition announces
    (loc_events: location -> number), so that no chunk is kept and nothing is sorted
    but a chunk. Events beyond a location's block (an archive that announces fewer, or
    a location not defined) wait aside and are sorted in at the end."""

    def __init__(self, lib, _otf2, attr_names, flush_regions, loc_events):
        self.lib, self._otf2 = lib, _otf2
        self.locs = np.array(sorted(loc_events), np.uint64).view(np.int64)
        self.locs.sort()  # the table's order: by location as a signed number
        size = np.array([loc_events[int(x)] for x in self.locs.view(np.uint64)], np.int64)
        self.size, self.fill = size, np.zeros(len(size), np.int64)
        self.start = np.r_[0, np.cumsum(size)[:-1]].astype(np.int64)
        self.out = _columns(int(size.sum()))
        self.aside = []  # events beyond their location's block, in read order
        self.cols = _columns(CHUNK)
        self.ctx = c = _Context()
        c.table.point(self.out)
        c.chunk.point(self.cols)
        c.locs, c.start = self.locs.ctypes.data, self.start.ctypes.data
        c.size, c.fill = self.size.ctypes.data, self.fill.ctypes.data
        c.nlocs = len(self.locs)
        c.cap = CHUNK
        # perfweave's attributes: one value column per name
        self.keys = sorted(set(attr_names.values()))
        refs = sorted(attr_names)
        self.aref = np.array(refs, np.uint32)
        self.akey = np.array([self.keys.index(attr_names[r]) for r in refs], np.uint8)
        self.ahow = np.array([_HOW.get(attr_names[r], 3) for r in refs], np.uint8)
        self.amask = np.zeros(CHUNK, np.uint32)
        self.avals = np.zeros((CHUNK, max(len(self.keys), 1)), np.int64)
        c.aref, c.akey, c.ahow = (x.ctypes.data for x in (self.aref, self.akey, self.ahow))
        c.naref, c.nkeys = len(refs), len(self.keys)
        c.amask, c.avals = self.amask.ctypes.data, self.avals.ctypes.data
        c.abase = 1
        self.flush = np.array(sorted(flush_regions), np.int64)
        c.flush, c.nflush = self.flush.ctypes.data, len(self.flush)
        from _otf2.Config import conf

        c.n_elements = ctypes.cast(conf.lib.OTF2_AttributeList_GetNumberOfElements, _P).value
        c.by_index = ctypes.cast(conf.lib.OTF2_AttributeList_GetAttributeByIndex, _P).value
        self.attrs = [None]  # row 0: no attributes
        self.other = {}
        self.table = None
        self.nevents = 0

    def register(self, handle, setters_which):
        """Register otf2_read.c's callbacks with the global event reader handle
        (setters_which: callbacks()'s answer, not None)."""
        from _otf2.Config import conf

        setters, which = setters_which
        new = conf.lib.OTF2_GlobalEvtReaderCallbacks_New
        new.restype, new.argtypes = _P, []
        delete = conf.lib.OTF2_GlobalEvtReaderCallbacks_Delete
        delete.restype, delete.argtypes = None, [_P]
        h = ctypes.cast(handle, _P).value
        cbs = new()
        try:
            self._check(self.lib.pw_otf2r_register(cbs, len(which), setters, which))
            set_cb = _library("OTF2_GlobalEvtReader_SetCallbacks", _P, _P, _P)
            self._check(set_cb(h, cbs, ctypes.addressof(self.ctx)))
        finally:
            delete(cbs)
        self.slots = _slots(self._otf2)
        self.handle = h

    def _check(self, rc):
        if rc:
            _otf2 = self._otf2
            raise _otf2.Error(_otf2.ErrorCode(rc))

    def read(self):
        """Read every event, a chunk at a time; keeps the events read as compact columns
        of their chunks until the table is made."""
        read = _library(
            "OTF2_GlobalEvtReader_ReadEvents", _P, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
        )
        c = self.ctx
        got = ctypes.c_uint64(0)
        while True:
            c.n = c.na = 0
            rc = read(self.handle, CHUNK, ctypes.byref(got))
            self._check(c.err or rc)
            self._take()
            if got.value < CHUNK:
                break
        self.table = self._table()

    def _take(self):
        """What the chunk just read holds: the events of kinds only counted, counted; those
        beyond their location's block, kept aside; its attribute rows as dicts."""
        c = self.ctx
        n, na = int(c.n), int(c.na)
        cols = self.cols
        kind = cols["kind"][:n]
        other = kind >= R_OTHER
        if other.any():
            key = kind[other] - R_OTHER
            loc = cols["loc"][:n][other]
            pairs, counts = np.unique(np.stack([key, loc]), axis=1, return_counts=True)
            for (slot, lref), m in zip(pairs.T.tolist(), counts.tolist()):
                k = (self.slots[slot], lref)
                self.other[k] = self.other.get(k, 0) + m
        if not other.all():
            keep = np.flatnonzero(~other)
            self.aside.append({k: v[keep] for k, v in cols.items()})
        if na:
            keys = self.keys
            how = [_HOW.get(k, 3) for k in keys]
            for mask, row in zip(self.amask[:na].tolist(), self.avals[:na].tolist()):
                d = {}
                for j, name in enumerate(keys):
                    if mask >> j & 1:
                        d[name] = row[j] & 0xFFFFFFFFFFFFFFFF if how[j] == 2 else row[j]
                self.attrs.append(d)
            c.abase += na

    def _table(self):
        out, size, used = self.out, self.size, self.fill
        self.nevents = int(used.sum()) + sum(len(a["loc"]) for a in self.aside)
        self.nevents += sum(self.other.values())
        if (used < size).any():  # fewer events than announced (or some only counted)
            idx = np.repeat(self.start - np.r_[0, np.cumsum(used)[:-1]], used) + np.arange(
                int(used.sum())
            )
            out = {k: v[idx] for k, v in out.items()}
        if self.aside:
            # after the events of its location in its block, in read order
            aside = {k: np.concatenate([a[k] for a in self.aside]) for k in out}
            out = {k: np.concatenate([v, aside[k]]) for k, v in out.items()}
            o = np.argsort(out["loc"], kind="stable")
            out = {k: v[o] for k, v in out.items()}
        if not len(out["loc"]):
            return None
        return out

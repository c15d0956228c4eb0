"""OTF2 import, reading: the kinds of event read (R_*), the callbacks the OTF2 library's
global event reader calls, which append each event's fields to the list of its kind
and count the events of kinds perfweave has no record for (Collector), and the table of
all events made from those lists (event_table). The import reads through them where
libperfweave-otf2.so is not built; bulk.py reads the same table in C."""

import itertools

import numpy as np

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
MPI_KINDS = np.setdiff1d(
    np.arange(R_NBC_COMPLETE + 1), [R_ENTER, R_LEAVE, R_FLUSH, R_PROGRAM_BEGIN, R_PROGRAM_END]
)


class Collector:
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


def event_table(lists):
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

"""The export's calls of the OTF2 library's event writer functions. The kinds of event
the export writes (K: the columns' "kind", numbered by mpi.spec's section otf2 through
perfweave/_mpi.py, as runtime/interop/otf2_bulk.c's, which bulk_writer checks), and
EventCalls, which writes a location's sorted event columns: through the C loop of
libperfweave-otf2.so (bulk_writer, blocks of BULK events per call) where it is built,
else one ctypes call per event through prototypes set up once (_direct), else through
the otf2 package's wrappers. All write the same bytes."""

import ctypes
import functools
import sys

import numpy as np

from perfweave._mpi import OTF2_EVENTS

# OTF2 event kinds written by export: {event: its number}
K = {event: i for i, event in enumerate(OTF2_EVENTS)}


BULK = 1 << 16  # events per call of the C loop


@functools.lru_cache(maxsize=None)
def bulk_writer():
    """pw_otf2_write of libperfweave-otf2.so (runtime/interop/otf2_bulk.c): the export's
    per-event loop in C, one call per block of a location's events instead of one ctypes
    call per event. None where that library is not built or was built for other event
    kinds; the export then calls the OTF2 library per event (EventCalls._write_each)."""
    from perfweave.launch import library_dir

    try:
        lib = ctypes.CDLL(str(library_dir() / "libperfweave-otf2.so"))
    except OSError:
        return None
    if lib.pw_otf2_kinds() != len(K):
        return None
    fn = lib.pw_otf2_write
    fn.restype = ctypes.c_size_t
    fn.argtypes = (
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        + [ctypes.c_void_p] * 9
        + [ctypes.POINTER(ctypes.c_int)]
    )
    return fn


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


class EventCalls:
    """The writer functions of one export: attr is the archive's perfweave attributes
    (key -> (reference, type, type name)), program and program_args the string
    references of ProgramBegin. What is looked up in the library is looked up once."""

    def __init__(self, _otf2, attr, program, program_args):
        self._otf2, self.attr = _otf2, attr
        self.program, self.program_args = program, program_args
        self._fns = self._table = None

    def write(self, ew, c, specs):
        """Write sorted event columns c to event writer ew (the C loop where it is
        built); specs holds the attribute lists of their "attr" keys (stream.Specs)."""
        n = len(c["time"])
        if not n:
            return
        h = ctypes.cast(ew.handle, ctypes.c_void_p).value
        bulk = bulk_writer()
        fns = self._bulk_functions() if bulk is not None else None
        if fns is not None:
            self._write_bulk(bulk, fns, h, c, n, specs)
        else:
            self._write_each(h, c, specs)

    def _write_one(self, h, al, kd, t, args):
        fn, nargs = self._writers()[kd]
        rc = fn(h, al, t, *args[:nargs])
        if rc:
            raise self._otf2.Error(self._otf2.ErrorCode(rc))

    def _write_each(self, h, c, specs):
        """One ctypes call per event: where the C loop (bulk_writer) is not built."""
        _otf2 = self._otf2
        table = self._writers()
        KE, KL = K["ENTER"], K["LEAVE"]
        E, L = table[KE][0], table[KL][0]
        attrs = specs
        A = [c[f"a{i}"].tolist() for i in range(1, 7)]
        for t, kd, a1, a2, a3, a4, a5, a6, ai in zip(
            c["time"].tolist(), c["kind"].tolist(), *A, c["attr"].tolist()
        ):
            al = self._attribute_list(attrs[ai]) if ai >= 0 else None
            if kd == KE:
                rc = E(h, al, t, a1)
            elif kd == KL:
                rc = L(h, al, t, a1)
            else:
                fn, nargs = table[kd]
                rc = fn(h, al, t, *(a1, a2, a3, a4, a5, a6)[:nargs])
            if al is not None:
                _otf2.AttributeList_Delete(al)
            if rc:
                raise _otf2.Error(_otf2.ErrorCode(rc))

    def _write_bulk(self, bulk, fns, h, c, n, specs):
        """The events in blocks of BULK through the C loop; its attribute lists are made
        per block (so few are alive at once) and ProgramBegin, whose strings the loop
        does not know, is written from here where the loop stops at it."""
        _otf2 = self._otf2
        attrs = specs
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
        if self._fns is None:
            from _otf2.Config import conf

            fns = (ctypes.c_void_p * len(self._wrapped()))()
            try:
                for kind, (fn, _) in self._wrapped().items():
                    if kind != K["PROGRAM_BEGIN"]:
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
        if self._table is None:
            table = self._wrapped()
            for kind, (fn, nargs) in table.items():
                if kind != K["PROGRAM_BEGIN"]:
                    table[kind] = (_direct(fn, self._otf2), nargs)
            self._table = table
        return self._table

    def _wrapped(self):
        """kind -> (writer function of _otf2, number of arguments after the time)."""
        o = self._otf2
        program, args = self.program, self.program_args
        table = {
            K[event]: (getattr(o, "EvtWriter_" + writer), nargs)
            for event, (writer, nargs) in OTF2_EVENTS.items()
            if event != "PROGRAM_BEGIN"
        }
        table[K["PROGRAM_BEGIN"]] = (
            lambda h, al, t: o.EvtWriter_ProgramBegin(
                ctypes.cast(h, ctypes.POINTER(o.EvtWriter)), al, t, program, args
            ),
            0,
        )
        return table

"""JSON events of the Chrome export written column at a time: a layout (Rows) of literal
text, names from a table and numbers, filled with a chunk's columns, and its writing as
bytes by the C loop of libperfweave-json.so (runtime/interop/json_rows.c), or with numpy
where that library is not built (_Matrix). No Python object is made per event."""

import ctypes
import functools
import json

import numpy as np


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


def decimal(v, neg=None):
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


class Rows:
    """n JSON events of one layout: its parts in order (literal text, a name from a
    table of JSON strings, an integer, 16 hex digits, nanoseconds as microseconds), each
    in every row or where its column of flags (present) says, with the column of each
    part's values. format_rows writes rows of one or several layouts: by the loop of
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


def format_rows(rows, which=None, buffer=None):
    """The events of several layouts (Rows) back to back, in the order given by which
    (per event, the index of its layout; None: all of rows[0]), as bytes-like; buffer(n)
    gives the bytes to write them in (default: new ones)."""
    lib = json_rows()
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
def json_rows():
    """pw_json_rows of libperfweave-json.so, or None where that library is not built (or
    was built for other part kinds); format_rows then builds rows with numpy."""
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
    """The numpy formatter of layouts (Rows), where libperfweave-json.so is not built:
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
                self.parts.append((decimal(data), present))
            elif kind == _HEX:
                b = data.astype(">u8").view(np.uint8).reshape(self.n, 8)
                self.parts.append((_HEX_DIGITS[b].view(np.uint8), None))
            else:
                a = np.abs(data)
                neg = data < 0
                if present is not None:
                    a, neg = np.where(present, a, 0), neg & present
                self.parts.append((decimal(a // 1000, neg), present))
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


def quoted(names):
    return [json.dumps(str(n)) for n in names]

"""Opening the files of an experiment, which may be damaged (docs/format.md, "Damaged
experiments"): only regular files are read (a FIFO put in a file's place would block
the reader forever, a directory or a symlink loop fails), JSON is parsed with its
nesting bounded, and every failure is one FormatError naming the file.

A file that does not exist raises FileNotFoundError, so that callers can tell an
absent optional file from a damaged one.

numpy is imported by the readers of arrays alone (SparseFile, read_array): perfweave run's
verdict reads files through this module without it (readers/recorded.py)."""

import errno
import json
import mmap
import os
import stat

from perfweave.errors import FormatError


class SparseFile:
    """A file the runtime maps and fills in place (the I/O record store, its segment
    trace), read by ranges with pread, never mapped: on tmpfs, reading a page of a
    mapping that the full file system cannot back faults (SIGBUS) even in a reader,
    while read() of a hole gives zeros. m[a:b] is a uint8 array of those bytes (zeros
    past the end); size is the file's length."""

    def __init__(self, path):
        self.path = path
        fd, self.size = _open_regular(path)  # a FIFO in its place would block open()
        os.close(fd)

    def __getitem__(self, s):
        start, stop, _ = s.indices(self.size)
        n = max(0, stop - start)
        fd, _ = _open_regular(self.path)
        try:
            b = os.pread(fd, n, start)
        except OSError as e:
            raise FormatError(f"{self.path}: cannot read: {e.strerror}") from None
        finally:
            os.close(fd)
        import numpy as np

        return np.frombuffer(b + bytes(n - len(b)), np.uint8)


# The head every module's per-process JSON file starts with (runtime/core/writer.c
# pw_buf_json_head; format.h PW_JSON_HEAD), as a check() schema.
PROCESS_HEAD = {"format": str, "version": int, "rank": int, "pid": int, "host": str}


def _open_regular(path):
    """A descriptor of path, known to be a regular file. O_NONBLOCK: opening a FIFO
    does not wait for a writer, and fstat then tells what it is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FormatError(f"{path}: symbolic link loop") from None
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(st.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "not a regular file"
            )
            raise FormatError(f"{path}: {kind}, not a file of an experiment")
        os.set_blocking(fd, True)
        return fd, st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path):
    """The whole content of the regular file path."""
    fd, size = _open_regular(path)
    try:
        with os.fdopen(fd, "rb", buffering=0) as f:
            return f.read()
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None


def read_line(path, limit=1 << 26):
    """The first line of the regular file path, newline excluded (at most limit bytes:
    FormatError beyond), without reading the rest of the file."""
    fd, size = _open_regular(path)
    line = b""
    try:
        with os.fdopen(fd, "rb") as f:
            line = f.readline(limit + 1)
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    if not line.endswith(b"\n"):
        raise FormatError(f"{path}: truncated or corrupt (no end of its first line)")
    return line[:-1]


def read_array(path):
    """The bytes of the regular file path as a read-only uint8 array over a mapping of
    it (unmapped when the last array over it goes). Mapped, records are read where the
    page cache holds them, without the copy (and its fresh memory) of read(2)."""
    import numpy as np

    fd, size = _open_regular(path)
    with os.fdopen(fd, "rb", buffering=0) as f:
        if size == 0:
            return np.zeros(0, np.uint8)
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # a file system that cannot map
            try:
                return np.frombuffer(f.read(), np.uint8)
            except OSError as e:
                raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    return np.frombuffer(m, np.uint8)


def parse_json(data, path, what="JSON"):
    """A JSON document from bytes or text; FormatError naming path when it is not
    JSON, or nested deeper than the parser's recursion allows."""
    try:
        return json.loads(data)
    except RecursionError:
        raise FormatError(f"{path}: corrupt {what} (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: corrupt {what} ({e})") from None


def read_json(path, what="JSON"):
    """The JSON object of the regular file path."""
    doc = parse_json(read_bytes(path), path, what)
    if not isinstance(doc, dict):
        raise FormatError(f"{path}: not a perfweave {what} (not a JSON object)")
    return doc


def read_result(path, what, fmt, version):
    """The JSON object at path, a saved result whose "format" must be fmt and "version"
    version (an analysis' or a verb's document not declared in format.h)."""
    doc = read_json(path, what)
    if doc.get("format") != fmt:
        raise FormatError(f"{path}: not a perfweave {what}")
    if doc.get("version") != version:
        raise FormatError(
            f"{path}: {what} format version {short(doc.get('version'))} not supported"
        )
    return doc


def read_document(path, kind, what, versions=None, schema=None, renamed=None):
    """The JSON document at path, a file of the kind `kind` (perfweave._format FILES),
    checked as every reader of a kind checks one: its "format" string, its version (one of
    versions; by default the current one), its keys against the kind's declared ones
    (format.h JSON entries: _format.JSON; schema adds or refines entries, e.g. a list's
    items) and the keys every document of the kind has (_format.JSON_REQUIRED). FormatError
    naming path otherwise. renamed(version): {key as declared now: its name in documents
    of that version}, checked under that name and moved to the declared one (a document
    that has both is corrupt)."""
    from perfweave._format import FILES, JSON, JSON_REQUIRED

    doc = read_json(path, what)
    magic = FILES[kind].magic
    if doc.get("format") != magic:
        raise FormatError(f"{path}: not a {magic} file")
    versions = versions or (FILES[kind].version,)
    if doc.get("version") not in versions:
        raise FormatError(
            f"{path}: version {short(doc.get('version'))} of {magic} (this perfweave reads "
            f"version{'s' if len(versions) > 1 else ''} {', '.join(map(str, versions))})"
        )
    schema = {**JSON[kind], **(schema or {})}
    for new, old in (renamed(doc["version"]) if renamed else {}).items():
        if new in doc:
            raise FormatError(f"{path}: corrupt {what} ({new} in a version {doc['version']} file)")
        if old in doc:  # checked under the name the file gives it
            doc[new] = check({old: doc.pop(old)}, {old: schema[new]}, path, what).get(old)
            if doc[new] is None:
                del doc[new]
    check(doc, schema, path, what)
    missing = [k for k in JSON_REQUIRED[kind] if k not in doc]
    if missing:
        raise FormatError(f"{path}: no {missing[0]!r}")
    return doc


def check(doc, schema, path, what="JSON"):
    """doc against schema, else FormatError naming path and the key. A schema is a type
    (int: an integer of int64's range, not a bool; float: any finite number; str, bool,
    dict, list), a
    one-item list [item] (a list of items), or a dict {key: schema} (an object whose
    keys, where present, match; other keys are free). A null value of a key the schema
    names is removed, so that readers' .get(key, default) sees it as absent."""
    _check(doc, schema, path, what, "")
    return doc


def _check(v, schema, path, what, where):
    if isinstance(schema, dict):
        ok = isinstance(v, dict)
    elif isinstance(schema, list):
        ok = isinstance(v, list)
    elif schema is int:  # every integer of the files is an int64
        ok = isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63
    elif schema is float:
        ok = (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and abs(v) != float("inf")
            and v == v
        )
    else:
        ok = isinstance(v, schema)
    if not ok:
        want = (
            "an object"
            if isinstance(schema, dict)
            else "a list"
            if isinstance(schema, list)
            else {
                int: "a 64-bit integer",
                float: "a number",
                str: "a string",
                bool: "true or false",
                dict: "an object",
                list: "a list",
            }[schema]
        )
        raise FormatError(
            f"{path}: corrupt {what} ({where or 'document'}: expected {want}, got {short(v)})"
        )
    if isinstance(schema, dict):
        for k, sub in schema.items():
            if k in v and v[k] is None:
                del v[k]
            elif k in v:
                _check(v[k], sub, path, what, f"{where}.{k}" if where else k)
    elif isinstance(schema, list):
        for i, x in enumerate(v):
            _check(x, schema[0], path, what, f"{where}[{i}]")


def short(v):
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."

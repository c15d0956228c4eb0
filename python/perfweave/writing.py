"""Writing the files of an experiment, and the marks of those that could not be written
(docs/format.md, "Writing files"): the Python side of the runtime's pw_file.

A file is written to NAME.tmp.PID and renamed to NAME once complete, so a name of the
format never holds a half-written file. A file that could not be written (full disk,
quota, I/O error) leaves instead an empty mark at the top of the experiment,
`unwritten.REL.ERR`: REL is the file's path in the experiment with `%` and `/` written
`%25` and `%2F`, ERR the errno's name. An empty file needs no data block, so the mark
can be made when the data could not.

An experiment's directory is named perfweave-...-DATE-TIME unless the user names it
(experiment_name: `perfweave run`'s and `perfweave import`'s default).
"""

import errno
import os
import time

MARK_PREFIX = "unwritten."


def experiment_name(*parts, now=None):
    """perfweave-PART...-YYYYmmdd-HHMMSS, with -N added where that names something
    already (N the first that does not), relative to the working directory: the default
    name of a new experiment directory. A character of a part that is not an ASCII
    letter or digit or one of _.+- becomes _; now: a datetime (the present, local time,
    by default; time, not datetime, on the launch path)."""
    stamp = now.strftime("%Y%m%d-%H%M%S") if now else time.strftime("%Y%m%d-%H%M%S")
    safe = (
        "".join(c if c.isascii() and (c.isalnum() or c in "_.+-") else "_" for c in p)
        for p in parts
    )
    base = "-".join(["perfweave", *safe, stamp])
    candidate, k = base, 1
    while os.path.exists(candidate):
        candidate = f"{base}-{k}"
        k += 1
    return candidate


def write_atomic(path, data):
    """Write data (str or bytes) to path through path.tmp.PID, renamed to path once
    complete. On OSError (a full disk) neither file is left behind and the error is
    raised."""
    path = os.fspath(path)
    tmp = f"{path.rstrip('/')}.tmp.{os.getpid()}"
    try:
        # the buffered writer loops over short writes; close() raises what the last
        # flush (or NFS, or a quota) reports
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_ESCAPED = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def _json_string(s):
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = []
    for c in s:
        if c in _ESCAPED:
            out.append(_ESCAPED[c])
        elif " " <= c <= "~":
            out.append(c)
        elif ord(c) > 0xFFFF:  # a surrogate pair, as JSON writes what UTF-16 cannot
            n = ord(c) - 0x10000
            out.append(f"\\u{0xD800 | n >> 10:04x}\\u{0xDC00 | n & 0x3FF:04x}")
        else:
            out.append(f"\\u{ord(c):04x}")
    return '"' + "".join(out) + '"'


def _json_scalar(v):
    if v is None or v is True or v is False:
        return {None: "null", True: "true", False: "false"}[v]
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        if v != v:
            return "NaN"
        return {float("inf"): "Infinity", float("-inf"): "-Infinity"}.get(v) or float.__repr__(v)
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _json_lines(v, depth, out):
    pad = "\n" + " " * (depth + 1)
    if isinstance(v, dict) and v:
        out.append("{")
        for k, (key, item) in enumerate(v.items()):
            key = key if isinstance(key, str) else _json_scalar(key).strip('"')
            out.append(("," if k else "") + pad + _json_string(key) + ": ")
            _json_lines(item, depth + 1, out)
        out.append("\n" + " " * depth + "}")
    elif isinstance(v, (list, tuple)) and v:
        out.append("[")
        for k, item in enumerate(v):
            out.append(("," if k else "") + pad)
            _json_lines(item, depth + 1, out)
        out.append("\n" + " " * depth + "]")
    else:
        out.append(
            "{}"
            if isinstance(v, dict)
            else "[]"
            if isinstance(v, (list, tuple))
            else _json_scalar(v)
        )


def json_text(doc):
    """json.dumps(doc, indent=1) and a newline, as experiment.json is written, without the
    json module (which imports re and enum: 4 ms of each run's start, docs/performance.md
    "The launch path"). tests/python/test_launch_path.py compares the two."""
    out = []
    _json_lines(doc, 0, out)
    return "".join(out) + "\n"


def error_name(err):
    return errno.errorcode.get(err, f"E{err}") if err else "EIO"


def mark_name(rel, err):
    return MARK_PREFIX + rel.replace("%", "%25").replace("/", "%2F") + "." + error_name(err)


def mark_unwritten(exp, rel, err):
    """Mark rel (a path in experiment exp) as not written because of errno err. Returns
    whether the mark could be made."""
    try:
        os.close(os.open(os.path.join(exp, mark_name(rel, err)), os.O_WRONLY | os.O_CREAT, 0o644))
        return True
    except OSError:
        return False


def unmark(exp, rel):
    """Remove rel's marks (it was written after all)."""
    for name in _marks(exp):
        if _parse(name)["file"] == rel:
            try:
                os.unlink(os.path.join(exp, name))
            except OSError:
                pass


def _reason(name):
    code = getattr(errno, name, None)
    if code is None and name[1:].isdigit():
        code = int(name[1:])
    return os.strerror(code) if code else name


def _parse(mark):
    rel, _, err = mark[len(MARK_PREFIX) :].rpartition(".")
    # mark_name's (and the runtime's) encoding undone: every % in it begins %2F or %25
    return {"file": rel.replace("%2F", "/").replace("%25", "%"), "error": err}


def _marks(exp):
    """The names of experiment exp's marks, in order."""
    try:
        return sorted(n for n in os.listdir(exp) if n.startswith(MARK_PREFIX))
    except OSError:
        return []


def read_unwritten(exp, meta=None):
    """The files of experiment exp that could not be written, from its marks and from
    experiment.json's "unwritten": [{"file", "error", "reason"}], in file order."""
    found = {}
    listed = (meta or {}).get("unwritten")
    for u in listed if isinstance(listed, list) else []:
        if isinstance(u, dict) and isinstance(u.get("file"), str):
            found[u["file"]] = str(u.get("error", "EIO"))
    for name in _marks(exp):
        u = _parse(name)
        found.setdefault(u["file"], u["error"])
    return [{"file": f, "error": e, "reason": _reason(e)} for f, e in sorted(found.items())]


def describe(unwritten, limit=3):
    """'profile.pwprof, samples/rank-1.samples and 2 more files (No space left on
    device)': one line however many files."""
    names = [u["file"] for u in unwritten]
    text = ", ".join(names[:limit])
    if len(names) > limit:
        text += f" and {len(names) - limit} more file{'s' if len(names) - limit > 1 else ''}"
    reasons = list(dict.fromkeys(u["reason"] for u in unwritten))
    return f"{text} ({'; '.join(reasons)})"

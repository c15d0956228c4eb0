"""Writing the files of an experiment, and the marks of those that could not be written
(docs/format.md, "Writing files"): the Python side of the runtime's pw_file.

A file is written to NAME.tmp.PID and renamed to NAME once complete, so a name of the
format never holds a half-written file. A file that could not be written (full disk,
quota, I/O error) leaves instead an empty mark at the top of the experiment,
`unwritten.REL.ERR`: REL is the file's path in the experiment with `%` and `/` written
`%25` and `%2F`, ERR the errno's name. An empty file needs no data block, so the mark
can be made when the data could not.
"""

import errno
import os
from contextlib import contextmanager

MARK_PREFIX = "unwritten."


@contextmanager
def atomic_open(path, mode="wb"):
    """A file object writing path.tmp.PID, renamed to path when the block ends without
    an exception; otherwise removed, and the exception (OSError for a full disk) goes
    on. For outputs written piece by piece (exports)."""
    path = os.fspath(path)
    tmp = f"{path.rstrip('/')}.tmp.{os.getpid()}"
    try:
        # the buffered writer loops over short writes; close() raises what the last
        # flush (or NFS, or a quota) reports
        with open(tmp, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path, data):
    """Write data (str or bytes) to path through path.tmp.PID. On OSError neither file
    is left behind and the error is raised."""
    with atomic_open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


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

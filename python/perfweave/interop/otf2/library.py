"""What both directions need from the otf2 package and the OTF2 library beneath it,
beside events: the package itself (need_otf2, or a one-line error), the exceptions that
mean an archive could not be read or written, the library's own messages on stderr
(quoted in our one-line errors), the numbers of the package's enum values; and for
writing, memory for the library's buffers (Chunks) and writers closed once only
(closed, abandon)."""

import contextlib
import ctypes
import os
import sys
import tempfile

from perfweave.errors import PerfweaveError


def need_otf2(what):
    """The otf2 package, or a one-line error saying how to get it."""
    try:
        import otf2
        import _otf2
    except ImportError:
        raise PerfweaveError(f"{what} needs the otf2 package (pip install otf2)") from None
    return otf2, _otf2


def enum_value(enum):
    """The number of one of the otf2 package's enum values (ctypes integers)."""
    return int(enum.value)


def library_errors(otf2, _otf2):
    """The exceptions of the otf2 package, and of its use, that mean the archive could
    not be read or written: one line of ours (export, import_archive)."""
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
def library_messages(into):
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


def why(exc, messages):
    """The most telling reason of a failure: the library's first error message."""
    for line in messages:
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    text = str(exc).strip()
    return text or type(exc).__name__


# ---------------------------------------------------------------- writing


CHUNK = 256 * 1024  # OTF2's smallest chunk: buffers per location are small


class Chunks:
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


def closed():
    """close() of an event writer already closed (stream.Location.close, abandon)."""


def abandon(w):
    """Close writer w of an export that failed (a full disk: an event file that could
    not be written) as far as the library lets it, and never again: the otf2 package
    would close it, and each event writer, once more when it is collected, and print
    the library's refusal as an ignored exception. The caller removes the files."""
    for ew in list(getattr(w, "_event_writers", {}).values()):
        try:
            ew.close()
        except Exception:  # the library's error types, whatever the failure
            pass
        ew.close = closed
    try:
        w.close()
    except Exception:
        pass
    w.close = closed

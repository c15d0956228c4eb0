"""Exchanging event traces with other tools (docs/interop.md).

- `interop.otf2`: export an experiment's traces as an OTF2 archive and import Score-P
  (or perfweave-written) OTF2 archives as experiments, through the `otf2` package;
- `interop.chrome`: export Chrome's Trace Event Format for chrome://tracing and Perfetto;
- `interop.darshan`: export the I/O profile as darshan-parser's text;
- `interop.profile`: an imported experiment's MPI profile (analysis/imported_profile.py)
  written as its profile.pwprof, at import or for an older import.

This module holds what several of them need: an experiment's ranks read, checked and
put on one clock the way `perfweave analyze` puts them (analysis/trace_source.py, so
that an export and an analysis see the same times) and read in chunks, names of user
regions and the pairing of their enters and leaves, and the file an export writes.
"""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from perfweave.analysis import trace_source
from perfweave.analysis.trace_source import RankExport, borrowed_note, ns_times, sibling_note
from perfweave.errors import PerfweaveError
from perfweave.model.trace import TIMED, T, object_labels, time_span
from perfweave.clock import app_window
from perfweave.readers.trace import SUB

FLUSH_REGION = "TRACE BUFFER FLUSH"  # Score-P's name for time spent writing buffers


def last_index(mask):
    """Per element, the index of the last True of mask up to it (-1 before the first):
    of records, the call a sub-event belongs to, with mask the CALL records."""
    idx = np.where(mask, np.arange(len(mask)), -1)
    return np.maximum.accumulate(idx) if len(idx) else idx


class ExportSource(trace_source.ExportSource):
    """An experiment's traces for export (trace_source.ExportSource), and the records of
    one rank in chunks (`stream(r)`, what the exports read)."""

    def stream(self, r):
        """Rank r's records chunk by chunk (RankExportStream): what rank(r) holds, in
        bounded memory."""
        return RankExportStream(self, r)


def load(exp):
    """The traces of experiment directory exp for export (ExportSource; records are read
    rank by rank when asked for). An experiment without traces is an error."""
    return trace_source.load(exp, ExportSource)


CHUNK_RECORDS = 1 << 16  # records of a RankExportStream chunk (tests make it tiny)


class RankExportStream:
    """One rank's records as ExportSource.rank gives them (grouped by thread, checked, on
    rank 0's clock), as a sequence of chunks (`chunks`): RankExport objects of one
    thread each, of about CHUNK_RECORDS records, whose field `base` is the index of
    their first record in what rank(r) would hold. A chunk never ends inside a call:
    the sub-events after a CALL come in the chunk of their call. Exports keep one chunk
    (and what they carry from one to the next) in memory, not the rank.

    t_begin and t_end need the span of the whole rank: they are known after one pass
    over the chunks (`span`, then `window`); chunks of a later pass carry them."""

    def __init__(self, X, r):
        from perfweave.readers import trace as rt

        self.X, self.rank = X, r
        self.src = rt.open_rank(X.path, r, X.meta_notes[r], pieces=True)
        self.meta, self.sibling = X.clock_meta(r, self.src.meta or {})
        self.complete = self.src.complete
        self.functions = list(self.meta.get("functions") or [])
        self.borrowed = not self.functions and bool(X.names)
        if self.borrowed:
            self.functions = list(X.names)
        self.span = None  # (first, last) time of the timed records, ns
        self.calls = False  # whether a pass met a CALL record
        self.records = 0  # records of the last pass
        self.t_begin = self.t_end = None
        self._checkers = []

    def threads(self):
        return self.src.threads()

    def chunks(self, size=None):
        """The chunks of every thread, thread after thread (a generator)."""
        self.begin()
        base = 0
        for t in self.threads():
            for c in self.thread_chunks(t, size, base):
                yield c
                base = c.base + len(c.rec)
        self.end()

    def begin(self):
        """Start a pass over the chunks: what it gathers (span, calls, records, records
        dropped) starts anew."""
        self.span, self.calls, self.records = None, False, 0
        self._checkers = []

    def end(self):
        """End a pass over all the chunks of every thread: the window is known."""
        if self.borrowed and not self.calls:
            self.functions = []
        self.t_begin, self.t_end = app_window(self.meta, self.span)

    def thread_chunks(self, t, size=None, base=0):
        """The chunks of thread t (a generator), the first with index base. Between
        begin() and end(), the chunks of several threads may be read side by side (the
        Chrome export merges threads in the order of time)."""
        from perfweave.readers.trace import Checker

        check = Checker(self.src)
        self._checkers.append(check)
        tail = None  # the last call and its sub-events, for the next chunk
        for records, parts, last in self.src.pieces(t, size or CHUNK_RECORDS):
            kept = check(parts, records, tail)
            if not last:
                kept, tail = _cut(kept)
            if len(kept):
                yield self._chunk(kept, t, base)
                base += len(kept)

    def _chunk(self, rec, t, base):
        typ = rec["type"]
        t0, t1 = ns_times(self.meta, rec)
        if TIMED(typ).any():
            span = time_span(typ, t0, t1)
            if span is not None:
                self.span = (
                    span
                    if self.span is None
                    else (min(self.span[0], span[0]), max(self.span[1], span[1]))
                )
        self.calls = self.calls or bool((typ == T["CALL"]).any())
        self.records += len(rec)
        c = RankExport(
            self.rank,
            self.meta,
            rec,
            np.full(len(rec), t, np.int32),
            t0,
            t1,
            self.t_begin,
            self.t_end,
            self.functions,
            self.complete,
            [],
        )
        c.base = base
        return c

    def finish_notes(self):
        """The rank's notes after a pass over all its chunks (as rank(r) makes them)."""
        from perfweave.readers.trace import dropped_note

        notes = self.src.final_notes()
        if self.src.parts is not None and any(self.src.parts.bad.values()):
            self.complete = False
        dropped = sum(c.dropped for c in self._checkers)
        if dropped:
            notes.append(dropped_note(self.rank, dropped))
            self.complete = False
        if self.sibling:
            notes.append(sibling_note(self.rank))
        if self.borrowed and self.calls:
            notes.append(borrowed_note(self.rank))
        return notes


def _cut(rec):
    """(records up to the last one that is no sub-event, the rest): a chunk ends before
    its last call (or other record) so that a call's sub-events stay with it."""
    typ = rec["type"]
    j = np.flatnonzero(~SUB(typ))
    j = int(j[-1]) if len(j) else 0
    return rec[:j], rec[j:]


def region_names(rt, mask, symbolizer=None):
    """Names (and source file, line) of the ENTER/LEAVE records of one rank where mask is
    set: the region's name for an imported region, else the instrumented function found
    from its address through the rank's loaded objects; `module+0xOFFSET` when it cannot
    be symbolised."""
    from perfweave.symbols import Symbolizer

    idx = np.flatnonzero(mask)
    names = np.full(len(idx), "", dtype=object)
    files = np.full(len(idx), "", dtype=object)
    lines = np.zeros(len(idx), np.int64)
    if not len(idx):
        return names, files, lines
    rid = rt.rec["comm"][idx]
    named = rid >= 0
    regions = rt.meta.get("regions") or []
    if named.any():
        table = np.array(
            [r.get("name", "?") if isinstance(r, dict) else str(r) for r in regions] + ["?"],
            dtype=object,
        )
        names[named] = table[np.clip(rid[named], 0, len(table) - 1)]
    if (~named).any():
        codes, labs = object_labels(rt.meta, rt.rec["bytes"][idx[~named]])
        uniq, inv = np.unique(np.array(labs, dtype=str)[codes], return_inverse=True)
        sym = symbolizer or Symbolizer()
        by_module = {}
        for i, lab in enumerate(uniq):
            path, _, off = lab.rpartition("|")
            path = path.rpartition("|")[0]
            by_module.setdefault(path, []).append((i, int(off, 16) if off else 0))
        un = np.full(len(uniq), "", dtype=object)
        uf = np.full(len(uniq), "", dtype=object)
        ul = np.zeros(len(uniq), np.int64)
        for path, items in by_module.items():
            offs = [o for _, o in items]
            # a function address is exact, not a return address: Symbolizer looks up
            # offset - 1, so hand it offset + 1
            locs = sym.resolve(path, [o + 1 for o in offs]) if path and path != "?" else []
            for k, (i, o) in enumerate(items):
                loc = locs[k] if locs else None
                if loc is not None and loc.function:
                    un[i], uf[i], ul[i] = loc.function, loc.file, loc.line
                elif path and path != "?":
                    un[i] = f"{os.path.basename(path)}+{o:#x}"
                else:
                    un[i] = f"{o:#x}" if o else "?"
        names[~named] = un[inv.reshape(-1)]
        files[~named] = uf[inv.reshape(-1)]
        lines[~named] = ul[inv.reshape(-1)]
    return names, files, lines


def pair_regions(enter, leave):
    """Match ENTER and LEAVE records of one thread (masks over its records, in order).
    Returns (partner, depth, unmatched_leave): the index of each ENTER's LEAVE (and each
    LEAVE's ENTER), -1 when there is none; the stack depth of each (0 outermost). A LEAVE
    with no open region (a trace that started inside functions) is unmatched."""
    n = len(enter)
    partner = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    pos = np.flatnonzero(enter | leave)
    if not len(pos):
        return partner, depth, np.zeros(n, bool)
    step = np.where(enter[pos], 1, -1)
    level = np.cumsum(step)
    low = np.minimum.accumulate(np.minimum(level, 0))
    low_prev = np.r_[0, low[:-1]]
    bad = ~enter[pos] & (low < low_prev)  # goes below every level seen: no ENTER
    unmatched = np.zeros(n, bool)
    unmatched[pos[bad]] = True
    pos = pos[~bad]
    step = np.where(enter[pos], 1, -1)
    level = np.cumsum(step)
    d = np.where(enter[pos], level - 1, level)  # an ENTER's depth; a LEAVE's after leaving
    depth[pos] = d
    is_e = enter[pos]
    for k in np.unique(d):
        e = pos[is_e & (d == k)]
        lv = pos[~is_e & (d == k)]
        if not len(e) or not len(lv):
            continue
        j = np.searchsorted(lv, e)  # the first LEAVE at this depth after the ENTER
        ok = j < len(lv)
        # the next ENTER at this depth must come after that LEAVE
        nxt = np.r_[e[1:], np.iinfo(np.int64).max]
        ok[ok] &= lv[j[ok]] < nxt[ok]
        partner[e[ok]] = lv[j[ok]]
        partner[lv[j[ok]]] = e[ok]
    return partner, depth, unmatched


def default_output(exp, name):
    return Path(exp) / "export" / name


def output_file(exp, out, name, force):
    """The file an export of exp writes: out, or NAME inside out when it is a directory,
    or EXP/export/NAME without it; one that exists only with force."""
    path = Path(out or default_output(exp, name))
    if path.is_dir():
        path = path / name
    if path.exists() and not force:
        raise PerfweaveError(f"{path}: already exists (--force replaces it)")
    return path


@contextlib.contextmanager
def new_directory(out):
    """Write a directory whole or not at all: yields a temporary directory beside out,
    which becomes out (an empty directory out is replaced) when the block ends, and is
    removed if it fails. A PerfweaveError names out when the file system refuses."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp.", dir=out.parent))
    except OSError as e:
        raise PerfweaveError(f"{out}: cannot create: {e.strerror}") from None
    try:
        yield tmp
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PerfweaveError(f"{out}: cannot write: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

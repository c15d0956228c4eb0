"""Exchanging event traces with other tools (docs/interop.md).

- `interop.otf2`: export an experiment's traces as an OTF2 archive and import Score-P
  (or perfweave-written) OTF2 archives as experiments, through the `otf2` package;
- `interop.chrome`: export Chrome's Trace Event Format for chrome://tracing and Perfetto;
- `interop.darshan`: export the I/O profile as darshan-parser's text;
- `interop.profile`: the MPI profile of an imported experiment, from its traces.

This module holds what several of them need: an experiment's ranks read, checked and
put on one clock the way `perfweave analyze` puts them (so that an export and an
analysis see the same times), names of user regions and the pairing of their enters and
leaves, an MPI function's family, and the file an export writes.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave._mpi import FUNCTIONS as MPI_FUNCTIONS
from perfweave.clock import app_window, host_clocks, to_ns
from perfweave.model.trace import T, object_labels, time_span
from perfweave.dtypes import TypeSet
from perfweave.readers.trace import SPANS, SUB

FLUSH_REGION = "TRACE BUFFER FLUSH"  # Score-P's name for time spent writing buffers
TIMED = TypeSet("CALL", "FLUSH", "ENTER", "LEAVE")


def ns_times(meta, rec):
    """(t0, t1) of records in ns on rank 0's clock: t0 of the timed records, t1 of those
    with a duration (CALL, FLUSH); 0 elsewhere."""
    typ = rec["type"]
    # every record converted, then the fields that hold no time set to 0: cheaper than
    # gathering and scattering the timed ones (to_ns is silent about the others)
    t0 = np.where(TIMED(typ), to_ns(meta, rec["t0"]), 0)
    t1 = np.where(SPANS(typ), to_ns(meta, rec["t1"]), 0)
    return t0, t1


def last_index(mask):
    """Per element, the index of the last True of mask up to it (-1 before the first):
    of records, the call a sub-event belongs to, with mask the CALL records."""
    idx = np.where(mask, np.arange(len(mask)), -1)
    return np.maximum.accumulate(idx) if len(idx) else idx


@dataclass
class RankExport:
    """One rank's records as exported: grouped by thread, times in ns on rank 0's clock."""

    rank: int
    meta: dict
    rec: np.ndarray  # EVENT_DTYPE, records of each thread together, in order
    thread: np.ndarray  # thread of each record
    t0: np.ndarray  # ns: CALL/FLUSH start, ENTER/LEAVE time; 0 otherwise
    t1: np.ndarray  # ns: CALL/FLUSH end; 0 otherwise
    t_begin: int  # ns: MPI_Init done (application time starts)
    t_end: int  # ns: MPI_Finalize entered (or the last record)
    functions: list
    complete: bool = True
    notes: list = field(default_factory=list)

    @property
    def host(self):
        return self.meta.get("host") or "unknown"


@dataclass
class ExportSource:
    """An experiment's traces for export: the metadata of every rank at hand, the
    records of one rank at a time (`rank(r)`, `each()`) or of one rank in chunks
    (`stream(r)`, what the exports read)."""

    path: Path
    meta: dict  # experiment.json
    world_size: int
    ranks: list  # rank numbers with a trace, in order
    metas: dict  # rank -> rank-R.json as read (clock put on rank 0's)
    notes: list = field(default_factory=list)
    _sibling: dict = None
    _names: list = None

    def threads(self, r):
        """The threads of rank r that wrote records, 0 first."""
        from perfweave.readers import trace as rt

        return rt.rank_threads(self.path, r, self.metas.get(r))

    def thread_ids(self, r):
        """{thread: OS thread id} of rank r's trace (none before trace version 4)."""
        from perfweave.readers import trace as rt

        return rt.rank_thread_ids(self.path, r)

    def rank_records(self, r):
        """Rank r's records as readers/trace.py reads them (RankRecords), with the clock
        perfweave analyze uses; a rank without its JSON borrows another's calibration."""
        from perfweave.readers import trace as rt

        rf = rt.read_rank(self.path, r, self._meta_notes[r])
        rf.meta, sibling = self._clock_meta(r, rf.meta)
        if sibling:
            rf.notes.append(_sibling_note(r))
        return rf

    def _clock_meta(self, r, meta):
        """(metadata of rank r, whether borrowed): a rank without its clock calibration
        (killed before writing its JSON) takes another rank's."""
        if not (meta or {}).get("clock") and self._sibling:
            return dict(self._sibling, rank=r), True
        return meta, False

    def rank(self, r):
        """The RankExport of rank r: its records read, checked and put on rank 0's clock
        as perfweave analyze puts them; damaged data is kept with notes."""
        rf = self.rank_records(r)
        m = rf.meta
        rec, thread = rf.records, rf.thread
        if len(thread) > 1 and (np.diff(thread) < 0).any():
            order = np.argsort(thread, kind="stable")
            rec, thread = rec[order], thread[order]
        typ = rec["type"]
        t0, t1 = ns_times(m, rec)
        tb, te = app_window(m, time_span(typ, t0, t1))
        functions = list(m.get("functions") or [])
        notes = list(rf.notes)
        # a rank killed before writing its JSON: every rank of a run has the same functions
        if not functions and (typ == T["CALL"]).any() and self._names:
            functions = list(self._names)
            notes.append(_borrowed_note(r))
        return RankExport(r, m, rec, thread, t0, t1, tb, te, functions, rf.complete, notes)

    def stream(self, r):
        """Rank r's records chunk by chunk (RankExportStream): what rank(r) holds, in
        bounded memory."""
        return RankExportStream(self, r)

    def each(self):
        """RankExport of every rank in order, one at a time; their notes go to notes."""
        for r in self.ranks:
            rt = self.rank(r)
            self.notes.extend(rt.notes)
            yield rt


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
        self.src = rt.open_rank(X.path, r, X._meta_notes[r])
        self.meta, self.sibling = X._clock_meta(r, self.src.meta or {})
        self.notes = list(self.src.notes)
        self.complete = self.src.complete
        self.functions = list(self.meta.get("functions") or [])
        self.borrowed = not self.functions and bool(X._names)
        if self.borrowed:
            self.functions = list(X._names)
        self.span = None  # (first, last) time of the timed records, ns
        self.calls = False  # whether a pass met a CALL record
        self.records = 0  # records of the last pass
        self.t_begin = self.t_end = None
        self._checkers = []
        # the committed spans, and whether each comes right after one of its thread in
        # file order (what Checker needs to know of a chunk's first record)
        self._spans = [s for s in self.src.spans if s[1]]
        self._follows = [
            i > 0 and self._spans[i - 1][2] == th for i, (_, _, th) in enumerate(self._spans)
        ]

    def threads(self):
        return sorted({t for _, _, t in self._spans})

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

        size = size or CHUNK_RECORDS
        check = Checker(self.src)
        self._checkers.append(check)
        tail = None  # the last call and its sub-events, for the next chunk
        parts, n = [], 0
        mine = [(a, c, f) for (a, c, th), f in zip(self._spans, self._follows) if th == t]
        for k, (a, c, f) in enumerate(mine):
            pos = a
            while pos < a + c:
                m = min(a + c - pos, size - n)
                parts.append((pos, m, f or pos > a))
                n += m
                pos += m
                last = k == len(mine) - 1 and pos == a + c
                if n >= size or last:
                    kept = check(parts, self.src.records, tail)
                    parts, n = [], 0
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

        notes = list(self.notes)
        dropped = sum(c.dropped for c in self._checkers)
        if dropped:
            notes.append(dropped_note(self.rank, dropped))
            self.complete = False
        if self.sibling:
            notes.append(_sibling_note(self.rank))
        if self.borrowed and self.calls:
            notes.append(_borrowed_note(self.rank))
        return notes


def _sibling_note(r):
    return (
        f"rank {r}: clock calibration and function table borrowed from another rank; "
        "its times are approximate"
    )


def _borrowed_note(r):
    return f"rank {r}: function names borrowed from another rank"


def _cut(rec):
    """(records up to the last one that is no sub-event, the rest): a chunk ends before
    its last call (or other record) so that a call's sub-events stay with it."""
    typ = rec["type"]
    j = np.flatnonzero(~SUB(typ))
    j = int(j[-1]) if len(j) else 0
    return rec[:j], rec[j:]


def load(exp):
    """The traces of experiment directory exp for export (ExportSource; records are read
    rank by rank when asked for). An experiment without traces is an error."""
    from perfweave.analysis.exchange import Local
    from perfweave.analysis.waitstates import sibling_meta, world_size_of
    from perfweave.readers import trace as rt
    from perfweave.readers.experiment import read_meta

    exp = Path(exp)
    if not exp.is_dir():
        raise PerfweaveError(f"{exp}: no such experiment directory")
    meta = read_meta(exp)
    ranks = rt.list_ranks(exp)
    world = world_size_of(exp, ranks)
    # the clock perfweave analyze uses: ranks on rank 0's host share its clock exactly
    pairs = {r: rt.read_meta(exp, r) for r in ranks}
    host_clocks(pairs, Local(world))
    X = ExportSource(exp, meta, world, list(ranks), {r: m for r, (m, _) in pairs.items()})
    X._meta_notes = pairs
    if any(not (m or {}).get("clock") for m in X.metas.values()):
        X._sibling = sibling_meta(exp, ranks)
    X._names = next(
        (list(m["functions"]) for m in X.metas.values() if m and m.get("functions")), []
    )
    return X


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


# What identifies an MPI function here is mpi.spec's (perfweave/_mpi.py), as for
# model/trace.py classify(), so that exports, imports, the model and the imported
# profile agree


def family(name):
    """The profile family of an MPI function (docs/format.md) from its name."""
    f = MPI_FUNCTIONS.get(name)
    return f[0] if f else "other"


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

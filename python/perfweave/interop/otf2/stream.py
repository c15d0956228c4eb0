"""The export of a rank chunk by chunk (interop.RankExportStream), one chunk of its records
in memory at a time: what a first pass over the rank finds ahead (FirstPass: its application
time, per thread the earliest time of each chunk's events, and which receive requests need
attributes, irecv_attributes); what a chunk's events need from the chunks before it (Carry,
and Specs: the attribute lists of the events not written yet); and a location's event writer
(Location), which sorts each chunk's events with those held back and writes them as far as
no later chunk can come before them. The archive is the same, byte for byte, as with the
whole rank at once."""

import collections

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave.interop.otf2.calls import K
from perfweave.interop.otf2.columns import I64_MAX, SORT
from perfweave.interop.otf2.implied import irecv_completions
from perfweave.interop.otf2.library import closed
from perfweave.model.trace import T

# rank r's application time (window), per thread the watermarks of its chunks (mins:
# the earliest time a chunk or any later one has an event at) and the answers of
# irecv_attributes (packed bits, one per IRECV record)
FirstPass = collections.namedtuple("FirstPass", "window mins irecv")


def irecv_attributes(rec, pending):
    """Which IRECV records of a chunk of one thread need attributes, in order: those
    whose completing RECV (irecv_completions: the first RECV of the same request after
    it) differs from the request, or that none completes. A request completed in a
    later chunk waits in pending (request key -> [(answers, position, record)]) and is
    decided there: what a thread carries is its requests still open."""
    typ = rec["type"]
    keyed = np.flatnonzero((typ == T["RECV"]) & (rec["t0"] != 0))
    if len(keyed) and pending:
        keys, first = np.unique(rec["t0"][keyed], return_index=True)
        for k, j in zip(keys.tolist(), keyed[first].tolist()):
            got = tuple(int(rec[f][j]) for f in _REQUEST)
            for answers, pos, req in pending.pop(k, ()):
                answers[pos] = got != req
    ir = np.flatnonzero(typ == T["IRECV"])
    need = np.ones(len(ir), bool)
    if len(ir):
        comp = irecv_completions(typ, rec["t0"], np.zeros(len(rec), np.int8))[ir]
        found = comp >= 0
        a, b = comp[found], ir[found]
        need[found] = ~np.logical_and.reduce([rec[f][a] == rec[f][b] for f in _REQUEST])
        for pos in np.flatnonzero(~found).tolist():
            # the fields as numbers: a record would hold its whole chunk in memory
            req = tuple(int(rec[f][ir[pos]]) for f in _REQUEST)
            pending.setdefault(int(rec["t0"][ir[pos]]), []).append((need, pos, req))
    return need


_REQUEST = ("peer", "tag", "bytes", "comm")  # what a receive request asked for


class Specs:
    """Attribute lists of the events not written yet, by key (an event's "attr")."""

    def __init__(self):
        self.items, self.next = {}, 0

    def add(self, spec):
        self.items[self.next] = spec
        self.next += 1
        return self.next - 1

    def extend(self, specs):
        keys = np.arange(self.next, self.next + len(specs))
        self.items.update(zip(keys.tolist(), specs))
        self.next += len(specs)
        return keys

    def __getitem__(self, key):
        return self.items[key]

    def drop(self, keys):
        for k in keys[keys >= 0].tolist():
            self.items.pop(k, None)


class Carry:
    """What the events of a rank's chunk need from the chunks before it: per thread,
    the user regions still open and the place in the first pass's answers on receive
    requests; per rank, nonblocking collectives started and not completed yet, the
    group of the access and exposure epochs open per window, and counts for notes."""

    def __init__(self):
        self.started = {}  # (request key, post number) -> what its completion needs
        self.openers = {}  # "win_start"/"win_post" -> {window: group}
        self.regions = {}  # user region definitions met (name, file, line, named)
        self.lost = self.unpaired = self.lost_events = 0
        self.lost_records = False
        self.tables = None  # columns._RankTables, made at the rank's first sub-event
        self.new_thread(None)

    def new_thread(self, irecv):
        self.stack = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
        self.irecv, self.irecv_at = irecv, 0

    def irecv_attributes(self, n):
        """The first pass's answers for the next n IRECV records of the thread."""
        a = self.irecv_at
        bits = np.unpackbits(self.irecv[a // 8 : (a + n + 7) // 8 + 1])[a % 8 : a % 8 + n]
        self.irecv_at += n
        return bits.astype(bool)

    def notes(self, r, notes):
        if self.lost:
            notes.append(
                f"rank {r}: {self.lost} LEAVE records without their ENTER (the "
                "trace started inside those functions) are not exported"
            )
        if self.unpaired:
            notes.append(
                f"rank {r}: {self.unpaired} LEAVE records without their ENTER are not exported"
            )
        if self.lost_records:
            notes.append(
                f"rank {r}: {self.lost_events} events were lost when recording "
                "(LOST records); OTF2 has no event for that and the archive does "
                "not mention them"
            )


class Location:
    """The event writer of one location, fed a chunk's events at a time (add): they are
    sorted with those held back from earlier chunks, and the ones before the earliest
    time a later chunk of the thread can have an event at (the first pass's watermark,
    mins) are written. Events of one time stamp are written together, so the order is
    that of sorting the location's events all at once."""

    def __init__(self, ex, w, r, t, fp):
        self.ex, self.w, self.key, self.thread = ex, w, (r, t), t
        self.mins = fp.mins.get(t, np.zeros(0, np.int64))
        self.seen = 0
        self.held = None
        self.ew = None
        self.n = 0
        self.first = self.last = None

    def add(self, cols, resolved):
        self.seen += 1
        held = self.held
        if held is not None and len(resolved[0]):
            # Enters held whose Leave this chunk found: their keys as the rank at once
            # gives them
            wait = np.flatnonzero((held["kind"] == K["ENTER"]) & (held["sec"] == -I64_MAX))
            if len(wait):
                o = np.argsort(resolved[0])
                ks, ends = resolved[0][o], resolved[1][o]
                j = np.clip(np.searchsorted(ks, held["grp"][wait]), 0, len(ks) - 1)
                hit = ks[j] == held["grp"][wait]
                held["sec"][wait[hit]] = -ends[j[hit]]
        if cols is None:
            cols = held
        elif held is not None:
            cols = {k: np.concatenate([held[k], cols[k]]) for k in cols}
        if cols is None or not len(cols["time"]):
            self.held = None
            return 0
        order = np.lexsort([cols[k] for k in SORT])
        cols = {k: v[order] for k, v in cols.items()}
        cut = len(order)
        if self.seen < len(self.mins):
            cut = int(np.searchsorted(cols["time"], self.mins[self.seen], "left"))
        self.held = {k: v[cut:] for k, v in cols.items()} if cut < len(order) else None
        return self._write({k: v[:cut] for k, v in cols.items()})

    def _write(self, c):
        n = len(c["time"])
        if not n:
            return 0
        if c["time"][0] < 0:
            raise PerfweaveError(
                f"rank {self.ex.locations[self.key].group.name}: negative "
                "time stamps on rank 0's clock; the trace's clock "
                "calibration is broken"
            )
        if self.ew is None:
            self.ew = self.w.event_writer_from_location(self.ex.locations[self.key])
        self.ex.calls.write(self.ew, c, self.ex.attr_specs)
        self.ex.attr_specs.drop(c["attr"])
        self.n += n
        self.first = int(c["time"][0]) if self.first is None else self.first
        self.last = int(c["time"][-1])
        return n

    def close(self):
        n = self._write(self.held) if self.held is not None else 0
        self.held = None
        if self.ew is None and self.thread == 0:  # the master thread's, even empty
            self.ew = self.w.event_writer_from_location(self.ex.locations[self.key])
        if self.ew is not None:
            # Closed as soon as its events are written, not with the archive: the
            # library keeps each open event file's bytes in a write buffer of its own
            # (4 MiB, beside the chunks of library.Chunks) until the file is closed, so memory
            # grew by up to 4 MiB per location. Closing writes the rest and frees it,
            # and the location's local definition writer with its chunk (the package's
            # EventWriter.close). The writer stays in the package's table, closed: at
            # the archive's close the package closes every writer of that table, and
            # opens one for each location missing from it, which would truncate the
            # location's event file.
            self.ew.close()
            self.ew.close = closed
        if self.n:
            # the bookkeeping otf2's EventWriter.write does per event
            self.ex.locations[self.key]._number_of_events_written = self.n
            self.w._update_timestamps(self.first)
            self.w._update_timestamps(self.last)
        return n

"""OTF2 import: import_archive turns an OTF2 archive (Score-P's, or one written by
export) into an experiment that `perfweave analyze` reads. _Importer reads the
archive's definitions (ranks and threads of its locations, regions, communicators,
windows, groups, perfweave's attributes), then its events a rank's locations at a time
into a table sorted by location (bulk.Reading, the C callbacks of libperfweave-otf2.so),
each rank's put aside on disk with what the ranks' records need of all of them (regions
entered, events per location), so that memory holds one rank's events; or all at once
through collector.Collector where libperfweave-otf2.so is not built. It makes each
location's records (records.thread_records) and each rank's description a rank at a
time as it writes the experiment directory: its traces, experiment.json and the profile
of those traces (interop/profile.py)."""

import datetime as _dt
import json
import os
import pickle
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave import __version__, progress
from perfweave.analysis.imported_profile import from_traces
from perfweave.errors import PerfweaveError
from perfweave.interop import FLUSH_REGION, new_directory, profile
from perfweave.model.trace import family
from perfweave.interop.otf2.bulk import Reading, bulk_reader, callbacks
from perfweave.interop.otf2.collector import R_ENTER, R_LEAVE, Collector, event_table
from perfweave.interop.otf2.library import (
    enum_value,
    library_errors,
    library_messages,
    need_otf2,
    why,
)
from perfweave.interop.otf2.mapping import NS, mpi_action
from perfweave.interop.otf2.records import thread_records
from perfweave.clock import rank0_clock, to_ns
from perfweave.dtypes import EVENT_DTYPE, TRACE_VERSION
from perfweave.readers.trace import TRACE_FORMAT


def _resolve_archive(path):
    p = Path(path)
    if p.is_dir():
        cand = p / "traces.otf2"
        if cand.is_file():
            return cand
        found = sorted(p.glob("*.otf2"))
        if len(found) == 1:
            return found[0]
        raise PerfweaveError(f"{p}: no OTF2 anchor file (NAME.otf2) in this directory")
    if not p.exists():
        raise PerfweaveError(f"{p}: no such OTF2 archive")
    if p.suffix != ".otf2":
        raise PerfweaveError(f"{p}: not an OTF2 anchor file (expected NAME.otf2)")
    return p


def import_archive(archive, out):
    """Convert the OTF2 archive archive (its anchor file, or a directory holding one) into
    the experiment directory out. Returns a summary dict (experiment, events, ranks,
    seconds, notes)."""
    otf2, _otf2 = need_otf2("OTF2 import")
    errors = library_errors(otf2, _otf2)
    anchor = _resolve_archive(archive)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PerfweaveError(f"{out}: already exists; choose another -o")
    t_start = time.perf_counter()
    messages = []
    try:
        with progress.task(f"reading {anchor.name}", 1) as bar, library_messages(messages):
            reader = otf2.reader.Reader(str(anchor))
            try:
                imp = _Importer(otf2, _otf2, reader, anchor)
                imp.creator = _otf2.Reader_GetCreator(reader.handle) or ""
                # the tables read wait beside the experiment, not in a /tmp that may be
                # in memory
                imp.out, parent = out, out.resolve().parent
                imp.spill_dir = str(parent) if parent.is_dir() else None
                imp.read()
                bar.step()
            finally:
                reader.close()
    except errors as e:
        raise PerfweaveError(
            f"{anchor}: not a readable OTF2 archive ({why(e, messages)})"
        ) from None
    except OSError as e:
        raise PerfweaveError(f"{anchor}: cannot read ({e.strerror or e})") from None
    t_read = time.perf_counter()
    try:
        with progress.task("building the traces", 2) as bar:
            imp.build()
            bar.step(1, f"writing {out.name}")
            imp.write(out)
            bar.step(1)
    finally:
        imp.close()
    t_end = time.perf_counter()
    return {
        "experiment": str(out),
        "events": imp.nevents,
        "records": imp.nrecords,
        "ranks": imp.world,
        "seconds": t_end - t_start,
        "read_seconds": t_read - t_start,
        "notes": imp.notes,
        "skipped_locations": imp.skipped_locations,
        "skipped_events": imp.skipped_events,
    }


def _blocks(loc):
    """The locations of a table sorted by location, and where each one's events begin
    and end."""
    first = np.flatnonzero(np.r_[True, loc[1:] != loc[:-1]]) if len(loc) else np.zeros(0, int)
    return loc[first], first, np.r_[first[1:], len(loc)].astype(first.dtype)


_COLUMNS = ("loc", "time", "kind", "attr", *"abcdef")  # of a table of events
_DTYPES = {k: np.int64 if len(k) > 1 else np.uint64 for k in _COLUMNS}


def _distinct(refs):
    """np.unique of references (uint64), by counting where they are small numbers, as
    definitions' references are: sorting tens of millions takes seconds."""
    if len(refs) and int(refs.max()) < 1 << 24:
        return np.flatnonzero(np.bincount(refs.view(np.int64)))
    return np.unique(refs)


def _location_kind(loc):
    """What an OTF2 location is to perfweave: "thread" (a CPU thread of a process: its
    events become the records of one thread of a rank), "accelerator stream" or
    "metric location" (no record type holds their events: skipped and counted)."""
    typ = enum_value(loc.type)
    group_type = enum_value(loc.group.location_group_type)
    if typ == 3:  # OTF2_LOCATION_TYPE_METRIC
        return "metric location"
    if typ == 2 or group_type == 2:  # GPU / ACCELERATOR_STREAM, ACCELERATOR
        return "accelerator stream"
    return "thread"  # CPU_THREAD, or UNKNOWN in a process


class _Importer:
    def __init__(self, otf2, _otf2, reader, anchor):
        self.otf2, self._otf2, self.reader, self.anchor = otf2, _otf2, reader, anchor
        self.notes = []
        self.creator = ""  # the archive's creator (Score-P x.y, perfweave ...)
        self.out = None  # the experiment directory to be
        self.spill_dir = None  # where the tables read wait (_add_part): beside out
        self.spill = None

    # ---- definitions ----

    def _defs(self):
        otf2, d = self.otf2, self.reader.definitions
        cp = d.clock_properties
        self.res = int(cp.timer_resolution) or 1
        self.offset = int(cp.global_offset)
        self.length = int(cp.trace_length)
        self.realtime = int(cp.realtime_timestamp)
        # ranks: the MPI locations group lists each rank's master location, by rank
        rank_of_group = {}
        mpi_locs = None
        for g in d.groups:
            if g.group_type == otf2.GroupType.COMM_LOCATIONS and g.paradigm == otf2.Paradigm.MPI:
                mpi_locs = list(g.members)
        self.world_locs = mpi_locs
        if mpi_locs:
            for r, loc in enumerate(mpi_locs):
                rank_of_group[loc.group._ref] = r
        else:
            procs = [
                lg
                for lg in d.location_groups
                if lg.location_group_type == otf2.LocationGroupType.PROCESS
            ]
            for r, lg in enumerate(procs):
                rank_of_group[lg._ref] = r
        for lg in d.location_groups:
            parent = getattr(lg, "creating_location_group", None)
            if lg._ref not in rank_of_group and parent is not None and parent._ref in rank_of_group:
                rank_of_group[lg._ref] = rank_of_group[parent._ref]
        self.world = (max(rank_of_group.values()) + 1) if rank_of_group else 0
        self.loc_rank, self.loc_thread = {}, {}
        threads = {}
        masters = {loc._ref for loc in (mpi_locs or [])}
        locs = sorted(d.locations, key=lambda x: (x._ref not in masters, x._ref))
        self.hosts = {}
        self.skipped_locs = {}  # ref -> (name, what, rank or None)
        for loc in locs:
            r = rank_of_group.get(loc.group._ref)
            what = _location_kind(loc)
            if r is None or what != "thread":
                self.skipped_locs[loc._ref] = (
                    f"{loc.group.name}/{loc.name}",
                    "thread of no MPI rank" if what == "thread" else what,
                    r,
                )
                continue
            self.loc_rank[loc._ref] = r
            self.loc_thread[loc._ref] = threads.setdefault(r, 0)
            threads[r] += 1
            node = loc.group.system_tree_parent
            self.hosts.setdefault(r, node.name if node is not None else "unknown")
        self.threads = threads
        # world rank of a location (COMM_GROUP members are locations in the otf2 package)
        self.rank_of_member = {}
        for loc in d.locations:
            if loc._ref in self.loc_rank:
                self.rank_of_member[loc._ref] = self.loc_rank[loc._ref]

        def members(g):
            if not isinstance(g, otf2.definitions.Group):
                return None
            if g.group_type == otf2.GroupType.COMM_SELF:
                return None  # the rank itself
            out = []
            for m in g.members:
                ref = getattr(m, "_ref", m)
                out.append(self.rank_of_member.get(ref, -1) if hasattr(m, "_ref") else int(m))
            return out

        # regions
        self.region_name = {}
        # 0 user, 1 MPI call, 2 buffer flush (3: window mark, _functions)
        self.region_kind = {}
        for r in d.regions:
            name = r.name or f"region {r._ref}"
            self.region_name[r._ref] = name
            if name == FLUSH_REGION:
                k = 2
            elif name.startswith("MPI_") or (
                r.paradigm == otf2.Paradigm.MPI and r.region_role != otf2.RegionRole.ARTIFICIAL
            ):
                k = 1
            else:
                k = 0
            self.region_kind[r._ref] = k
        # communicators, windows, groups
        self.comm_def = {}  # ref -> ("comm", members|None) / ("inter", A, B)
        self.comm_name = {}
        self.comm_order = []
        for c in d.comms:
            groups = [getattr(c, k, None) for k in ("group", "groupA", "groupB")]
            if not any(
                isinstance(g, otf2.definitions.Group) and g.paradigm == otf2.Paradigm.MPI
                for g in groups
            ):
                continue  # the measurement system's own communicators
            if isinstance(c, otf2.definitions.InterComm):
                self.comm_def[c._ref] = ("inter", members(c.groupA) or [], members(c.groupB) or [])
            else:
                self.comm_def[c._ref] = ("comm", members(c.group))
            self.comm_name[c._ref] = c.name
            self.comm_order.append(c._ref)
        self.comm_parent = {
            c._ref: (c.parent._ref if getattr(c, "parent", None) is not None else None)
            for c in d.comms
            if c._ref in self.comm_def
        }
        self.win_comm = {w._ref: w.comm._ref for w in d.rma_wins if w.comm is not None}
        self.win_order = [w._ref for w in d.rma_wins]
        self.group_members = {
            g._ref: members(g)
            for g in d.groups
            if g.group_type in (otf2.GroupType.COMM_GROUP, otf2.GroupType.COMM_SELF)
        }
        self.attr_names = {
            a._ref: a.name[len("perfweave:") :]
            for a in d.attributes
            if a.name.startswith("perfweave:")
        }
        self.flush_regions = {ref for ref, k in self.region_kind.items() if k == 2}
        self.loc_events = {loc._ref: int(loc.number_of_events or 0) for loc in d.locations}
        self.announced = sum(self.loc_events.values())

    # ---- events ----

    def read(self):
        self._defs()
        self.nevents, self.other, self.per_loc = 0, {}, {}
        self.parts, self.part_of = [], {}
        self.entered = set()  # regions entered or left on the threads of ranks
        self.window_times = {}  # region -> (Enter times, Leave times) (_window_mark)
        lib = bulk_reader()
        cbs = callbacks(lib, self._otf2) if lib is not None else None
        if cbs is not None and len(set(self.attr_names.values())) <= 32:
            self._read_groups(lib, cbs)
            return
        self._read_each(self.reader._get_global_evt_reader_handle(None))

    def _groups(self):
        """The locations read together: each rank's threads, then the locations of each
        location group not imported (only counted)."""
        ranks, other = {}, {}
        for loc in self.reader._locations:
            if loc._ref in self.loc_rank:
                ranks.setdefault(self.loc_rank[loc._ref], []).append(loc._ref)
            else:
                other.setdefault(loc.group._ref, []).append(loc._ref)
        return [sorted(v) for _, v in sorted(ranks.items())] + [
            sorted(v) for _, v in sorted(other.items())
        ]

    def _read_groups(self, lib, cbs):
        """The callbacks in C (otf2_read.c), a group of locations (_groups) at a time:
        a global event reader over that group's local event readers, its table made,
        summed up and put aside on disk (_add_part) before the next group is read, so
        that memory holds one rank's events, not the archive's. Each event goes to its
        location's block of the table, as large as the definitions announce; an archive
        can announce more than its event files can hold (each event takes a byte at
        least): then all wait aside, in chunks, as the events beyond a block."""
        _otf2, h = self._otf2, self.reader.handle
        files = self.anchor.parent / self.anchor.stem
        room = sum(p.stat().st_size for p in files.rglob("*") if p.is_file())
        blocks = self.loc_events
        if self.announced > room:
            blocks = dict.fromkeys(blocks, 0)
        try:
            self.spill = tempfile.TemporaryDirectory(prefix=".perfweave-otf2.", dir=self.spill_dir)
        except OSError as e:
            raise PerfweaveError(f"{self.out}: cannot write: {e.strerror}") from None
        for loc in self.reader._locations:
            _otf2.Reader_SelectLocation(h, loc._ref)
        # as the otf2 package opens them (OTF2's examples): an archive may have no local
        # definition files
        try:
            _otf2.Reader_OpenDefFiles(h)
            defs = True
        except _otf2.Error:
            defs = False
        try:
            _otf2.Reader_OpenEvtFiles(h)
        except _otf2.Error:
            pass
        try:
            for refs in self._groups():
                for ref in refs:
                    if defs:
                        d = _otf2.Reader_GetDefReader(h, ref)
                        if d:
                            _otf2.Reader_ReadAllLocalDefinitions(h, d)
                            _otf2.Reader_CloseDefReader(h, d)
                    _otf2.Reader_GetEvtReader(h, ref)
                # over the local event readers open: this group's (closing it closes them)
                g = _otf2.Reader_GetGlobalEvtReader(h)
                try:
                    rd = Reading(
                        lib,
                        self._otf2,
                        self.attr_names,
                        self.flush_regions,
                        {ref: blocks.get(ref, 0) for ref in refs},
                    )
                    rd.register(g, cbs)
                    rd.read()
                finally:
                    _otf2.Reader_CloseGlobalEvtReader(h, g)
                self._add_part(rd.table, rd.attrs, rd.other, rd.nevents, spill=True)
                del rd
        except BaseException:
            self.close()  # a failed read leaves no table behind
            raise
        finally:
            if defs:
                _otf2.Reader_CloseDefFiles(h)
            _otf2.Reader_CloseEvtFiles(h)

    def _read_each(self, handle):
        """One Python call per event, where libperfweave-otf2.so is not built: all
        locations at once."""
        _otf2 = self._otf2
        col = Collector(_otf2, self.attr_names, self.flush_regions)
        # The library keeps only C function pointers; the otf2 package ties each one's
        # lifetime to the Python function it was made from. Every function handed over
        # therefore stays referenced here until the reader is closed, or the library
        # calls freed code at the first event of a kind (Metric, ThreadFork, ...).
        self._callbacks = []
        cbs = _otf2.GlobalEvtReaderCallbacks_New()
        try:
            ours = col.callbacks()
            for nm in dir(_otf2):
                if not (nm.startswith("GlobalEvtReaderCallbacks_Set") and nm.endswith("Callback")):
                    continue
                kind = nm[len("GlobalEvtReaderCallbacks_Set") : -len("Callback")]
                fn = ours.get(kind) or col.counter(kind)
                self._callbacks.append(fn)
                getattr(_otf2, nm)(cbs, fn)
            _otf2.GlobalEvtReader_SetCallbacks(handle, cbs, None)
        finally:
            _otf2.GlobalEvtReaderCallbacks_Delete(cbs)
        while _otf2.GlobalEvtReader_ReadEvents(handle, 1 << 20) == 1 << 20:
            pass
        nevents = sum(len(v) for v in col.lists.values()) + sum(col.other.values())
        table, col.lists = event_table(col.lists), None
        self._add_part(table, col.attrs, col.other, nevents, spill=False)

    def _add_part(self, tab, attrs, other, nevents, spill):
        """Take the events of a group of locations (tab: their table sorted by location,
        attrs, other: as Collector's): what build needs of all ranks summed up (events
        per location, regions entered, the times of MPI_Init/Finalize-like regions), the
        table of the threads of ranks kept, on disk where spill (read back a part at a
        time by write)."""
        self.nevents += nevents
        for k, n in other.items():
            self.other[k] = self.other.get(k, 0) + n
        if tab is None:
            return
        ids, first, end = _blocks(tab["loc"])
        for loc, n in zip(ids.tolist(), (end - first).tolist()):
            self.per_loc[loc] = self.per_loc.get(loc, 0) + n
        known = np.isin(ids, np.array(sorted(set(self.loc_rank)), np.int64))
        if not known.any():
            return
        if not known.all():
            keep = np.repeat(known, end - first)
            tab = {k: v[keep] for k, v in tab.items()}
            ids = ids[known]
        kind = tab["kind"]
        ends = (kind == R_ENTER) | (kind == R_LEAVE)
        self.entered.update(_distinct(tab["a"][ends]).tolist())
        if self.creator.startswith("perfweave "):
            for r in self._window_candidates():
                mine = tab["a"] == r
                t = self.window_times.setdefault(r, ([], []))
                t[0].append(tab["time"][mine & (kind == R_ENTER)])
                t[1].append(tab["time"][mine & (kind == R_LEAVE)])
        i = len(self.parts)
        for loc in ids.tolist():
            self.part_of[self.loc_rank[loc]] = i
        if spill:
            # one file a part: its columns one after the other, then its attributes
            f = Path(self.spill.name) / f"{i}.table"
            try:
                with open(f, "wb") as out:
                    for k in _COLUMNS:
                        tab[k].tofile(out)
                    pickle.dump(attrs, out, pickle.HIGHEST_PROTOCOL)
            except OSError as e:  # a full disk: as writing the experiment would say
                raise PerfweaveError(f"{self.out}: cannot write: {e.strerror}") from None
            self.parts.append((f, len(tab["loc"])))
        else:
            self.parts.append((tab, attrs))

    def _window_candidates(self):
        """The MPI call regions that _window_mark may take for marks."""
        return [
            r
            for r, k in self.region_kind.items()
            if k == 1 and mpi_action(self.region_name[r]) in ("init", "finalize")
        ]

    def _load(self, i):
        """Part i of the events (_add_part) as self.tab and self.attrs; per_rank: the
        slices of each of its ranks' threads."""
        tab, attrs = self.parts[i]
        if isinstance(tab, Path):
            f, n = tab, attrs
            with open(f, "rb") as src:
                tab = {k: np.fromfile(src, _DTYPES[k], n) for k in _COLUMNS}
                attrs = pickle.load(src)
            f.unlink()
        self.parts[i] = None
        ids, first, end = _blocks(tab["loc"])
        per_rank = {}
        for loc, a, b in zip(ids.tolist(), first.tolist(), end.tolist()):
            per_rank.setdefault(self.loc_rank[loc], []).append((self.loc_thread[loc], a, b))
        self.tab, self.attrs, self.per_rank = tab, attrs, per_rank

    def close(self):
        """Remove the tables put aside (_add_part)."""
        self.parts = []
        if self.spill is not None:
            self.spill.cleanup()
            self.spill = None

    # ---- records ----

    def build(self):
        notes = self.notes
        if self.announced and self.announced != self.nevents:
            notes.append(
                f"read {self.nevents} events, the archive's definitions announce {self.announced}"
            )
        self.ranks = {}
        self._skipped()
        self._functions()
        self._comms()
        self._windows()
        self.counts = {"outside": 0, "nested": 0, "open": 0, "unmatched": 0, "nocomm": 0}

    def _count_notes(self):
        """The notes of what the records of all ranks (_rank) left out or changed."""
        notes = self.notes
        c = self.counts
        if c["outside"]:
            notes.append(
                f"{c['outside']} MPI events outside any MPI call: a perfweave record "
                "of what a call did needs its call (not imported)"
            )
        if c["nested"]:
            notes.append(
                f"{c['nested']} Enter/Leave events of MPI functions called inside "
                "another MPI function: folded into the outer call"
            )
        if c["open"]:
            notes.append(
                f"{c['open']} MPI calls never left before the trace ends: they end "
                "at the rank's last event"
            )
        if c["unmatched"]:
            notes.append(f"{c['unmatched']} Leave events without an Enter: not imported")
        if c["nocomm"]:
            notes.append(
                f"{c['nocomm']} events name a communicator or window the rank is not "
                "a member of: imported without it"
            )

    def _skipped(self):
        """Count what is not imported: every location that is not a thread of a rank
        (accelerator streams, metric locations, threads of no rank) with all its events,
        and on the imported threads the events of kinds perfweave has no record for
        (per_loc: the events of each location in the tables read)."""
        per_loc = dict(self.per_loc)
        kinds = {}
        for (name, loc), n in self.other.items():
            if loc in self.loc_rank:
                kinds[name] = kinds.get(name, 0) + n
            else:
                per_loc[loc] = per_loc.get(loc, 0) + n
        self.skipped_locations = [
            {"location": name, "kind": what, "rank": r, "events": per_loc.get(ref, 0)}
            for ref, (name, what, r) in sorted(self.skipped_locs.items())
        ]
        self.skipped_events = dict(sorted(kinds.items()))
        by_kind = {}
        for s in self.skipped_locations:
            k = by_kind.setdefault(s["kind"], [0, 0, []])
            k[0] += 1
            k[1] += s["events"]
            k[2].append(s["location"])
        for what, (n, events, names) in by_kind.items():
            more = f", {n - 5} more" if n > 5 else ""
            self.notes.append(
                f"{n} {what}{'s' if n > 1 else ''} with {events} events not "
                f"imported ({', '.join(names[:5])}{more}): perfweave's traces "
                "have no place for them"
            )
        for name, n in self.skipped_events.items():
            what = "records unknown to this OTF2 version" if name == "Unknown" else f"{name} events"
            self.notes.append(f"{n} {what}: perfweave has no record for them (not imported)")

    def _window_mark(self, r):
        """3 (a mark of the application window: no call, no record) where every Enter
        of region r is left at its own time, as perfweave's export writes MPI_Init and
        MPI_Finalize for ranks whose records hold neither (the window comes back from
        ProgramBegin/End, at the same times); 1 (MPI calls) otherwise. Durations are
        never negative, so equal sorted enter and leave times mean all of them are 0."""
        t_in, t_out = (np.sort(np.concatenate(t)) for t in self.window_times[r])
        return 3 if np.array_equal(t_in, t_out) else 1

    def _functions(self):
        """The MPI functions and user regions the events enter, as perfweave numbers
        them (functions: names of MPI regions in the JSON; regions: user region names)."""
        regs = sorted(self.entered)
        name = lambda r: self.region_name.get(r, f"region {r}")
        kind = {r: self.region_kind.get(r, 0) for r in regs}
        if self.creator.startswith("perfweave "):
            for r in regs:
                if kind[r] == 1 and mpi_action(name(r)) in ("init", "finalize"):
                    kind[r] = self._window_mark(r)
        self.functions = []
        for r in regs:
            if kind[r] == 1 and name(r) not in self.functions:
                self.functions.append(name(r))
        self.regions = sorted({name(r) for r in regs if kind[r] == 0})
        if len(self.functions) > 65535:
            raise PerfweaveError(f"{self.anchor}: more than 65535 MPI functions")
        fidx = {f: i for i, f in enumerate(self.functions)}
        ridx = {f: i for i, f in enumerate(self.regions)}
        self.reg_kind = {r: kind[r] for r in regs}
        self.reg_fn = {r: fidx[name(r)] for r in regs if kind[r] == 1}
        self.reg_user = {r: ridx[name(r)] for r in regs if kind[r] == 0}
        self.init_fns = np.array([i for f, i in fidx.items() if mpi_action(f) == "init"], np.int64)
        self.fini_fns = np.array(
            [i for f, i in fidx.items() if mpi_action(f) == "finalize"], np.int64
        )

    def _comms(self):
        """Each rank's communicators: those it is a member of, numbered as perfweave
        numbers them (seq: earlier ones with the same members, in definition order)."""
        self.rank_comms = {}
        for r in range(self.world):
            lst, local = [], {}
            seen = {}
            for ref in self.comm_order:
                d = self.comm_def[ref]
                if d[0] == "inter":
                    a, b = d[1], d[2]
                    if r in a:
                        ranks, remote = a, b
                    elif r in b:
                        ranks, remote = b, a
                    else:
                        continue
                else:
                    ranks = [r] if d[1] is None else d[1]
                    remote = []
                    if r not in ranks:
                        continue
                key = (tuple(ranks), tuple(remote))
                seq = seen.get(key, 0)
                seen[key] = seq + 1
                entry = {"id": len(lst), "ranks": list(ranks), "parent": -1, "seq": seq}
                if remote:
                    entry["remote"] = list(remote)
                if self.comm_name.get(ref):
                    entry["name"] = self.comm_name[ref]
                local[ref] = len(lst)
                lst.append(entry)
            for ref, i in local.items():
                p = self.comm_parent.get(ref)
                if p is not None and p in local:
                    lst[i]["parent"] = local[p]
            self.rank_comms[r] = (lst, local)

    def _windows(self):
        self.rank_wins = {}
        for r in range(self.world):
            lst, local = [], {}
            seq = {}
            comms = self.rank_comms[r][1]
            for ref in self.win_order:
                c = self.win_comm.get(ref)
                if c not in comms:
                    continue
                s = seq.get(c, 0)
                seq[c] = s + 1
                local[ref] = len(lst)
                lst.append({"id": len(lst), "comm": comms[c], "seq": s})
            self.rank_wins[r] = (lst, local)

    def to_world(self, comm, value, rank, remote=True):
        """Ranks in communicator comm (refs) -> world ranks; values >= 2**31 are negative
        int32 values kept as they are (perfweave writes -1 and -2 that way)."""
        v = value.astype(np.int64)
        out = np.where(v >= 1 << 31, v - (1 << 32), -1)
        for ref in np.unique(comm).tolist():
            sel = (comm == ref) & (v < 1 << 31)
            if not sel.any():
                continue
            d = self.comm_def.get(ref)
            if d is None:
                continue
            if d[0] == "inter":
                a, b = d[1], d[2]
                m = np.asarray(
                    (b if rank in a else a) if remote else (a if rank in a else b), np.int64
                )
            elif d[1] is None:
                m = np.array([rank], np.int64)
            else:
                m = np.asarray(d[1], np.int64)
            ok = sel & (v < len(m))
            out[ok] = m[v[ok]]
        return out

    def _rank(self, r, parts):
        """The records of rank r from its locations' events (parts: (thread, a, b) slices
        of the table), and its rank-R.json."""
        tab = self.tab
        recs, flushes = [], []
        tb_cand = {}
        te_cand = {}
        all_t = []
        comm_local = self.rank_comms[r][1]
        win_local = self.rank_wins[r][1]
        groups, group_ids = [], {}
        for thread, a, b in parts:
            ev = {k: v[a:b] for k, v in tab.items()}
            out, info = thread_records(
                self, r, thread, ev, comm_local, win_local, groups, group_ids
            )
            first = sum(len(x) for x in recs)
            if len(out):
                recs.append(out)
                flushes.append({"thread": int(thread), "first": int(first), "count": int(len(out))})
            for k, v in info.items():  # the first thread that has it
                (tb_cand if k in ("init", "begin") else te_cand).setdefault(k, v)
            if len(ev["time"]):
                all_t += [int(ev["time"].min()), int(ev["time"].max())]
        rec = np.concatenate(recs) if recs else np.zeros(0, EVENT_DTYPE)
        tb = tb_cand.get("init", tb_cand.get("begin"))
        te = te_cand.get("fini", te_cand.get("end"))
        first = min(all_t) if all_t else self.offset
        last = max(all_t) if all_t else self.offset
        complete = "fini" in te_cand or "end" in te_cand
        ns = lambda t: int(to_ns({"clock": self._clock(0, 0)}, np.array([t], np.int64))[0])
        clock = self._clock(ns(tb if tb is not None else first), ns(te if te is not None else last))
        comms = self.rank_comms[r][0]
        return rec, {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "rank": r,
            "world_size": self.world,
            "host": self.hosts.get(r, "unknown"),
            "pid": 0,
            "state": "complete" if complete else "no-finalize",
            "functions": self.functions,
            "families": [family(f) for f in self.functions],
            "clock": clock,
            "comms": comms,
            "windows": self.rank_wins[r][0],
            "groups": [{"id": i, "ranks": g} for i, g in enumerate(groups)],
            "regions": [{"name": n} for n in self.regions],
            "objects": [],
            "flushes": flushes,
            "records": int(len(rec)),
            "lost": 0,
        }

    def _clock(self, t_init_ns, t_fini_ns):
        # ticks are OTF2's time stamps; ns = (t - offset) * 1e9 / resolution + offset in ns,
        # exact for a resolution of 1 ns
        ns0 = self.offset * NS // self.res
        return rank0_clock(
            t_init_ns, t_fini_ns, (self.offset, self.offset + self.res), (ns0, ns0 + NS)
        )

    # ---- output ----

    def write(self, out):
        with new_directory(out) as tmp:
            traces = tmp / "traces"
            traces.mkdir()
            # a rank's records at a time: written as soon as they are made
            self.nrecords = 0
            self.per_rank, loaded = {}, None
            for r in range(self.world):
                i = self.part_of.get(r)
                if i is not None and i != loaded:
                    self.tab = self.attrs = None  # the part before, freed first
                    self._load(i)
                    loaded = i
                rec, meta = self._rank(r, sorted(self.per_rank.get(r, [])) if i is not None else [])
                rec.tofile(traces / f"rank-{r}.events")
                (traces / f"rank-{r}.json").write_text(json.dumps(meta))
                self.nrecords += len(rec)
            self._count_notes()
            self.tab = None
            (tmp / "experiment.json").write_text(json.dumps(self._experiment(), indent=1) + "\n")
            # the profile of the records as written, so that reading the experiment
            # derives nothing (readers/experiment.py reads it as a run's)
            profile.write(tmp / "profile.pwprof", from_traces(tmp))

    def _experiment(self):
        now = time.time()
        if self.realtime != int(self.otf2.Undefined.TIMESTAMP.value) and self.realtime > 0:
            start = self.realtime / NS
        else:
            start = now
        wall = self.length / self.res
        iso = lambda s: _dt.datetime.fromtimestamp(s).astimezone().isoformat()
        return {
            "format": "perfweave-experiment",
            "version": 1,
            "perfweave_version": __version__,
            "command": [],
            "launched": [],
            "cwd": os.getcwd(),
            "host": next(iter(self.hosts.values()), "unknown"),
            "program": None,
            "launcher": None,
            "mpi_flavor": None,
            "runtime_library": None,
            "options": {},
            "start_time": iso(start),
            "start_epoch": start,
            "state": "finished",
            "end_epoch": start + wall,
            "end_time": iso(start + wall),
            "wall_seconds": wall,
            "exit_status": {"code": 0},
            "imported_from": str(Path(self.anchor).resolve()),
            "import_notes": list(self.notes),
            "import": {
                "format": "OTF2",
                "creator": self.creator,
                "events": int(self.nevents),
                "records": int(self.nrecords),
                "timer_resolution": self.res,
                "global_offset": self.offset,
                "skipped_locations": self.skipped_locations,
                "skipped_events": self.skipped_events,
            },
        }

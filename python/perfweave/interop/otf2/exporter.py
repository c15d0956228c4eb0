"""OTF2 export: export writes an experiment's traces as an OTF2 archive. _Exporter
defines what the events name (system tree, locations, communicators, windows, groups,
regions, perfweave's attributes), makes a first pass over each rank (stream.FirstPass),
then writes the rank chunk by chunk: a chunk's records become event columns
(columns.columns), which each location's writer (stream.Location) sorts and hands to
the OTF2 library (calls.EventCalls)."""

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave import __version__, progress
from perfweave.errors import PerfweaveError
from perfweave.interop import FLUSH_REGION, TIMED, default_output, load
from perfweave.interop.otf2.calls import EventCalls
from perfweave.interop.otf2.columns import I64_MAX, columns
from perfweave.interop.otf2.library import (
    CHUNK,
    Chunks,
    abandon,
    library_errors,
    library_messages,
    need_otf2,
    why,
)
from perfweave.interop.otf2.mapping import ATTRIBUTES, NS, mpi_action, region_role
from perfweave.interop.otf2.stream import Carry, FirstPass, Location, Specs, irecv_attributes
from perfweave.model.trace import T
from perfweave.symbols import Symbolizer


def _anchor(out):
    out = Path(out)
    if out.suffix != ".otf2":
        out = out / "traces.otf2"
    return out


def export(exp, out=None, force=False, symbolizer=None):
    """Write the traces of experiment exp as an OTF2 archive whose anchor file is out
    (default EXP/export/traces.otf2; a directory means DIR/traces.otf2). Returns a
    summary dict (anchor, events, locations, seconds, notes)."""
    otf2, _otf2 = need_otf2("OTF2 export")
    errors = library_errors(otf2, _otf2)
    X = load(exp)
    anchor = _anchor(out or default_output(exp, "traces.otf2"))
    name = anchor.name[: -len(".otf2")]
    if not name:
        raise PerfweaveError(f"{anchor}: the anchor file needs a name (NAME.otf2)")
    parent = anchor.parent
    targets = [parent / f"{name}.otf2", parent / f"{name}.def", parent / name]
    existing = [p for p in targets if p.exists() or p.is_symlink()]
    if existing and not force:
        raise PerfweaveError(f"{anchor}: already exists (--force replaces it)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp.", dir=parent))
    except OSError as e:
        raise PerfweaveError(f"{parent}: cannot write there ({e.strerror})") from None
    t_start = time.perf_counter()
    messages = []
    try:
        try:
            with library_messages(messages):
                ex = _Exporter(otf2, _otf2, X, symbolizer)
                nevents, nloc, notes = ex.write(tmp, name)
                nrecords = ex.nrecords
        except errors as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({why(e, messages)})"
            ) from None
        except OSError as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({e.strerror or e})"
            ) from None
        try:
            for p in existing:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
            for p in targets:
                os.replace(tmp / p.name, p)
        except OSError as e:
            raise PerfweaveError(
                f"{anchor}: cannot write the OTF2 archive ({e.strerror or e})"
            ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "anchor": str(anchor),
        "events": nevents,
        "records": nrecords,
        "locations": nloc,
        "ranks": len(X.ranks),
        "seconds": time.perf_counter() - t_start,
        "notes": X.notes + notes,
    }


class _Exporter:
    def __init__(self, otf2, _otf2, X, symbolizer=None):
        self.otf2, self._otf2, self.X = otf2, _otf2, X
        # one for every rank and chunk of the export: it keeps what it found
        self.symbolizer = symbolizer or Symbolizer()
        self.notes = []

    # ---- definitions ----

    def _definitions(self, w):
        otf2, X = self.otf2, self.X
        d = w.definitions
        self.d = d
        d.paradigm(otf2.Paradigm.MPI, "MPI", otf2.ParadigmClass.PROCESS)
        self.attr = {}
        for key, typ, desc in ATTRIBUTES:
            a = d.attribute(f"perfweave:{key}", desc, getattr(otf2.Type, typ))
            self.attr[key] = (a._ref, getattr(otf2.Type, typ), typ)
        machine = d.system_tree_node(X.meta.get("host") or "machine", class_name="machine")
        nodes = {}
        metas = {r: (m or {}) for r, m in X.metas.items()}
        self.locations = {}
        masters = []
        for r in range(X.world_size):
            host = metas[r].get("host") or "unknown" if r in metas else "unknown"
            if host not in nodes:
                nodes[host] = d.system_tree_node(host, class_name="node", parent=machine)
            lg = d.location_group(
                f"MPI Rank {r}",
                location_group_type=otf2.LocationGroupType.PROCESS,
                system_tree_parent=nodes[host],
            )
            threads = X.threads(r) if r in metas else [0]
            for t in threads:
                loc = d.location(
                    "Master thread" if t == 0 else f"Thread {t}",
                    type=otf2.LocationType.CPU_THREAD,
                    group=lg,
                )
                self.locations[(r, t)] = loc
            masters.append(self.locations[(r, 0)])
        d.group(
            "MPI ranks",
            group_type=otf2.GroupType.COMM_LOCATIONS,
            paradigm=otf2.Paradigm.MPI,
            members=masters,
        )
        self.groups = {}
        self._communicators()
        self._windows()
        # post/start groups
        self.rank_groups = {}
        for r, m in metas.items():
            self.rank_groups[r] = [
                self._group(g.get("ranks", []))._ref for g in m.get("groups", [])
            ]
        # regions: MPI functions, the flush, user regions (made when first met); the
        # functions a rank calls are found with one pass over its records
        self.mpi_regions = {}
        self.passes = {}
        self.window_calls = set()  # ranks whose records hold MPI_Init* or MPI_Finalize
        for r in X.ranks:
            used, names, self.passes[r] = self._first_pass(r)
            called = [names[f] for f in used if f < len(names)]
            if any(mpi_action(nm) in ("init", "finalize") for nm in called):
                self.window_calls.add(r)
            for nm in called:
                self._mpi_region(nm)
        # MPI_Init and MPI_Finalize as Score-P writes them (scout synchronises on them):
        # a rank whose records hold neither call gets both, at its application window's
        # ends (columns); an imported rank that holds them keeps its own
        self.window_regions = {nm: self._mpi_region(nm) for nm in ("MPI_Init", "MPI_Finalize")}
        self.flush_region = d.region(
            FLUSH_REGION,
            region_role=otf2.RegionRole.ARTIFICIAL,
            paradigm=otf2.Paradigm.MEASUREMENT_SYSTEM,
        )._ref
        self.user_regions = {}
        cmd = [str(a) for a in X.meta.get("command") or []]
        program = X.meta.get("program") or (cmd[0] if cmd else "?")
        # under a launcher the program's arguments are the words after the program
        base = os.path.basename(program)
        at = next((i for i, a in enumerate(cmd) if a == program or os.path.basename(a) == base), 0)
        self.program = d.strings.get_ref(program)
        self.program_args = [d.strings.get_ref(a) for a in cmd[at + 1 :]]
        # the region of ProgramBegin as Score-P defines it, which Scalasca's reader
        # looks up (the executable's name; with its path and arguments)
        d.region(
            base,
            canonical_name=" ".join([program] + cmd[at + 1 :]),
            region_role=otf2.RegionRole.ARTIFICIAL,
            paradigm=otf2.Paradigm.MEASUREMENT_SYSTEM,
        )
        status = X.meta.get("exit_status") or {}
        self.exit_status = int(
            status.get("code", 128 + status.get("signal", 0) if "signal" in status else 0)
        )
        self.calls = EventCalls(self._otf2, self.attr, self.program, self.program_args)

    def _mpi_region(self, nm):
        """The region of MPI function nm, defined when first asked for. Its source file is
        "MPI" as Score-P writes it: Scalasca tells MPI regions (and which is MPI_Init or
        a barrier) from the others by that name, not by the paradigm."""
        if nm not in self.mpi_regions:
            self.mpi_regions[nm] = self.d.region(
                nm,
                canonical_name=nm,
                region_role=region_role(self.otf2, nm),
                paradigm=self.otf2.Paradigm.MPI,
                source_file="MPI",
            )._ref
        return self.mpi_regions[nm]

    def _group(self, members):
        key = tuple(int(m) for m in members)
        g = self.groups.get(key)
        if g is None:
            g = self.d.group(
                f"group {len(self.groups)}",
                group_type=self.otf2.GroupType.COMM_GROUP,
                paradigm=self.otf2.Paradigm.MPI,
                members=list(key),
            )
            self.groups[key] = g
        return g

    def _communicators(self):
        """One OTF2 Comm per communicator: the same one on every rank is recognised by its
        members and creation order (model/trace.py comm_key). They are defined in order of
        that creation number, so that an importer that numbers communicators with equal
        members in definition order gets the same numbers back."""
        X = self.X
        found = {}  # key -> (seq, first appearance, name, parent key, members, remote)
        self.local_comm = {}
        for r, meta in X.metas.items():
            meta = meta or {}
            keys = []
            for c in meta.get("comms", []):
                m = tuple(int(x) for x in c.get("ranks", []))
                rem = tuple(int(x) for x in c.get("remote", []) or [])
                seq = int(c.get("seq", 0))
                key = (m, rem, seq)
                keys.append(key)
                if key not in found:
                    found[key] = [seq, len(found), c.get("name"), None, m, rem]
            for c, key in zip(meta.get("comms", []), keys):
                p = c.get("parent", -1)
                if isinstance(p, int) and 0 <= p < len(keys) and found[key][3] is None:
                    found[key][3] = keys[p]
            self.local_comm[r] = keys
        world_key = (tuple(range(X.world_size)), (), 0)
        if world_key not in found:
            found[world_key] = [0, -1, "MPI_COMM_WORLD", None, world_key[0], ()]
        self.comms = {}
        names = set()
        for key in sorted(found, key=lambda k: (found[k][0], found[k][1])):
            seq, _, name, parent, m, rem = found[key]
            if not name or name in names:
                name = f"{name or 'comm'} #{len(self.comms)}"
            names.add(name)
            par = self.comms.get(parent) if parent else None
            # an intercommunicator is its local group on each side: the otf2 package
            # writes no InterComm definition (its class has the fields of Comm too), and
            # peers in the remote group go as perfweave:peer attributes
            c = self.d.comm(name, group=self._group(m), parent=par)
            self.comms[key] = c
        self.world_comm = self.comms[world_key]

    def _windows(self):
        otf2, X = self.otf2, self.X
        found = {}
        order = {k: i for i, k in enumerate(self.comms)}
        for r, meta in X.metas.items():
            ck = self.local_comm[r]
            for wdef in (meta or {}).get("windows", []):
                c = wdef.get("comm", -1)
                if not (isinstance(c, int) and 0 <= c < len(ck)):
                    continue
                found.setdefault((ck[c], int(wdef.get("seq", 0))), None)
        self.wins = {}
        for key in sorted(found, key=lambda k: (order[k[0]], k[1])):
            self.wins[key] = self.d.rma_win(
                f"window {len(self.wins)}",
                self.comms[key[0]],
                otf2.RmaWinFlag.CREATE_DESTROY_EVENTS,
            )

    def user_region(self, name, file, line, named):
        """The region of a user function (named: of an imported trace, else found by
        addr2line), defined when first met."""
        key = (name, file, int(line))
        ref = self.user_regions.get(key)
        if ref is None:
            otf2 = self.otf2
            ref = self.d.region(
                name,
                canonical_name=name,
                region_role=otf2.RegionRole.FUNCTION,
                paradigm=otf2.Paradigm.USER if named else otf2.Paradigm.COMPILER,
                source_file=file or None,
                begin_line_number=int(line),
            )._ref
            self.user_regions[key] = ref
        return ref

    # ---- events ----

    def _first_pass(self, r):
        """What writing rank r's events needs to know ahead, from a pass over its chunks
        (RankExportStream): the functions it calls, its application time, per thread the
        earliest time of each chunk's events (Location's watermark) and which receive
        requests need attributes (irecv_attributes). Returns (used function ids,
        function names, FirstPass)."""
        stream = self.X.stream(r)
        used = set()
        mins, irecv = {}, {}
        pending = {}
        t = None
        for c in stream.chunks():
            typ = c.rec["type"]
            if c.thread[0] != t:
                t = int(c.thread[0])
                mins[t], irecv[t], pending = [], [], {}
            used.update(np.unique(c.rec["fn"][typ == T["CALL"]]).tolist())
            timed = TIMED(typ)
            mins[t].append(int(c.t0[timed].min()) if timed.any() else I64_MAX)
            irecv[t].append(irecv_attributes(c.rec, pending))
        fp = FirstPass(
            (stream.t_begin, stream.t_end),
            {t: np.minimum.accumulate(np.array(m[::-1], np.int64))[::-1] for t, m in mins.items()},
            {t: np.packbits(np.concatenate(b)) for t, b in irecv.items()},
        )
        return sorted(used), stream.functions, fp

    def write(self, directory, name):
        otf2 = self.otf2
        w = otf2.writer.Writer(
            str(directory),
            archive_name=name,
            timer_resolution=NS,
            chunk_size_events=CHUNK,
            chunk_size_definitions=CHUNK,
        )
        self.chunks = Chunks(w._handle)
        try:
            w.creator = f"perfweave {__version__}"
            w.description = f"perfweave experiment {self.X.path}"
            self._definitions(w)
            total = 0
            self.nrecords = 0
            with progress.task("OTF2: writing", len(self.X.ranks), "rank") as bar:
                for r in self.X.ranks:  # one chunk of a rank in memory at a time
                    total += self._rank(w, r)
                    bar.step()
            if w._first_timestamp is not None and self.X.meta.get("start_epoch"):
                # wall-clock time of the first event: the launch, at best
                w._realtime_timestamp = float(self.X.meta["start_epoch"])
        except BaseException:
            abandon(w)
            raise
        w.close()
        return total, len(self.locations), self.notes

    def _rank(self, w, r):
        """Write rank r's events location by location, chunk by chunk (RankExportStream):
        each chunk's events are sorted with those held back from earlier chunks, and
        the ones earlier than any later chunk's can be are written (Location)."""
        fp = self.passes.pop(r)
        stream = self.X.stream(r)
        stream.t_begin, stream.t_end = fp.window
        self.attr_specs = Specs()  # attribute lists of the events held
        carry = Carry()
        total = 0
        loc = None
        for c in stream.chunks():
            t = int(c.thread[0])
            if loc is None or loc.thread != t:
                if loc is not None:
                    total += loc.close()
                elif t != 0 and (r, 0) in self.locations:
                    total += Location(self, w, r, 0, fp).close()
                loc = Location(self, w, r, t, fp)
                carry.new_thread(fp.irecv.get(t))
            cols, resolved = columns(self, c, carry)
            total += loc.add(cols, resolved)
        if loc is not None:
            total += loc.close()
        elif (r, 0) in self.locations:
            total += Location(self, w, r, 0, fp).close()
        self.X.notes.extend(stream.finish_notes())
        self.nrecords += stream.records
        carry.notes(r, self.notes)
        return total

"""An experiment's traces read rank by rank, checked and put on rank 0's clock the way
`perfweave analyze` puts them (load, ExportSource, RankExport): what the exports read
(interop adds the reading of a rank in chunks) and what an imported experiment's
profile is computed from (analysis/imported_profile.py), so that an export, an
analysis and that profile see the same times.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.clock import app_window, host_clocks, to_ns
from perfweave.errors import PerfweaveError
from perfweave.model.trace import TIMED, T, time_span
from perfweave.readers.trace import SPANS


def ns_times(meta, rec):
    """(t0, t1) of records in ns on rank 0's clock: t0 of the timed records, t1 of those
    with a duration (CALL, FLUSH); 0 elsewhere."""
    typ = rec["type"]
    # every record converted, then the fields that hold no time set to 0: cheaper than
    # gathering and scattering the timed ones (to_ns is silent about the others)
    t0 = np.where(TIMED(typ), to_ns(meta, rec["t0"]), 0)
    t1 = np.where(SPANS(typ), to_ns(meta, rec["t1"]), 0)
    return t0, t1


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
    records of one rank at a time (`rank(r)`, `each()`); interop's ExportSource, what
    the exports read, adds those of one rank in chunks (`stream(r)`)."""

    path: Path
    meta: dict  # experiment.json
    world_size: int
    ranks: list  # rank numbers with a trace, in order
    metas: dict  # rank -> rank-R.json as read (clock put on rank 0's)
    notes: list = field(default_factory=list)
    sibling: dict = None  # the calibration a rank without its own borrows
    names: list = None  # the functions a rank without its JSON borrows
    meta_notes: dict = None  # rank -> (rank-R.json, notes) as read

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

        rf = rt.read_rank(self.path, r, self.meta_notes[r])
        rf.meta, sibling = self.clock_meta(r, rf.meta)
        if sibling:
            rf.notes.append(sibling_note(r))
        return rf

    def clock_meta(self, r, meta):
        """(metadata of rank r, whether borrowed): a rank without its clock calibration
        (killed before writing its JSON) takes another rank's."""
        if not (meta or {}).get("clock") and self.sibling:
            return dict(self.sibling, rank=r), True
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
        if not functions and (typ == T["CALL"]).any() and self.names:
            functions = list(self.names)
            notes.append(borrowed_note(r))
        return RankExport(r, m, rec, thread, t0, t1, tb, te, functions, rf.complete, notes)

    def each(self):
        """RankExport of every rank in order, one at a time; their notes go to notes."""
        for r in self.ranks:
            rt = self.rank(r)
            self.notes.extend(rt.notes)
            yield rt


def sibling_note(r):
    return (
        f"rank {r}: clock calibration and function table borrowed from another rank; "
        "its times are approximate"
    )


def borrowed_note(r):
    return f"rank {r}: function names borrowed from another rank"


def load(exp, source=None):
    """The traces of experiment directory exp for export (an ExportSource, or of its
    subclass source; records are read rank by rank when asked for). An experiment
    without traces is an error."""
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
    metas = {r: m for r, (m, _) in pairs.items()}
    X = (source or ExportSource)(exp, meta, world, list(ranks), metas)
    X.meta_notes = pairs
    if any(not (m or {}).get("clock") for m in X.metas.values()):
        X.sibling = sibling_meta(exp, ranks)
    X.names = next((list(m["functions"]) for m in X.metas.values() if m and m.get("functions")), [])
    return X

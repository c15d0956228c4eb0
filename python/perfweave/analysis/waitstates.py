"""Automatic wait-state analysis of event traces (`perfweave analyze`).

The patterns and their waiting-time formulas are Scalasca 2.6's (summarised in
../shared/wait-states.md) and, for MPI-2 one-sided communication, those of Hermanns et
al., "Scalable detection of MPI-2 remote memory access inefficiency patterns" (IJHPCA
2012, section 4). Every pattern is computed on whole columns of numpy records: messages
are matched by (source, destination, communicator, tag, sequence number), collective
operations (blocking or not) by (communicator, sequence number), fences by (window,
sequence number), access and exposure epochs by (origin, target, window, sequence
number), all without a loop over events. Data another rank owns comes through
`exchange.route` (the identity in one process), so `mpirun -n K perfweave analyze
--parallel` runs this same code.

Times are integer nanoseconds on rank 0's clock throughout; a value is charged to a
(metric, call path, rank) and summed exactly, so the serial and parallel results agree
to the nanosecond.
"""
import time as _time
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis import metrics as MT
from perfweave.analysis.exchange import Local, _mix
from perfweave.model.grouping import dense_ids
from perfweave.model.trace import (COLL_COLS, COLL_FLAGS, RECV_COLS, SEND_COLS,
                                   WCALL_COLS, WEV_COLS, F, R, T, Cols, Trace, classify,
                                   prepare)
from perfweave.readers import trace as rt
from perfweave.readers.dtypes import TypeSet
from perfweave.readers.experiment import rank_ranges

RESULT_FORMAT = "perfweave-waitstates"
RESULT_VERSION = 1
WO_BUFFER = 100   # Late Sender instances a receiver remembers for Wrong Order (Scalasca)

CATS = list(MT.CATEGORY_METRIC)
C = {c: i for i, c in enumerate(CATS)}

WINDOW_EVENTS = TypeSet("WSYNC", "RMA")
MIN64 = np.iinfo(np.int64).min
MAX64 = np.iinfo(np.int64).max


# ---------------------------------------------------------------- loading

@dataclass
class Loaded:
    trace: Trace                     # the ranks this process owns
    paths: list                      # global call paths: label tuples, sorted
    sends: Cols                      # SEND_COLS of every owned rank; path, call, chan global
    recvs: Cols                      # RECV_COLS, likewise
    colls: Cols                      # COLL_COLS; key: dense communicator id
    wcalls: Cols                     # WCALL_COLS
    wevents: Cols                    # WEV_COLS; "call" indexes wcalls
    ncalls: int                      # MPI calls of the owned ranks ("call" of sends, recvs)
    nchan: int                       # channels of messages ("chan"), all processes
    channels: np.ndarray             # (nchan, 4): source, destination, comm id, tag
    groups: dict                     # rank -> list of member arrays
    comms: dict                      # comm key -> members
    windows: dict                    # window key -> comm key
    ranks_present: list              # every rank with a trace (all processes)
    notes: list = field(default_factory=list)
    comm_keys: np.ndarray = None     # every communicator's key, sorted (all processes)
    path_role: np.ndarray = None     # role (R) of each path's leaf MPI function
    row_ranks: dict = None           # table name -> (rank, first row) of each owned rank
    locations: np.ndarray = None     # first call of each location (rank, thread), in
                                     # order; None when every owned rank has one thread

    def rank_at(self, name, rows):
        """The rank of the rows (indices) of table name."""
        ranks, first = self.row_ranks[name]
        return ranks[np.searchsorted(first, rows, "right") - 1].astype(np.int32)

    def chunks(self, name, target=None):
        """Row ranges (a, b) of table name that hold whole ranks, each of about target
        rows (CHUNK; or one rank's rows, if more)."""
        target = target or CHUNK
        _, first = self.row_ranks[name]
        n = len(getattr(self, name))
        cuts, last = [0], 0
        for f in first.tolist():
            if f - last >= target:
                cuts.append(f)
                last = f
        cuts.append(n)
        return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]

    def ranks_of(self, name, a, b):
        """The rank of each of the rows a..b-1 of table name."""
        ranks, first = self.row_ranks[name]
        ends = np.r_[first[1:], np.iinfo(np.int64).max] if len(first) else first
        i0, i1 = np.searchsorted(ends, a, "right"), np.searchsorted(first, b, "left")
        edges = np.clip(np.r_[first[i0:i1], b], a, b)
        edges[0] = a
        return np.repeat(ranks[i0:i1].astype(np.int32), np.diff(edges))


class Rows(Cols):
    """A table of the store: its stored columns, and columns derived when first asked
    for (derive(table, name)), also of row ranges t[a:b] (which know where they start)."""

    def __init__(self, cols, derive, start=0):
        super().__init__(cols)
        self.derive = derive
        self.start = start

    def __getitem__(self, k):
        if isinstance(k, slice):
            a, b, _ = k.indices(len(self))
            return Rows({n: v[a:b] for n, v in self.items()}, self.derive, self.start + a)
        if dict.__contains__(self, k):
            return dict.__getitem__(self, k)
        v = self.derive(self, k)
        dict.__setitem__(self, k, v)
        return v


def _deriver(L, name):
    """What the rows of table name can tell without storing it: the rank (from where
    the rows are), a message's source or destination (from its channel), a call's role
    (from its path), a collective's flags, communicator size and the rank's place in it."""
    own = {"sends": "src", "recvs": "dst", "colls": "rank"}.get(name)
    other = {"sends": ("dst", 1), "recvs": ("src", 0)}.get(name)

    def derive(t, k):
        if k == own:
            return L.ranks_of(name, t.start, t.start + len(t))
        if other and k == other[0]:
            return L.channels[t["chan"], other[1]].astype(np.int32) if L.nchan else \
                np.zeros(len(t), np.int32)
        if k == "role":
            return L.path_role[t["path"]]
        if name == "colls" and k in COLL_FLAGS:
            return ((t["flags"] & COLL_FLAGS[k]) != 0).view(np.uint8)
        if name == "colls" and k in ("csize", "crank"):
            return _comm_place(L, t["key"], t["rank"])[k == "crank"]
        raise KeyError(k)
    return derive


def _comm_place(L, key, rank):
    """(size of each row's communicator (dense id key), the row's rank's position in it;
    -1 where unknown)."""
    size = np.full(len(key), -1, np.int32)
    place = np.full(len(key), -1, np.int32)
    for k in np.unique(key).tolist():
        m = L.comms.get(int(L.comm_keys[k])) if 0 <= k < len(L.comm_keys) else None
        if m is None or not len(m):
            continue
        sel = np.flatnonzero(key == k)
        size[sel] = len(m)
        srt = np.argsort(m, kind="stable")
        pos = np.minimum(np.searchsorted(m[srt], rank[sel]), len(m) - 1)
        place[sel] = np.where(m[srt][pos] == rank[sel], srt[pos], -1)
    return size, place


def world_size_of(exp, ranks):
    """The run's MPI_COMM_WORLD size: from any rank's JSON, else the largest rank + 1."""
    for r in ranks:
        meta, _ = rt.read_meta(exp, r)
        if meta and meta.get("world_size"):
            return int(meta["world_size"])
    return max(ranks) + 1


def _sibling_meta(exp, ranks):
    """What a rank without its JSON can borrow from another rank of the run: the clock
    calibration (same counter rate on a host), the function table (same runtime) and
    MPI_COMM_WORLD (communicator id 0 on every rank)."""
    for r in ranks:
        meta, _ = rt.read_meta(exp, r)
        if meta and meta.get("clock"):
            comms = [c for c in meta.get("comms", []) if c.get("id") == 0]
            return {"clock": meta["clock"], "functions": meta.get("functions", []),
                    "families": meta.get("families", []), "comms": comms,
                    "world_size": meta.get("world_size"), "state": "unknown"}
    return None


TABLES = {"sends": SEND_COLS, "recvs": RECV_COLS, "colls": COLL_COLS,
          "wcalls": WCALL_COLS, "wevents": WEV_COLS}
DETAIL = {"thread", "bytes"}    # columns of messages only load(detail=True) keeps


class Store:
    """The process's tables (TABLES), filled rank by rank: each prepared rank's tables
    are copied in and replaced by views of the store, so the ranks are never held twice
    (a concatenation would) and little memory is allocated afresh. Capacities are
    estimated from the first ranks (rows per trace record) and grow when exceeded."""

    def __init__(self, records, detail=False):
        self.records = max(int(records), 1)   # trace records of all ranks to come
        self.seen = 0                         # ... of the ranks taken so far
        self.cols = {name: {k: t for k, t in cols.items() if detail or k not in DETAIL}
                     for name, cols in TABLES.items()}
        self.tables = {name: None for name in TABLES}
        self.used = dict.fromkeys(TABLES, 0)

    def _room(self, name, need):
        t, used = self.tables[name], self.used[name]
        cap = len(t) if t is not None else 0
        if t is not None and used + need <= cap:
            return
        # rows per record so far, for the records still to come, plus a margin
        rate = (used + need) / max(self.seen, 1)
        want = used + need + int(rate * (self.records - self.seen) * 1.1) + 1024
        want = max(want, int(cap * 1.5))
        new = Cols({k: np.empty(want, ty) for k, ty in self.cols[name].items()})
        if t is not None:
            for k in new:
                new[k][:used] = t[k][:used]
        self.tables[name] = new

    def take(self, rd):
        """Copy rank rd's tables in and drop them from rd (views() gives them back as
        views of the store, once every rank is in)."""
        self.seen += rd.nrecords
        rd.rows = {}
        for name in TABLES:
            mine = getattr(rd, name)
            n = len(mine)
            self._room(name, n)
            table, n0 = self.tables[name], self.used[name]
            for k in table:
                table[k][n0:n0 + n] = mine[k]
            self.used[name] = n0 + n
            rd.rows[name] = n
            setattr(rd, name, None)

    def row_ranks(self, trace):
        """table name -> (rank, first row) of each rank taken."""
        out = {}
        for name in TABLES:
            n = np.array([rd.rows[name] for rd in trace.ranks], np.int64)
            out[name] = (np.array([rd.rank for rd in trace.ranks], np.int64),
                         np.cumsum(n) - n)
        return out

    def views(self, trace):
        """Point each rank's tables at its rows of the store (ranks in the order taken)."""
        pos = dict.fromkeys(TABLES, 0)
        for rd in trace.ranks:
            for name in TABLES:
                n0, n = pos[name], rd.rows[name]
                table = self.table(name)
                setattr(rd, name, Cols({k: v[n0:n0 + n] for k, v in table.items()}))
                pos[name] = n0 + n

    def table(self, name):
        t = self.tables[name]
        if t is None:
            return Cols({k: np.zeros(0, ty) for k, ty in self.cols[name].items()})
        return Cols({k: v[:self.used[name]] for k, v in t.items()})


def load(exp, ex, detail=False):
    """Read and prepare the ranks ex owns (Loaded). detail: keep the columns of
    messages that the patterns do not need (DETAIL)."""
    ranks = rt.list_ranks(exp)
    world = world_size_of(exp, ranks)
    ex.world_size = world
    mine = [r for r in ranks if ex.owns(r)]
    metas = {r: rt.read_meta(exp, r) for r in mine}
    _host_clocks(metas, ex)
    store = Store(sum(rt.record_count(exp, r) for r in mine), detail)
    data, sibling = [], None
    for r in mine:                      # one rank at a time: its raw records are dropped
        rf = rt.read_rank(exp, r, metas[r])
        if not rf.meta.get("clock"):
            sibling = sibling or _sibling_meta(exp, ranks)
            if sibling:
                rf.meta = dict(sibling, rank=rf.rank)
                rf.notes.append(f"rank {rf.rank}: clock calibration, function table and "
                                "MPI_COMM_WORLD taken from another rank; its times are "
                                "approximate and messages on other communicators cannot "
                                "be matched")
        rd = prepare(rf)
        del rf
        store.take(rd)
        data.append(rd)
    return _unify(Trace(world, [], data, source=str(exp)), ex, ranks, store)


def _host_clocks(metas, ex):
    """Ranks on one host read one CLOCK_MONOTONIC, so their offsets to rank 0 are one
    value: exactly 0 on rank 0's host, elsewhere the host's best-measured offset (the
    smallest round trip). Measured per rank, the offsets carry the error of each
    ping-pong (tens of microseconds on busy cores), enough to reorder a post and the
    start it releases. metas: {rank: (meta, note)}, updated in place."""
    def clock(m):
        return m.get("clock") if m and m.get("host") else None
    mine = [(r, m["host"], m["clock"].get("offset_init_ns", 0),
             m["clock"].get("offset_init_err_ns", 0), m["clock"].get("offset_fini_ns", 0),
             m["clock"].get("offset_fini_err_ns", 0))
            for r, (m, _) in metas.items() if clock(m)]
    allc = [c for part in ex.allgather(mine) for c in part]
    host0 = next((c[1] for c in allc if c[0] == 0), None)
    best = {}
    for rank, host, oi, ei, of, ef in allc:
        b = best.setdefault(host, [None, None])
        if b[0] is None or ei < b[0][1]:
            b[0] = (oi, ei)
        if b[1] is None or ef < b[1][1]:
            b[1] = (of, ef)
    for r, (m, note) in metas.items():
        if not clock(m):
            continue
        c = dict(m["clock"])
        if m["host"] == host0:
            c["offset_init_ns"] = c["offset_fini_ns"] = 0
        else:
            c["offset_init_ns"], c["offset_fini_ns"] = best[m["host"]][0][0], best[m["host"]][1][0]
        metas[r] = (dict(m, clock=c), note)


def _unify(trace, ex, ranks_present, store=None):
    """Merge function tables and call paths of every analysis process (by name), and
    build this process's tables: every owned rank's rows, with call paths, calls and
    communicators numbered alike in every process."""
    glist, seen = [], set()
    mine = []
    for rd in trace.ranks:
        for f in rd.fn_names:
            if f not in seen:
                seen.add(f)
                mine.append(f)
    seen = set()
    for fl in ex.allgather(mine):
        for f in fl:
            if f not in seen:
                seen.add(f)
                glist.append(f)
    gfn = {f: i for i, f in enumerate(glist)}
    sep = "\x1f"
    local = set()
    for rd in trace.ranks:
        local.update(sep.join(p) for p in rd.paths)
    allp = {"program"}
    for part in ex.allgather(sorted(local)):
        allp.update(part)
    paths = sorted(allp)
    gid = {p: i for i, p in enumerate(paths)}
    comms, windows, groups = {}, {}, {}
    for rd in trace.ranks:
        comms.update(rd.comms)
        windows.update(rd.windows)
        groups[rd.rank] = rd.groups
    ckeys = {0}                         # events without a communicator
    for part in ex.allgather(sorted(comms)):
        ckeys.update(part)
    comm_keys = np.array(sorted(ckeys), np.int64)
    chan_ids, channels = _channels(trace, ex, comm_keys)
    if store is None:                   # a trace built in memory: store it now
        store = Store(sum(rd.nrecords for rd in trace.ranks))
        for rd in trace.ranks:
            store.take(rd)
    store.views(trace)
    cbase = wbase = 0
    locations = []
    for rd in trace.ranks:              # the views are updated in place
        pmap = np.array([gid[sep.join(p)] for p in rd.paths], np.int32)
        cmap = np.searchsorted(comm_keys, rd.comm_keys).astype(np.int32)
        for name, ids in zip(("sends", "recvs"), chan_ids[rd.rank]):
            t = getattr(rd, name)
            t["path"][:] = pmap[t["path"]]
            t["chan"][:] = ids[t["chan"]]
            np.add(t["call"], cbase, out=t["call"], where=t["call"] >= 0)
        c = rd.colls
        c["path"][:] = pmap[c["path"]]
        c["wpath"][:] = pmap[c["wpath"]]
        c["key"][:] = cmap[c["key"]]
        c["wcall"] += cbase
        rd.wcalls["path"][:] = pmap[rd.wcalls["path"]]
        rd.wevents["call"] += wbase
        locations.append(rd.thread_calls + cbase)
        cbase += rd.ncalls
        wbase += len(rd.wcalls)
        rd.gpaths = pmap.astype(np.int64)
        rd.gfn = np.array([gfn[f] for f in rd.fn_names], np.int64)
    trace.functions = glist
    notes = [n for rd in trace.ranks for n in rd.notes]
    present = set(ranks_present)
    trace.missing = [r for r in range(trace.world_size) if r not in present]
    for rd in trace.ranks:              # the store's tables replace them
        for name in TABLES:
            setattr(rd, name, None)
    labels = [tuple(p.split(sep)) for p in paths]
    L = Loaded(trace=trace, paths=labels,
               **{name: store.table(name) for name in TABLES}, ncalls=cbase,
               nchan=len(channels), channels=channels,
               groups=groups, comms=comms, windows=windows,
               ranks_present=sorted(present), notes=notes, comm_keys=comm_keys,
               path_role=np.array([_leaf_role(p) for p in labels], np.int16),
               row_ranks=store.row_ranks(trace),
               locations=np.concatenate(locations)
               if any(len(x) > 1 for x in locations) else None)
    for name in ("sends", "recvs", "colls"):
        setattr(L, name, Rows(getattr(L, name), _deriver(L, name)))
    return L


def _leaf_role(labels):
    """The role (R) of the MPI function a path ends in ('M:name@site'), else other."""
    leaf = labels[-1]
    if leaf.startswith("M:"):
        return R[classify(leaf[2:].split("@", 1)[0])[1]]
    return R["other"]


def _channels(trace, ex, comm_keys):
    """Number the channels of messages, (source, destination, communicator, tag), alike
    in every analysis process: each process sends its ranks' (small) channel tables to
    all, and all number the union in sorted order. Returns ({rank: (global id of each
    of its send channels, ... of its receive channels)}, the channels: rows (source,
    destination, dense communicator id, tag), in the order of their ids)."""
    parts, sizes = [], []
    for rd in trace.ranks:
        cmap = np.searchsorted(comm_keys, rd.comm_keys)
        sc, rc = rd.send_channels, rd.recv_channels
        parts.append(np.stack([np.full(len(sc), rd.rank), sc[:, 0], cmap[sc[:, 1]],
                               sc[:, 2]], axis=1))
        parts.append(np.stack([rc[:, 0], np.full(len(rc), rd.rank), cmap[rc[:, 1]],
                               rc[:, 2]], axis=1))
        sizes.append((len(sc), len(rc)))
    mine = np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 4), np.int64)
    every = ex.allgather(mine)
    offset = sum(len(p) for p in every[:ex.me])
    allch = np.concatenate(every)
    if not len(allch):
        return {rd.rank: (np.zeros(0, np.int32),) * 2 for rd in trace.ranks}, \
            np.zeros((0, 4), np.int64)
    uniq, inv = np.unique(allch, axis=0, return_inverse=True)
    ids = inv.reshape(-1)[offset:offset + len(mine)].astype(np.int32)
    out, pos = {}, 0
    for rd, (ns, nr) in zip(trace.ranks, sizes):
        out[rd.rank] = (ids[pos:pos + ns], ids[pos + ns:pos + ns + nr])
        pos += ns + nr
    return out, uniq


# ---------------------------------------------------------------- helpers

class Acc:
    """Contributions (metric, path, rank, value), summed at the end. Large batches are
    summed per (path, rank) as they come, so that little is kept."""

    def __init__(self):
        self.parts = []

    def add(self, metric, path, rank, value, mask=None):
        """Add value[i] to (metric, path[i], rank[i]) for the rows i of mask (all rows
        if None) whose value is not 0."""
        value = np.asarray(value)
        keep = value != 0
        if mask is not None:
            keep &= mask
        idx = np.flatnonzero(keep)
        if not len(idx):
            return
        p = np.asarray(path)[idx].astype(np.int64)
        r = np.asarray(rank)[idx].astype(np.int64)
        v = value[idx].astype(np.int64)
        w = int(r.max()) + 1 if len(r) else 1
        if len(idx) > 4096 and int(r.min()) >= 0 and int(p.min()) >= 0 and \
                (int(p.max()) + 1) * w < 2 ** 62:
            uniq, inv = dense_ids(p * w + r)
            v = _sum_at(inv, v, len(uniq))
            p, r = np.divmod(uniq, w)
        self.parts.append((np.full(len(p), MT.INDEX[metric], np.int64), p, r, v))

    def rows(self, path, rank):
        """A batch of rows (path, rank) that several metrics are charged to: _Batch."""
        return _Batch(self, path, rank)

    def add_many(self, metric_idx, path, rank, value):
        value = np.asarray(value)
        keep = value != 0
        if keep.any():
            self.parts.append((np.asarray(metric_idx, np.int64)[keep],
                               np.asarray(path, np.int64)[keep],
                               np.asarray(rank, np.int64)[keep], value[keep].astype(np.int64)))

    def reduced(self):
        if not self.parts:
            z = np.zeros(0, np.int64)
            return z, z, z, z
        return _reduce(*(np.concatenate(x) for x in zip(*self.parts)))


class _Batch:
    """Rows of one batch grouped by (path, rank) once, for the metrics charged to them:
    each metric's values are summed per group as they are added."""

    def __init__(self, acc, path, rank):
        self.acc = acc
        p, r = np.asarray(path).astype(np.int64), np.asarray(rank).astype(np.int64)
        self.width = int(r.max()) + 1 if len(r) else 1
        if len(r) and (int(r.min()) < 0 or int(p.min()) < 0 or
                       (int(p.max()) + 1) * self.width >= 2 ** 62):
            self.uniq = None
            self.path, self.rank = p, r
            return
        self.uniq, self.inv = dense_ids(p * self.width + r)

    def add(self, metric, value, mask):
        if self.uniq is None:
            self.acc.add(metric, self.path, self.rank, value, mask)
            return
        keep = mask & (value != 0)
        idx = np.flatnonzero(keep)
        if not len(idx):
            return
        sums = _sum_at(self.inv[idx], np.asarray(value)[idx].astype(np.int64), len(self.uniq))
        nz = np.flatnonzero(sums)
        p, r = np.divmod(self.uniq[nz], self.width)
        self.acc.parts.append((np.full(len(nz), MT.INDEX[metric], np.int64), p, r, sums[nz]))


def _sum_at(inv, v, n):
    out = np.zeros(n, np.int64)
    np.add.at(out, inv, v)
    return out


def _reduce(m, p, r, v):
    """Sum values of equal (metric, path, rank), exactly (int64)."""
    if not len(m):
        return m, p, r, v
    pmax, rmax = int(p.max()) + 1, int(r.max()) + 1
    if len(MT.IDS) * pmax * rmax < 2 ** 62:
        key = (m * pmax + p) * rmax + r
        order = np.argsort(key, kind="stable")
        ks = key[order]
        start = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    else:
        order = np.lexsort((r, p, m))
        ms, ps, rs = m[order], p[order], r[order]
        start = np.flatnonzero(np.r_[True, (ms[1:] != ms[:-1]) | (ps[1:] != ps[:-1]) |
                                     (rs[1:] != rs[:-1])])
    o = order[start]
    return m[o], p[o], r[o], np.add.reduceat(v[order], start)


def _groups(*cols, extra=()):
    """Sort rows by the key columns (first = most significant), then by the extra
    columns. Returns (order, start of each key group in sorted order, key group id of
    each sorted row)."""
    n = len(cols[0])
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort(tuple(reversed(list(cols) + list(extra))))
    change = np.zeros(n, bool)
    change[0] = True
    for c in cols:
        sc = np.asarray(c)[order]
        change[1:] |= sc[1:] != sc[:-1]
    start = np.flatnonzero(change)
    gid = np.cumsum(change) - 1
    return order, start, gid


def _seq(keys, order_cols):
    """Sequence number of each row within its group of equal keys, in the order given by
    order_cols (most significant first)."""
    if not len(keys[0]):
        return np.zeros(0, np.int64)
    order, start, gid = _groups(*keys, extra=order_cols)
    out = np.empty(len(order), np.int64)
    out[order] = np.arange(len(order)) - start[gid]
    return out


def _hash_cols(*cols):
    h = np.zeros(len(cols[0]), np.uint64)
    for c in cols:
        h = _mix(h ^ np.asarray(c).astype(np.int64).view(np.uint64) if len(c) else h)
    return h


def _join(a_cols, b_cols):
    """For each row of table a, the index of the row of table b with equal key columns,
    or -1. Keys are unique in b."""
    na = len(a_cols[0])
    out = np.full(na, -1, np.int64)
    if not na or not len(b_cols[0]):
        return out
    ha, hb = _hash_cols(*a_cols), _hash_cols(*b_cols)
    ob = np.argsort(hb, kind="stable")
    hbs = hb[ob]
    i = np.searchsorted(hbs, ha)
    i = np.minimum(i, len(hbs) - 1)
    cand = ob[i]
    ok = hbs[i] == ha
    for ca, cb in zip(a_cols, b_cols):
        ok &= np.asarray(ca) == np.asarray(cb)[cand]
    out[ok] = cand[ok]
    return out


def _ffill_index(mask):
    """For each position, the latest position <= it where mask is set, or -1."""
    idx = np.where(mask, np.arange(len(mask)), -1)
    return np.maximum.accumulate(idx) if len(idx) else idx


def _table(dtype, **cols):
    """A record array of dtype from equal-length columns (fields not given are 0)."""
    n = len(next(iter(cols.values())))
    out = np.zeros(n, dtype)
    for k, v in cols.items():
        out[k] = v
    return out


def _route(ex, rows, dest_ranks=None, keys=None):
    if dest_ranks is not None:
        return ex.route(rows, ex.owner(dest_ranks))
    return ex.route(rows, ex.owner_of_keys(keys))


# ---------------------------------------------------------------- point-to-point

class _Published:
    """One value per message (the enter of the call that posted it), from the processes
    owning one end of the messages to those owning the other end.

    Every process knows every channel and, after one reduction, how many messages each
    carries. So all can lay the messages out alike without sending any key: by the
    process owning the publishing end, then the process owning the other end, then
    channel, then number on the channel. A process fills its part of that layout with
    its values (a scatter), the parts go to the processes that need them in one
    exchange of bare values, and a message's value is found again from its channel and
    number (a gather). In one process the layout is simply one slot per message."""

    def __init__(self, L, ex, rows, values, publisher):
        """rows (chan, seq): the messages as the publishing end sees them; values: one
        per row; publisher: "src" (rows are sends) or "dst" (receives)."""
        ch = L.channels
        nch, P, me = L.nchan, ex.nproc, ex.me
        pub, qry = (ch[:, 0], ch[:, 1]) if publisher == "src" else (ch[:, 1], ch[:, 0])
        pp, qp = ex.owner(pub), ex.owner(qry)
        chan, seq = rows["chan"], rows["seq"]
        self.count = ex.allreduce(np.bincount(chan, minlength=nch).astype(np.int64), "sum")
        pair = pp * P + qp
        order = np.argsort(pair, kind="stable")              # (pp, qp), then channel
        first = np.empty(nch, np.int64)
        first[order] = np.cumsum(self.count[order]) - self.count[order]
        block = np.bincount(pair, weights=self.count, minlength=P * P).astype(np.int64)
        block_first = np.cumsum(block) - block
        mine = block[me * P:(me + 1) * P]                       # what this process sends
        buf = np.empty(int(mine.sum()), np.int64)
        buf[first[chan] + seq - block_first[me * P]] = values
        self.values = ex.alltoallv(buf, mine)
        # where the messages of each channel this process asks about start in values
        from_p = block[np.arange(P) * P + me]
        displ = np.cumsum(from_p) - from_p
        self.first = displ[pp] + first - block_first[pp * P + me]

    def get(self, rows):
        """For each row (chan, seq) of the asking end: (the message's value, whether the
        publishing end has that message)."""
        chan, seq = rows["chan"], rows["seq"]
        ok = seq < self.count[chan]
        out = np.zeros(len(chan), np.int64)
        out[ok] = self.values[self.first[chan[ok]] + seq[ok]]
        return out, ok


def _run_max(group, values):
    """For rows sorted by group: the row of each group's largest value (first if tied)."""
    start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    gid = np.cumsum(np.r_[True, group[1:] != group[:-1]]) - 1
    mx = np.maximum.reduceat(values, start)
    cand = np.where(values == mx[gid], np.arange(len(values)), len(values))
    return np.minimum.reduceat(cand, start)


class _Slots:
    """Messages of a table `other` (chan, seq) by slot: the messages of a channel get
    consecutive slots (its offset plus the message's number), so that finding a
    message is one gather, without a sort or a join."""

    def __init__(self, other, nchan):
        ch, seq = other["chan"], other["seq"]
        self.count = np.bincount(ch, minlength=nchan)
        self.first = np.cumsum(self.count) - self.count
        ok = seq < self.count[ch]
        self.row = np.full(len(ch), -1, np.int64)
        self.row[(self.first[ch] + seq)[ok]] = np.flatnonzero(ok)

    def find(self, rows):
        """For each row of rows, the index of the row of `other` for the same message
        (channel, number), or -1."""
        out = np.full(len(rows), -1, np.int64)
        if not len(self.row):
            return out
        ch, seq = rows["chan"], rows["seq"]
        ok = seq < self.count[ch]
        out[ok] = self.row[self.first[ch[ok]] + seq[ok]]
        return out


def _match(rows, other, nchan):
    """For each row of `rows`, the index of the row of `other` for the same message, or
    -1 (_Slots)."""
    return _Slots(other, nchan).find(rows)


CHUNK = 1 << 18     # rows of a batch: the temporaries of a batch stay in cache


def message_pairs(L):
    """Every message of a trace loaded in one process, matched as the analysis matches
    them: (the SEND_COLS rows, the RECV_COLS rows; with "src" and "dst"), one row of
    each per message."""
    m = _match(L.recvs, L.sends, L.nchan)
    ok = np.flatnonzero(m >= 0)
    S, V = L.sends.take(m[ok]), L.recvs.take(ok)
    S["src"], V["dst"] = L.rank_at("sends", m[ok]), L.rank_at("recvs", ok)
    return S, V


def point_to_point(L, ex, acc, notes, deferred=None):
    """Late Sender (and Wrong Order) on the receivers' side, Late Receiver on the
    senders', in batches of whole ranks. deferred: the DEFER rows of collectives()
    (nonblocking collectives completed in multi-waits), charged here: a multi-wait is
    one wait, for the request it waited for longest, a message or a collective."""
    S, V = L.sends, L.recvs
    sent = _Published(L, ex, S, S["e"], "src")       # the send's enter, at the receiver
    ls_call = np.zeros(L.ncalls, bool)      # multi-waits with a wait charged
    multi = _MultiWaits(L.ncalls, deferred)
    for a, b in L.chunks("recvs"):
        _late_sender(V[a:b], sent, ls_call, multi, acc, notes, L.locations)
    del sent
    multi.charge(acc, ls_call)
    posted = _Published(L, ex, V, V["e"], "dst")     # the receive's post, at the sender
    for a, b in L.chunks("sends"):
        _late_receiver(S[a:b], posted, ls_call, acc, notes)


class _MultiWaits:
    """The waits of nonblocking collectives completed in multi-waits (DEFER rows) and of
    the Late Senders in the same calls: each call is charged the largest, once."""

    def __init__(self, ncalls, deferred):
        self.rows = deferred if deferred is not None and len(deferred) else None
        if self.rows is None:
            return
        d = self.rows
        # per call: the collectives' largest wait, and the row that has it
        o = np.lexsort((-d["value"], d["wcall"]))
        first = np.r_[True, d["wcall"][o][1:] != d["wcall"][o][:-1]]
        self.best = d[o[first]]
        self.coll = np.full(ncalls, -1, np.int64)
        self.coll[self.best["wcall"]] = self.best["value"]
        self.ls = np.zeros(ncalls, np.int64)       # per call: its Late Sender's wait

    def keep_late_senders(self, call, idle):
        """Of Late Sender instances in multi-waits (calls, waits): those that win over
        the collectives of their call; their waits are noted."""
        if self.rows is None:
            return np.ones(len(call), bool)
        self.ls[call] = idle
        return idle > self.coll[call]

    def charge(self, acc, waited):
        """Charge the collectives that won (waited: calls with a wait, updated)."""
        if self.rows is None:
            return
        b = self.best[self.best["value"] >= self.ls[self.best["wcall"]]]
        acc.add_many(b["metric"], b["path"], b["rank"], b["value"])
        c = b[b["cmetric"] >= 0]
        acc.add_many(c["cmetric"], c["path"], c["rank"], c["cvalue"])
        waited[b["wcall"][b["value"] > 0]] = True


def _late_sender(V, sent, ls_call, multi, acc, notes, threads=None):
    e_send, matched = sent.get(V)
    rc, role = V["call"], V["role"]
    idle = np.minimum(e_send, V["ce"]) - V["cb"]
    ls = matched & (role != R["test"]) & (idle > 0)
    is_multi = role == R["waitmulti"]
    # a multi-wait is one instance, of its latest sender (rc is sorted along the rows)
    lm = np.flatnonzero(ls & is_multi)
    inst = ls & ~is_multi
    if len(lm):
        top = lm[_run_max(rc[lm], idle[lm])]
        inst[top[multi.keep_late_senders(rc[top], idle[top])]] = True
    inst_rows = np.flatnonzero(inst)
    ls_call[rc[lm]] = True
    ip = V["path"][inst_rows]
    irank = V["dst"][inst_rows]
    acc.add("mpi_latesender", ip, irank, idle[inst_rows])
    acc.add("mpi_latesender_count", ip, irank, np.ones(len(inst_rows), np.int64))
    _wrong_order(V, matched, e_send, inst_rows, idle, acc, threads)
    nm = int(np.count_nonzero(matched))
    notes["unmatched_receives"] += len(matched) - nm
    notes["messages"] += nm


def _late_receiver(S, posted, ls_call, acc, notes):
    e_rq, matched = posted.get(S)
    cc = S["call"]
    ok = matched & (cc >= 0)
    lr_idle = np.where(S["ce"] <= e_rq, 0, e_rq - S["cb"])
    crole = S["role"]
    # a send that may block until the receive is posted: MPI_Send and MPI_Ssend (not
    # Bsend, Rsend, nor Sendrecv, whose own receive would look like the send's wait),
    # or the single MPI_Wait of a nonblocking send (as Scalasca's is_mpi_block_send)
    waits = ok & (lr_idle > 0)
    single = waits & (((S["nb"] == 0) & (crole == R["block_send"])) | (crole == R["wait"]))
    mw = np.flatnonzero(waits & (crole == R["waitmulti"]))
    mw = mw[~ls_call[cc[mw]]]
    if len(mw):
        mw = mw[np.argsort(cc[mw], kind="stable")]
        single[mw[_run_max(cc[mw], lr_idle[mw])]] = True
    lr_rows = np.flatnonzero(single)
    lp = S["path"][lr_rows]
    lrank = S["src"][lr_rows]
    acc.add("mpi_latereceiver", lp, lrank, lr_idle[lr_rows])
    acc.add("mpi_latereceiver_count", lp, lrank, np.ones(len(lr_rows), np.int64))
    notes["unmatched_sends"] += len(matched) - int(np.count_nonzero(matched))


def _wrong_order(V, matched, e_send, inst_rows, idle, acc, threads=None):
    """Late Sender, Wrong Order: a Late Sender instance is re-charged as wrong order when
    a later receive of the same location (while the instance is among the location's
    last WO_BUFFER instances) gets a message that was sent before the instance's
    message. A location is a rank, or a thread of it (threads: the first call of each
    (rank, thread), given when a rank has several): as in Scalasca, the order of
    receives is that of one thread; threads that receive side by side have none.
    Same / different sources compare the two messages' senders."""
    if not len(inst_rows):
        return
    rc = V["call"]
    # the location of each row: non-decreasing along the rows (calls are in location
    # order), like the ranks
    loc = V["dst"] if threads is None else np.searchsorted(threads, rc, "right") - 1
    seq = np.flatnonzero(matched)             # receives in processing order (rows of V)
    s_time = e_send[seq]
    s_call = rc[seq]
    s_loc = loc[seq]
    s_src = V["src"][seq]
    i_call = rc[inst_rows]
    i_loc = loc[inst_rows]
    i_time = e_send[inst_rows]
    i_src = V["src"][inst_rows]
    # window: receives after the instance's call, up to the call of the instance
    # WO_BUFFER later at the same location (when it pushes this one out)
    start = np.searchsorted(s_call, i_call, "right")
    order = np.lexsort((i_call, i_loc))
    ir, ic = i_loc[order], i_call[order]
    later = np.arange(len(order)) + WO_BUFFER
    end_call = np.full(len(order), np.iinfo(np.int64).max)
    valid = later < len(order)
    valid[valid] &= ir[later[valid]] == ir[valid]
    end_call[valid] = ic[later[valid]]
    loc_end = np.searchsorted(s_loc, ir, "right")
    end = np.empty(len(order), np.int64)
    end[order] = np.minimum(np.searchsorted(s_call, end_call, "right"), loc_end)
    # the first receive in [start, end) whose message was sent before the instance's,
    # one location at a time with a sparse table of minima (small, cache-resident): is
    # there one (the minimum of the window, from two overlapping blocks)? then where
    # (descend)
    pos = end.copy()
    locs = np.unique(i_loc)           # instances come in location order, like receives
    ia, ib = np.searchsorted(i_loc, locs), np.searchsorted(i_loc, locs, "right")
    ra, rb = np.searchsorted(s_loc, locs), np.searchsorted(s_loc, locs, "right")
    for qa, qb, a, b in zip(ia.tolist(), ib.tolist(), ra.tolist(), rb.tolist()):
        p, e, t = start[qa:qb] - a, end[qa:qb] - a, i_time[qa:qb]
        width = e - p
        span = int(width.max(initial=0))
        if a >= b or span <= 0:
            continue
        table = np.full((max(span.bit_length(), 1), b - a), MAX64, np.int64)
        table[0] = s_time[a:b]
        for lv in range(1, len(table)):
            k = 1 << (lv - 1)
            np.minimum(table[lv - 1, :b - a - k], table[lv - 1, k:], out=table[lv, :b - a - k])
        ok = width > 0
        lv = np.zeros(len(p), np.int64)
        lv[ok] = np.log2(width[ok]).astype(np.int64)
        lo = table[lv, np.minimum(p, b - a - 1)]
        hi = table[lv, np.clip(e - (1 << lv), 0, b - a - 1)]
        q = np.flatnonzero(ok & (np.minimum(lo, hi) < t))
        if not len(q):
            continue
        pq, eq, tq = p[q], e[q], t[q]
        for lv in range(len(table) - 1, -1, -1):
            w = 1 << lv
            step = (pq + w <= eq) & (table[lv, np.minimum(pq, b - a - 1)] >= tq)
            pq = np.where(step, pq + w, pq)
        pos[qa + q] = pq + a
    n = len(seq)
    found = pos < end
    found[found] &= s_time[np.minimum(pos[found], n - 1)] < i_time[found]
    f = np.flatnonzero(found)
    same = s_src[pos[f]] == i_src[f]
    path = V["path"][inst_rows[f]]
    rank = V["dst"][inst_rows[f]]
    acc.add("mpi_latesender_wo", path, rank, idle[inst_rows[f]])
    acc.add("mpi_lswo_same", path[same], rank[same], idle[inst_rows[f]][same])
    acc.add("mpi_lswo_different", path[~same], rank[~same], idle[inst_rows[f]][~same])


# ---------------------------------------------------------------- collectives

COLLS = np.dtype([("key", "<i8"), ("seq", "<i8"), ("rank", "<i4"), ("path", "<i4"),
                  ("role", "<i2"), ("nb", "u1"), ("sent", "u1"), ("recv", "u1"),
                  ("root", "u1"), ("pad", "<u2"), ("csize", "<i4"), ("crank", "<i4"),
                  ("b", "<i8"), ("e", "<i8"), ("w", "<i8"), ("wpath", "<i4"),
                  ("wcall", "<i4")])


def _take(rows, index):
    """rows[index] for a table: Cols column by column; a record array by whole records
    (faster than numpy's field-by-field fancy indexing of structured arrays)."""
    if isinstance(rows, Cols):
        return rows.take(index)
    v = rows.view(np.dtype((np.void, rows.dtype.itemsize)))
    return v[index].view(rows.dtype)


class _Instances:
    """Rows of collective-like operations grouped by instance (key, seq), without
    sorting them: each row's instance gets a number (0..n-1, by hashing), and
    per-instance reductions scatter into arrays of n (ufunc.at). `ok`: the instances
    that hold a whole blocking operation of one kind (every member's row, no
    nonblocking one, one role)."""

    def __init__(self, here):
        self.here = here
        n = len(here)
        self.n = 0
        if not n:
            self.ok = np.zeros(0, bool)
            self._gid = np.zeros(0, np.int64)
            return
        key, seq = here["key"], here["seq"]
        ukey, kid = dense_ids(key)
        if int(seq.min()) >= 0 and int(seq.max()) < 2 ** 40 and len(ukey) < 2 ** 23:
            uinst, self._gid = dense_ids((kid << 40) | seq)
            self.n = len(uinst)
        else:
            order = np.lexsort((seq, kid))
            k, q = kid[order], seq[order]
            change = np.r_[True, (k[1:] != k[:-1]) | (q[1:] != q[:-1])]
            self._gid = np.empty(n, np.int64)
            self._gid[order] = np.cumsum(change) - 1
            self.n = int(change.sum())
        count = np.bincount(self._gid, minlength=self.n)
        csize = here["csize"]
        role = here["role"]
        self.ok = (count == self.max(csize)) & (self.min(csize) == self.max(csize)) & \
            (self.max(here["nb"]) == 0) & (self.min(role) == self.max(role))

    def gid(self):
        return self._gid

    def max(self, values):
        """Per instance: the largest of values (the int64 minimum if none)."""
        out = np.full(self.n, MIN64, np.int64)
        np.maximum.at(out, self._gid, values)
        return out

    def min(self, values):
        out = np.full(self.n, MAX64, np.int64)
        np.minimum.at(out, self._gid, values)
        return out


def _instances(L, ex, rows):
    """Route collective-like rows (COLL_COLS, as Cols or COLLS records) to the owner of
    their instance (key, seq) and group them there (_Instances)."""
    if ex.parallel:
        if isinstance(rows, Cols):
            rows = _table(COLLS, **{k: v for k, v in rows.items() if k in COLLS.names})
        rows = _route(ex, rows, keys=_hash_cols(rows["key"], rows["seq"]))
    return _Instances(rows)


def _kind(t):
    """What the rows of one instance must agree on, as one number: the role, nonblocking
    or not (MPI matches neither with the other), and whether a nonblocking one was left
    open (never completed). Its minimum and maximum over an instance are equal when they
    agree."""
    f = t["flags"].astype(np.int64)
    return t["role"].astype(np.int64) * 4 + (f & COLL_FLAGS["nb"]) * 2 + \
        ((f & COLL_FLAGS["open"]) != 0)


# what the collective patterns need of each instance: (reduction, value of a row,
# roles that need it: None for all). b is the enter of the call that started the
# operation on a rank (MPI_Ibarrier or MPI_Barrier), e the exit of the call that
# completed it.
COLL_SUMMARY = {
    "count": ("sum", lambda t: np.ones(len(t), np.int64), None),
    "kmin": ("min", _kind, None),
    "kmax": ("max", _kind, None),
    "latest": ("max", lambda t: t["b"], None),
    "earliest_end": ("min", lambda t: t["e"], None),
    "latest_sender": ("max", lambda t: np.where(t["sent"] > 0, t["b"], MIN64),
                      ("n2n", "n21")),
    "root_b": ("max", lambda t: np.where(t["root"] > 0, t["b"], MIN64), ("12n",)),
    "root_sent": ("max", lambda t: (t["sent"] > 0) & (t["root"] > 0), ("12n",)),
}
_UFUNC = {"max": (np.maximum, MIN64), "min": (np.minimum, MAX64), "sum": (np.add, 0)}

# (wait metric, completion metric or None) of each collective role
COLL_METRICS = {"barrier": ("mpi_barrier_wait", "mpi_barrier_completion"),
                "n2n": ("mpi_wait_nxn", "mpi_nxn_completion"),
                "12n": ("mpi_latebroadcast", None), "n21": ("mpi_earlyreduce", None),
                "scan": ("mpi_earlyscan", None)}

# a nonblocking collective completed in a multi-wait, charged once the call's other
# waits are known (_charge_multiwaits): the call, the rank, its path, the metrics
# (MT.INDEX; -1 none) and values of the wait and of the completion
DEFER = np.dtype([("wcall", "<i8"), ("rank", "<i4"), ("path", "<i4"), ("metric", "<i4"),
                  ("cmetric", "<i4"), ("value", "<i8"), ("cvalue", "<i8")])


def _deferred(wcall, rank, path, role, value, cvalue):
    """DEFER rows for collectives of one role."""
    m, cm = COLL_METRICS[role]
    return _table(DEFER, wcall=wcall, rank=rank, path=path, metric=MT.INDEX[m],
                  cmetric=MT.INDEX[cm] if cm else -1, value=value, cvalue=cvalue)


def _waiting(L, nb, wpath):
    """(rows charged now, rows of multi-waits deferred) among rows of collectives (nb:
    nonblocking, wpath: the path of the call that completed it), or (None, None) when
    all are charged now: a nonblocking operation's wait is in the call that completed
    it; not charged when that is an MPI_Test* (the rank did not wait there, as for Late
    Sender); deferred when it is a multi-wait, which may have waited for other requests
    too."""
    nb = nb != 0
    if not nb.any():
        return None, None
    wrole = L.path_role[wpath]
    return ~(nb & ((wrole == R["test"]) | (wrole == R["waitmulti"]))), \
        nb & (wrole == R["waitmulti"])


def collectives(L, ex, acc, notes):
    """Waits at collective operations (Scalasca's definitions). Each process sums up
    the instances over its own rows (the latest enter, the earliest exit, ...), the
    processes combine those summaries (one reduction per kind, as many values as there
    are instances: far less than the rows), and each process then charges its own
    rows, in batches. An instance is an offset per communicator plus the operation's
    number on it, the same in every process.

    A nonblocking operation is an instance like a blocking one (MPI orders both kinds
    alike on a communicator); it starts at the enter of the MPI_I... call and the rank
    waits for it in the call that completes it: the blocking twin's formula, with the
    wait starting at that call's enter (w) instead of b. Returns the DEFER rows of those
    completed in multi-waits, each at the process that owns its rank."""
    C = L.colls
    key, seq = C["key"], C["seq"]
    last = np.full(len(L.comm_keys), -1, np.int64)
    if len(C):
        np.maximum.at(last, key.astype(np.intp), seq.astype(np.int64))
    used = np.flatnonzero(np.bincount(C["path"], minlength=len(L.paths)))
    roles = np.bincount(L.path_role[used], minlength=len(R))
    # communicator sizes: from the definitions (a process knows those of its ranks)
    csize = np.array([len(L.comms.get(int(k), ())) for k in L.comm_keys], np.int64)
    nk = len(last)
    every = ex.allreduce(np.r_[last, csize, roles > 0].astype(np.int64), "max")
    last, csize, roles = every[:nk], every[nk:2 * nk], every[2 * nk:]
    size = last + 1
    base = np.cumsum(size) - size
    ninst = int(size.sum())
    deferred = [np.zeros(0, DEFER)]
    if not ninst:
        return deferred[0]
    need = {k: v for k, v in COLL_SUMMARY.items()
            if v[2] is None or any(roles[R[r]] for r in v[2])}
    chunks = [(a, min(a + CHUNK, len(C))) for a in range(0, len(C), CHUNK)]
    S = {k: np.full(ninst, _UFUNC[op][1], np.int64) for k, (op, _, _) in need.items()}
    for a, z in chunks:
        rows = C[a:z]
        g = base[rows["key"]] + rows["seq"]
        for k, (op, f, _) in need.items():
            _UFUNC[op][0].at(S[k], g, np.asarray(f(rows)).astype(np.int64, copy=False))
    for op in ("max", "min", "sum"):        # one reduction per kind over the processes
        names = [k for k, (o, _, _) in need.items() if o == op]
        if names:
            S.update(zip(names, ex.allreduce(np.stack([S[k] for k in names]), op)))
    # an instance is whole when every member of its communicator took part, all alike,
    # and none left it open
    present = S["count"] > 0
    ok = present & (S["count"] == np.repeat(csize, size)) & (S["kmin"] == S["kmax"]) & \
        ((S["kmax"] & 1) == 0)
    if ex.me == 0:
        notes["collectives"] += int(ok.sum())
        notes["incomplete_collectives"] += int((present & ~ok).sum())
    scans = []
    for a, z in chunks:
        here = C[a:z]
        gid = base[here["key"]] + here["seq"]
        e, w, role = here["e"], here["w"], here["role"]
        latest, earliest_end = S["latest"][gid], S["earliest_end"][gid]
        okr = ok[gid]
        now, later = _waiting(L, here["flags"] & COLL_FLAGS["nb"], here["wpath"])
        charge = okr if now is None else okr & now
        wait_full = np.maximum(0, np.minimum(latest, e) - w)
        completion = np.maximum(0, e - np.maximum(np.maximum(earliest_end,
                                                             np.minimum(latest, e)), w))
        batch = acc.rows(here["wpath"], here["rank"])
        values = {}
        bar = role == R["barrier"]
        if bar.any():
            values["barrier"] = (bar, wait_full, completion)
        n2n = role == R["n2n"]
        if n2n.any():
            latest_sender = S["latest_sender"][gid]
            overlap = earliest_end > latest
            w_partial = np.where((here["recv"] > 0) & (w < latest_sender),
                                 np.maximum(0, np.minimum(latest_sender, e) - w), 0)
            values["n2n"] = (n2n, np.where(overlap, wait_full, w_partial), completion)
        o2n = role == R["12n"]
        if o2n.any():
            root_b = S["root_b"][gid]
            o2n &= (S["root_sent"][gid] > 0) & (here["root"] == 0) & (here["recv"] > 0)
            values["12n"] = (o2n & (w < root_b), np.maximum(0, np.minimum(root_b, e) - w),
                             None)
        n21 = role == R["n21"]
        if n21.any():
            latest_sender = S["latest_sender"][gid]
            n21 &= (here["root"] > 0) & (w < latest_sender)
            values["n21"] = (n21, np.maximum(0, np.minimum(latest_sender, e) - w), None)
        for r, (mask, wait, comp) in values.items():
            m, cm = COLL_METRICS[r]
            batch.add(m, wait, mask & charge)
            if cm:
                batch.add(cm, comp, mask & charge)
            if later is not None:
                d = np.flatnonzero(mask & okr & later)
                if len(d):
                    deferred.append(_deferred(
                        here["wcall"][d], here["rank"][d], here["wpath"][d], r, wait[d],
                        comp[d] if comp is not None else 0))
        scan = np.flatnonzero(role == R["scan"])
        if len(scan):
            scans.append(a + scan)
    if not roles[R["scan"]]:           # no process has scans: nothing to route
        return np.concatenate(deferred)
    scans = np.concatenate(scans) if scans else np.zeros(0, np.int64)
    rows = C.take(scans)
    rows["rank"] = L.rank_at("colls", scans)
    rows["role"] = L.path_role[rows["path"]]
    rows["csize"], rows["crank"] = _comm_place(L, rows["key"], rows["rank"])
    for k, bit in COLL_FLAGS.items():
        rows[k] = ((rows["flags"] & bit) != 0).view(np.uint8)
    deferred.append(_early_scan(L, ex, rows, ok, base, acc))
    return np.concatenate(deferred)


def _early_scan(L, ex, rows, ok, base, acc):
    """Early Scan: at each rank, the wait for the latest start among the ranks before it
    (in communicator order) and itself that send. The rows of an instance come together
    at one process (rare operations: routed, not summarised). Returns the DEFER rows of
    nonblocking scans completed in multi-waits, sent back to the process of their rank."""
    X = _instances(L, ex, rows)
    here = X.here
    none = np.zeros(0, DEFER)
    if not len(here):
        return _route(ex, none, dest_ranks=none["rank"]) if ex.parallel else none
    gid = X.gid()
    o = np.lexsort((here["crank"], gid))
    here, gid = _take(here, o), gid[o]
    b, e, w = here["b"], here["e"], here["w"]
    pm = np.where(here["sent"] > 0, b, MIN64)
    run = _group_cummax(gid, pm)
    inst = base[here["key"]] + here["seq"]
    wait = np.maximum(0, np.minimum(run, e) - w)
    okr = ok[inst]
    now, later = _waiting(L, here["nb"], here["wpath"])
    acc.add("mpi_earlyscan", here["wpath"], here["rank"], wait,
            okr if now is None else okr & now)
    d = np.flatnonzero(okr & later) if later is not None else []
    out = _deferred(here["wcall"][d], here["rank"][d], here["wpath"][d], "scan", wait[d],
                    0) if len(d) else none
    return _route(ex, out, dest_ranks=out["rank"]) if ex.parallel else out


def _group_cummax(group, values):
    """Running maximum of values restarted at each group (rows sorted by group): one
    running maximum over (group, rank of the value), which groups cannot mix."""
    if not len(values):
        return values.copy()
    order = np.argsort(values, kind="stable")
    rank = np.empty(len(values), np.int64)
    rank[order] = np.arange(len(values))
    g = np.cumsum(np.r_[False, group[1:] != group[:-1]])
    run = np.maximum.accumulate(g * len(values) + rank) - g * len(values)
    return values[order[run]]


def _comm_geometry(L, rows, ckeys, ranks):
    """Fill csize and crank (the rank's position in the communicator) of rows; csize -1
    for a communicator without definition."""
    for k in np.unique(ckeys):
        sel = ckeys == k
        m = L.comms.get(int(k))
        if m is None or not len(m):
            rows["csize"][sel] = -1
            continue
        rows["csize"][sel] = len(m)
        srt = np.argsort(m, kind="stable")
        pos = np.searchsorted(m[srt], ranks[sel])
        pos = np.minimum(pos, len(m) - 1)
        rows["crank"][sel] = np.where(m[srt][pos] == ranks[sel], srt[pos], -1)


# ---------------------------------------------------------------- one-sided

OPS = np.dtype([("key", "<i8"), ("seq", "<i8"), ("target", "<i4"), ("origin", "<i4"),
                ("l", "<i8")])
PAIRS = np.dtype([("o", "<i4"), ("t", "<i4"), ("win", "<i8"), ("pseq", "<i8"),
                  ("epoch", "<i8"), ("x", "<i8"), ("y", "<i8"), ("acc", "<i8")])


def _window_timeline(L):
    """Window events (WSYNC, RMA) of every rank in call order, with per (rank, window)
    counts: the fences before each, and the latest synchronisation role."""
    ev, calls = L.wevents, L.wcalls
    wi = np.flatnonzero(WINDOW_EVENTS[ev["type"]])
    order = np.lexsort((wi, ev["win"][wi], ev["rank"][wi]))
    wi = wi[order]
    role = calls["role"][ev["call"][wi]]
    rank, win = ev["rank"][wi], ev["win"][wi]
    newgrp = np.r_[True, (rank[1:] != rank[:-1]) | (win[1:] != win[:-1])]
    gstart = np.flatnonzero(newgrp)
    gidx = np.cumsum(newgrp) - 1

    def count_before(mask):
        c = np.cumsum(mask)
        base = np.r_[0, c[gstart[1:] - 1]] if len(gstart) else np.zeros(0, np.int64)
        return c - mask - base[gidx]   # strictly before, within the group

    is_sync = ev["type"][wi] == T["WSYNC"]
    last = _ffill_index(is_sync)
    same = (last >= 0)
    same[same] &= gidx[np.maximum(last[same], 0)] == gidx[same]
    last_role = np.where(same, role[np.maximum(last, 0)], -1)
    return wi, role, count_before, last_role, gidx


def rma(L, ex, acc, notes):
    ev, calls = L.wevents, L.wcalls
    if not (WINDOW_EVENTS[ev["type"]].any() or (ev["type"] == T["WIN"]).any()):
        return
    wi, role, count_before, last_role, gidx = _window_timeline(L)
    typ = ev["type"][wi]
    is_op = typ == T["RMA"]
    fence = (typ == T["WSYNC"]) & (role == R["win_fence"])
    start = (typ == T["WSYNC"]) & (role == R["win_start"])
    fences_before = count_before(fence)
    starts_before = count_before(start)
    rank, win = ev["rank"][wi], ev["win"][wi]
    call = ev["call"][wi]
    b, e = calls["t0"][call], calls["t1"][call]
    path = calls["path"][call]

    # ---- fences: instances (window, k); the ops of epoch k to each target ----
    fi = np.flatnonzero(fence)
    frows = _table(COLLS, key=win[fi], seq=fences_before[fi], rank=rank[fi], path=path[fi],
                   role=np.full(len(fi), R["win_fence"]), b=b[fi], e=e[fi])
    uw, wix = np.unique(win[fi], return_inverse=True)
    ckeys = np.array([L.windows.get(int(w), 0) for w in uw.tolist()], np.int64)[wix.reshape(-1)]
    _comm_geometry(L, frows, ckeys, rank[fi])
    fop = np.flatnonzero(is_op & (last_role == R["win_fence"]))
    orows = _table(OPS, key=win[fop], seq=fences_before[fop], target=ev["peer"][wi[fop]],
                   origin=rank[fop], l=e[fop])
    ops_there = _route(ex, orows, keys=_hash_cols(orows["key"], orows["seq"]))
    X = _instances(L, ex, frows)
    here, gid, ok = X.here, X.gid(), X.ok
    if len(here):
        latest = X.max(here["b"])[gid]
        earliest_end = X.min(here["e"])[gid]
        hb, he = here["b"], here["e"]
        waf = np.where((earliest_end > latest) & (hb < latest), latest - hb, 0)
        # ops to each (window, epoch, target): latest end, number of distinct origins
        o2, s2, _ = _groups(ops_there["key"], ops_there["seq"], ops_there["target"],
                            ops_there["origin"])
        ot = _take(ops_there, o2)
        if len(ot):
            last_l = np.maximum.reduceat(ot["l"], s2)
            firsts = ot[s2]
            o3, s3, g3 = _groups(firsts["key"], firsts["seq"], firsts["target"])
            f3 = firsts[o3]
            norig = np.diff(np.r_[s3, len(f3)])
            lastl_t = np.maximum.reduceat(last_l[o3], s3)
            tk = f3[s3]
            j = _join([here["key"], here["seq"], here["rank"]],
                      [tk["key"], tk["seq"], tk["target"]])
        else:
            j = np.full(len(here), -1)
            norig = lastl_t = np.zeros(0, np.int64)
        has = j >= 0
        lastop = np.where(has, lastl_t[np.maximum(j, 0)] if len(lastl_t) else 0,
                          np.iinfo(np.int64).min)
        norigins = np.where(has, norig[np.maximum(j, 0)] if len(norig) else 0, 0)
        okr = ok[gid]
        ef = np.where((waf > 0) & (lastop > hb) & (lastop <= he), lastop - hb, 0)
        acc.add("mpi_rma_wait_at_fence", here["path"][okr], here["rank"][okr], waf[okr])
        acc.add("mpi_rma_early_fence", here["path"][okr], here["rank"][okr], ef[okr])
        csz = np.maximum(here["csize"], 0)
        acc.add("mpi_rma_pairsync_count", here["path"], here["rank"], csz)
        acc.add("mpi_rma_pairsync_unneeded_count", here["path"], here["rank"],
                np.maximum(csz - norigins, 0))
        notes["fences"] += int(ok.sum())

    _gats(L, ex, acc, notes, wi, role, typ, rank, win, call, b, e, path, is_op, start,
          starts_before, last_role, count_before)
    _window_create_free(L, ex, acc, notes)


def _explode(groups_of_rank, ranks, gids):
    """Rows (epoch index, member) for epochs with group ids gids on ranks: one row per
    member of each epoch's group, without a loop over epochs."""
    if not len(ranks):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs = np.stack([ranks.astype(np.int64), gids.astype(np.int64)])
    uniq, inv = np.unique(pairs, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    members = []
    for r, g in uniq.T.tolist():          # distinct (rank, group): few
        gl = groups_of_rank.get(r, [])
        members.append(gl[g].astype(np.int64) if 0 <= g < len(gl) else
                       np.zeros(0, np.int64))
    size = np.array([len(m) for m in members], np.int64)
    offs = np.cumsum(size) - size
    flat = np.concatenate(members) if members else np.zeros(0, np.int64)
    n = size[inv]
    ep = np.repeat(np.arange(len(ranks)), n)
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    return ep, flat[offs[inv][ep] + within]


def _pair_epochs(opens, closes, rank, win):
    """Pair the i-th opening with the i-th closing event of each (rank, window)."""
    def nth(ix):
        return _seq([rank[ix], win[ix]], [ix])
    no, nc = nth(opens), nth(closes)
    j = _join([rank[opens], win[opens], no], [rank[closes], win[closes], nc])
    return np.where(j >= 0, closes[np.maximum(j, 0)], -1)


def _gats(L, ex, acc, notes, wi, role, typ, rank, win, call, b, e, path, is_op, start,
          starts_before, last_role, count_before):
    ev = L.wevents
    sync = typ == T["WSYNC"]
    group = ev["group"][wi]
    # ---- access epochs: Win_start .. Win_complete on the origin ----
    st = np.flatnonzero(start)
    cp = np.flatnonzero(sync & (role == R["win_complete"]))
    cl = _pair_epochs(st, cp, rank, win)
    good = cl >= 0
    st, cl = st[good], cl[good]
    ops = np.flatnonzero(is_op & (last_role == R["win_start"]))
    op_epoch = np.searchsorted(st, ops, "right") - 1   # the start before the op (same group)
    okop = op_epoch >= 0
    okop[okop] &= (rank[st[op_epoch[okop]]] == rank[ops[okop]]) & \
        (win[st[op_epoch[okop]]] == win[ops[okop]])
    ops, op_epoch = ops[okop], op_epoch[okop]
    op_target = ev["peer"][wi[ops]]
    # per (epoch, target): last op end, or the start's end when there is none
    ep, mem = _explode(L.groups, rank[st], group[st])
    a_rows = np.zeros(len(ep), PAIRS)
    a_rows["o"] = rank[st][ep]
    a_rows["t"] = mem
    a_rows["win"] = win[st][ep]
    a_rows["epoch"] = ep
    a_rows["pseq"] = _seq([a_rows["o"], a_rows["t"], a_rows["win"]], [ep])
    keys_u, lastop_u = _uniq_max(op_epoch, op_target, e[ops])
    j = _join([a_rows["epoch"], a_rows["t"]], keys_u)
    accessed = j >= 0
    a_rows["acc"] = accessed
    a_rows["x"] = b[cl][ep]                                          # complete enter
    a_rows["y"] = np.where(accessed, lastop_u[np.maximum(j, 0)] if len(lastop_u) else 0,
                           e[st][ep])                                # last op end
    # pair-wise synchronisations at the complete: group members, unneeded: not accessed
    gsize = np.bincount(ep, minlength=len(st))
    nacc = np.bincount(ep, weights=accessed, minlength=len(st)).astype(np.int64)
    acc.add("mpi_rma_pairsync_count", path[cl], rank[cl], gsize)
    acc.add("mpi_rma_pairsync_unneeded_count", path[cl], rank[cl], gsize - nacc)

    # ---- exposure epochs: Win_post .. Win_wait (or a Win_test that completed) ----
    po = np.flatnonzero(sync & (role == R["win_post"]))
    closer = sync & ((role == R["win_wait"]) |
                     ((role == R["win_test"]) & ((ev["flags"][wi] & F["DONE"]) != 0)))
    wt = _pair_epochs(po, np.flatnonzero(closer), rank, win)
    good = wt >= 0
    po, wt = po[good], wt[good]
    ep2, mem2 = _explode(L.groups, rank[po], group[po])
    t_rows = np.zeros(len(ep2), PAIRS)
    t_rows["o"] = mem2
    t_rows["t"] = rank[po][ep2]
    t_rows["win"] = win[po][ep2]
    t_rows["epoch"] = ep2
    t_rows["pseq"] = _seq([t_rows["o"], t_rows["t"], t_rows["win"]], [ep2])
    t_rows["x"] = b[po][ep2]                                         # post enter
    key = ("o", "t", "win", "pseq")

    # origin side: the targets' post enters come to the origin's process
    posts_here = _route(ex, t_rows, dest_ranks=t_rows["o"])
    jp = _join([a_rows[k] for k in key], [posts_here[k] for k in key])
    matched = jp >= 0
    post_e = np.where(matched, posts_here["x"][np.maximum(jp, 0)], np.iinfo(np.int64).min)
    last_post = np.full(len(st), np.iinfo(np.int64).min)
    np.maximum.at(last_post, ep, post_e)
    bc, ec, bs, es = b[cl], e[cl], b[st], e[st]
    in_c = (last_post > bc) & (last_post < ec)
    in_s = ~in_c & (last_post > bs) & (last_post < es)
    acc.add("mpi_rma_sync_late_post", path[cl][in_c], rank[cl][in_c], (last_post - bc)[in_c])
    acc.add("mpi_rma_sync_late_post", path[st][in_s], rank[st][in_s], (last_post - bs)[in_s])
    # operations of the other epochs: their own target's post inside the operation
    free = ~(in_c | in_s)
    jo = _join([op_epoch, op_target], [a_rows["epoch"], a_rows["t"]])
    p_op = np.where(jo >= 0, post_e[np.maximum(jo, 0)], np.iinfo(np.int64).min)
    bo, eo = b[ops], e[ops]
    late = free[op_epoch] & (p_op > bo) & (p_op < eo)
    acc.add("mpi_rma_comm_late_post", path[ops][late], rank[ops][late], (p_op - bo)[late])

    # target side: the origins' complete enters and last operations come to the target
    done_here = _route(ex, a_rows, dest_ranks=a_rows["t"])
    jt = _join([t_rows[k] for k in key], [done_here[k] for k in key])
    m = jt >= 0
    x = np.where(m, done_here["x"][np.maximum(jt, 0)], np.iinfo(np.int64).min)
    y = np.where(m, done_here["y"][np.maximum(jt, 0)], np.iinfo(np.int64).min)
    a = np.where(m, done_here["acc"][np.maximum(jt, 0)], 0)
    last_complete = np.full(len(po), np.iinfo(np.int64).min)
    last_rma = np.full(len(po), np.iinfo(np.int64).min)
    np.maximum.at(last_complete, ep2, x)
    np.maximum.at(last_rma, ep2, y)
    naccessed = np.bincount(ep2, weights=a, minlength=len(po)).astype(np.int64)
    gsize2 = np.bincount(ep2, minlength=len(po))
    acc.add("mpi_rma_pairsync_count", path[wt], rank[wt], gsize2)
    acc.add("mpi_rma_pairsync_unneeded_count", path[wt], rank[wt], gsize2 - naccessed)
    bw = b[wt]
    is_wait = role[wt] == R["win_wait"]
    ew = is_wait & (last_complete > bw)
    acc.add("mpi_rma_early_wait", path[wt][ew], rank[wt][ew], (last_complete - bw)[ew])
    lc = np.maximum(0, last_complete - np.maximum(last_rma, bw))
    acc.add("mpi_rma_late_complete", path[wt][ew], rank[wt][ew], lc[ew])
    notes["access_epochs"] += len(st)
    notes["exposure_epochs"] += len(po)


def _uniq_max(epoch, target, values):
    """Unique (epoch, target) pairs and the max of values per pair."""
    if not len(epoch):
        z = np.zeros(0, np.int64)
        return [z, z], z
    o, st, _ = _groups(epoch, target)
    return [epoch[o][st], target[o][st]], np.maximum.reduceat(values[o], st)


def _window_create_free(L, ex, acc, notes):
    ev, calls = L.wevents, L.wcalls
    wi = np.flatnonzero(ev["type"] == T["WIN"])
    if not len(wi):
        return
    c = ev["call"][wi]
    free = (ev["flags"][wi] & F["FREE"]) != 0
    rows = _table(COLLS, key=ev["win"][wi], seq=free, rank=ev["rank"][wi],
                  path=calls["path"][c], role=free, b=calls["t0"][c], e=calls["t1"][c],
                  crank=ev["crank"][wi], csize=ev["csize"][wi])
    X = _instances(L, ex, rows)
    here, gid, ok = X.here, X.gid(), X.ok
    if not len(here):
        return
    latest = X.max(here["b"])[gid]
    earliest_end = X.min(here["e"])[gid]
    idle = np.where((earliest_end > latest) & (here["b"] < latest), latest - here["b"], 0)
    okr = ok[gid]
    free = here["seq"] > 0
    for metric, sel in (("mpi_rma_wait_at_create", okr & ~free),
                        ("mpi_rma_wait_at_free", okr & free)):
        acc.add(metric, here["path"][sel], here["rank"][sel], idle[sel])


# ---------------------------------------------------------------- time, visits, bytes

def basics(L, acc):
    """Visits, bytes, and the time of every path: computation outside MPI, MPI calls by
    category (their waiting-time patterns are computed below), trace overhead; each
    rank summed them per path already."""
    metric_by_cat = np.array([MT.INDEX[MT.CATEGORY_METRIC[k]] for k in CATS], np.int64)
    cat_of = np.array([C[classify(f)[0]] for f in L.trace.functions], np.int64)
    for rd in L.trace.ranks:
        g = rd.gpaths
        rank = np.full(len(g), rd.rank)
        acc.add("visits", g, rank, rd.visits)
        acc.add("bytes", g, rank, rd.bytes)
        acc.add("overhead", g, rank, rd.overhead_ns)
        leaf = rd.path_fn >= 0
        acc.add("computation", g[~leaf], rank[~leaf], rd.time_ns[~leaf])
        cat = cat_of[rd.gfn[rd.path_fn[leaf]]]
        if rd.path_cat:                 # completions of nonblocking collectives
            li = np.flatnonzero(leaf)
            for p, c in rd.path_cat.items():
                cat[np.searchsorted(li, p)] = C[c]
        acc.add_many(metric_by_cat[cat], g[leaf], rank[leaf], rd.time_ns[leaf])


# ---------------------------------------------------------------- driver

def analyze(exp, ex=None):
    """Analyse the traces of experiment directory exp. Returns the result dict on the
    process of rank 0 (and in a serial run), None on the others."""
    ex = ex or Local(0)
    t_start = _time.perf_counter()
    L = load(exp, ex)
    return _patterns(L, ex, str(exp), _time.perf_counter() - t_start)


def analyze_trace(trace, ex=None):
    """Analyse a Trace built in memory (Trace.from_literal): the result dict."""
    ex = ex or Local(trace.world_size)
    L = _unify(trace, ex, [rd.rank for rd in trace.ranks])
    return _patterns(L, ex, trace.source or "literal", 0.0)


def _patterns(L, ex, name, load_s):
    t_loaded = _time.perf_counter()
    acc = Acc()
    notes = {k: 0 for k in ("messages", "unmatched_sends", "unmatched_receives",
                            "collectives", "incomplete_collectives", "fences",
                            "access_epochs", "exposure_epochs")}
    basics(L, acc)
    deferred = collectives(L, ex, acc, notes)
    point_to_point(L, ex, acc, notes, deferred)
    rma(L, ex, acc, notes)
    m, p, r, v = acc.reduced()
    nev = L.trace.nevents
    parts = ex.gather(((m, p, r, v), notes, L.notes, nev,
                       {rd.rank: (rd.t_begin, rd.t_end, rd.complete, rd.host, rd.state)
                        for rd in L.trace.ranks}))
    if parts is None:
        return None
    t_done = _time.perf_counter()
    cat = [np.concatenate(x) for x in zip(*[pt[0] for pt in parts])]
    m, p, r, v = _reduce(*cat)
    counts = {k: sum(pt[1][k] for pt in parts) for k in notes}
    text_notes = [n for pt in parts for n in pt[2]]
    ranks_info = {}
    for pt in parts:
        ranks_info.update(pt[4])
    return build_result(name, L, (m, p, r, v), counts, text_notes, ranks_info,
                        sum(pt[3] for pt in parts), ex.nproc,
                        {"load_s": load_s, "patterns_s": t_done - t_loaded})


def build_result(exp, L, mprv, counts, text_notes, ranks_info, nevents, nproc, timing):
    m, p, r, v = mprv
    world = L.trace.world_size
    notes = list(text_notes)
    if L.trace.missing:
        notes.append(f"no trace from {len(L.trace.missing)} of {world} ranks: "
                     f"{rank_ranges(L.trace.missing)}; patterns that involve them are not "
                     "computed")
    if counts["unmatched_sends"] or counts["unmatched_receives"]:
        notes.append(f"{counts['unmatched_sends']} sent and {counts['unmatched_receives']} "
                     "received messages have no partner in the trace (a rank's trace is "
                     "missing or truncated, or messages were received with MPI_Mrecv)")
    if counts["incomplete_collectives"]:
        notes.append(f"{counts['incomplete_collectives']} collective operations lack a "
                     "participant's record, or a nonblocking one was never completed; "
                     "they were not analysed")
    complete = not notes and all(x[2] for x in ranks_info.values())
    values = {}
    for mid in MT.IDS:
        sel = m == MT.INDEX[mid]
        values[mid] = (p[sel], r[sel], v[sel])
    # sums for "sum" metrics, bottom up
    for mid in reversed(list(MT.walk())):
        if MT.HOW[mid] == "sum":
            kids = [values[c] for c in MT.CHILDREN[mid]]
            pp = np.concatenate([k[0] for k in kids]) if kids else np.zeros(0, np.int64)
            rr = np.concatenate([k[1] for k in kids]) if kids else np.zeros(0, np.int64)
            vv = np.concatenate([k[2] for k in kids]) if kids else np.zeros(0, np.int64)
            z = np.zeros(len(pp), np.int64)
            _, pp, rr, vv = _reduce(z, pp, rr, vv)
            values[mid] = (pp, rr, vv)
    total_time = int(values["time"][2].sum())
    metrics = []
    for mid in MT.walk():
        pp, rr, vv = values[mid]
        tot = int(vv.sum())
        unit = MT.UNIT[mid]
        root = MT.root_of(mid)
        denom = total_time if unit == "s" else int(values[root][2].sum())
        metrics.append({
            "id": mid, "name": MT.NAME[mid], "parent": MT.PARENT[mid], "unit": unit,
            "depth": MT.depth(mid), "description": MT.DESCRIPTION[mid],
            "total": tot / 1e9 if unit == "s" else tot,
            "pct": 100.0 * tot / denom if denom else 0.0,
            "values": [[int(a), int(b), (int(c) / 1e9 if unit == "s" else int(c))]
                       for a, b, c in zip(pp, rr, vv)],
        })
    index = {lab: i for i, lab in enumerate(L.paths)}
    paths = [{"id": i, "labels": list(lab), "parent": index.get(lab[:-1])}
             for i, lab in enumerate(L.paths)]
    ranks = sorted(ranks_info)
    return {
        "format": RESULT_FORMAT, "version": RESULT_VERSION, "experiment": str(exp),
        "complete": complete, "notes": notes, "world_size": world,
        "ranks": [{"rank": k, "host": ranks_info[k][3], "state": ranks_info[k][4],
                   "complete": bool(ranks_info[k][2]),
                   "time_s": (ranks_info[k][1] - ranks_info[k][0]) / 1e9} for k in ranks],
        "events": int(nevents), "counts": counts,
        "analysis": dict(timing, processes=nproc),
        "metrics": metrics, "callpaths": paths,
    }

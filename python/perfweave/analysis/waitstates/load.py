"""Loading traces for the wait-state analysis: each rank's records prepared
(model/trace.py), clocks unified across hosts, communicators, channels and call paths
made global, and the per-kind tables (sends, receives, collectives, windows) stored."""

from dataclasses import dataclass, field

import numpy as np

from perfweave.model.trace import (
    COLL_COLS,
    COLL_FLAGS,
    RECV_COLS,
    SEND_COLS,
    WCALL_COLS,
    WEV_COLS,
    R,
    Cols,
    Trace,
    classify,
    prepare,
)
from perfweave import progress
from perfweave.clock import host_clocks
from perfweave.readers import trace as rt
from perfweave.analysis.waitstates.common import CHUNK


@dataclass
class Loaded:
    trace: Trace  # the ranks this process owns
    paths: list  # global call paths: label tuples, sorted
    sends: Cols  # SEND_COLS of every owned rank; path, call, chan global
    recvs: Cols  # RECV_COLS, likewise
    colls: Cols  # COLL_COLS; key: dense communicator id
    wcalls: Cols  # WCALL_COLS
    wevents: Cols  # WEV_COLS; "call" indexes wcalls
    ncalls: int  # MPI calls of the owned ranks ("call" of sends, recvs)
    nchan: int  # channels of messages ("chan"), all processes
    channels: np.ndarray  # (nchan, 4): source, destination, comm id, tag
    groups: dict  # rank -> list of member arrays
    comms: dict  # comm key -> members
    windows: dict  # window key -> comm key
    ranks_present: list  # every rank with a trace (all processes)
    notes: list = field(default_factory=list)
    comm_keys: np.ndarray = None  # every communicator's key, sorted (all processes)
    path_role: np.ndarray = None  # role (R) of each path's leaf MPI function
    row_ranks: dict = None  # table name -> (rank, first row) of each owned rank
    locations: np.ndarray = None  # first call of each location (rank, thread), in
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
            return (
                L.channels[t["chan"], other[1]].astype(np.int32)
                if L.nchan
                else np.zeros(len(t), np.int32)
            )
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


def sibling_meta(exp, ranks):
    """What a rank without its JSON can borrow from another rank of the run: the clock
    calibration (same counter rate on a host), the function table (same runtime) and
    MPI_COMM_WORLD (communicator id 0 on every rank)."""
    for r in ranks:
        meta, _ = rt.read_meta(exp, r)
        if meta and meta.get("clock"):
            comms = [c for c in meta.get("comms", []) if c.get("id") == 0]
            return {
                "clock": meta["clock"],
                "functions": meta.get("functions", []),
                "families": meta.get("families", []),
                "comms": comms,
                "world_size": meta.get("world_size"),
                "state": "unknown",
            }
    return None


TABLES = {
    "sends": SEND_COLS,
    "recvs": RECV_COLS,
    "colls": COLL_COLS,
    "wcalls": WCALL_COLS,
    "wevents": WEV_COLS,
}
# columns only load(detail=True) keeps: the patterns do not need them
DETAIL = {"thread", "bytes", "scall", "sync", "pcall", "bcall", "index"}


class Store:
    """The process's tables (TABLES), filled rank by rank: each prepared rank's tables
    are copied in and replaced by views of the store, so the ranks are never held twice
    (a concatenation would) and little memory is allocated afresh. Capacities are
    estimated from the first ranks (rows per trace record) and grow when exceeded."""

    def __init__(self, records, detail=False):
        self.records = max(int(records), 1)  # trace records of all ranks to come
        self.seen = 0  # ... of the ranks taken so far
        self.cols = {
            name: {k: t for k, t in cols.items() if detail or k not in DETAIL}
            for name, cols in TABLES.items()
        }
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
                table[k][n0 : n0 + n] = mine[k]
            self.used[name] = n0 + n
            rd.rows[name] = n
            setattr(rd, name, None)

    def row_ranks(self, trace):
        """table name -> (rank, first row) of each rank taken."""
        out = {}
        for name in TABLES:
            n = np.array([rd.rows[name] for rd in trace.ranks], np.int64)
            out[name] = (np.array([rd.rank for rd in trace.ranks], np.int64), np.cumsum(n) - n)
        return out

    def views(self, trace):
        """Point each rank's tables at its rows of the store (ranks in the order taken)."""
        pos = dict.fromkeys(TABLES, 0)
        for rd in trace.ranks:
            for name in TABLES:
                n0, n = pos[name], rd.rows[name]
                table = self.table(name)
                setattr(rd, name, Cols({k: v[n0 : n0 + n] for k, v in table.items()}))
                pos[name] = n0 + n

    def table(self, name):
        t = self.tables[name]
        if t is None:
            return Cols({k: np.zeros(0, ty) for k, ty in self.cols[name].items()})
        return Cols({k: v[: self.used[name]] for k, v in t.items()})


def load(exp, ex, detail=False):
    """Read and prepare the ranks ex owns (Loaded). detail: keep the columns of
    messages that the patterns do not need (DETAIL) and each rank's calls (the event
    graph's)."""
    ranks = rt.list_ranks(exp)
    world = world_size_of(exp, ranks)
    ex.world_size = world
    mine = [r for r in ranks if ex.owns(r)]
    metas = {r: rt.read_meta(exp, r) for r in mine}
    host_clocks(metas, ex)
    store = Store(sum(rt.record_count(exp, r) for r in mine), detail)
    data, sibling = [], None
    with progress.task("reading traces", len(mine), "rank") as bar:
        for r in mine:  # one rank at a time: its raw records are dropped
            bar.step(0, f"reading rank {r}'s trace")
            rf = rt.read_rank(exp, r, metas[r])
            if not rf.meta.get("clock"):
                sibling = sibling or sibling_meta(exp, ranks)
                if sibling:
                    rf.meta = dict(sibling, rank=rf.rank)
                    rf.notes.append(
                        f"rank {rf.rank}: clock calibration, function table and "
                        "MPI_COMM_WORLD taken from another rank; its times are "
                        "approximate and messages on other communicators cannot "
                        "be matched"
                    )
            rd = prepare(rf)
            del rf
            store.take(rd)
            if not detail:
                rd.calls = None
            data.append(rd)
            bar.step()
    return _unify(Trace(world, [], data, source=str(exp)), ex, ranks, store)


def _unify(trace, ex, ranks_present, store=None, detail=False):
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
    ckeys = {0}  # events without a communicator
    for part in ex.allgather(sorted(comms)):
        ckeys.update(part)
    comm_keys = np.array(sorted(ckeys), np.int64)
    chan_ids, channels = _channels(trace, ex, comm_keys)
    if store is None:  # a trace built in memory: store it now
        store = Store(sum(rd.nrecords for rd in trace.ranks), detail)
        for rd in trace.ranks:
            store.take(rd)
    store.views(trace)
    cbase = wbase = 0
    locations = []
    for rd in trace.ranks:  # the views are updated in place
        pmap = np.array([gid[sep.join(p)] for p in rd.paths], np.int32)
        cmap = np.searchsorted(comm_keys, rd.comm_keys).astype(np.int32)
        for name, ids in zip(("sends", "recvs"), chan_ids[rd.rank]):
            t = getattr(rd, name)
            t["path"][:] = pmap[t["path"]]
            t["chan"][:] = ids[t["chan"]]
            np.add(t["call"], cbase, out=t["call"], where=t["call"] >= 0)
        for t, k in ((rd.sends, "scall"), (rd.recvs, "pcall"), (rd.colls, "bcall")):
            if k in t:
                t[k] += cbase
        if "index" in rd.wcalls:
            rd.wcalls["index"] += cbase
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
    for rd in trace.ranks:  # the store's tables replace them
        for name in TABLES:
            setattr(rd, name, None)
    labels = [tuple(p.split(sep)) for p in paths]
    L = Loaded(
        trace=trace,
        paths=labels,
        **{name: store.table(name) for name in TABLES},
        ncalls=cbase,
        nchan=len(channels),
        channels=channels,
        groups=groups,
        comms=comms,
        windows=windows,
        ranks_present=sorted(present),
        notes=notes,
        comm_keys=comm_keys,
        path_role=np.array([_leaf_role(p) for p in labels], np.int16),
        row_ranks=store.row_ranks(trace),
        locations=np.concatenate(locations) if any(len(x) > 1 for x in locations) else None,
    )
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
        parts.append(
            np.stack([np.full(len(sc), rd.rank), sc[:, 0], cmap[sc[:, 1]], sc[:, 2]], axis=1)
        )
        parts.append(
            np.stack([rc[:, 0], np.full(len(rc), rd.rank), cmap[rc[:, 1]], rc[:, 2]], axis=1)
        )
        sizes.append((len(sc), len(rc)))
    mine = np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 4), np.int64)
    every = ex.allgather(mine)
    offset = sum(len(p) for p in every[: ex.me])
    allch = np.concatenate(every)
    if not len(allch):
        return {rd.rank: (np.zeros(0, np.int32),) * 2 for rd in trace.ranks}, np.zeros(
            (0, 4), np.int64
        )
    uniq, inv = np.unique(allch, axis=0, return_inverse=True)
    ids = inv.reshape(-1)[offset : offset + len(mine)].astype(np.int32)
    out, pos = {}, 0
    for rd, (ns, nr) in zip(trace.ranks, sizes):
        out[rd.rank] = (ids[pos : pos + ns], ids[pos + ns : pos + ns + nr])
        pos += ns + nr
    return out, uniq

"""Automatic wait-state analysis of event traces (`perfweave analyze`).

The patterns and their waiting-time formulas are Scalasca 2.6's (summarised in
../shared/wait-states.md) and, for MPI-2 one-sided communication, those of Hermanns et
al., "Scalable detection of MPI-2 remote memory access inefficiency patterns" (IJHPCA
2012, section 4). Every pattern is computed on whole columns of numpy records: messages
are matched by (source, destination, communicator, tag, sequence number), collective
operations by (communicator, sequence number), fences by (window, sequence number),
access and exposure epochs by (origin, target, window, sequence number), all without a
loop over events. Data another rank owns comes through `exchange.route` (the identity
in one process), so `mpirun -n K perfweave analyze --parallel` runs this same code.

Times are integer nanoseconds on rank 0's clock throughout; a value is charged to a
(metric, call path, rank) and summed exactly, so the serial and parallel results agree
to the nanosecond.
"""
import time as _time
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis import metrics as MT
from perfweave.analysis.exchange import Local, _mix
from perfweave.model.trace import F, T, Cols, Trace, classify, prepare, type_mask
from perfweave.readers import trace as rt
from perfweave.readers.experiment import rank_ranges

RESULT_FORMAT = "perfweave-waitstates"
RESULT_VERSION = 1
WO_BUFFER = 100   # Late Sender instances a receiver remembers for Wrong Order (Scalasca)

ROLES = ["other", "p2p", "block_send", "wait", "waitmulti", "test", "barrier", "n2n", "12n", "n21", "scan",
         "coll", "win_fence", "win_post", "win_start", "win_complete", "win_wait",
         "win_test", "passive", "op", "create", "free", "io", "file", "comm", "init",
         "finalize", "init_thread"]
R = {r: i for i, r in enumerate(ROLES)}
CATS = list(MT.CATEGORY_METRIC)
C = {c: i for i, c in enumerate(CATS)}

WINDOW_EVENTS = type_mask("WSYNC", "RMA")


# ---------------------------------------------------------------- loading

@dataclass
class Loaded:
    trace: Trace                     # the ranks this process owns
    paths: list                      # global call paths: label tuples, sorted
    calls: Cols                      # CALL_COLS + rank, role, cat: every owned rank
    events: Cols                     # EV_COLS + rank; "call" indexes calls, "post" events
    groups: dict                     # rank -> list of member arrays
    comms: dict                      # comm key -> members
    windows: dict                    # window key -> comm key
    ranks_present: list              # every rank with a trace (all processes)
    notes: list = field(default_factory=list)
    comm_keys: np.ndarray = None     # every communicator's key, sorted (all processes)

    def dense_comm(self, keys):
        """Communicator keys -> small ids, the same in every analysis process."""
        return np.searchsorted(self.comm_keys, keys)


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


# Column types of the store. Indices within one process (call, post) and sequence
# numbers fit 32 bits: at most 2^31 records per analysis process.
CALL_TYPES = {"thread": np.int32, "fn": np.int32, "path": np.int32, "t0": np.int64,
              "t1": np.int64, "rank": np.int32, "role": np.int16, "cat": np.int16}
EV_TYPES = {"call": np.int32, "type": np.uint8, "flags": np.uint8, "peer": np.int32,
            "tag": np.int32, "group": np.int32, "comm": np.int64, "win": np.int64,
            "bytes": np.int64, "bytes2": np.int64, "post": np.int32, "seq": np.int32,
            "crank": np.int32, "csize": np.int32, "rank": np.int32}


class Store:
    """The process's tables, allocated once for at most `capacity` records: each
    prepared rank is copied in and its own arrays dropped, so the ranks are never held
    twice (a concatenation would) and no large array is allocated afresh."""

    def __init__(self, capacity):
        self.calls = Cols({k: np.empty(capacity, t) for k, t in CALL_TYPES.items()})
        self.events = Cols({k: np.empty(capacity, t) for k, t in EV_TYPES.items()})
        self.nc = self.ne = 0

    def take(self, rd):
        """Copy rank rd's tables in; rd's tables become views of the store."""
        for mine, table, n0 in ((rd.calls, self.calls, self.nc),
                                (rd.events, self.events, self.ne)):
            n = len(mine)
            for k, v in list(mine.items()):
                if k in table:                # (the request keys are not needed now)
                    table[k][n0:n0 + n] = v
            table["rank"][n0:n0 + n] = rd.rank
            for k in table:               # every column, those _unify fills in too
                mine[k] = table[k][n0:n0 + n]
        self.nc += len(rd.calls)
        self.ne += len(rd.events)

    def tables(self):
        return (Cols({k: v[:self.nc] for k, v in self.calls.items()}),
                Cols({k: v[:self.ne] for k, v in self.events.items()}))


def load(exp, ex):
    ranks = rt.list_ranks(exp)
    world = world_size_of(exp, ranks)
    ex.world_size = world
    mine = [r for r in ranks if ex.owns(r)]
    metas = {r: rt.read_meta(exp, r) for r in mine}
    _host_clocks(metas, ex)
    store = Store(sum(rt.record_count(exp, r) for r in mine))
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
    build this process's tables: every owned rank's calls and events, concatenated."""
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
    role_of = np.array([R[classify(f)[1]] for f in glist], np.int16)
    cat_of = np.array([C[classify(f)[0]] for f in glist], np.int16)
    if store is None:                   # a trace built in memory: store it now
        store = Store(sum(max(len(rd.calls), len(rd.events)) for rd in trace.ranks))
        for rd in trace.ranks:
            store.take(rd)
    cbase = ebase = 0
    groups, comms, windows = {}, {}, {}
    for rd in trace.ranks:
        fmap = np.array([gfn[f] for f in rd.fn_names], np.int64)
        pmap = np.array([gid[sep.join(p)] for p in rd.paths], np.int64)
        c = rd.calls                    # views of the store: updated in place
        c["fn"][:] = fmap[c["fn"]]
        c["path"][:] = pmap[c["path"]]
        c["role"][:] = role_of[c["fn"]]
        c["cat"][:] = cat_of[c["fn"]]
        e = rd.events
        e["call"] += cbase
        np.add(e["post"], ebase, out=e["post"], where=e["post"] >= 0)
        cbase += len(c)
        ebase += len(e)
        rd.gpaths = pmap
        rd.gfn = fmap
        groups[rd.rank] = rd.groups
        comms.update(rd.comms)
        windows.update(rd.windows)
    trace.functions = glist
    ckeys = set()
    for part in ex.allgather(sorted(comms)):
        ckeys.update(part)
    ckeys.add(0)                      # events without a communicator
    notes = [n for rd in trace.ranks for n in rd.notes]
    present = set(ranks_present)
    trace.missing = [r for r in range(trace.world_size) if r not in present]
    for rd in trace.ranks:              # the store's tables replace them
        rd.calls = rd.events = None
    calls, events = store.tables()
    return Loaded(trace=trace, paths=[tuple(p.split(sep)) for p in paths],
                  calls=calls, events=events,
                  groups=groups, comms=comms, windows=windows,
                  ranks_present=sorted(present), notes=notes,
                  comm_keys=np.array(sorted(ckeys), np.int64))


# ---------------------------------------------------------------- helpers

class Acc:
    """Contributions (metric, path, rank, value), summed at the end."""

    def __init__(self):
        self.parts = []

    def add(self, metric, path, rank, value):
        self.add_many(np.full(len(value), MT.INDEX[metric], np.int64), path, rank, value)

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

# a message as its sender and its receiver see it (comm: dense communicator id)
SENDS = np.dtype([("src", "<i4"), ("dst", "<i4"), ("tag", "<i4"), ("comm", "<i4"),
                  ("seq", "<i4"), ("pad", "<i4"), ("e", "<i8")])
RECVS = np.dtype([("src", "<i4"), ("dst", "<i4"), ("tag", "<i4"), ("comm", "<i4"),
                  ("seq", "<i4"), ("pad", "<i4"), ("e", "<i8"), ("l", "<i8")])


def _run_max(group, values):
    """For rows sorted by group: the row of each group's largest value (first if tied)."""
    start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    gid = np.cumsum(np.r_[True, group[1:] != group[:-1]]) - 1
    mx = np.maximum.reduceat(values, start)
    cand = np.where(values == mx[gid], np.arange(len(values)), len(values))
    return np.minimum.reduceat(cand, start)


def _match(rows, other):
    """For each row of `rows`, the index of the row of `other` for the same message
    (src, dst, comm, tag, seq), or -1. comm is a dense communicator id. With small ranks,
    communicators and tags a channel (src, dst, comm, tag) packs into one integer:
    channels get dense ids from one np.unique, and a message is then found by its
    channel's offset plus its sequence number, without a join."""
    n, m = len(rows), len(other)
    out = np.full(n, -1, np.int64)
    if not n or not m:
        return out
    cols = ("src", "dst", "comm", "tag")
    big = max(int(max(rows[c].max(), other[c].max())) for c in ("src", "dst"))
    if big < 2 ** 20 and max(int(rows["comm"].max()), int(other["comm"].max())) < 2 ** 8 \
            and min(int(rows["tag"].min()), int(other["tag"].min())) >= 0 \
            and max(int(rows["tag"].max()), int(other["tag"].max())) < 2 ** 16:
        def pack(t):
            return (t["src"].astype(np.int64) << 44) | (t["dst"].astype(np.int64) << 24) | \
                (t["comm"].astype(np.int64) << 16) | t["tag"].astype(np.int64)
        u, inv = np.unique(np.concatenate([pack(other), pack(rows)]), return_inverse=True)
        inv = inv.reshape(-1)
        ch_o, ch_r = inv[:m], inv[m:]
        count = np.bincount(ch_o, minlength=len(u))
        first = np.cumsum(count) - count
        ids = first[ch_o] + other["seq"]
        ok_o = other["seq"] < count[ch_o]
        slot_of = np.full(m, -1, np.int64)
        slot_of[ids[ok_o]] = np.flatnonzero(ok_o)
        ok = rows["seq"] < count[ch_r]
        out[ok] = slot_of[first[ch_r[ok]] + rows["seq"][ok]]
        return out
    return _join([rows[c] for c in cols + ("seq",)], [other[c] for c in cols + ("seq",)])


def _p2p_rows(L):
    """The messages of the owned ranks as seen by their senders and by their receivers:
    (send event indices, SENDS rows, the call completing each send; receive event
    indices, RECVS rows, the call completing each receive)."""
    ev, calls = L.events, L.calls
    typ = ev["type"]
    nb = (ev["flags"] & F["NONBLOCKING"]) != 0
    dense = L.dense_comm
    # ---- send side: the call posting it (sender's enter) and completing it ----
    post = ev["post"]
    si = np.flatnonzero((typ == T["SEND"]) & (ev["peer"] >= 0))
    cmp_call = np.where(nb[si], -1, ev["call"][si])
    done_idx = np.flatnonzero((post >= 0) & (typ == T["SEND_DONE"]))
    pos_in_si = np.searchsorted(si, post[done_idx])
    okd = pos_in_si < len(si)
    okd[okd] &= si[pos_in_si[okd]] == post[done_idx[okd]]
    cmp_call[pos_in_si[okd]] = ev["call"][done_idx[okd]]
    sc = ev["call"][si]
    send_rows = _table(SENDS, src=ev["rank"][si], dst=ev["peer"][si], tag=ev["tag"][si],
                       comm=dense(ev["comm"][si]), seq=ev["seq"][si], e=calls["t0"][sc])
    # ---- receive side: the call completing it, the call posting it ----
    ri = np.flatnonzero((typ == T["RECV"]) & (ev["peer"] >= 0))
    rc = ev["call"][ri]
    req_call = np.where(post[ri] >= 0, ev["call"][np.maximum(post[ri], 0)], rc)
    recv_rows = _table(RECVS, src=ev["peer"][ri], dst=ev["rank"][ri], tag=ev["tag"][ri],
                       comm=dense(ev["comm"][ri]), seq=ev["seq"][ri], e=calls["t0"][req_call],
                       l=calls["t1"][req_call])
    return si, send_rows, cmp_call, ri, recv_rows, rc


def message_pairs(L):
    """Every message of a trace loaded in one process: (the event index of its SEND,
    that of its RECV), matched as the analysis matches them."""
    si, send_rows, _, ri, recv_rows, _ = _p2p_rows(L)
    m = _match(recv_rows, send_rows)
    ok = np.flatnonzero(m >= 0)
    return si[m[ok]], ri[ok]


def point_to_point(L, ex, acc, notes):
    ev, calls = L.events, L.calls
    nb = (ev["flags"] & F["NONBLOCKING"]) != 0
    si, send_rows, cmp_call, ri, recv_rows, rc = _p2p_rows(L)

    # ---- Late Sender, on the receiver (the sends come to the receiver's process) ----
    sends_here = _route(ex, send_rows, dest_ranks=send_rows["dst"])
    m = _match(recv_rows, sends_here)
    matched = m >= 0
    e_send = np.where(matched, sends_here["e"][np.maximum(m, 0)], 0)
    e_r, l_r = calls["t0"][rc], calls["t1"][rc]
    role = calls["role"][rc]
    idle = np.minimum(e_send, l_r) - e_r
    ls = matched & (role != R["test"]) & (idle > 0)
    multi = role == R["waitmulti"]
    # a multi-wait is one instance, of its latest sender (rc is sorted along ri)
    lm = np.flatnonzero(ls & multi)
    inst_rows = np.flatnonzero(ls & ~multi)
    if len(lm):
        inst_rows = np.sort(np.r_[inst_rows, lm[_run_max(rc[lm], idle[lm])]])
    ls_call = np.zeros(len(calls["t0"]), bool)      # multi-waits with a Late Sender
    ls_call[rc[lm]] = True
    ip = calls["path"][rc[inst_rows]]
    irank = ev["rank"][ri[inst_rows]]
    acc.add("mpi_latesender", ip, irank, idle[inst_rows])
    acc.add("mpi_latesender_count", ip, irank, np.ones(len(inst_rows), np.int64))

    _wrong_order(ev, ri, rc, matched, e_send, inst_rows, idle, calls, acc)

    # ---- Late Receiver, on the sender (the receive posts come to its process) ----
    recvs_here = _route(ex, recv_rows, dest_ranks=recv_rows["src"])
    m2 = _match(send_rows, recvs_here)
    ok = (m2 >= 0) & (cmp_call >= 0)
    e_rq = np.where(ok, recvs_here["e"][np.maximum(m2, 0)], 0)
    cc = np.maximum(cmp_call, 0)
    e_sc, l_sc = calls["t0"][cc], calls["t1"][cc]
    lr_idle = np.where(l_sc <= e_rq, 0, e_rq - e_sc)
    crole = calls["role"][cc]
    # a send that may block until the receive is posted: MPI_Send and MPI_Ssend (not
    # Bsend, Rsend, nor Sendrecv, whose own receive would look like the send's wait),
    # or the single MPI_Wait of a nonblocking send (as Scalasca's is_mpi_block_send)
    single = ok & (lr_idle > 0) & ((~nb[si] & (crole == R["block_send"])) |
                                   (crole == R["wait"]))
    lr_rows = np.flatnonzero(single)
    mw = np.flatnonzero(ok & (lr_idle > 0) & (crole == R["waitmulti"]) & ~ls_call[cc])
    if len(mw):
        mw = mw[np.argsort(cc[mw], kind="stable")]
        lr_rows = np.sort(np.r_[lr_rows, mw[_run_max(cc[mw], lr_idle[mw])]])
    lp = calls["path"][cc[lr_rows]]
    lrank = ev["rank"][si[lr_rows]]
    acc.add("mpi_latereceiver", lp, lrank, lr_idle[lr_rows])
    acc.add("mpi_latereceiver_count", lp, lrank, np.ones(len(lr_rows), np.int64))
    notes["unmatched_receives"] += int((~matched).sum())
    notes["unmatched_sends"] += int((m2 < 0).sum())
    notes["messages"] += int(matched.sum())


def _wrong_order(ev, ri, rc, matched, e_send, inst_rows, idle, calls, acc):
    """Late Sender, Wrong Order: a Late Sender instance is re-charged as wrong order when
    a later receive on the same rank (while the instance is among the rank's last
    WO_BUFFER instances) gets a message that was sent before the instance's message.
    Same / different sources compare the two messages' senders."""
    if not len(inst_rows):
        return
    seq = np.flatnonzero(matched)             # receives in processing order (rows of ri)
    s_time = e_send[seq]
    s_call = rc[seq]
    s_rank = ev["rank"][ri[seq]]
    s_src = ev["peer"][ri[seq]]
    i_call = rc[inst_rows]
    i_rank = ev["rank"][ri[inst_rows]]
    i_time = e_send[inst_rows]
    i_src = ev["peer"][ri[inst_rows]]
    # window: receives after the instance's call, up to the call of the instance
    # WO_BUFFER later on the same rank (when it pushes this one out)
    start = np.searchsorted(s_call, i_call, "right")
    order = np.lexsort((i_call, i_rank))
    ir, ic = i_rank[order], i_call[order]
    later = np.arange(len(order)) + WO_BUFFER
    end_call = np.full(len(order), np.iinfo(np.int64).max)
    valid = later < len(order)
    valid[valid] &= ir[later[valid]] == ir[valid]
    end_call[valid] = ic[later[valid]]
    rank_end = np.searchsorted(s_rank, ir, "right")
    end = np.empty(len(order), np.int64)
    end[order] = np.minimum(np.searchsorted(s_call, end_call, "right"), rank_end)
    # the first receive in [start, end) whose message was sent before the instance's:
    # descend a sparse table of minima, one rank at a time (small, cache-resident)
    pos = start.copy()
    ranks = np.unique(i_rank)          # instances come in rank order, like receives
    ia, ib = np.searchsorted(i_rank, ranks), np.searchsorted(i_rank, ranks, "right")
    ra, rb = np.searchsorted(s_rank, ranks), np.searchsorted(s_rank, ranks, "right")
    for qa, qb, a, b in zip(ia.tolist(), ib.tolist(), ra.tolist(), rb.tolist()):
        if a >= b:
            continue
        p, e, t = pos[qa:qb] - a, end[qa:qb] - a, i_time[qa:qb]
        levels = [s_time[a:b]]
        k = 1
        while 2 * k <= b - a:
            prev = levels[-1]
            levels.append(np.minimum(prev[:len(prev) - k], prev[k:]))
            k *= 2
        for lv in range(len(levels) - 1, -1, -1):
            w = 1 << lv
            tab = levels[lv]
            step = (p + w <= e) & (tab[np.minimum(p, len(tab) - 1)] >= t)
            p = np.where(step, p + w, p)
        pos[qa:qb] = p + a
    n = len(seq)
    found = pos < end
    found[found] &= s_time[np.minimum(pos[found], n - 1)] < i_time[found]
    f = np.flatnonzero(found)
    same = s_src[pos[f]] == i_src[f]
    path = calls["path"][i_call[f]]
    acc.add("mpi_latesender_wo", path, i_rank[f], idle[inst_rows[f]])
    acc.add("mpi_lswo_same", path[same], i_rank[f][same], idle[inst_rows[f]][same])
    acc.add("mpi_lswo_different", path[~same], i_rank[f][~same], idle[inst_rows[f]][~same])


# ---------------------------------------------------------------- collectives

COLLS = np.dtype([("key", "<i8"), ("seq", "<i8"), ("rank", "<i4"), ("path", "<i4"),
                  ("role", "<i2"), ("nb", "u1"), ("sent", "u1"), ("recv", "u1"),
                  ("root", "u1"), ("pad", "<u2"), ("csize", "<i4"), ("crank", "<i4"),
                  ("b", "<i8"), ("e", "<i8")])


def _take(rows, index):
    """rows[index] for a record array, copying whole records (faster than numpy's
    field-by-field fancy indexing of structured arrays)."""
    v = rows.view(np.dtype((np.void, rows.dtype.itemsize)))
    return v[index].view(rows.dtype)


def _instances(L, ex, rows):
    """Route collective-like rows (COLLS) to the owner of their instance (key, seq);
    returns (the rows there, sorted by instance; group starts; group id per row;
    mask of the groups that hold a whole blocking instance of one kind)."""
    here = _route(ex, rows, keys=_hash_cols(rows["key"], rows["seq"]))
    if not len(here):
        z = np.zeros(0, np.int64)
        return here, z, z, np.zeros(0, bool)
    ids = np.unique(here["key"], return_inverse=True)[1].reshape(-1).astype(np.int64)
    if int(here["seq"].max()) < 2 ** 42 and int(ids.max()) < 2 ** 21:
        order = np.argsort((ids << 42) | here["seq"])    # one integer per instance
    else:
        order = np.lexsort((here["seq"], ids))
    here = _take(here, order)
    inst = (ids[order], here["seq"])
    change = np.r_[True, (inst[0][1:] != inst[0][:-1]) | (inst[1][1:] != inst[1][:-1])]
    start = np.flatnonzero(change)
    gid = np.cumsum(change) - 1
    count = np.diff(np.r_[start, len(here)])
    complete = count == here["csize"][start]
    nbany = np.maximum.reduceat(here["nb"], start)
    same_role = np.minimum.reduceat(here["role"], start) == \
        np.maximum.reduceat(here["role"], start)
    return here, start, gid, complete & (nbany == 0) & same_role


def collectives(L, ex, acc, notes):
    ev, calls = L.events, L.calls
    ci = np.flatnonzero(ev["type"] == T["COLL"])
    c = ev["call"][ci]
    rows = _table(COLLS, key=ev["comm"][ci], seq=ev["seq"][ci], rank=ev["rank"][ci],
                  path=calls["path"][c], role=calls["role"][c],
                  nb=(ev["flags"][ci] & F["NONBLOCKING"]) != 0, sent=ev["bytes"][ci] > 0,
                  recv=ev["bytes2"][ci] > 0, root=ev["peer"][ci] == ev["rank"][ci],
                  b=calls["t0"][c], e=calls["t1"][c], crank=ev["crank"][ci],
                  csize=ev["csize"][ci])
    here, start, gid, ok = _instances(L, ex, rows)
    notes["collectives"] += int(ok.sum())
    notes["incomplete_collectives"] += int((~ok).sum())
    if not len(here):
        return
    b, e, role = here["b"], here["e"], here["role"]
    latest = np.maximum.reduceat(b, start)[gid]
    earliest_end = np.minimum.reduceat(e, start)[gid]
    okr = ok[gid]
    sent_b = np.where(here["sent"] > 0, b, np.iinfo(np.int64).min)
    latest_sender = np.maximum.reduceat(sent_b, start)[gid]
    root_b = np.where(here["root"] > 0, b, np.iinfo(np.int64).min)
    root_b = np.maximum.reduceat(root_b, start)[gid]
    root_sent = np.maximum.reduceat(here["sent"] * here["root"], start)[gid] > 0
    wait_full = np.maximum(0, np.minimum(latest, e) - b)
    completion = np.maximum(0, e - np.maximum(earliest_end, np.minimum(latest, e)))
    path, rank = here["path"], here["rank"]

    def add(metric, mask, values):
        mask = mask & okr
        acc.add(metric, path[mask], rank[mask], values[mask])

    bar = role == R["barrier"]
    add("mpi_barrier_wait", bar, wait_full)
    add("mpi_barrier_completion", bar, completion)
    n2n = role == R["n2n"]
    overlap = earliest_end > latest
    w_partial = np.where((here["recv"] > 0) & (b < latest_sender),
                         np.maximum(0, np.minimum(latest_sender, e) - b), 0)
    add("mpi_wait_nxn", n2n, np.where(overlap, wait_full, w_partial))
    add("mpi_nxn_completion", n2n, completion)
    o2n = (role == R["12n"]) & root_sent & (here["root"] == 0) & (here["recv"] > 0)
    add("mpi_latebroadcast", o2n & (b < root_b), np.maximum(0, np.minimum(root_b, e) - b))
    n21 = (role == R["n21"]) & (here["root"] > 0) & (b < latest_sender)
    add("mpi_earlyreduce", n21, np.maximum(0, np.minimum(latest_sender, e) - b))
    scan = role == R["scan"]
    if scan.any():
        # latest enter among ranks 0..me (in communicator order) that send
        si = np.flatnonzero(scan)
        si = si[np.lexsort((here["crank"][si], gid[si]))]
        pm = np.where(here["sent"][si] > 0, b[si], np.iinfo(np.int64).min)
        run = pm.copy()
        g = gid[si]
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        for a, z in zip(bounds, np.r_[bounds[1:], len(si)]):
            run[a:z] = np.maximum.accumulate(pm[a:z])
        sel = np.zeros(len(here), bool)
        sel[si] = True
        val = np.zeros(len(here), np.int64)
        val[si] = np.maximum(0, np.minimum(run, e[si]) - b[si])
        add("mpi_earlyscan", sel, val)


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
    ev, calls = L.events, L.calls
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
    ev, calls = L.events, L.calls
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
    here, gstart, gid, ok = _instances(L, ex, frows)
    if len(here):
        latest = np.maximum.reduceat(here["b"], gstart)[gid]
        earliest_end = np.minimum.reduceat(here["e"], gstart)[gid]
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
    ev = L.events
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
    ev, calls = L.events, L.calls
    wi = np.flatnonzero(ev["type"] == T["WIN"])
    if not len(wi):
        return
    c = ev["call"][wi]
    free = (ev["flags"][wi] & F["FREE"]) != 0
    rows = _table(COLLS, key=ev["win"][wi], seq=free, rank=ev["rank"][wi],
                  path=calls["path"][c], role=free, b=calls["t0"][c], e=calls["t1"][c],
                  crank=ev["crank"][wi], csize=ev["csize"][wi])
    here, start, gid, ok = _instances(L, ex, rows)
    if not len(here):
        return
    latest = np.maximum.reduceat(here["b"], start)[gid]
    earliest_end = np.minimum.reduceat(here["e"], start)[gid]
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
    point_to_point(L, ex, acc, notes)
    collectives(L, ex, acc, notes)
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
                     "participant's record (or are nonblocking) and were not analysed")
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

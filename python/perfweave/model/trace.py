"""The event trace of a run, as tables the analysis works on.

Each rank's records (readers/trace.py) become, with numpy and without a loop over
events, what the wait-state patterns need of the rank and nothing more:

- `sends`, `recvs`: one row per message as its sender and as its receiver see it: its
  source and destination, its channel (source, destination, communicator, tag; as an
  index into the rank's table of channels) and its number on the channel, which MPI's
  ordering rules make the same on both sides, so ranks agree without talking; the
  enter (and exit) of the call that posted it and the call that completed it (enter,
  exit, call path, role);
- `colls`: one row per participation in a collective operation: the communicator and
  the operation's number on it (blocking and nonblocking ones counted together, in the
  order they were started), the call's times, path and role, root and bytes, and the
  call that completed it (a nonblocking one's MPI_Wait or MPI_Test);
- `wcalls`, `wevents`: the calls and events on RMA windows (creation, fences, epochs,
  operations), with the window's key;
- `paths`: the calling context tree of the rank: user functions (ENTER/LEAVE records of
  programs built with -finstrument-functions, or regions of an imported trace) and, as
  leaves, MPI functions at their call site;
- per path: the rank's time (exclusive), trace buffer flushes' time, MPI calls, bytes.

Communicators are numbered per rank in the tables (1 + their index in the rank's JSON,
0 for none); `comm_keys` gives each its 64-bit key, computed alike by every rank from
the definition (members and creation order). Tables are columns (`Cols`: a dict of
numpy arrays), which numpy works on faster than on the fields of structured arrays.

A path is named by its labels from the root, so paths of different ranks (or of ranks
read by different analysis processes) are merged by name. `Trace.from_literal` builds a
trace from Python lists for tests; it goes through the same code as a recorded one.
"""

import hashlib
from dataclasses import dataclass, field

import numpy as np

from perfweave.model.grouping import dense_ids, rank_in_group
from perfweave._format import FILES
from perfweave._mpi import FUNCTIONS as MPI_FUNCTIONS, PATTERN_ROLES
from perfweave.clock import app_window, to_ns
from perfweave.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES, SPANS, SUB, TypeSet

T = EVENT_TYPES
F = EVENT_FLAGS


TIMED = TypeSet("CALL", "FLUSH", "ENTER", "LEAVE")
WINDOWED = TypeSet("WIN", "RMA", "WSYNC")
MOVES = TypeSet("SEND", "RECV", "COLL", "RMA")


@dataclass
class RankRecords:
    """One rank's trace as recorded, read and checked (readers/trace.py read_rank):
    records in file order and the rank's JSON."""

    rank: int
    records: np.ndarray
    thread: np.ndarray  # thread of each record (from the flush table)
    meta: dict
    complete: bool = True
    notes: list = field(default_factory=list)
    types: np.ndarray = None  # records["type"], contiguous (None: not taken yet)

    @property
    def path_hint(self):
        return f"rank {self.rank}"


class Cols(dict):
    """A table as named numpy columns of equal length: t["t0"], len(t), t.take(index),
    t[a:b] (rows a..b-1, as views)."""

    def __getitem__(self, k):
        if isinstance(k, slice):
            return Cols({n: v[k] for n, v in self.items()})
        return dict.__getitem__(self, k)

    def __len__(self):
        for v in self.values():
            return len(v)
        return 0

    def take(self, index):
        return Cols({k: v[index] for k, v in self.items()})

    def slice(self, a, b):
        """Rows a..b-1, as views."""
        return Cols({k: v[a:b] for k, v in self.items()})

    @classmethod
    def concat(cls, tables, names):
        return cls({k: np.concatenate([t[k] for t in tables]) for k in names})


# the tables of a rank (column -> dtype). "call": the index of a call among the rank's
# calls (-1: none); "chan": a channel's index in the rank's table of the channels it
# sends (receives) on; "key" of colls: a communicator's number in the rank (0: none);
# "flags" of colls: COLL_FLAGS; b: the enter of the call that started the collective, e:
# the exit of the call that completed it, w, wpath, wcall: the enter, path and call of
# the call that waits for it (the same call, unless nonblocking: the Wait or Test that
# completed it); times in ns. What can be derived is not stored: the
# rank (from the rows' position), a message's peer (from its channel), a call's role
# (from its path), a communicator's size and the rank's position in it. For the event
# graph (analysis/eventgraph.py) only: scall, the call that started a send; sync, 1 for
# a synchronous send (MPI_Ssend, MPI_Issend); pcall, the call that posted a receive;
# bcall, the call that started a collective (b); bytes of colls, sent + received;
# index of wcalls, the call among the rank's calls.
SEND_COLS = {
    "chan": np.int32,
    "seq": np.int32,
    "e": np.int64,
    "cb": np.int64,
    "ce": np.int64,
    "path": np.int32,
    "call": np.int32,
    "nb": np.uint8,
    "thread": np.int16,
    "scall": np.int32,
    "sync": np.uint8,
}
RECV_COLS = {
    "chan": np.int32,
    "seq": np.int32,
    "e": np.int64,
    "cb": np.int64,
    "ce": np.int64,
    "path": np.int32,
    "call": np.int32,
    "thread": np.int16,
    "bytes": np.int64,
    "pcall": np.int32,
}
COLL_COLS = {
    "key": np.int32,
    "seq": np.int32,
    "path": np.int32,
    "flags": np.uint8,
    "b": np.int64,
    "e": np.int64,
    "w": np.int64,
    "wpath": np.int32,
    "wcall": np.int32,
    "bcall": np.int32,
    "bytes": np.int64,
}
# nonblocking, sends, receives, root, nonblocking and never completed
COLL_FLAGS = {"nb": 1, "sent": 2, "recv": 4, "root": 8, "open": 16}
WCALL_COLS = {
    "t0": np.int64,
    "t1": np.int64,
    "path": np.int32,
    "role": np.int16,
    "thread": np.int32,
    "index": np.int32,
}
WEV_COLS = {
    "call": np.int32,
    "type": np.uint8,
    "flags": np.uint8,
    "peer": np.int32,
    "group": np.int32,
    "win": np.int64,
    "bytes": np.int64,
    "bytes2": np.int64,
    "seq": np.int32,
    "crank": np.int32,
    "csize": np.int32,
    "rank": np.int32,
}

ROOT_LABEL = "program"


# ---- what an MPI function is, by name ----

# The pattern roles, in the order of their codes (R), from mpi.spec (perfweave/_mpi.py)
ROLES = list(PATTERN_ROLES)
R = {r: i for i, r in enumerate(ROLES)}


def classify(name):
    """(category of the time tree, pattern role) of an MPI function name, as mpi.spec
    says (runtime/mpi/gen_wrappers.py PATTERN_ROLES); ("other", "other") for a name it
    does not list.

    Categories: init, mgmt_comm, mgmt_win, mgmt_file, sync_coll, rma_active, rma_passive,
    p2p, coll, rma_comm, file_data, other. Roles refine them for the patterns: barrier,
    n2n, 12n, n21, scan (also of the nonblocking forms: MPI_Iallreduce is n2n), coll
    (other collectives: v/w all-to-all, neighbourhood), win_fence, win_post, win_start,
    win_complete, win_wait, win_test, passive, op (RMA operations), create and free
    (windows), block_send (MPI_Send, MPI_Ssend), p2p (other sends, receives, ...), wait
    (MPI_Wait), waitmulti (MPI_Waitall/any/some), test (MPI_Test*)."""
    f = MPI_FUNCTIONS.get(name)
    role = f[2] if f else "other"
    return PATTERN_ROLES[role][0], role


def family(name):
    """The profile family of an MPI function (docs/format.md) from its name, as mpi.spec
    says, so that exports, imports, the model and the imported profile agree."""
    f = MPI_FUNCTIONS.get(name)
    return f[0] if f else "other"


# ---- keys of communicators and windows ----


def _key(*parts):
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(np.asarray(p, dtype="<i8").tobytes())
        h.update(b"|")
    return int(np.frombuffer(h.digest(), "<i8")[0])


def comm_key(members, remote=(), seq=0):
    """The key of a communicator: its members (world ranks, in communicator rank order),
    remote group, and how many communicators with the same members were created before
    it (collective creation happens in the same order on all members)."""
    return _key(members, remote, [seq])


def window_key(ckey, seq):
    return _key([ckey], [seq], [7])


# ---- one rank ----


@dataclass
class RankModel:
    """One rank of Trace, made for the analysis (prepare): its messages, collectives,
    window events and call paths as columns, times in ns on rank 0's clock."""

    rank: int
    host: str
    state: str
    complete: bool
    notes: list
    t_begin: int  # ns, rank 0's clock: MPI_Init done
    t_end: int  # ns: MPI_Finalize entered (or the last record)
    sends: Cols  # SEND_COLS: messages this rank sent
    recvs: Cols  # RECV_COLS: messages this rank received
    send_channels: np.ndarray  # (peer, comm number, tag) of sends' "chan"
    recv_channels: np.ndarray  # ... of receives' "chan"
    colls: Cols  # COLL_COLS: collective operations it took part in
    wcalls: Cols  # WCALL_COLS: its calls with window events
    wevents: Cols  # WEV_COLS: its window events ("call" indexes wcalls)
    ncalls: int  # MPI calls ("call" of sends and recvs indexes them)
    paths: list  # path label tuples, index = local path id
    path_fn: np.ndarray  # function (index into fn_names) of MPI leaves, else -1
    time_ns: np.ndarray  # exclusive time per local path (ns)
    overhead_ns: np.ndarray  # trace flush time per local path (ns)
    visits: np.ndarray  # MPI calls per local path
    bytes: np.ndarray  # bytes moved per local path
    comms: dict  # comm key -> members (np.int32 world ranks)
    comm_keys: np.ndarray  # key of the rank's communicator numbers (0: none)
    windows: dict  # window key -> comm key
    groups: list  # group id -> members (np.int32 world ranks)
    fn_names: list  # function names of the rank's records (+ "?")
    nrecords: int = 0
    # MPI_Pcontrol calls, in order: (time ns, level) rows (trace version 5; none before)
    pcontrol: np.ndarray = None
    thread_calls: np.ndarray = None  # first call of each thread (calls are by thread)
    path_cat: dict = None  # local path -> its time category, where not its function's
    # the MPI calls, by thread then in order: thread, path (local), t0, t1 (ns), role;
    # kept for the event graph (load(detail=True)), else dropped once the tables are made
    calls: Cols = None


def object_labels(meta, addresses):
    """Code addresses -> (codes, labels): labels[codes[i]] is 'path|buildid|offset'
    (offset hex) of addresses[i]; '' for address 0 (unknown)."""
    uniq, codes = dense_ids(addresses)
    objs = sorted(meta.get("objects") or [], key=lambda o: o["start"])
    starts = np.array([o["start"] for o in objs], np.int64)
    ends = np.array([o["end"] for o in objs], np.int64)
    labels = []
    for a in uniq.tolist():
        i = int(np.searchsorted(starts, a, "right")) - 1 if len(objs) else -1
        if a == 0:
            labels.append("")
        elif i >= 0 and a < ends[i]:
            o = objs[i]
            labels.append(f"{o['path']}|{o.get('buildid', '')}|{a - o['base']:x}")
        else:
            labels.append(f"?|?|{a:x}")
    return codes, labels


def prepare(rf):
    """RankRecords (readers/trace.py) -> RankModel, with numpy on whole columns."""
    meta, rec, notes = rf.meta, rf.records, list(rf.notes)
    fn_names = list(meta.get("functions") or [])
    # records of each thread together, in their order
    thread = rf.thread
    typ = rf.types if rf.types is not None else np.ascontiguousarray(rec["type"])
    one_thread = not len(thread) or thread.min() == thread.max()
    if not one_thread and (np.diff(thread) < 0).any():
        order = np.argsort(thread, kind="stable")
        rec, thread, typ = rec[order], thread[order], typ[order]
    n = len(rec)
    starts = _segments(thread) if not one_thread else np.zeros(min(n, 1), np.int64)
    threads = len(starts) > 1
    labels = [(ROOT_LABEL,)]  # local node 0: the root; a node is its label tuple
    parents = [-1]
    enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
    regions = bool(enter.any() or leave.any())
    if regions:
        top = _regions(meta, rec, enter, leave, starts, labels, parents)
    else:
        top = None  # innermost open region after each record: root
    is_call = typ == T["CALL"]
    ci = np.flatnonzero(is_call)
    # times (ns) of the calls, and of every record where time is attributed record by
    # record (threads or user regions; meaningful for TIMED ones, t1 for SPANS ones)
    if threads or regions:
        t0, t1 = to_ns(meta, rec["t0"]), to_ns(meta, rec["t1"])
        ct0, ct1 = t0[ci], t1[ci]
        span = time_span(typ, t0, t1)
    else:
        ct0, ct1 = to_ns(meta, rec["t0"][ci]), to_ns(meta, rec["t1"][ci])
        flush = typ == T["FLUSH"]
        fi = np.flatnonzero(flush) if flush.any() else ci[:0]
        ft0, ft1 = to_ns(meta, rec["t0"][fi]), to_ns(meta, rec["t1"][fi])
        span = _span((ct0, ft0), (ct0, ft0, ct1, ft1))

    # ---- calls and their paths: (region node, function, call site) ----
    names = fn_names + ["?"]
    fn = np.minimum(rec["fn"][ci].astype(np.int64), len(fn_names))
    site_code, site_labels = object_labels(meta, rec["bytes"][ci])
    call_path = np.zeros(len(ci), np.int64)
    leaf_fn = []
    if len(ci):
        nf, ns = len(names), max(len(site_labels), 1)
        key = fn * ns + site_code
        if regions:
            key = _before(top, ci, starts) * (nf * ns) + key
        uk, inv = dense_ids(key)
        first = len(labels)
        for k in uk.tolist():
            parent, rest = divmod(k, nf * ns)
            f, sc = divmod(rest, ns)
            labels.append(labels[parent] + (f"M:{names[f]}@{site_labels[sc]}",))
            parents.append(parent)
            leaf_fn.append(f)
        call_path = first + inv
    npaths = len(labels)
    path_fn = np.full(npaths, -1, np.int64)
    path_fn[npaths - len(leaf_fn) :] = leaf_fn
    role_of = np.array([R[classify(f)[1]] for f in names], np.int16)
    calls = Cols(thread=thread[ci], path=call_path, t0=ct0, t1=ct1, role=role_of[fn])

    # ---- sub-events: what the calls did ----
    si = np.flatnonzero(SUB(typ))
    call_of = np.cumsum(is_call)[si] - 1
    r = {k: rec[k][si] for k in ("t0", "t1", "flags", "peer", "tag", "comm", "bytes")}
    rtyp = typ[si]
    comms, ckeys = comm_keys(meta)
    windows, wkeys = _window_keys(meta, ckeys)
    # communicator number: 1 + index in the JSON, 0 for none (or an unknown index)
    lc = r["comm"].astype(np.int64) + 1
    lc[(lc < 0) | (lc > len(ckeys))] = 0
    ev = Cols(
        call=call_of,
        type=rtyp,
        flags=r["flags"],
        peer=r["peer"],
        tag=r["tag"],
        comm=lc,
        bytes=r["bytes"],
        key=r["t0"],
        number=r["t1"],
    )
    call_t0 = calls["t0"] if threads else None
    sends, recvs, send_ch, recv_ch = _messages(ev, calls, rf.rank, len(ckeys) + 1, call_t0)
    _sequence(ev, meta, rf.rank, call_t0, len(ckeys) + 1)
    groups = [np.array(g.get("ranks", []), np.int32) for g in meta.get("groups", [])]
    colls = _collectives(ev, calls, rf.rank, r["t1"], r["tag"])
    path_cat = _completion_categories(ev, calls, colls, names, fn, npaths)
    wcalls, wevents = _window_events(ev, calls, rf.rank, r, wkeys)

    # ---- per path: time, overhead, calls, bytes ----
    t_begin, t_end = app_window(meta, span)
    if not threads and not regions:
        time_ns, overhead_ns = _attribute_flat(
            ct0, ct1, ft0, ft1, call_path, npaths, t_begin, t_end
        )
    else:
        if top is None:
            top = np.zeros(n, np.int64)
        top_before = np.zeros(n, np.int64)
        if n:
            top_before[1:] = top[:-1]
            top_before[starts] = 0
        leaf = np.full(n, -1, np.int64)
        leaf[ci] = call_path
        time_ns, overhead_ns = _attribute_time(
            typ, t0, t1, top, top_before, leaf, starts, npaths, t_begin, t_end
        )
    visits = np.bincount(call_path, minlength=npaths).astype(np.int64)
    # bytes moved: of SEND, RECV, COLL, RMA; + t1 (bytes received) of COLL and RMA
    two = (rtyp == T["COLL"]) | (rtyp == T["RMA"])
    w = (r["bytes"] + r["t1"] * two) * MOVES(rtyp)
    moved = np.bincount(call_path[call_of], weights=w.astype(np.float64), minlength=npaths)
    # a damaged trace's byte counts can sum past int64: kept at its bounds, not cast wrapped
    moved = np.clip(moved, -(2.0**63), 2.0**63 - 1024)
    return RankModel(
        rank=rf.rank,
        host=meta.get("host", "?"),
        state=meta.get("state", "?"),
        complete=rf.complete,
        notes=notes,
        t_begin=t_begin,
        t_end=t_end,
        sends=sends,
        recvs=recvs,
        send_channels=send_ch,
        recv_channels=recv_ch,
        colls=colls,
        wcalls=wcalls,
        wevents=wevents,
        ncalls=len(ci),
        paths=labels,
        path_fn=path_fn,
        time_ns=time_ns,
        overhead_ns=overhead_ns,
        visits=visits,
        bytes=np.rint(moved).astype(np.int64),
        comms=comms,
        comm_keys=np.r_[np.int64(0), ckeys].astype(np.int64),
        windows=windows,
        groups=groups,
        fn_names=names,
        nrecords=n,
        pcontrol=_pcontrol(meta, rec, typ),
        thread_calls=_segments(calls["thread"]),
        path_cat=path_cat,
        calls=calls,
    )


def _pcontrol(meta, rec, typ):
    """(time ns, level) of the rank's MPI_Pcontrol calls, by time (a thread's records
    are together, not the rank's)."""
    pi = np.flatnonzero(typ == T["PCONTROL"])
    t = to_ns(meta, rec["t0"][pi])
    order = np.argsort(t, kind="stable")
    return np.stack([t[order], rec["tag"][pi][order].astype(np.int64)], axis=1)


def _before(top, index, starts):
    """The innermost open region before each record of index (the root at a thread's
    first record)."""
    out = np.where(index > 0, top[np.maximum(index - 1, 0)], 0)
    out[np.isin(index, starts)] = 0
    return out


def _messages(ev, calls, rank, ncomm, call_t0):
    """The rank's messages as sender (SEND_COLS) and receiver (RECV_COLS), and the
    tables of the channels it sends and receives on (rows: peer, communicator number,
    tag; "chan" indexes them).

    A message's number on its channel counts the rank's earlier messages on the channel
    in the order of posting: MPI matches the messages of a channel in that order. A send
    is posted by its own call (in the order of the records; in the order of time with
    several threads) and completed by it when blocking, else by the call of the
    SEND_DONE that names it; a receive is posted (e: enter) by the call of its IRECV, if
    any, else by its own call, and completed by its own call."""
    typ, call, flags, peer = ev["type"], ev["call"], ev["flags"], ev["peer"]
    n = len(typ)
    S = np.flatnonzero(typ == T["SEND"])
    V = np.flatnonzero(typ == T["RECV"])
    nbS = (flags[S] & F["NONBLOCKING"]) != 0
    # ---- requests: the post of each completion (SEND_DONE; RECV with a request) ----
    D = np.flatnonzero(typ == T["SEND_DONE"])
    posts = np.concatenate([S[nbS], np.flatnonzero(typ == T["IRECV"])])
    done = np.concatenate([D, V[ev["key"][V] != 0]])
    post = np.full(n, -1, np.int64)
    post[done] = _request_posts(ev["key"], ev["number"], posts, done)
    # ---- numbers on channels ----
    lc = ev["comm"]
    tag = ev["tag"].astype(np.int64)
    p64 = peer.astype(np.int64)
    npeer = int(p64.max(initial=0)) + 3
    ntag = int(tag.max(initial=0)) + 2
    fits = n == 0 or (
        p64.min(initial=0) >= -2 and tag.min(initial=0) >= -1 and npeer * ntag * ncomm < 2**62
    )
    seqs, chans, tables = [], [], []
    for i, pv in ((S, None), (V, post[V])):
        if call_t0 is not None:
            at = i if pv is None else np.where(pv >= 0, pv, i)
            order = np.argsort(call_t0[call[at]], kind="stable")
        elif pv is not None and (pv >= 0).any():
            order = _order_of_distinct(np.where(pv >= 0, pv, i), n)
        else:
            order = None  # posted in the order of the records
        if fits:
            uniq, ids = dense_ids(((p64[i] + 2) * ncomm + lc[i]) * ntag + tag[i] + 1)
            rest, tg = np.divmod(uniq, ntag)
            pk, c = np.divmod(rest, ncomm)
            table = np.stack([pk - 2, c, tg - 1], axis=1)
        else:
            table, ids = np.unique(
                np.stack([p64[i], lc[i], tag[i]], axis=1), axis=0, return_inverse=True
            )
            ids = ids.reshape(-1)
        seqs.append(channel_numbers(ids, len(table), order))
        chans.append(ids)
        tables.append(table.astype(np.int64))
    # ---- the rows (messages to and from real ranks) ----
    ks = np.flatnonzero(p64[S] >= 0)
    si = S[ks]
    ccall = np.where(nbS[ks], -1, call[si])
    pd = post[D]
    if len(pd):
        where = np.full(n, -1, np.int64)
        where[si] = np.arange(len(si))
        j = where[pd[pd >= 0]]
        ok = j >= 0
        ccall[j[ok]] = call[D[pd >= 0][ok]]
    sc, cc = call[si], np.maximum(ccall, 0)
    # (cb, ce, path: of call 0 where no call completed the send: call -1)
    sends = Cols(
        chan=chans[0][ks].astype(np.int32),
        seq=seqs[0][ks].astype(np.int32),
        e=calls["t0"][sc],
        cb=calls["t0"][cc],
        ce=calls["t1"][cc],
        path=calls["path"][cc],
        call=ccall.astype(np.int32),
        nb=nbS[ks].view(np.uint8),
        thread=calls["thread"][sc].astype(np.int16),
        scall=sc,
        sync=((flags[si] & F["SYNCHRONOUS"]) != 0).view(np.uint8),
    )
    kv = np.flatnonzero(p64[V] >= 0)
    ri = V[kv]
    rc = call[ri]
    pr = post[ri]
    req = np.where(pr >= 0, call[np.maximum(pr, 0)], rc)
    recvs = Cols(
        chan=chans[1][kv].astype(np.int32),
        seq=seqs[1][kv].astype(np.int32),
        e=calls["t0"][req],
        cb=calls["t0"][rc],
        ce=calls["t1"][rc],
        path=calls["path"][rc],
        call=rc.astype(np.int32),
        thread=calls["thread"][rc].astype(np.int16),
        bytes=ev["bytes"][ri],
        pcall=req,
    )
    return _typed(sends, SEND_COLS), _typed(recvs, RECV_COLS), tables[0], tables[1]


def channel_numbers(ids, nchan, order=None, before=None):
    """The number of each message on its channel, for the model and the exports alike:
    MPI matches the messages of a channel in the order of posting, so a message's number
    counts the messages of its channel (ids: its index, below nchan) posted before it
    (order: the messages' indices in the order of posting; None: as given), plus
    before[id], the channel's messages numbered earlier (a rank read in parts)."""
    seq = rank_in_group(ids, nchan, order)
    return seq if before is None else before[ids] + seq


def _collectives(ev, calls, rank, t1, tag):
    """The rank's collective operations (COLL_COLS); key: its communicator number. A
    nonblocking one ends in the call of the COLL_DONE that names its post (its number
    is in the COLL's tag); without one it stays open."""
    typ = ev["type"]
    ci = np.flatnonzero(typ == T["COLL"])
    c = ev["call"][ci]
    nb = (ev["flags"][ci] & F["NONBLOCKING"]) != 0
    flags = nb * np.uint8(COLL_FLAGS["nb"])
    for on, bit in (
        (ev["bytes"][ci] > 0, "sent"),
        (t1[ci] > 0, "recv"),
        (ev["peer"][ci] == rank, "root"),
    ):
        flags |= on * np.uint8(COLL_FLAGS[bit])
    done_call = c.copy()  # the call that completes each: its own if blocking
    if nb.any():
        posts = ci[nb]
        done = np.flatnonzero(typ == T["COLL_DONE"])
        number = ev["number"].copy()
        number[posts] = tag[posts]
        post = _request_posts(ev["key"], number, posts, done)
        at = np.full(len(typ), -1, np.int64)
        ok = post >= 0
        at[post[ok]] = ev["call"][done[ok]]
        done_call[nb] = at[posts]
        flags |= (done_call < 0) * np.uint8(COLL_FLAGS["open"])
        done_call = np.where(done_call < 0, c, done_call)
    return _typed(
        Cols(
            key=ev["comm"][ci],
            seq=ev["seq"][ci],
            path=calls["path"][c],
            flags=flags,
            b=calls["t0"][c],
            e=calls["t1"][done_call],
            w=calls["t0"][done_call],
            wpath=calls["path"][done_call],
            wcall=done_call,
            bcall=c,
            bytes=ev["bytes"][ci] + np.maximum(t1[ci], 0),
        ),
        COLL_COLS,
    )


def _completion_categories(ev, calls, colls, names, fn, npaths):
    """{path: category} for the paths of completion calls (MPI_Wait, MPI_Test, ...)
    that completed nonblocking collectives and no message: their time is collective
    time ("sync_coll" for MPI_Ibarrier, else "coll"), where their waits are charged.
    A path that also completes messages stays point-to-point."""
    nb = (colls["flags"] & (COLL_FLAGS["nb"] | COLL_FLAGS["open"])) == COLL_FLAGS["nb"]
    if not nb.any():
        return {}
    typ = ev["type"]
    wcall = colls["wcall"][nb]
    start = np.flatnonzero(typ == T["COLL"])[nb]
    barrier = np.array([classify(f)[0] == "sync_coll" for f in names])[fn[ev["call"][start]]]
    msg = ev["call"][(typ == T["SEND_DONE"]) | ((typ == T["RECV"]) & (ev["key"] != 0))]
    path = calls["path"]
    n_msg = np.bincount(path[msg], minlength=npaths)
    n_bar = np.bincount(path[wcall], weights=barrier, minlength=npaths)
    n_coll = np.bincount(path[wcall], minlength=npaths)
    return {
        int(p): "sync_coll" if n_bar[p] * 2 > n_coll[p] else "coll"
        for p in np.flatnonzero((n_coll > 0) & (n_msg == 0))
    }


def _window_events(ev, calls, rank, r, wkeys):
    """The rank's window events (WEV_COLS) and the calls they belong to (WCALL_COLS)."""
    typ = ev["type"]
    wi = np.flatnonzero(WINDOWED[typ])
    c = ev["call"][wi]
    kc, cidx = np.unique(c, return_inverse=True)
    t = typ[wi]
    wcalls = Cols(
        t0=calls["t0"][kc],
        t1=calls["t1"][kc],
        path=calls["path"][kc],
        role=calls["role"][kc],
        thread=calls["thread"][kc],
        index=kc,
    )
    wevents = Cols(
        call=cidx.reshape(-1),
        type=t,
        flags=ev["flags"][wi],
        peer=ev["peer"][wi],
        group=np.where(t == T["WSYNC"], r["t1"][wi], -1),
        win=_lookup(wkeys, r["tag"][wi]),
        bytes=ev["bytes"][wi],
        bytes2=np.where(t == T["RMA"], r["t1"][wi], 0),
        seq=ev["seq"][wi],
        crank=ev["crank"][wi],
        csize=ev["csize"][wi],
        rank=np.full(len(wi), rank, np.int32),
    )
    return _typed(wcalls, WCALL_COLS), _typed(wevents, WEV_COLS)


def _typed(cols, types):
    return Cols({k: np.asarray(cols[k]).astype(t, copy=False) for k, t in types.items()})


def _sequence(ev, meta, rank, call_t0, ncomm):
    """COLL, WIN: the number of the operation on its communicator (MPI orders the
    collectives of a communicator alike on every member: ranks agree without talking);
    WIN: the rank's position in the communicator (crank) and its size (csize). call_t0: the
    calls' enter times when the rank has several threads (their operations are then
    numbered in the order of time), else None."""
    typ = ev["type"]
    n = len(typ)
    lc = ev["comm"]
    seq = np.zeros(n, np.int64)
    crank = np.zeros(n, np.int32)
    csize = np.zeros(n, np.int32)
    pos, size = _comm_positions(meta, rank)
    for t in (T["COLL"], T["WIN"]):
        i = np.flatnonzero(typ == t)
        if not len(i):
            continue
        order = None if call_t0 is None else np.argsort(call_t0[ev["call"][i]], kind="stable")
        if t == T["COLL"]:
            seq[i] = rank_in_group(lc[i], ncomm, order)
        else:
            free = (ev["flags"][i] & F["FREE"]) != 0
            seq[i] = rank_in_group(lc[i] * 2 + free, 2 * ncomm, order)
        if t == T["WIN"]:
            c = lc[i] - 1
            ok = (c >= 0) & (c < len(pos))
            c = np.clip(c, 0, max(len(pos) - 1, 0))
            crank[i] = np.where(ok, pos[c] if len(pos) else -1, -1)
            csize[i] = np.where(ok, size[c] if len(size) else -1, -1)
    ev["seq"], ev["crank"], ev["csize"] = seq, crank, csize


def _order_of_distinct(values, bound):
    """The order that sorts values (distinct integers in [0, bound)): a scatter, no sort;
    a stable argsort if they are not distinct."""
    slot = np.full(bound, -1, np.int64)
    slot[values] = np.arange(len(values))
    order = slot[slot >= 0]
    if len(order) != len(values):
        return np.argsort(values, kind="stable")
    return order


def _comm_positions(meta, rank):
    """For each local communicator id: this rank's position in it and its size."""
    pos, size = [], []
    for c in meta.get("comms", []):
        m = c.get("ranks", [])
        pos.append(m.index(rank) if rank in m else -1)
        size.append(len(m))
    return np.array(pos, np.int64), np.array(size, np.int64)


def _lookup(table, local):
    """table[local] where 0 <= local < len(table), else 0."""
    if not len(table):
        return np.zeros(len(local), np.int64)
    ok = (local >= 0) & (local < len(table))
    return np.where(ok, table[np.clip(local, 0, len(table) - 1)], 0).astype(np.int64)


def _by_number(pn, dn):
    """For each number of dn, the index of the post (numbered pn) with that number, the
    last one if several, else -1. The runtime numbers posts 1, 2, ...: a table indexed
    by number; numbers far beyond the posts (a damaged trace; an export's few open posts
    of a long rank) are looked up by sorting, not with a table that large."""
    top = int(max(pn.max(), dn.max()))
    if top <= 2 * (len(pn) + len(dn)) + 1:
        table = np.full(top + 1, -1, np.int64)
        table[pn] = np.arange(len(pn))
        return table[np.maximum(dn, 0)]
    o = np.argsort(pn, kind="stable")
    sp = pn[o]
    i = np.clip(np.searchsorted(sp, dn, "right") - 1, 0, len(sp) - 1)
    return np.where(sp[i] == dn, o[i], -1)


def _request_posts(key, number, posts, done):
    """For each completion of done (indices of SEND_DONE, and RECV with a request key),
    the index of its post (one of posts: SEND posted nonblocking, IRECV), else -1."""
    found = request_posts(number[posts], key[posts], posts, number[done], key[done], done)
    if not len(posts):  # completions of no post (a damaged trace): nothing to index
        return np.full(len(done), -1, found.dtype)
    return np.where(found >= 0, posts[np.maximum(found, 0)], -1)


def request_posts(post_number, post_key, post_order, done_number, done_key, done_order):
    """The rule that links a request's completion to its post, for the model and the
    exports alike: for each completion, the index into the posts of its post, else -1.
    The runtime numbers each post (1, 2, ...) and repeats the number in its completion: a
    completion with a number takes the post of that number (the last of several), wherever
    it stands, as a number is its post's alone (a thread may complete a request before the
    records meet its post). Records without numbers (imported traces) are linked by
    request key among the posts without one: the latest post of the key before the
    completion (order: places in the order of the records), as MPI reuses a request's
    handle once it completed. On whole arrays, no Python loop."""
    pn, dn = np.asarray(post_number, np.int64), np.asarray(done_number, np.int64)
    out = np.full(len(dn), -1, np.int64)
    if not len(dn) or not len(pn):
        return out
    okp, okd = pn > 0, dn > 0
    if okp.all() and okd.all():
        return _by_number(pn, dn)
    if okp.any() and okd.any():
        found = _by_number(pn[okp], dn[okd])
        out[okd] = np.where(found >= 0, np.flatnonzero(okp)[np.maximum(found, 0)], -1)
    up, ud = np.flatnonzero(~okp), np.flatnonzero(~okd)
    pk, dk = np.asarray(post_key, np.int64), np.asarray(done_key, np.int64)
    po, do = np.asarray(post_order, np.int64), np.asarray(done_order, np.int64)
    found = latest_post(pk[up], po[up], dk[ud], do[ud])
    out[ud[found >= 0]] = up[found[found >= 0]]
    return out


def latest_post(post_value, post_order, done_value, done_order):
    """For each completion (value: a request key; order: its place among the records),
    the index into the posts of the latest post of the same value before it, else -1
    (of posts of equal order, the later in the arrays). On whole arrays, no Python
    loop."""
    post_value, done_value = np.asarray(post_value, np.int64), np.asarray(done_value, np.int64)
    npost = len(post_value)
    out = np.full(len(done_value), -1, np.int64)
    if not npost or not len(done_value):
        return out
    value = np.r_[post_value, done_value]
    o = np.lexsort((np.r_[post_order, done_order], value))
    is_post = o < npost
    last = np.maximum.accumulate(np.where(is_post, np.arange(len(o)), -1))
    prev = o[np.maximum(last, 0)]
    ok = ~is_post & (last >= 0) & (value[prev] == value[o])
    out[o[ok] - npost] = prev[ok]
    return out


def _regions(meta, rec, enter, leave, starts, labels, parents):
    """ENTER/LEAVE records -> calling-context nodes (appended to labels and parents);
    returns the innermost open node after each record."""
    n = len(rec)
    level = np.cumsum(enter.astype(np.int64) - leave.astype(np.int64))
    level -= np.repeat(np.r_[0, level[starts[1:] - 1]], np.diff(np.r_[starts, n]))
    # LEAVEs without an ENTER (a trace started inside functions) are ignored
    low = _segment_min(np.minimum(level, 0), starts)
    low_prev = np.r_[0, low[:-1]]
    low_prev[starts] = 0
    leave = leave & ~(low < low_prev)
    level = level - low
    depth = np.where(enter, level - 1, level)  # LEAVE: depth of the region it closes
    rid = rec["comm"].astype(np.int64)
    rkey = np.where(rid >= 0, -(rid + 1), rec["bytes"])
    pos_e, pos_l = np.flatnonzero(enter), np.flatnonzero(leave)
    ukeys, code_e = np.unique(rkey[pos_e], return_inverse=True)
    code_e = code_e.reshape(-1)
    rlabels = _region_label_list(meta, ukeys)
    node_of = np.zeros(n, np.int64)
    d_e = depth[pos_e]
    nr = max(len(ukeys), 1)
    for d in range(int(d_e.max()) + 1 if len(d_e) else 0):
        sel = d_e == d
        here = pos_e[sel]
        if d == 0:
            parent = np.zeros(len(here), np.int64)
        else:
            above = pos_e[d_e == d - 1]
            j = np.searchsorted(above, here, "right") - 1
            parent = np.where(j >= 0, node_of[above[np.maximum(j, 0)]], 0)
        uk, inv = np.unique(parent * nr + code_e[sel], return_inverse=True)
        first = len(labels)
        for k in uk.tolist():
            p, c = divmod(k, nr)
            labels.append(labels[p] + (rlabels[c],))
            parents.append(p)
        node_of[here] = first + inv.reshape(-1)
    # the node each LEAVE closes: the latest ENTER at its depth before it
    left = np.zeros(len(pos_l), np.int64)
    d_l = depth[pos_l]
    for d in np.unique(d_l):
        sel = d_l == d
        above = pos_e[d_e == d]
        j = np.searchsorted(above, pos_l[sel], "right") - 1
        left[sel] = np.where(j >= 0, node_of[above[np.maximum(j, 0)]], 0)
    par = np.array(parents, np.int64)
    val = np.zeros(n, np.int64)
    val[pos_e] = node_of[pos_e]
    val[pos_l] = np.maximum(par[left], 0)
    return _ffill(enter | leave, val, starts, 0)


def _region_label_list(meta, ukeys):
    """Labels of region keys: -(id + 1) for a region id of the JSON ('N:name'), else a
    function address ('F:path|buildid|offset')."""
    regions = meta.get("regions") or []
    keys = ukeys.tolist()
    out = [""] * len(keys)
    addr = [i for i, k in enumerate(keys) if k >= 0]
    if addr:
        codes, labs = object_labels(meta, np.array([keys[i] for i in addr], np.int64))
        for i, c in zip(addr, codes):
            out[i] = "F:" + labs[c]
    for i, k in enumerate(keys):
        if k < 0:
            r = regions[-k - 1] if -k - 1 < len(regions) else {}
            out[i] = "N:" + (r.get("name", "?") if isinstance(r, dict) else str(r))
    return out


def _segments(thread):
    """Start indices of runs of equal thread ids (records already grouped by thread)."""
    if not len(thread):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])


def _ffill(defined, values, starts, start_value):
    """Forward-fill values[defined] per segment; segment starts without a value take
    start_value."""
    n = len(values)
    idx = np.where(defined, np.arange(n), -1)
    v = values.copy()
    at_start = np.zeros(n, bool)
    at_start[starts] = True
    fill_start = at_start & ~defined
    v[fill_start] = start_value
    idx[fill_start] = np.flatnonzero(fill_start)
    idx = np.maximum.accumulate(idx) if n else idx
    return v[idx]


def _segment_min(values, starts):
    """Running minimum restarted at each segment start."""
    out = values.copy()
    bounds = np.r_[starts, len(values)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        out[a:b] = np.minimum.accumulate(values[a:b])
    return out


def comm_keys(meta):
    comms, keys = {}, []
    for c in meta.get("comms", []):
        members = np.array(c.get("ranks", []), np.int32)
        k = comm_key(members, c.get("remote", []), c.get("seq", 0))
        comms[k] = members
        keys.append(k)
    return comms, np.array(keys, np.int64)


def _window_keys(meta, ckeys):
    windows, keys = {}, []
    for w in meta.get("windows", []):
        c = w.get("comm", -1)
        ck = int(ckeys[c]) if 0 <= c < len(ckeys) else 0
        k = window_key(ck, w.get("seq", 0))
        windows[k] = ck
        keys.append(k)
    return windows, np.array(keys, np.int64)


def time_span(typ, t0, t1):
    """(first, last) time of the TIMED records (t1 counts for SPANS ones only), None if
    there are none."""
    ti = np.flatnonzero(TIMED(typ))
    return _span((t0[ti],), (t0[ti], t1[ti[SPANS(typ[ti])]]))


def _span(firsts, lasts):
    """(earliest of the arrays firsts, latest of the arrays lasts), None if firsts are
    all empty."""
    firsts = [a for a in firsts if len(a)]
    if not firsts:
        return None
    return (min(int(a.min()) for a in firsts), max(int(a.max()) for a in lasts if len(a)))


def _attribute_flat(ct0, ct1, ft0, ft1, call_path, npaths, tb, te):
    """_attribute_time for one thread without user functions, from the times of its
    calls and flushes: each call's time is its path's, flushes are overhead, the rest of
    [tb, te] is the root's."""
    dur = np.maximum(np.minimum(ct1, te) - np.maximum(ct0, tb), 0)
    time_ns = np.bincount(call_path, weights=dur, minlength=npaths).astype(np.int64)
    over_ns = np.zeros(npaths, np.int64)
    if len(ft0):
        over_ns[0] = int(np.maximum(np.minimum(ft1, te) - np.maximum(ft0, tb), 0).sum())
    time_ns[0] += max(te - tb, 0) - int(dur.sum()) - over_ns[0]
    return time_ns, over_ns


def _attribute_time(typ, t0, t1, top, top_before, leaf, starts, npaths, tb, te):
    """Exclusive time per path from the records of each thread: the time between two
    consecutive boundaries (enter/leave of regions, calls, flushes) belongs to what is
    running then. Thread 0's time is the rank's [tb, te]; other threads' from their first
    to their last record. Flushes are trace overhead at the path they interrupt."""
    time_ns = np.zeros(npaths, np.int64)
    over_ns = np.zeros(npaths, np.int64)
    n = len(typ)
    if not n:
        time_ns[0] = max(te - tb, 0)
        return time_ns, over_ns
    call, flush = typ == T["CALL"], typ == T["FLUSH"]
    reg = (typ == T["ENTER"]) | (typ == T["LEAVE"])
    # two boundary slots per record: (start, what runs after it), (end, what runs after)
    bt = np.empty(2 * n, np.int64)
    bnode = np.empty(2 * n, np.int64)
    bover = np.zeros(2 * n, bool)
    valid = np.zeros(2 * n, bool)
    bt[0::2], bt[1::2] = t0, t1
    bnode[0::2] = np.where(call, leaf, np.where(flush, top_before, top))
    bnode[1::2] = top_before
    bover[0::2] = flush
    valid[0::2] = call | flush | reg
    valid[1::2] = call | flush
    bounds = np.r_[starts, n]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        sl = slice(2 * a, 2 * b)
        v = valid[sl]
        if not v.any():
            continue
        t, nd, ov = bt[sl][v], bnode[sl][v], bover[sl][v]
        t = np.maximum.accumulate(t)
        lo, hi = (tb, te) if k == 0 else (t[0], t[-1])
        start = np.r_[lo, t]
        end = np.r_[t, hi]
        node = np.r_[0, nd]
        over = np.r_[False, ov]
        dur = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None)
        w = ~over
        time_ns += np.bincount(node[w], weights=dur[w], minlength=npaths).astype(np.int64)
        if over.any():
            over_ns += np.bincount(node[over], weights=dur[over], minlength=npaths).astype(np.int64)
    return time_ns, over_ns


# ---- the whole trace (or the ranks one analysis process owns) ----


@dataclass
class Trace:
    world_size: int
    functions: list
    ranks: list  # RankModel, by rank
    notes: list = field(default_factory=list)
    missing: list = field(default_factory=list)  # ranks without any trace file
    source: str = ""

    @property
    def complete(self):
        return not self.missing and all(r.complete for r in self.ranks)

    @property
    def nevents(self):
        return sum(r.nrecords for r in self.ranks)

    @classmethod
    def from_literal(
        cls, ranks, comms=None, windows=(), groups=(), world_size=None, functions=None
    ):
        """A trace from Python lists, for tests. ranks: {rank: [item, ...]} where an item
        is (fn_name, t0_ns, t1_ns, [subevent dict, ...], thread) for an MPI call (thread
        optional: 0), ("ENTER"|"LEAVE", region_name, t_ns), or ("PCONTROL", level,
        t_ns). A subevent dict has type (name) and any of
        peer, tag, comm (index into comms), win (index into windows), group, bytes,
        bytes2, key, number, flags (int or list of flag names). comms: list of member lists
        (default: [all ranks]); windows: list of comm indices; groups: member lists."""
        n = world_size or (max(ranks) + 1 if ranks else 0)
        comms = comms or [list(range(n))]
        fns = list(functions or [])
        for items in ranks.values():
            for it in items:
                if it[0] not in ("ENTER", "LEAVE", "PCONTROL") and it[0] not in fns:
                    fns.append(it[0])
        files = []
        seqs = {}
        cdefs = []
        for i, m in enumerate(comms):
            seq = seqs.get(tuple(m), 0)
            seqs[tuple(m)] = seq + 1
            cdefs.append({"id": i, "ranks": list(m), "seq": seq})
        wseq = {}
        wdefs = []
        for i, c in enumerate(windows):
            s = wseq.get(c, 0)
            wseq[c] = s + 1
            wdefs.append({"id": i, "comm": c, "seq": s})
        for rank in sorted(ranks):
            rows, regions, threads = [], [], []
            t_last = 0
            for it in ranks[rank]:
                if it[0] == "PCONTROL":
                    rows.append(dict(type=T["PCONTROL"], t0=it[2], tag=it[1]))
                    threads.append(0)
                    continue
                if it[0] in ("ENTER", "LEAVE"):
                    if it[1] not in regions:
                        regions.append(it[1])
                    rows.append(dict(type=T[it[0]], t0=it[2], comm=regions.index(it[1])))
                    threads.append(0)
                    t_last = max(t_last, it[2])
                    continue
                name, a, b = it[0], it[1], it[2]
                rows.append(dict(type=T["CALL"], t0=a, t1=b, fn=fns.index(name)))
                thread = it[4] if len(it) > 4 else 0
                threads += [thread] * (1 + len(it[3] if len(it) > 3 else []))
                t_last = max(t_last, b)
                for e in it[3] if len(it) > 3 else []:
                    e = dict(e)
                    row = dict(
                        type=T[e.pop("type")],
                        peer=e.pop("peer", -1),
                        comm=e.pop("comm", -1),
                        tag=e.pop("tag", 0),
                        bytes=e.pop("bytes", 0),
                    )
                    flags = e.pop("flags", 0)
                    if isinstance(flags, (list, tuple)):
                        flags = sum(F[f] for f in flags)
                    row["flags"] = flags
                    if "win" in e:
                        row["tag"] = e.pop("win")
                    if "group" in e:
                        row["t1"] = e.pop("group")
                    if "bytes2" in e:
                        row["t1"] = e.pop("bytes2")
                    if "key" in e:
                        row["t0"] = e.pop("key")
                    if "number" in e:  # a request's post number
                        row["tag" if row["type"] == T["COLL"] else "t1"] = e.pop("number")
                    if e:
                        raise ValueError(f"unknown subevent fields {sorted(e)}")
                    rows.append(row)
            rec = np.zeros(len(rows), EVENT_DTYPE)
            rec["peer"] = -1
            rec["comm"] = -1
            for i, row in enumerate(rows):
                for k, v in row.items():
                    rec[i][k] = v
            meta = {
                "format": FILES["trace"].magic,
                "version": 1,
                "rank": rank,
                "world_size": n,
                "host": "host",
                "state": "complete",
                "functions": fns,
                "clock": {"ticks": [0, 1], "ns": [0, 1], "t_init_ns": 0, "t_fini_ns": t_last},
                "comms": cdefs,
                "windows": wdefs,
                "groups": [{"id": i, "ranks": list(g)} for i, g in enumerate(groups)],
                "regions": [{"name": r} for r in regions],
                "objects": [],
            }
            files.append(RankRecords(rank, rec, np.array(threads, np.int32), meta))
        data = [prepare(f) for f in files]
        return cls(world_size=n, functions=fns, ranks=data, source="literal")

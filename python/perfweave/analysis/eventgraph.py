"""The event graph of a trace: every location's MPI calls in order, and what links the
calls of different locations (messages, collective operations, RMA synchronisation).

The replay on an ideal network (analysis/replay.py), the critical paths and the delay
analysis are longest paths over this graph. Matching is the wait-state analysis's
(analysis/waitstates): messages by channel and number on it (wildcard receives keep the
message they got), collective operations by communicator and number on it (nonblocking
ones from their start call to the call that completed their request), fences and window
creation/free by window and number, access and exposure epochs by
(origin, target, window, number) as waitstates/rma.py pairs them.

Calls are numbered as the loaded trace numbers them (Loaded's "call": ranks in order,
a rank's calls by thread, then in order), so a location's calls are consecutive.
Times are ns on rank 0's clock.

EventGraph tables (Cols: named numpy columns of equal length):

- `locations` (one row per (rank, thread)): rank, thread, first (its first call; its
  calls are first .. first of the next location - 1), t_begin (the rank's MPI_Init
  done), t_end (the rank's MPI_Finalize entered).
- `calls` (one row per MPI call): loc, rank, thread, t0 (enter), t1 (leave), path
  (index into `paths`), fn (index into `functions`), role (model.trace.R), useful
  (ns of computation before the call on its location: its enter minus the previous
  call's leave; for a location's first call, its enter minus the rank's t_begin, at
  least 0).
- `messages` (one row per matched message): scall (the call that started the send),
  sdone (the call that completed the send: scall if blocking, the MPI_Wait*/Test* of a
  nonblocking one, -1 if never completed), rpost (the call that posted the receive:
  the MPI_Irecv, or the receive itself), rdone (the call that completed the receive),
  src, dst (ranks), bytes, sync (1: synchronous send, MPI_Ssend/Issend), tag.
- `coll_instances` (one row per operation instance: a collective operation, a fence, a
  window creation or free): kind (COLL, FENCE, WINDOW), size (members of its
  communicator), present (participants in the trace), whole (every member took part,
  alike, and none left it open), bytes (the largest sent + received of a participant).
- `coll_parts` (one row per participation): inst, rank, bcall (the call that started
  it: enter = arrival), ecall (the call that completed it: leave = departure; bcall for
  blocking ones), root (1 on the root of a rooted collective), bytes (sent + received),
  open (1: nonblocking and never completed).
- `rma_sync` (one row per pair-wise synchronisation of general active target
  synchronisation): kind (POST_COMPLETE: the target's MPI_Win_post before the origin's
  MPI_Win_complete; COMPLETE_WAIT: the origin's MPI_Win_complete before the target's
  Win_wait or completing Win_test), a (the call that must be entered first), b (the
  call whose leave waits for it), origin, target.

Columns keep the loaded trace's types (call numbers are int32: widen before arithmetic
that could pass 2**31). `unmatched` counts what the graph lacks (messages without
partner, incomplete collective instances).
"""

import copy
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis.exchange import Local
from perfweave.analysis.waitstates.collectives import COLLS, _comm_geometry, _instances, _kind
from perfweave.analysis.waitstates.common import _join, _table
from perfweave.analysis.waitstates.load import _unify, load
from perfweave.analysis.waitstates.p2p import _match
from perfweave.analysis.waitstates.rma import EPOCH_KEY, _window_timeline, _WindowEvents, epochs
from perfweave.model.trace import F, R, T, Cols

# coll_instances kind
COLL, FENCE, WINDOW = 0, 1, 2
# rma_sync kind
POST_COMPLETE, COMPLETE_WAIT = 0, 1


@dataclass
class EventGraph:
    locations: Cols
    calls: Cols
    messages: Cols
    coll_instances: Cols
    coll_parts: Cols
    rma_sync: Cols
    paths: list  # call path label tuples (Loaded.paths)
    functions: list  # function names
    loaded: object = None  # the Loaded it was built from
    unmatched: dict = field(default_factory=dict)

    @property
    def nevents(self):
        return self.loaded.trace.nevents if self.loaded is not None else 0

    def location(self, rank, thread=0):
        """The location id of (rank, thread), or -1."""
        loc = self.locations
        hit = np.flatnonzero((loc["rank"] == rank) & (loc["thread"] == thread))
        return int(hit[0]) if len(hit) else -1

    def call_name(self, call):
        """The MPI function name of a call."""
        return self.functions[int(self.calls["fn"][call])]


def load_graph(exp):
    """Read experiment exp (one process) and build its event graph."""
    return build(load(exp, Local(0), detail=True))


def from_trace(trace):
    """The event graph of a Trace built in memory (Trace.from_literal). The trace is
    copied: loading takes its ranks' tables, and a test replays one trace many ways."""
    trace = copy.deepcopy(trace)
    ex = Local(trace.world_size)
    return build(_unify(trace, ex, [rd.rank for rd in trace.ranks], detail=True))


def build(L):
    """The EventGraph of a trace loaded in one process with detail
    (waitstates.load.load(exp, Local(0), detail=True))."""
    if any(rd.calls is None for rd in L.trace.ranks) or "scall" not in L.sends:
        raise ValueError("the event graph needs the trace loaded with detail=True")
    unmatched = {}
    locations, calls = _calls(L)
    messages = _messages(L, unmatched)
    inst, parts = _collectives(L, unmatched)
    rsync = _rma_sync(L, inst, parts)
    return EventGraph(
        locations=locations,
        calls=calls,
        messages=messages,
        coll_instances=inst,
        coll_parts=parts,
        rma_sync=rsync,
        paths=L.paths,
        functions=L.trace.functions,
        loaded=L,
        unmatched=unmatched,
    )


CALL_COLS = {
    "loc": np.int32,
    "rank": np.int32,
    "thread": np.int32,
    "t0": np.int64,
    "t1": np.int64,
    "path": np.int32,
    "fn": np.int32,
    "role": np.int16,
    "useful": np.int64,
}


def _calls(L):
    """(locations, calls) from each rank's calls (RankModel.calls), in the order of the
    loaded trace's call numbers; the columns are filled rank by rank, in place."""
    calls = Cols({k: np.empty(L.ncalls, t) for k, t in CALL_COLS.items()})
    loc = {k: [] for k in ("rank", "thread", "first", "t_begin", "t_end")}
    a = 0
    for rd in L.trace.ranks:
        c = rd.calls
        b = a + len(c["t0"])
        out = calls.slice(a, b)
        first = rd.thread_calls if b > a else np.zeros(0, np.int64)
        lc = out["loc"]
        lc[:] = 0
        lc[first[1:]] = 1  # a thread's calls start a location
        np.cumsum(lc, out=lc)
        lc += len(loc["rank"])
        out["rank"][:] = rd.rank
        out["thread"][:] = c["thread"]
        out["t0"][:] = c["t0"]
        out["t1"][:] = c["t1"]
        out["path"][:] = rd.gpaths[c["path"]]
        out["role"][:] = c["role"]
        u = out["useful"]
        if b > a:
            np.subtract(out["t0"][1:], out["t1"][:-1], out=u[1:])
            u[first] = out["t0"][first] - rd.t_begin
            np.maximum(u, 0, out=u)
        loc["rank"] += [rd.rank] * len(first)
        loc["thread"] += c["thread"][first].astype(np.int64).tolist()
        loc["first"] += (a + first).tolist()
        loc["t_begin"] += [rd.t_begin] * len(first)
        loc["t_end"] += [rd.t_end] * len(first)
        a = b
    # the function of each call: its path's leaf
    fn = {f: i for i, f in enumerate(L.trace.functions)}
    leaf = [p[-1][2:].split("@", 1)[0] if p[-1].startswith("M:") else None for p in L.paths]
    np.take(np.array([fn.get(f, -1) for f in leaf], np.int32), calls["path"], out=calls["fn"])
    types = {"rank": np.int32, "thread": np.int32}
    return Cols({k: np.array(v, types.get(k, np.int64)) for k, v in loc.items()}), calls


def _messages(L, unmatched):
    """Matched messages, matched as message_pairs (p2p.py) matches them; only the
    columns the graph needs are gathered (a large trace has millions of messages)."""
    S, V = L.sends, L.recvs
    m = _match(V, S, L.nchan)
    rows = np.flatnonzero(m >= 0)
    si = m[rows]
    unmatched["sends"] = len(S) - len(rows)
    unmatched["receives"] = len(V) - len(rows)
    chan = V["chan"][rows]
    return Cols(
        scall=S["scall"][si],
        sdone=S["call"][si],
        rpost=V["pcall"][rows],
        rdone=V["call"][rows],
        src=L.rank_at("sends", si),
        dst=L.rank_at("recvs", rows),
        bytes=V["bytes"][rows],
        sync=S["sync"][si],
        tag=L.channels[chan, 3] if L.nchan else np.zeros(len(rows), np.int64),
    )


INST_COLS = {
    "kind": np.int8,
    "size": np.int32,
    "present": np.int32,
    "whole": bool,
    "bytes": np.int64,
}
PART_COLS = {
    "inst": np.int64,
    "rank": np.int32,
    "bcall": np.int64,
    "ecall": np.int64,
    "root": np.uint8,
    "bytes": np.int64,
    "open": np.uint8,
}


def _collectives(L, unmatched):
    """(coll_instances, coll_parts): collective operations by (communicator, number), as
    waitstates/collectives.py groups them, then fences by (window, number of fences
    before) and window creation/free by (window, free), as waitstates/rma.py does."""
    inst = {k: [] for k in INST_COLS}
    parts = {k: [] for k in PART_COLS}

    def add(kind, gid, n, size, whole, **cols):
        inst["kind"].append(np.full(n, kind))
        inst["size"].append(size)
        inst["present"].append(np.bincount(gid, minlength=n))
        inst["whole"].append(whole)
        inst["bytes"].append(_group_max(gid, cols["bytes"], n))
        parts["inst"].append(sum(len(k) for k in inst["kind"][:-1]) + gid)
        for k, v in cols.items():
            parts[k].append(v)

    C = L.colls
    if len(C):
        # instances numbered as collectives() numbers them: an offset per communicator
        # plus the operation's number on it
        key, seq = C["key"], C["seq"].astype(np.int64)
        nk = len(L.comm_keys)
        size = np.where(np.bincount(key, minlength=nk) > 0, _group_max(key, seq, nk) + 1, 0)
        gid = (np.cumsum(size) - size)[key] + seq
        n = int(size.sum())
        count = np.bincount(gid, minlength=n)
        # communicator sizes from the definitions, as collectives() takes them
        ksize = np.array([len(L.comms.get(int(k), ())) for k in L.comm_keys], np.int64)
        csize = np.repeat(ksize, size)
        kind = _kind(C)
        kfirst = np.zeros(n, np.int64)
        kfirst[gid] = kind
        opened = C["open"] != 0
        # as collectives(): every member took part, all alike, none left it open
        unlike = np.bincount(gid, weights=(kind != kfirst[gid]) | opened, minlength=n)
        add(
            COLL,
            gid,
            n,
            np.maximum(csize, 0),
            (count == csize) & (unlike == 0),
            rank=C["rank"],
            bcall=C["bcall"],
            ecall=np.where(opened, -1, C["wcall"]),
            root=C["root"],
            bytes=C["bytes"],
            open=opened,
        )
    ev, wc = L.wevents, L.wcalls
    if len(ev) and "index" in wc:
        wi, role, count_before, _, _ = _window_timeline(L)
        fence = (ev["type"][wi] == T["WSYNC"]) & (role == R["win_fence"])
        wv = np.flatnonzero(ev["type"] == T["WIN"])
        free = ((ev["flags"][wv] & F["FREE"]) != 0).astype(np.int64)
        for kind, rows_i, seq in (
            (FENCE, wi[fence], count_before(fence)[fence]),
            (WINDOW, wv, free),
        ):
            if not len(rows_i):
                continue
            call = wc["index"][ev["call"][rows_i]]
            rank, win = ev["rank"][rows_i], ev["win"][rows_i]
            frows = _table(COLLS, key=win, seq=seq, rank=rank)
            uw, wix = np.unique(win, return_inverse=True)
            ckeys = np.array([L.windows.get(int(w), 0) for w in uw.tolist()], np.int64)
            _comm_geometry(L, frows, ckeys[wix.reshape(-1)], rank)
            X = _instances(L, Local(0), frows)
            z = np.zeros(len(rows_i), np.int64)
            size = np.maximum(X.max(frows["csize"]), 0)
            add(
                kind,
                X.gid(),
                X.n,
                size,
                X.ok,
                rank=rank,
                bcall=call,
                ecall=call,
                root=z,
                bytes=z,
                open=z,
            )
    inst, parts = _cat(inst, INST_COLS), _cat(parts, PART_COLS)
    unmatched["collectives"] = int(np.count_nonzero(~inst["whole"]))
    return inst, parts


def _group_max(gid, values, n):
    """The largest of values per group (gid in 0..n-1; 0 for an empty group)."""
    out = np.zeros(n, np.int64)
    if len(values) and values.min() == values.max():  # the common case: no scatter
        out[gid] = values[0]
    elif len(values):
        out[:] = np.iinfo(np.int64).min
        np.maximum.at(out, gid, values.astype(np.int64))
        out[np.bincount(gid, minlength=n) == 0] = 0
    return out


def _cat(cols, types):
    return Cols(
        {
            k: np.concatenate(v).astype(types[k]) if v else np.zeros(0, types[k])
            for k, v in cols.items()
        }
    )


def _rma_sync(L, inst, parts):
    """The pair-wise synchronisations of access and exposure epochs (rma.epochs)."""
    ev, wc = L.wevents, L.wcalls
    out = {k: np.zeros(0, np.int64) for k in ("kind", "a", "b", "origin", "target")}
    if not len(ev) or "index" not in wc:
        return Cols(out)
    wi, role, _, last_role, _ = _window_timeline(L)
    typ = ev["type"][wi]
    call = ev["call"][wi]
    w = _WindowEvents(
        wi=wi,
        typ=typ,
        role=role,
        last_role=last_role,
        rank=ev["rank"][wi],
        win=ev["win"][wi],
        b=wc["t0"][call],
        e=wc["t1"][call],
        path=wc["path"][call],
        is_op=typ == T["RMA"],
        start=(typ == T["WSYNC"]) & (role == R["win_start"]),
    )
    E = epochs(L, w)
    gcall = wc["index"][call].astype(np.int64)
    a, t = E.a_rows, E.t_rows
    j = _join([a[k] for k in EPOCH_KEY], [t[k] for k in EPOCH_KEY])
    ok = np.flatnonzero(j >= 0)
    jt = j[ok]
    complete = gcall[E.cl[a["epoch"][ok]]]
    post = gcall[E.po[t["epoch"][jt]]]
    wait = gcall[E.wt[t["epoch"][jt]]]
    n = len(ok)
    return Cols(
        kind=np.r_[np.full(n, POST_COMPLETE), np.full(n, COMPLETE_WAIT)].astype(np.int8),
        a=np.r_[post, complete],
        b=np.r_[complete, wait],
        origin=np.r_[a["o"][ok], a["o"][ok]].astype(np.int32),
        target=np.r_[a["t"][ok], a["t"][ok]].astype(np.int32),
    )

"""The event trace of a run, as tables the analysis works on.

Each rank's records (readers/trace.py) become, with numpy and without a loop over
events:

- `calls`: one row per MPI call: thread, function (index into `Trace.functions`), the
  call path it was made from (index into the rank's `paths`), enter and leave times in
  nanoseconds on rank 0's clock;
- `events`: what the calls did (messages, requests, collectives, windows), each with
  the index of its call; communicators and windows as 64-bit keys that every rank
  computes alike from the definitions (members and creation order), so that ranks agree
  on them without talking to each other;
- `paths`: the calling context tree of the rank: user functions (ENTER/LEAVE records of
  programs built with -finstrument-functions, or regions of an imported trace) and, as
  leaves, MPI functions at their call site;
- `time_ns` / `overhead_ns`: the rank's time attributed to each path (exclusive), and the
  trace buffer flushes' time.

A path is named by its labels from the root, so paths of different ranks (or of ranks
read by different analysis processes) are merged by name. `Trace.from_literal` builds a
trace from Python lists for tests; it goes through the same code as a recorded one.
"""
import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.readers.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES

T = EVENT_TYPES
F = EVENT_FLAGS

CALL_DTYPE = np.dtype([("thread", "<i4"), ("fn", "<i4"), ("path", "<i4"), ("pad", "<i4"),
                       ("t0", "<i8"), ("t1", "<i8")])
EV_DTYPE = np.dtype([("call", "<i8"), ("type", "u1"), ("flags", "u1"), ("pad", "<u2"),
                     ("peer", "<i4"), ("tag", "<i4"), ("group", "<i4"), ("comm", "<i8"),
                     ("win", "<i8"), ("bytes", "<i8"), ("bytes2", "<i8"), ("key", "<u8")])

ROOT_LABEL = "program"


# ---- what an MPI function is, by name ----

_N2N = {"MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Allreduce",
        "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"}
_12N = {"MPI_Bcast", "MPI_Scatter", "MPI_Scatterv"}
_N21 = {"MPI_Reduce", "MPI_Gather", "MPI_Gatherv"}
_SCAN = {"MPI_Scan", "MPI_Exscan"}
_WIN_MGMT = {"MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared",
             "MPI_Win_create_dynamic", "MPI_Win_free"}
_ACTIVE = {"MPI_Win_fence": "win_fence", "MPI_Win_post": "win_post",
           "MPI_Win_start": "win_start", "MPI_Win_complete": "win_complete",
           "MPI_Win_wait": "win_wait", "MPI_Win_test": "win_test"}
_RMA_OPS = {"MPI_Put", "MPI_Rput", "MPI_Get", "MPI_Rget", "MPI_Accumulate",
            "MPI_Raccumulate", "MPI_Get_accumulate", "MPI_Rget_accumulate",
            "MPI_Fetch_and_op", "MPI_Compare_and_swap"}
_FILE_MGMT = {"MPI_File_open", "MPI_File_close", "MPI_File_seek", "MPI_File_sync",
              "MPI_File_set_view", "MPI_File_set_size", "MPI_File_get_size",
              "MPI_File_delete", "MPI_File_preallocate", "MPI_File_seek_shared"}


def classify(name):
    """(category of the time tree, role) of an MPI function name.

    Categories: init, mgmt_comm, mgmt_win, mgmt_file, sync_coll, rma_active, rma_passive,
    p2p, coll, rma_comm, io, other. Roles refine them for the patterns: barrier, n2n,
    12n, n21, scan, coll (other collectives and nonblocking ones), win_fence, win_post,
    win_start, win_complete, win_wait, win_test, passive, op (RMA operations), create and
    free (windows), p2p (sends, receives, ...), wait (MPI_Wait), waitmulti
    (MPI_Waitall/any/some), test (MPI_Test*)."""
    n = name
    if n in ("MPI_Init", "MPI_Init_thread", "MPI_Finalize"):
        return "init", n[4:].lower()
    if n in ("MPI_Barrier", "MPI_Ibarrier"):
        return "sync_coll", "barrier"
    if n in _ACTIVE:
        return "rma_active", _ACTIVE[n]
    if n.startswith(("MPI_Win_lock", "MPI_Win_unlock", "MPI_Win_flush")) or n == "MPI_Win_sync":
        return "rma_passive", "passive"
    if n in _WIN_MGMT:
        return "mgmt_win", "free" if n == "MPI_Win_free" else "create"
    if n in _RMA_OPS:
        return "rma_comm", "op"
    blocking = n if n in _N2N | _12N | _N21 | _SCAN else n.replace("MPI_I", "MPI_", 1)
    if blocking in _N2N:
        return "coll", "n2n" if blocking == n else "coll"
    if blocking in _12N:
        return "coll", "12n" if blocking == n else "coll"
    if blocking in _N21:
        return "coll", "n21" if blocking == n else "coll"
    if blocking in _SCAN:
        return "coll", "scan" if blocking == n else "coll"
    if blocking in ("MPI_Alltoallv", "MPI_Alltoallw") or "Neighbor" in n or \
            "neighbor" in n:
        return "coll", "coll"
    if n == "MPI_Wait":
        return "p2p", "wait"
    if n in ("MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"):
        return "p2p", "waitmulti"
    if n.startswith("MPI_Test") and n != "MPI_Test_cancelled":
        return "p2p", "test"
    if n.startswith("MPI_File_"):
        return ("mgmt_file", "file") if n in _FILE_MGMT else ("io", "io")
    if re.match(r"MPI_(Comm_(dup|idup|split|split_type|create|create_group|free)|"
                r"Intercomm_|Cart_create|Cart_sub|Graph_create|Dist_graph_create)", n):
        return "mgmt_comm", "comm"
    if re.match(r"MPI_([BSR]?send|I[bsr]?send|Recv|Irecv|Mrecv|Imrecv|Sendrecv|"
                r"[BSR]?send_init|Recv_init|Start|Startall|Probe|Iprobe|Mprobe|Improbe|"
                r"Request_free|Cancel)", n):
        return "p2p", "p2p"
    return "other", "other"


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
class RankData:
    rank: int
    host: str
    state: str
    complete: bool
    notes: list
    t_begin: int                  # ns, rank 0's clock: MPI_Init done
    t_end: int                    # ns: MPI_Finalize entered (or the last record)
    calls: np.ndarray             # CALL_DTYPE
    events: np.ndarray            # EV_DTYPE
    paths: list                   # path label tuples, index = local path id
    time_ns: np.ndarray           # exclusive time per local path (ns)
    overhead_ns: np.ndarray       # trace flush time per local path (ns)
    comms: dict                   # comm key -> members (np.int32 world ranks)
    windows: dict                 # window key -> comm key
    groups: list                  # group id -> members (np.int32 world ranks)
    nrecords: int = 0
    fn_names: list = field(default_factory=list)


def _to_ns(meta, ticks):
    """Ticks of the rank's counter -> ns of rank 0's CLOCK_MONOTONIC (docs/format.md)."""
    c = meta.get("clock") or {}
    tk, ns = c.get("ticks", [0, 1]), c.get("ns", [0, 1])
    span = tk[1] - tk[0]
    rate = (ns[1] - ns[0]) / span if span else 1.0
    local = ns[0] + (ticks - tk[0]).astype(np.float64) * rate
    oi, of = c.get("offset_init_ns", 0), c.get("offset_fini_ns", 0)
    ti, tf = c.get("t_init_ns", 0), c.get("t_fini_ns", 0)
    if of != oi and tf > ti:
        off = oi + (of - oi) * (local - ti) / (tf - ti)
    else:
        off = oi
    return np.rint(local - off).astype(np.int64)


def _global_ns(meta, local_ns):
    """A local CLOCK_MONOTONIC time (ns) of the JSON -> rank 0's clock."""
    c = meta.get("clock") or {}
    oi, of = c.get("offset_init_ns", 0), c.get("offset_fini_ns", 0)
    ti, tf = c.get("t_init_ns", 0), c.get("t_fini_ns", 0)
    off = oi + (of - oi) * (local_ns - ti) / (tf - ti) if of != oi and tf > ti else oi
    return int(round(local_ns - off))


def _object_labels(meta, addresses):
    """Code addresses -> labels 'path|buildid|offset' (offset hex), '' if unknown."""
    objs = meta.get("objects") or []
    out = np.full(len(addresses), "", dtype=object)
    if not objs or not len(addresses):
        return out
    objs = sorted(objs, key=lambda o: o["start"])
    starts = np.array([o["start"] for o in objs], np.int64)
    ends = np.array([o["end"] for o in objs], np.int64)
    i = np.searchsorted(starts, addresses, "right") - 1
    ok = (i >= 0) & (addresses < ends[np.maximum(i, 0)]) & (addresses != 0)
    uniq, inv = np.unique(np.stack([np.where(ok, i, -1), addresses]), axis=1,
                          return_inverse=True)
    inv = inv.reshape(-1)
    labels = []
    for oi, addr in uniq.T:
        if oi < 0:
            labels.append("" if addr == 0 else f"?|?|{addr:x}")
        else:
            o = objs[oi]
            labels.append(f"{o['path']}|{o.get('buildid', '')}|{addr - o['base']:x}")
    return np.array(labels, dtype=object)[inv]


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


def prepare(rf, functions, fn_index):
    """RankFile (readers/trace.py) -> RankData. `functions` is the global list of
    function names and fn_index maps a name to its index (extended here with names
    this rank has and the list lacks)."""
    meta, rec, notes = rf.meta, rf.records, list(rf.notes)
    names = meta.get("functions") or []
    lmap = np.array([fn_index.setdefault(nm, len(fn_index)) for nm in names] + [-1],
                    np.int32)
    for nm in names:
        if nm not in functions:
            functions.append(nm)
    # records of each thread together, in their order
    thread = rf.thread
    if len(thread) > 1 and (np.diff(thread) < 0).any():
        order = np.argsort(thread, kind="stable")
        rec, thread = rec[order], thread[order]
    typ = rec["type"]
    timed = np.isin(typ, [T["CALL"], T["FLUSH"], T["ENTER"], T["LEAVE"]])
    t0 = np.zeros(len(rec), np.int64)
    t1 = np.zeros(len(rec), np.int64)
    if timed.any():
        t0[timed] = _to_ns(meta, rec["t0"][timed])
        both = np.isin(typ, [T["CALL"], T["FLUSH"]])
        t1[both] = _to_ns(meta, rec["t1"][both])
    starts = _segments(thread)

    # ---- regions: ENTER/LEAVE -> calling-context nodes ----
    enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
    labels = [(ROOT_LABEL,)]          # local node 0: the root; a node is its label tuple
    node_parent = [-1]
    top = np.zeros(len(rec), np.int64)   # innermost open region after each record
    if enter.any() or leave.any():
        rlabel = _region_labels(meta, rec, enter | leave)
        step = enter.astype(np.int64) - leave.astype(np.int64)
        level = np.cumsum(step)
        seg_base = np.repeat(np.r_[0, level[starts[1:] - 1]] if len(starts) else [],
                             np.diff(np.r_[starts, len(rec)]))
        level = level - seg_base
        # LEAVEs without an ENTER (a trace started inside functions) are ignored
        low = _segment_min(np.minimum(level, 0), starts)
        low_prev = np.r_[0, low[:-1]]
        low_prev[starts] = 0
        leave = leave & ~(low < low_prev)
        level = level - low
        depth = np.where(enter, level - 1, level)     # LEAVE: depth of the region left
        node_of = np.full(len(rec), -1, np.int64)
        pos_e = np.flatnonzero(enter)
        d_e = depth[pos_e]
        label_index = {}
        for d in range(int(d_e.max()) + 1 if len(d_e) else 0):
            here = pos_e[d_e == d]
            if d == 0:
                parent = np.zeros(len(here), np.int64)
            else:
                above = pos_e[d_e == d - 1]
                j = np.searchsorted(above, here, "right") - 1
                parent = np.where(j >= 0, node_of[above[np.maximum(j, 0)]], 0)
            keys = list(zip(parent.tolist(), rlabel[here].tolist()))
            ids = []
            for pk in keys:
                nid = label_index.get(pk)
                if nid is None:
                    nid = len(labels)
                    label_index[pk] = nid
                    labels.append(labels[pk[0]] + (pk[1],))
                    node_parent.append(pk[0])
                ids.append(nid)
            node_of[here] = ids
        # the node left by each LEAVE: the latest ENTER at its depth before it
        pos_l = np.flatnonzero(leave)
        left = np.zeros(len(pos_l), np.int64)
        for d in np.unique(depth[pos_l]):
            here = pos_l[depth[pos_l] == d]
            above = pos_e[d_e == d]
            j = np.searchsorted(above, here, "right") - 1
            left[depth[pos_l] == d] = np.where(j >= 0, node_of[above[np.maximum(j, 0)]], 0)
        parents = np.array(node_parent, np.int64)
        defined = enter | leave
        val = np.zeros(len(rec), np.int64)
        val[pos_e] = node_of[pos_e]
        val[pos_l] = np.maximum(parents[left], 0)
        top = _ffill(defined, val, starts, 0)
    top_before = np.zeros(len(rec), np.int64)
    if len(rec):
        top_before[1:] = top[:-1]
        top_before[starts] = 0

    # ---- calls and their paths ----
    ci = np.flatnonzero(typ == T["CALL"])
    fn = lmap[np.minimum(rec["fn"][ci].astype(np.int64), len(lmap) - 1)]
    site = _object_labels(meta, rec["bytes"][ci])
    fn_names = functions
    leaf_index = {}
    call_path = np.zeros(len(ci), np.int32)
    if len(ci):
        keys = np.stack([top_before[ci], fn.astype(np.int64)])
        site_ids, site_inv = np.unique(site.astype(str), return_inverse=True)
        keys = np.vstack([keys, site_inv.reshape(1, -1)])
        uk, inv = np.unique(keys, axis=1, return_inverse=True)
        inv = inv.reshape(-1)
        ids = np.zeros(uk.shape[1], np.int32)
        for k, (parent, f, s) in enumerate(uk.T):
            name = fn_names[f] if 0 <= f < len(fn_names) else "?"
            lab = f"M:{name}@{site_ids[s]}"
            nid = leaf_index.get((parent, lab))
            if nid is None:
                nid = len(labels)
                leaf_index[(parent, lab)] = nid
                labels.append(labels[parent] + (lab,))
                node_parent.append(int(parent))
            ids[k] = nid
        call_path = ids[inv]
    calls = np.zeros(len(ci), CALL_DTYPE)
    calls["thread"] = thread[ci]
    calls["fn"] = fn
    calls["path"] = call_path
    calls["t0"] = t0[ci]
    calls["t1"] = t1[ci]

    # ---- sub-events ----
    call_of = np.cumsum(typ == T["CALL"]) - 1
    si = np.flatnonzero(np.isin(typ, [T[k] for k in ("SEND", "RECV", "IRECV", "SEND_DONE",
                                                      "COLL", "WIN", "RMA", "WSYNC")]))
    ev = np.zeros(len(si), EV_DTYPE)
    r = rec[si]
    ev["call"] = call_of[si]
    ev["type"] = r["type"]
    ev["flags"] = r["flags"]
    ev["peer"] = r["peer"]
    ev["tag"] = r["tag"]
    ev["bytes"] = r["bytes"]
    reqish = np.isin(r["type"], [T["SEND"], T["RECV"], T["IRECV"], T["SEND_DONE"], T["RMA"]])
    ev["key"] = np.where(reqish, r["t0"], 0).astype(np.uint64)
    ev["bytes2"] = np.where(np.isin(r["type"], [T["COLL"], T["RMA"]]), r["t1"], 0)
    ev["group"] = np.where(r["type"] == T["WSYNC"], r["t1"], -1)
    comms, ckeys = _comm_keys(meta)
    windows, wkeys = _window_keys(meta, ckeys)
    lc = r["comm"]
    ev["comm"] = np.where((lc >= 0) & (lc < len(ckeys)), ckeys[np.clip(lc, 0, None)]
                          if len(ckeys) else 0, 0)
    winish = np.isin(r["type"], [T["WIN"], T["RMA"], T["WSYNC"]])
    lw = np.where(winish, r["tag"], -1)
    ev["win"] = np.where((lw >= 0) & (lw < len(wkeys)), wkeys[np.clip(lw, 0, None)]
                         if len(wkeys) else 0, 0)
    ev["tag"] = np.where(winish, -1, r["tag"])
    groups = [np.array(g.get("ranks", []), np.int32) for g in meta.get("groups", [])]

    # ---- the rank's time per path ----
    t_begin, t_end = _window(meta, t0, t1, typ)
    time_ns, overhead_ns = _attribute_time(typ, t0, t1, top, top_before, node_of_leaf(
        ci, call_path, len(rec)), starts, thread, len(labels), t_begin, t_end)
    return RankData(rank=rf.rank, host=meta.get("host", "?"), state=meta.get("state", "?"),
                    complete=rf.complete, notes=notes, t_begin=t_begin, t_end=t_end,
                    calls=calls, events=ev, paths=labels, time_ns=time_ns,
                    overhead_ns=overhead_ns, comms=comms, windows=windows, groups=groups,
                    nrecords=len(rec), fn_names=fn_names)


def node_of_leaf(ci, call_path, n):
    out = np.full(n, -1, np.int64)
    out[ci] = call_path
    return out


def _segment_min(values, starts):
    """Running minimum restarted at each segment start."""
    out = values.copy()
    bounds = np.r_[starts, len(values)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        out[a:b] = np.minimum.accumulate(values[a:b])
    return out


def _region_labels(meta, rec, mask):
    """Labels of ENTER/LEAVE records: 'N:name' for a region id, 'F:path|buildid|offset'
    for a function address."""
    out = np.full(len(rec), "", dtype=object)
    idx = np.flatnonzero(mask)
    regions = meta.get("regions") or []
    rid = rec["comm"][idx]
    named = rid >= 0
    if named.any():
        names = np.array([r.get("name", "?") if isinstance(r, dict) else str(r)
                          for r in regions] + ["?"], dtype=object)
        out[idx[named]] = ["N:" + s for s in names[np.clip(rid[named], 0, len(names) - 1)]]
    if (~named).any():
        lab = _object_labels(meta, rec["bytes"][idx[~named]])
        out[idx[~named]] = ["F:" + s for s in lab]
    return out


def _comm_keys(meta):
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


def _window(meta, t0, t1, typ):
    """The rank's application time: MPI_Init done to MPI_Finalize entered (rank 0's
    clock); from its records when the JSON lacks them."""
    c = meta.get("clock") or {}
    timed = np.isin(typ, [T["CALL"], T["FLUSH"], T["ENTER"], T["LEAVE"]])
    lo = int(t0[timed].min()) if timed.any() else 0
    hi = int(max(t0[timed].max(), t1[timed].max())) if timed.any() else 0
    tb = _global_ns(meta, c["t_init_ns"]) if c.get("t_init_ns") else lo
    te = _global_ns(meta, c["t_fini_ns"]) if c.get("t_fini_ns") else hi
    if timed.any():
        te = max(te, hi) if meta.get("state") != "complete" else te
    return tb, max(te, tb)


def _attribute_time(typ, t0, t1, top, top_before, leaf, starts, thread, npaths, tb, te):
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
            over_ns += np.bincount(node[over], weights=dur[over],
                                   minlength=npaths).astype(np.int64)
    return time_ns, over_ns


# ---- the whole trace (or the ranks one analysis process owns) ----

@dataclass
class Trace:
    world_size: int
    functions: list
    ranks: list                       # RankData, by rank
    notes: list = field(default_factory=list)
    missing: list = field(default_factory=list)   # ranks without any trace file
    source: str = ""

    @property
    def complete(self):
        return not self.missing and all(r.complete for r in self.ranks)

    @property
    def nevents(self):
        return sum(r.nrecords for r in self.ranks)

    @classmethod
    def from_literal(cls, ranks, comms=None, windows=(), groups=(), world_size=None,
                     functions=None):
        """A trace from Python lists, for tests. ranks: {rank: [item, ...]} where an item
        is (fn_name, t0_ns, t1_ns, [subevent dict, ...]) for an MPI call, or
        ("ENTER"|"LEAVE", region_name, t_ns). A subevent dict has type (name) and any of
        peer, tag, comm (index into comms), win (index into windows), group, bytes,
        bytes2, key, flags (int or list of flag names). comms: list of member lists
        (default: [all ranks]); windows: list of comm indices; groups: member lists."""
        from perfweave.readers.trace import RankFile
        n = world_size or (max(ranks) + 1 if ranks else 0)
        comms = comms or [list(range(n))]
        fns = list(functions or [])
        for items in ranks.values():
            for it in items:
                if it[0] not in ("ENTER", "LEAVE") and it[0] not in fns:
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
            rows, regions = [], []
            t_last = 0
            for it in ranks[rank]:
                if it[0] in ("ENTER", "LEAVE"):
                    if it[1] not in regions:
                        regions.append(it[1])
                    rows.append(dict(type=T[it[0]], t0=it[2], comm=regions.index(it[1])))
                    t_last = max(t_last, it[2])
                    continue
                name, a, b = it[0], it[1], it[2]
                rows.append(dict(type=T["CALL"], t0=a, t1=b, fn=fns.index(name)))
                t_last = max(t_last, b)
                for e in (it[3] if len(it) > 3 else []):
                    e = dict(e)
                    row = dict(type=T[e.pop("type")], peer=e.pop("peer", -1),
                               comm=e.pop("comm", -1), tag=e.pop("tag", 0),
                               bytes=e.pop("bytes", 0))
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
                    if e:
                        raise ValueError(f"unknown subevent fields {sorted(e)}")
                    rows.append(row)
            rec = np.zeros(len(rows), EVENT_DTYPE)
            rec["peer"] = -1
            rec["comm"] = -1
            for i, row in enumerate(rows):
                for k, v in row.items():
                    rec[i][k] = v
            meta = {"format": "perfweave-trace", "version": 1, "rank": rank,
                    "world_size": n, "host": "host", "state": "complete",
                    "functions": fns, "clock": {"ticks": [0, 1], "ns": [0, 1],
                                                "t_init_ns": 0, "t_fini_ns": t_last},
                    "comms": cdefs, "windows": wdefs,
                    "groups": [{"id": i, "ranks": list(g)} for i, g in enumerate(groups)],
                    "regions": [{"name": r} for r in regions], "objects": []}
            files.append(RankFile(rank, rec, np.zeros(len(rec), np.int32), meta))
        functions = []
        fn_index = {}
        data = [prepare(f, functions, fn_index) for f in files]
        return cls(world_size=n, functions=functions, ranks=data, source="literal")

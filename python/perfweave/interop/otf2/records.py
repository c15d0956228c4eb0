"""OTF2 import, records: the events of one location (a thread of a rank), read in file
order, become perfweave's records (thread_records): outermost MPI regions become CALL
records, the MPI events inside a call its sub-records (_sub_records), with requests and
nonblocking collectives linked to their posts (_from_posts); user regions become
ENTER/LEAVE, trace buffer flushes FLUSH. imp is the import (importer._Importer): its
definitions, what the records name, and its counts for the notes."""

import numpy as np

from perfweave.interop import last_index, pair_regions
from perfweave.interop.otf2.collector import (
    MPI_KINDS,
    R_ACQUIRE,
    R_ATOMIC,
    R_COLL_BEGIN,
    R_COLL_END,
    R_ENTER,
    R_FLUSH,
    R_GET,
    R_GROUP_SYNC,
    R_IRECV,
    R_IRECV_REQ,
    R_ISEND,
    R_ISEND_DONE,
    R_LEAVE,
    R_NBC_COMPLETE,
    R_NBC_REQUEST,
    R_PROGRAM_BEGIN,
    R_PROGRAM_END,
    R_PUT,
    R_RECV,
    R_RELEASE,
    R_RMA_COLL_BEGIN,
    R_RMA_COLL_END,
    R_RMA_SYNC,
    R_SEND,
    R_WIN_CREATE,
    R_WIN_DESTROY,
)
from perfweave.interop.otf2.implied import derived_flags, function_traits, irecv_completions
from perfweave.interop.otf2.library import enum_value
from perfweave.interop.otf2.mapping import U32, WIN_OPS, lookup
from perfweave.model.trace import F, T, classify
from perfweave.dtypes import EVENT_DTYPE


def thread_records(imp, r, thread, ev, comm_local, win_local, groups, group_ids):
    """The records of one location, from its events in file order."""
    counts = imp.counts
    n = len(ev["time"])
    kind = ev["kind"]
    t = ev["time"]
    info = {}
    enter, leave = kind == R_ENTER, kind == R_LEAVE
    reg = np.where(enter | leave, ev["a"], U32).astype(np.int64)
    rk = np.where(enter | leave, lookup(imp.reg_kind, reg, 0), -1)
    # ---- MPI calls: the outermost Enter/Leave of MPI regions ----
    me, ml = enter & (rk == 1), leave & (rk == 1)
    step = me.astype(np.int64) - ml.astype(np.int64)
    level = np.cumsum(step)
    low = np.minimum.accumulate(np.minimum(level, 0)) if n else level
    low_prev = np.r_[0, low[:-1]] if n else low
    bad = ml & (low < low_prev)
    if bad.any():
        counts["unmatched"] += int(bad.sum())
        ml = ml & ~bad
        step = me.astype(np.int64) - ml.astype(np.int64)
        level = np.cumsum(step)
    before = level - step
    start = me & (before == 0)
    end = ml & (level == 0)
    counts["nested"] += int(((me | ml) & ~start & ~end).sum())
    call_no = np.cumsum(start) - 1
    inside = (before > 0) | start  # at or after a call's Enter, before Leave
    si = np.flatnonzero(start)
    ei = np.flatnonzero(end)
    open_calls = len(si) - len(ei)
    if open_calls > 0:
        counts["open"] += open_calls
        ei = np.r_[ei, np.full(open_calls, n, np.int64)]
    t_end = np.r_[t, t[-1] if n else 0]
    call_t0, call_t1 = t[si], t_end[ei]
    fn = np.maximum(lookup(imp.reg_fn, reg[si], 0), 0)
    # application time: MPI_Init left, MPI_Finalize entered (else ProgramBegin/End)
    i = np.flatnonzero(np.isin(fn, imp.init_fns) & (ei < n))
    if len(i):
        info["init"] = int(call_t1[i[0]])
    i = np.flatnonzero(np.isin(fn, imp.fini_fns))
    if len(i):
        info["fini"] = int(call_t0[i[0]])
    pb = np.flatnonzero(kind == R_PROGRAM_BEGIN)
    pe = np.flatnonzero(kind == R_PROGRAM_END)
    if len(pb):
        info["begin"] = int(t[pb[0]])
    if len(pe):
        info["end"] = int(t[pe[-1]])

    out = []  # (anchor, order, records)
    # CALL records, written where the call ends (as the runtime writes them)
    crec = np.zeros(len(si), EVENT_DTYPE)
    crec["type"] = T["CALL"]
    crec["t0"], crec["t1"], crec["fn"] = call_t0, call_t1, fn
    crec["peer"], crec["comm"] = -1, -1
    out.append((ei, np.zeros(len(si), np.int64), crec))

    # ---- what the calls did ----
    mpi_ev = np.isin(kind, MPI_KINDS)
    outside = mpi_ev & ~inside
    counts["outside"] += int(outside.sum())
    sub = np.flatnonzero(mpi_ev & inside)
    if len(sub):
        recs, keep = _sub_records(
            imp, r, ev, sub, call_no[sub], fn, comm_local, win_local, groups, group_ids
        )
        sub, recs = sub[keep], recs[keep]
        out.append((ei[call_no[sub]], 1 + sub, recs))

    # ---- user regions, buffer flushes ----
    ue, ul = enter & (rk == 0), leave & (rk == 0)
    partner, depth, unmatched = pair_regions(ue, ul)
    counts["unmatched"] += int(unmatched.sum())
    ul &= ~unmatched
    ui = np.flatnonzero(ue | ul)
    urec = np.zeros(len(ui), EVENT_DTYPE)
    urec["type"] = np.where(ue[ui], T["ENTER"], T["LEAVE"])
    urec["t0"] = t[ui]
    urec["tag"] = depth[ui]
    urec["peer"] = -1
    urec["comm"] = lookup(imp.reg_user, reg[ui], -1)
    out.append((ui, np.zeros(len(ui), np.int64), urec))
    fe, fl = enter & (rk == 2), leave & (rk == 2)
    fp, _, fun = pair_regions(fe, fl)
    counts["unmatched"] += int(fun.sum())
    fi = np.flatnonzero(fe)
    frec = np.zeros(len(fi), EVENT_DTYPE)
    frec["type"] = T["FLUSH"]
    frec["t0"] = t[fi]
    frec["t1"] = np.where(fp[fi] >= 0, t[np.maximum(fp[fi], 0)], t_end[-1])
    frec["bytes"] = [imp.attrs[x].get("bytes", 0) if x else 0 for x in ev["attr"][fi].tolist()]
    frec["peer"], frec["comm"] = -1, -1
    out.append((fi, np.zeros(len(fi), np.int64), frec))
    bf = np.flatnonzero(kind == R_FLUSH)
    brec = np.zeros(len(bf), EVENT_DTYPE)
    brec["type"] = T["FLUSH"]
    brec["t0"], brec["t1"] = t[bf], ev["a"][bf].astype(np.int64)
    brec["peer"], brec["comm"] = -1, -1
    out.append((bf, np.zeros(len(bf), np.int64), brec))

    anchor = np.concatenate([o[0] for o in out])
    order = np.concatenate([o[1] for o in out])
    rec = np.concatenate([o[2] for o in out])
    o = np.lexsort((order, anchor))
    return rec[o], info


def _sub_records(imp, r, ev, sub, call, fn, comm_local, win_local, groups, group_ids):
    """Records of the MPI events sub (indices into the location's events) made in
    the calls call (indices into its calls, function fn)."""
    otf2 = imp.otf2
    kind = ev["kind"][sub]
    a, b, c, d, e, f = (ev[k][sub] for k in "abcdef")
    attr = ev["attr"][sub]
    m = len(sub)
    rec = np.zeros(m, EVENT_DTYPE)
    rec["peer"], rec["comm"] = -1, -1
    keep = np.ones(m, bool)
    cfn = fn[call]
    traits = function_traits(imp.functions)
    rtype = np.zeros(m, np.int64)
    nb_event = np.zeros(m, bool)
    excl = np.zeros(m, bool)

    def local_comm(refs):
        out = lookup(comm_local, refs, -1)
        imp.counts["nocomm"] += int(((out < 0) & (refs != U32)).sum())
        return out

    def world(comm_refs, vals):
        return imp.to_world(comm_refs.astype(np.int64), vals, r)

    def sel(*kinds):
        return np.isin(kind, kinds)

    # point-to-point: (peer, comm, tag, length[, request])
    p2p = sel(R_SEND, R_ISEND, R_RECV, R_IRECV)
    if p2p.any():
        rtype[sel(R_SEND, R_ISEND)] = T["SEND"]
        rtype[sel(R_RECV, R_IRECV)] = T["RECV"]
        nb_event |= sel(R_ISEND)
        rec["peer"][p2p] = world(b[p2p], a[p2p])
        rec["comm"][p2p] = local_comm(b[p2p])
        rec["tag"][p2p] = (c[p2p] & U32).astype(np.uint32).view(np.int32)
        rec["bytes"][p2p] = d[p2p].view(np.int64)
        req = sel(R_ISEND, R_IRECV)
        rec["t0"][req] = e[req].view(np.int64)
    ir = sel(R_IRECV_REQ)
    rtype[ir] = T["IRECV"]
    nb_event |= ir
    rec["t0"][ir] = a[ir].view(np.int64)
    rec["peer"][ir], rec["tag"][ir] = -2, -1
    sd = sel(R_ISEND_DONE)
    rtype[sd] = T["SEND_DONE"]
    rec["t0"][sd] = a[sd].view(np.int64)

    # collectives: the begin is part of the record of the end
    def coll_fields(m):
        """root (world rank, -1 none), communicator, bytes sent and received of the
        collective events m (an end, or a nonblocking one's completion)"""
        rec["peer"][m] = np.where(c[m] == U32, -1, world(b[m], c[m]))
        rec["comm"][m] = local_comm(b[m])
        rec["bytes"][m] = d[m].view(np.int64)
        rec["t1"][m] = e[m].view(np.int64)

    co = sel(R_COLL_END)
    rtype[co] = T["COLL"]
    if co.any():
        coll_fields(co)
    keep &= ~sel(R_COLL_BEGIN, R_RMA_COLL_BEGIN)
    # nonblocking ones: the request starts the COLL, which takes what the collective
    # was from its completion (_from_posts); the completion is a COLL_DONE
    nq = sel(R_NBC_REQUEST)
    rtype[nq] = T["COLL"]
    rec["t0"][nq] = a[nq].view(np.int64)
    nc = sel(R_NBC_COMPLETE)
    rtype[nc] = T["COLL_DONE"]
    if nc.any():
        coll_fields(nc)
        rec["t0"][nc] = f[nc].view(np.int64)
    # windows and one-sided operations
    wk = sel(
        R_WIN_CREATE,
        R_WIN_DESTROY,
        R_PUT,
        R_GET,
        R_ATOMIC,
        R_GROUP_SYNC,
        R_ACQUIRE,
        R_RELEASE,
        R_RMA_SYNC,
        R_RMA_COLL_END,
    )
    win = np.where(sel(R_GROUP_SYNC), b, np.where(sel(R_RMA_COLL_END), c, np.where(wk, a, U32)))
    win = win.astype(np.int64)
    if wk.any():
        wl = lookup(win_local, win, -1)
        wc = lookup(imp.win_comm, win, U32)
        imp.counts["nocomm"] += int((wk & (wl < 0)).sum())
        rec["tag"][wk] = wl[wk]
        rec["comm"][wk] = lookup(comm_local, wc[wk], -1)
        remote = sel(R_PUT, R_GET, R_ATOMIC, R_ACQUIRE, R_RELEASE, R_RMA_SYNC)
        if remote.any():
            rec["peer"][remote] = imp.to_world(wc[remote], b[remote], r)
    cw = sel(R_WIN_CREATE)
    dw = sel(R_WIN_DESTROY)
    rtype[cw | dw] = T["WIN"]
    rec["flags"][dw] = F["FREE"]
    put, get, atom = sel(R_PUT), sel(R_GET), sel(R_ATOMIC)
    rtype[put | get | atom] = T["RMA"]
    rec["bytes"][put] = c[put].view(np.int64)
    rec["t0"][put | get] = d[put | get].view(np.int64)
    rec["t1"][get] = c[get].view(np.int64)
    rec["bytes"][atom] = d[atom].view(np.int64)
    rec["t1"][atom] = e[atom].view(np.int64)
    rec["t0"][atom] = f[atom].view(np.int64)
    # window synchronisation
    rce = sel(R_RMA_COLL_END)
    if rce.any():
        win_ops = {enum_value(getattr(otf2.CollectiveOp, x)) for x in WIN_OPS}
        absorbed = rce & np.isin(a.astype(np.int64), list(win_ops))
        keep &= ~absorbed
        rtype[rce & ~absorbed] = T["WSYNC"]
    gs = sel(R_GROUP_SYNC)
    rtype[gs | sel(R_ACQUIRE, R_RELEASE, R_RMA_SYNC)] = T["WSYNC"]
    rec["t1"][rtype == T["WSYNC"]] = -1
    if gs.any():
        opener = np.array(
            [classify(x)[1] in ("win_post", "win_start") for x in imp.functions] + [False]
        )[cfn]
        for j in np.flatnonzero(gs & opener).tolist():
            if int(c[j]) == U32 or int(c[j]) not in imp.group_members:
                continue
            mem = imp.group_members[int(c[j])]
            key = tuple(mem if mem is not None else [r])
            gid = group_ids.get(key)
            if gid is None:
                gid = group_ids[key] = len(groups)
                groups.append(list(key))
            rec["t1"][j] = gid
    acq = sel(R_ACQUIRE)
    excl = (
        acq & (d.astype(np.int64) == enum_value(imp.otf2.LockType.EXCLUSIVE)) & (rec["peer"] >= 0)
    )
    rec["type"] = rtype
    # flags the events imply, and what perfweave's attributes add
    rec["flags"] |= derived_flags(traits, cfn, rtype, nb_event, excl).astype(np.uint8)
    for j in np.flatnonzero(attr > 0).tolist():
        at = imp.attrs[int(attr[j])]
        if "flags" in at:
            rec["flags"][j] = at["flags"]
        if "peer" in at:
            rec["peer"][j] = at["peer"]
        if "tag" in at:
            rec["tag"][j] = at["tag"]
        if "bytes" in at:
            rec["bytes"][j] = at["bytes"]
        if "comm" in at:
            rec["comm"][j] = comm_local.get(at["comm"], -1) if at["comm"] != U32 else -1
    # requests: a completion names its post's communicator, peer and tag
    _from_posts(rec, ir, sd, attr, nq, nc)
    return rec, keep


def _from_posts(rec, ir, sd, attr, nq, nc):
    """OTF2's MpiIsendComplete carries only the request: take communicator, peer and
    tag from the latest MpiIsend of that request before it (the runtime does the
    same). A NonBlockingCollectiveRequest takes what the collective was (its
    communicator, root, sizes) from the NonBlockingCollectiveComplete of its request
    after it. An MpiIrecvRequest without perfweave's attributes takes communicator,
    source, tag and size of the receive that completes it (irecv_completions)."""
    key = rec["t0"]
    n = len(rec)

    def latest(post, done):
        cand = np.flatnonzero(post | done)
        o = np.lexsort((cand, key[cand]))
        s = cand[o]
        last = last_index(post[s])
        prev = np.where(last >= 0, s[np.maximum(last, 0)], -1)
        ok = (last >= 0) & (key[np.maximum(prev, 0)] == key[s]) & done[s]
        return s[ok], prev[ok]

    sends = (rec["type"] == T["SEND"]) & ((rec["flags"] & F["NONBLOCKING"]) != 0)
    d, p = latest(sends, sd)
    for k in ("comm", "peer", "tag"):
        rec[k][d] = rec[k][p]
    cd, cp = latest(nq, nc)
    for k in ("comm", "peer", "bytes", "t1"):
        rec[k][cp] = rec[k][cd]
    for k, v in (("peer", -1), ("bytes", 0), ("t1", 0)):
        rec[k][nc] = v
    comp = irecv_completions(rec["type"], key, np.zeros(n, np.int64))
    bare = np.flatnonzero(ir & (attr <= 0))
    if len(bare):
        cb = comp[bare]
        ok = cb >= 0
        for k in ("comm", "peer", "tag", "bytes"):
            rec[k][bare[ok]] = rec[k][cb[ok]]
    # posts numbered in order, as the runtime numbers them; completions name theirs
    posts = np.flatnonzero(sends | (rec["type"] == T["IRECV"]) | nq)
    number = np.zeros(n, np.int64)
    number[posts] = np.arange(1, len(posts) + 1)
    rec["t1"][posts[~nq[posts]]] = number[posts[~nq[posts]]]
    rec["t1"][d] = rec["t1"][p]
    # a nonblocking collective holds its number in its tag
    rec["tag"][nq] = number[nq]
    rec["t1"][cd] = number[cp]
    irecv = np.flatnonzero((rec["type"] == T["IRECV"]) & (comp >= 0))
    rec["t1"][comp[irecv]] = rec["t1"][irecv]

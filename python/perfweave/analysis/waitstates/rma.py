"""One-sided (MPI-2 RMA) wait states after Hermanns et al. (IJHPCA 2012, section 4):
fences matched by (window, sequence number), access and exposure epochs by (origin,
target, window, sequence number); window creation and free."""

from dataclasses import dataclass

import numpy as np

from perfweave.model.trace import F, R, T
from perfweave.analysis.waitstates.collectives import COLLS, _comm_geometry, _instances, _take
from perfweave.analysis.waitstates.common import (
    WINDOW_EVENTS,
    _ffill_index,
    _groups,
    _hash_cols,
    _join,
    _route,
    _seq,
    _table,
)

OPS = np.dtype([("key", "<i8"), ("seq", "<i8"), ("target", "<i4"), ("origin", "<i4"), ("l", "<i8")])
PAIRS = np.dtype(
    [
        ("o", "<i4"),
        ("t", "<i4"),
        ("win", "<i8"),
        ("pseq", "<i8"),
        ("epoch", "<i8"),
        ("x", "<i8"),
        ("y", "<i8"),
        ("acc", "<i8"),
    ]
)


@dataclass(frozen=True)
class _WindowEvents:
    """The window events (WSYNC, RMA) of every rank in call order (_window_timeline) and,
    per event, what the analysis of access and exposure epochs reads (_gats): one array
    each, all of the same length."""

    wi: np.ndarray  # rows of L.wevents
    typ: np.ndarray  # record type
    role: np.ndarray  # synchronisation role of the event's call
    last_role: np.ndarray  # of the latest WSYNC of its (rank, window) up to it; -1: none
    rank: np.ndarray
    win: np.ndarray
    b: np.ndarray  # the call's enter
    e: np.ndarray  # and leave
    path: np.ndarray  # the call's call path
    is_op: np.ndarray  # an RMA operation
    start: np.ndarray  # an MPI_Win_start


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
        return c - mask - base[gidx]  # strictly before, within the group

    is_sync = ev["type"][wi] == T["WSYNC"]
    last = _ffill_index(is_sync)
    same = last >= 0
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
    rank, win = ev["rank"][wi], ev["win"][wi]
    call = ev["call"][wi]
    b, e = calls["t0"][call], calls["t1"][call]
    path = calls["path"][call]

    # ---- fences: instances (window, k); the ops of epoch k to each target ----
    fi = np.flatnonzero(fence)
    frows = _table(
        COLLS,
        key=win[fi],
        seq=fences_before[fi],
        rank=rank[fi],
        path=path[fi],
        role=np.full(len(fi), R["win_fence"]),
        b=b[fi],
        e=e[fi],
    )
    uw, wix = np.unique(win[fi], return_inverse=True)
    ckeys = np.array([L.windows.get(int(w), 0) for w in uw.tolist()], np.int64)[wix.reshape(-1)]
    _comm_geometry(L, frows, ckeys, rank[fi])
    fop = np.flatnonzero(is_op & (last_role == R["win_fence"]))
    orows = _table(
        OPS,
        key=win[fop],
        seq=fences_before[fop],
        target=ev["peer"][wi[fop]],
        origin=rank[fop],
        l=e[fop],
    )
    ops_there = _route(ex, orows, keys=_hash_cols(orows["key"], orows["seq"]))
    X = _instances(L, ex, frows)
    here, gid, ok = X.here, X.gid(), X.ok
    if len(here):
        latest = X.max(here["b"])[gid]
        earliest_end = X.min(here["e"])[gid]
        hb, he = here["b"], here["e"]
        waf = np.where((earliest_end > latest) & (hb < latest), latest - hb, 0)
        # ops to each (window, epoch, target): latest end, number of distinct origins
        o2, s2, _ = _groups(
            ops_there["key"], ops_there["seq"], ops_there["target"], ops_there["origin"]
        )
        ot = _take(ops_there, o2)
        if len(ot):
            last_l = np.maximum.reduceat(ot["l"], s2)
            firsts = ot[s2]
            o3, s3, g3 = _groups(firsts["key"], firsts["seq"], firsts["target"])
            f3 = firsts[o3]
            norig = np.diff(np.r_[s3, len(f3)])
            lastl_t = np.maximum.reduceat(last_l[o3], s3)
            tk = f3[s3]
            j = _join(
                [here["key"], here["seq"], here["rank"]], [tk["key"], tk["seq"], tk["target"]]
            )
        else:
            j = np.full(len(here), -1)
            norig = lastl_t = np.zeros(0, np.int64)
        has = j >= 0
        lastop = np.where(
            has, lastl_t[np.maximum(j, 0)] if len(lastl_t) else 0, np.iinfo(np.int64).min
        )
        norigins = np.where(has, norig[np.maximum(j, 0)] if len(norig) else 0, 0)
        okr = ok[gid]
        ef = np.where((waf > 0) & (lastop > hb) & (lastop <= he), lastop - hb, 0)
        acc.add("mpi_rma_wait_at_fence", here["path"][okr], here["rank"][okr], waf[okr])
        acc.add("mpi_rma_early_fence", here["path"][okr], here["rank"][okr], ef[okr])
        csz = np.maximum(here["csize"], 0)
        acc.add("mpi_rma_pairsync_count", here["path"], here["rank"], csz)
        acc.add(
            "mpi_rma_pairsync_unneeded_count",
            here["path"],
            here["rank"],
            np.maximum(csz - norigins, 0),
        )
        notes["fences"] += int(ok.sum())

    w = _WindowEvents(
        wi=wi,
        typ=typ,
        role=role,
        last_role=last_role,
        rank=rank,
        win=win,
        b=b,
        e=e,
        path=path,
        is_op=is_op,
        start=start,
    )
    _gats(L, ex, acc, notes, w)
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
    for r, g in uniq.T.tolist():  # distinct (rank, group): few
        gl = groups_of_rank.get(r, [])
        members.append(gl[g].astype(np.int64) if 0 <= g < len(gl) else np.zeros(0, np.int64))
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


@dataclass(frozen=True)
class _Epochs:
    """Access and exposure epochs of general active target synchronisation, paired
    (positions into the _WindowEvents arrays): st, cl: each access epoch's MPI_Win_start
    and MPI_Win_complete; ops, op_epoch, op_target: its RMA operations; a_rows (PAIRS):
    one per (access epoch, target of its group); po, wt: each exposure epoch's
    MPI_Win_post and the Win_wait (or completed Win_test) that closed it; t_rows (PAIRS):
    one per (exposure epoch, origin of its group). An a_row and a t_row are the same
    pair-wise synchronisation when their (o, t, win, pseq) agree."""

    st: np.ndarray
    cl: np.ndarray
    ops: np.ndarray
    op_epoch: np.ndarray
    op_target: np.ndarray
    a_rows: np.ndarray
    po: np.ndarray
    wt: np.ndarray
    t_rows: np.ndarray


EPOCH_KEY = ("o", "t", "win", "pseq")


def epochs(L, w):
    """Pair the access and exposure epochs of the window events w (_Epochs): for this
    analysis and the event graph (analysis/eventgraph.py) alike."""
    wi, typ, role, last_role = w.wi, w.typ, w.role, w.last_role
    rank, win, b, e = w.rank, w.win, w.b, w.e
    is_op, start = w.is_op, w.start
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
    op_epoch = np.searchsorted(st, ops, "right") - 1  # the start before the op (same group)
    okop = op_epoch >= 0
    okop[okop] &= (rank[st[op_epoch[okop]]] == rank[ops[okop]]) & (
        win[st[op_epoch[okop]]] == win[ops[okop]]
    )
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
    a_rows["x"] = b[cl][ep]  # complete enter
    a_rows["y"] = np.where(
        accessed, lastop_u[np.maximum(j, 0)] if len(lastop_u) else 0, e[st][ep]
    )  # last op end

    # ---- exposure epochs: Win_post .. Win_wait (or a Win_test that completed) ----
    po = np.flatnonzero(sync & (role == R["win_post"]))
    closer = sync & (
        (role == R["win_wait"]) | ((role == R["win_test"]) & ((ev["flags"][wi] & F["DONE"]) != 0))
    )
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
    t_rows["x"] = b[po][ep2]  # post enter
    return _Epochs(st, cl, ops, op_epoch, op_target, a_rows, po, wt, t_rows)


def _gats(L, ex, acc, notes, w):
    """General active target synchronisation (MPI_Win_start/complete on the origin,
    MPI_Win_post/wait/test on the target), over the window events w (_WindowEvents)."""
    role, rank, b, e, path = w.role, w.rank, w.b, w.e, w.path
    E = epochs(L, w)
    st, cl, ops, op_epoch, op_target = E.st, E.cl, E.ops, E.op_epoch, E.op_target
    a_rows, po, wt, t_rows = E.a_rows, E.po, E.wt, E.t_rows
    ep, ep2 = a_rows["epoch"], t_rows["epoch"]
    key = EPOCH_KEY
    # pair-wise synchronisations at the complete: group members, unneeded: not accessed
    gsize = np.bincount(ep, minlength=len(st))
    nacc = np.bincount(ep, weights=a_rows["acc"], minlength=len(st)).astype(np.int64)
    acc.add("mpi_rma_pairsync_count", path[cl], rank[cl], gsize)
    acc.add("mpi_rma_pairsync_unneeded_count", path[cl], rank[cl], gsize - nacc)

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
    rows = _table(
        COLLS,
        key=ev["win"][wi],
        seq=free,
        rank=ev["rank"][wi],
        path=calls["path"][c],
        role=free,
        b=calls["t0"][c],
        e=calls["t1"][c],
        crank=ev["crank"][wi],
        csize=ev["csize"][wi],
    )
    X = _instances(L, ex, rows)
    here, gid, ok = X.here, X.gid(), X.ok
    if not len(here):
        return
    latest = X.max(here["b"])[gid]
    earliest_end = X.min(here["e"])[gid]
    idle = np.where((earliest_end > latest) & (here["b"] < latest), latest - here["b"], 0)
    okr = ok[gid]
    free = here["seq"] > 0
    for metric, sel in (
        ("mpi_rma_wait_at_create", okr & ~free),
        ("mpi_rma_wait_at_free", okr & free),
    ):
        acc.add(metric, here["path"][sel], here["rank"][sel], idle[sel])

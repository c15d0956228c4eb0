"""Point-to-point wait states: messages matched by (channel, sequence number); Late
Sender (with its Wrong Order sub-pattern) and Late Receiver."""

import numpy as np

from perfweave.model.trace import R
from perfweave.analysis.waitstates.common import MAX64, WO_BUFFER


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
        order = np.argsort(pair, kind="stable")  # (pp, qp), then channel
        first = np.empty(nch, np.int64)
        first[order] = np.cumsum(self.count[order]) - self.count[order]
        block = np.bincount(pair, weights=self.count, minlength=P * P).astype(np.int64)
        block_first = np.cumsum(block) - block
        mine = block[me * P : (me + 1) * P]  # what this process sends
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


def message_pairs(L):
    """Every message of a trace loaded in one process, matched as the analysis matches
    them: (the SEND_COLS rows, the RECV_COLS rows; with "src" and "dst"), one row of
    each per message."""
    s, v = message_rows(L)
    S, V = L.sends.take(s), L.recvs.take(v)
    S["src"], V["dst"] = L.rank_at("sends", s), L.rank_at("recvs", v)
    return S, V


def message_rows(L):
    """(the row of L.sends, the row of L.recvs) of every matched message of a trace
    loaded in one process."""
    m = _match(L.recvs, L.sends, L.nchan)
    ok = np.flatnonzero(m >= 0)
    return m[ok], ok


def point_to_point(L, ex, acc, notes, deferred=None, found=None):
    """Late Sender (and Wrong Order) on the receivers' side, Late Receiver on the
    senders', in batches of whole ranks. deferred: the DEFER rows of collectives()
    (nonblocking collectives completed in multi-waits), charged here: a multi-wait is
    one wait, for the request it waited for longest, a message or a collective.
    found: a clockcheck.Found, given the receives and their sends' enters."""
    S, V = L.sends, L.recvs
    sent = _Published(L, ex, S, S["e"], "src")  # the send's enter, at the receiver
    ls_call = np.zeros(L.ncalls, bool)  # multi-waits with a wait charged
    multi = _MultiWaits(L.ncalls, deferred)
    for a, b in L.chunks("recvs"):
        _late_sender(V[a:b], sent, ls_call, multi, acc, notes, L.locations, found)
    del sent
    multi.charge(acc, ls_call)
    posted = _Published(L, ex, V, V["e"], "dst")  # the receive's post, at the sender
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
        self.ls = np.zeros(ncalls, np.int64)  # per call: its Late Sender's wait

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


def _late_sender(V, sent, ls_call, multi, acc, notes, threads=None, found=None):
    e_send, matched = sent.get(V)
    if found is not None:
        found.messages(V, e_send, matched)
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
    seq = np.flatnonzero(matched)  # receives in processing order (rows of V)
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
    locs = np.unique(i_loc)  # instances come in location order, like receives
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
            np.minimum(table[lv - 1, : b - a - k], table[lv - 1, k:], out=table[lv, : b - a - k])
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

"""The clock condition of a trace, and its correction (`perfweave analyze
--correct-clocks`; docs/wait-states.md, "Clock condition").

A message cannot be received before it was sent, and a collective operation in which
data flows cannot end on a rank before the ranks it needs data from entered it. When
recorded times say otherwise, the ranks' clocks disagreed by more than the message's
latency (Scalasca's scout counts these "clock condition violations"): the events are
checked here on the loaded tables, on

- messages: the leave of the call that completed the receive before the enter of the
  call that started the send: L(recv) < E(send);
- collectives: the exit e of a rank's call before the latest enter b of the ranks it
  receives data from: every member for barriers and N x N operations (the members that
  send, for N x N), the root for a non-root of a broadcast or scatter, the senders for
  the root of a reduce or gather.

Each violation is charged to (kind, sending rank, receiving rank, receiving call path),
with the number of them and the largest amount.

The correction is the controlled logical clock of Becker, Rabenseifner, Wolf and
Linford ("Scalable timestamp synchronization for event traces of message-passing
applications", Parallel Computing 2009), on every time of a rank's tables (its "events",
in time order):

- forward: t'(i) = max(t(i), t'(i-1) + gamma (t(i) - t(i-1)), bound(i)), where bound
  is t'(send) + mu for a receive's completion and max t'(b) + mu over the rank's
  sources for a collective's exit (mu: the minimum message latency). With
  v = t' - gamma t that is a running maximum of bound - gamma t along each rank, so a
  pass is one grouped cumulative maximum; passes repeat, with the bounds of the last
  pass' times, until no time moves (at most the length of the longest chain of
  messages that needed moving);
- backward: a forward jump of d at an event is spread over the events before it, each
  moved by d - s (t(jump) - t(k)) when that is larger than its own correction, so that
  the intervals before the jump grow by at most the fraction s instead of the last one
  by d. A reversed grouped running maximum again; where it would move a send (or a
  collective's enter that others need) past the bound its partner's corrected time
  allows, the send keeps that bound and the events before it are moved from there.

Corrections only move events later; the order of a rank's events is kept. The check
runs in every analysis process on its ranks (a send's enter reaches its receive as for
Late Sender, a collective's latest enter in a reduction as for its waits); the
correction in a serial analysis only (its passes need every rank's times)."""

import numpy as np

from perfweave.analysis.exchange import Local
from perfweave.analysis.waitstates.collectives import _group_cummax
from perfweave.analysis.waitstates.common import MIN64
from perfweave.analysis.waitstates.p2p import _Published, message_rows
from perfweave.errors import PerfweaveError
from perfweave.model.trace import R

GAMMA = 1.0  # forward amortisation: the corrected clock keeps a jump (see docs)
SLOPE = 0.01  # backward amortisation: intervals before a jump grow by at most 1 %
MAX_PASSES = 1000

# the time columns of each table: corrected together
TIME_COLS = {"sends": ("e", "cb", "ce"), "recvs": ("e", "cb", "ce"), "colls": ("b", "e", "w")}
WCALL_TIMES = ("t0", "t1")


# ---------------------------------------------------------------- constraints


def _flows(L, ex):
    """The collectives' data flows, as rows of L.colls: (each row's instance, the rows
    that are a source, those that are a destination, the number of instances). Rows
    of whole instances only (every member, one role, all blocking or all not, none left
    open); instances are numbered alike in every analysis process (an offset per
    communicator plus the number on it), their summaries reduced over the processes."""
    C = L.colls
    key, seq = C["key"].astype(np.int64), C["seq"].astype(np.int64)
    nk = len(L.comm_keys)
    last = np.full(nk, -1, np.int64)
    np.maximum.at(last, key, seq)
    csize = np.array([len(L.comms.get(int(k), ())) for k in L.comm_keys], np.int64)
    every = ex.allreduce(np.r_[last, csize], "max")  # a process knows its ranks' only
    size, csize = every[:nk] + 1, every[nk:]
    n = int(size.sum())
    inst = (np.cumsum(size) - size)[key] + seq
    role = C["role"].astype(np.int64)
    kind = role * 2 + (C["nb"] > 0) + 4 * len(R) * (C["open"] > 0)
    count = np.bincount(inst, minlength=n).astype(np.int64)
    kmin = np.full(n, np.iinfo(np.int64).max)
    kmax = np.full(n, MIN64)
    np.minimum.at(kmin, inst, kind)
    np.maximum.at(kmax, inst, kind)
    if n:
        count = ex.allreduce(count, "sum")
        kmin, kmax = ex.allreduce(kmin, "min"), ex.allreduce(kmax, "max")
    ok = ((count == np.repeat(csize, size)) & (kmin == kmax))[inst]
    src, dst = _ends(C, role)
    return inst, np.flatnonzero(ok & src), np.flatnonzero(ok & dst), n


def _ends(rows, role):
    """(sources, destinations) among collective rows (sent, recv, root; role): every
    member of a barrier; of N x N, the members that send / receive; of one to all, the
    root that sends / the non-roots that receive; of all to one, the non-roots that send
    / the root."""
    sent, recv, root = rows["sent"] > 0, rows["recv"] > 0, rows["root"] > 0
    bar, n2n = role == R["barrier"], role == R["n2n"]
    o2n, n21 = role == R["12n"], role == R["n21"]
    src = bar | (n2n & sent) | (o2n & root & sent) | (n21 & sent & ~root)
    dst = bar | (n2n & recv) | (o2n & ~root & recv) | (n21 & root)
    return src, dst


def _collective_edges(L, ex):
    """(source rows, destination rows, the instance of each, instances)."""
    inst, s, d, n = _flows(L, ex)
    return s, d, inst[s], inst[d], n


class _Events:
    """Every time of the loaded tables (TIME_COLS, the window calls' and each rank's
    span), as events: one per distinct (rank, time), sorted by rank and time; cell
    (table, column) -> its event."""

    def __init__(self, L):
        parts, self.cells = [], []
        for name, cols in TIME_COLS.items():
            t = getattr(L, name)
            rank = L.ranks_of(name, 0, len(t)).astype(np.int64)
            for c in cols:
                parts.append((rank, t[c]))
                self.cells.append((name, c, len(t)))
        w = L.wcalls
        wr = L.ranks_of("wcalls", 0, len(w)).astype(np.int64)
        for c in WCALL_TIMES:
            parts.append((wr, w[c]))
            self.cells.append(("wcalls", c, len(w)))
        ranks = np.array([rd.rank for rd in L.trace.ranks], np.int64)
        for c in ("t_begin", "t_end"):
            parts.append((ranks, np.array([getattr(rd, c) for rd in L.trace.ranks], np.int64)))
            self.cells.append(("span", c, len(ranks)))
        rank = np.concatenate([p[0] for p in parts])
        t = np.concatenate([p[1] for p in parts]).astype(np.int64)
        lo = int(t.min(initial=0))
        width = int(t.max(initial=0)) - lo + 1
        if int(rank.max(initial=0)) < 2**62 // width:  # one key: a faster sort
            order = np.argsort(rank * width + (t - lo))
        else:
            order = np.lexsort((t, rank))
        rs, ts = rank[order], t[order]
        new = (
            np.r_[True, (rs[1:] != rs[:-1]) | (ts[1:] != ts[:-1])] if len(t) else np.zeros(0, bool)
        )
        self.rank, self.t = rs[new], ts[new]
        self.of = np.empty(len(t), np.int64)
        self.of[order] = np.cumsum(new) - 1
        self.first = np.r_[True, self.rank[1:] != self.rank[:-1]] if len(self.t) else new

    def cell(self, name, col):
        """The event of each row's cell (name, col)."""
        pos = 0
        for n, c, size in self.cells:
            if (n, c) == (name, col):
                return self.of[pos : pos + size]
            pos += size
        raise KeyError((name, col))


# ---------------------------------------------------------------- violations


class Found:
    """Violations as they are met: the receives of a batch with their sends' enters
    (messages), collective rows with the latest enter of their instance's sources
    (collectives); resolve() names the source rank of each collective violated, pairs()
    merges all over the analysis processes. The patterns feed one as they go (their
    exchanges bring those values anyway); violations() feeds one on its own."""

    def __init__(self):
        self.rows = []  # (kind, from rank, to rank, call path, ns)
        self.coll = []  # (instance, to rank, call path, ns, the sources' latest enter)
        self.instances = None  # () -> the instance of each row of L.colls

    def messages(self, V, e_send, matched):
        late = np.where(matched, e_send - V["ce"], 0)
        bad = np.flatnonzero(late > 0)
        if len(bad):
            self.rows.append(("p2p", V["src"][bad], V["dst"][bad], V["path"][bad], late[bad]))

    def collectives(self, inst, rows, whole, enter):
        """inst: each row's instance; whole: rows of whole instances; enter: per row its
        instance's latest source enter (MIN64: none)."""
        _, dst = _ends(rows, rows["role"])
        late = np.where(whole & dst & (enter > MIN64), enter - rows["e"], 0)
        bad = np.flatnonzero(late > 0)
        if len(bad):
            self.coll.append(
                (inst[bad], rows["rank"][bad], rows["wpath"][bad], late[bad], enter[bad])
            )

    def resolve(self, L, ex):
        """The rank that entered last among each violated instance's sources (the
        highest if tied); every analysis process takes part."""
        mine = np.unique(np.concatenate([c[0] for c in self.coll])) if self.coll else []
        U = np.unique(np.concatenate([np.asarray(x, np.int64) for x in ex.allgather(mine)]))
        if not len(U):
            return
        enter = np.full(len(U), MIN64)
        for c in self.coll:
            np.maximum.at(enter, np.searchsorted(U, c[0]), c[4])
        enter = ex.allreduce(enter, "max")
        C = L.colls
        inst = self.instances()
        pos = np.minimum(np.searchsorted(U, inst), len(U) - 1)
        idx = np.flatnonzero(U[pos] == inst)
        rows = {k: C[k][idx] for k in ("sent", "recv", "root")}
        src, _ = _ends(rows, C["role"][idx])
        at = idx[src & (C["b"][idx] == enter[pos[idx]])]
        who = np.full(len(U), -1, np.int64)
        np.maximum.at(who, pos[at], C["rank"][at].astype(np.int64))
        who = ex.allreduce(who, "max")
        for i, to, path, late, _ in self.coll:
            self.rows.append(("collective", who[np.searchsorted(U, i)], to, path, late))
        self.coll = []

    def pairs(self, ex):
        """{p2p, collective: counts; pairs: (kind, from, to, call path, count, largest
        ns), largest first} at the first analysis process, None at the others."""
        mine = []
        for kind, a, b, p, x in self.rows:
            key = np.stack([a, b, p]).astype(np.int64)
            uk, inv = np.unique(key, axis=1, return_inverse=True)
            inv = inv.reshape(-1)
            cnt = np.bincount(inv, minlength=uk.shape[1])
            mx = np.full(uk.shape[1], MIN64)
            np.maximum.at(mx, inv, x.astype(np.int64))
            mine += [
                ((kind, f, t, cp), c, m)
                for (f, t, cp), c, m in zip(uk.T.tolist(), cnt.tolist(), mx.tolist())
            ]
        parts = ex.gather(mine)
        if parts is None:
            return None
        merged = {}
        for k, c, m in (row for part in parts for row in part):
            c0, m0 = merged.get(k, (0, MIN64))
            merged[k] = (c0 + c, max(m0, m))
        counts = {"p2p": 0, "collective": 0}
        for (kind, *_), (c, _) in merged.items():
            counts[kind] += c
        pairs = sorted(
            ((*k, c, m) for k, (c, m) in merged.items()),
            key=lambda r: (-r[5], r[0], r[1], r[2], r[3]),
        )
        return dict(counts, pairs=pairs)


def violations(L, ex):
    """The clock-condition violations of the loaded trace, found on their own (the
    patterns find them with Found as they go): Found.pairs()."""
    found = Found()
    V = L.recvs
    e_send, ok = _Published(L, ex, L.sends, L.sends["e"], "src").get(V)
    found.messages(V, e_send, ok)
    inst, s, d, n = _flows(L, ex)
    if n:
        C = L.colls
        latest = np.full(n, MIN64)
        np.maximum.at(latest, inst[s], C["b"][s])
        latest = ex.allreduce(latest, "max")
        whole = np.zeros(len(C), bool)
        whole[d] = True
        found.collectives(inst, C, whole, latest[inst])
    found.instances = lambda: inst
    found.resolve(L, ex)
    return found.pairs(ex)


# ---------------------------------------------------------------- correction


def _seg_cummax(group, values):
    """Running maximum of integer values restarted at each group (rows sorted by
    group): one running maximum of group * width + value when that fits in 63 bits,
    else by ranks of the values (_group_cummax)."""
    if not len(values):
        return values.copy()
    lo = int(values.min())
    width = int(values.max()) - lo + 1
    if int(group[-1]) >= 2**62 // width:
        return _group_cummax(group, values)
    base = group * width
    return np.maximum.accumulate(base + (values - lo)) - base + lo


def correct(L, min_latency_ns=0, gamma=GAMMA, slope=SLOPE):
    """Correct the loaded trace's times in place with the controlled logical clock (see
    the module's text). Returns {passes, moved: {rank: (events moved, max ns, mean ns of
    those moved)}}."""
    if not 0 < gamma <= 1 or not 0 <= slope <= 1:
        raise PerfweaveError("clock correction: gamma must be in (0, 1], slope in [0, 1]")
    mu = int(min_latency_ns)
    ev = _Events(L)
    t, first = ev.t, ev.first
    # p2p: send enter -> receive leave
    m = message_rows(L)
    p_src = ev.cell("sends", "e")[m[0]]
    p_dst = ev.cell("recvs", "ce")[m[1]]
    s, d, si, di, ninst = _collective_edges(L, Local(0))
    c_src, c_dst = ev.cell("colls", "b")[s], ev.cell("colls", "e")[d]
    # gamma t, rounded to the ns (monotone, so the order of a rank's events is kept)
    t0 = int(t.min(initial=0))
    tg = t if gamma == 1.0 else t0 + np.rint(gamma * (t - t0)).astype(np.int64)
    group = np.cumsum(first)
    tp = t.copy()
    passes = 0
    while True:
        passes += 1
        bound = t.copy()
        if len(p_dst):
            np.maximum.at(bound, p_dst, tp[p_src] + mu)
        if len(c_dst):
            latest = np.full(ninst, MIN64)
            np.maximum.at(latest, si, tp[c_src])
            np.maximum.at(bound, c_dst, latest[di] + mu)
        new = tg + _seg_cummax(group, bound - tg)
        if np.array_equal(new, tp):
            break
        tp = new
        if passes >= MAX_PASSES:
            raise PerfweaveError(
                f"clock correction: no fixpoint after {MAX_PASSES} passes (a cycle of "
                "messages in the trace?)"
            )
    tp = _backward(t, tp, first, slope, mu, (p_src, p_dst), (c_src, c_dst, si, di, ninst))
    _apply(L, ev, tp)
    _apply_calls(L, ev, tp)
    shift = tp - t
    starts = np.flatnonzero(first)
    k = np.add.reduceat((shift > 0).astype(np.int64), starts) if len(t) else starts
    mx = np.maximum.reduceat(shift, starts) if len(t) else starts
    total = np.add.reduceat(shift, starts) if len(t) else starts
    moved = {
        r: (n, m, s / n if n else 0.0)
        for r, n, m, s in zip(ev.rank[starts].tolist(), k.tolist(), mx.tolist(), total.tolist())
    }
    return {"passes": passes, "moved": moved}


def _backward(t, tp, first, slope, mu, p2p, coll):
    """Spread each forward jump over the events before it (module text), keeping every
    send (and a collective's enter that others wait for) at or below what its
    partners' corrected times allow."""
    if slope <= 0 or not len(t):
        return tp
    p_src, p_dst = p2p
    c_src, c_dst, si, di, ninst = coll
    # the latest a source event may move to: its partners' (forward) time - mu
    cap = np.full(len(t), np.iinfo(np.int64).max)
    if len(p_src):
        np.minimum.at(cap, p_src, tp[p_dst] - mu)
    if len(c_dst):
        earliest = np.full(ninst, np.iinfo(np.int64).max)
        np.minimum.at(earliest, di, tp[c_dst] - mu)
        np.minimum.at(cap, c_src, earliest[si])
    c = tp - t
    ts = np.rint(slope * (t - t.min())).astype(np.int64)  # s t, to the ns
    last = np.r_[first[1:], True]  # a rank's last event: where its reversed scan starts
    ramp = _rev_seg_cummax(last, c - ts) + ts
    over = np.flatnonzero(t + ramp > cap)
    if len(over):
        # a capped source takes its cap, and starts the scan again for what is before it
        c[over] = cap[over] - t[over]
        start = last.copy()
        start[over] = True
        ramp = _rev_seg_cummax(start, c - ts) + ts
        # past the capped event the ramp comes from it; never below the forward time
    out = t + np.maximum(ramp, tp - t)
    return np.minimum(out, np.maximum(cap, tp))


def _rev_seg_cummax(start, values):
    """Running maximum from the end backwards, restarted where start is set (start:
    the last row of each reversed segment, in forward order)."""
    return _seg_cummax(np.cumsum(start[::-1]), values[::-1])[::-1]


def _apply(L, ev, tp):
    """Write the corrected times into the tables and each rank's span."""
    for name, col, _ in ev.cells:
        new = tp[ev.cell(name, col)]
        if name == "span":
            for rd, x in zip(L.trace.ranks, new.tolist()):
                setattr(rd, col, x)
        else:
            getattr(L, name)[col][:] = new


def _apply_calls(L, ev, tp):
    """Move the calls of a trace loaded with detail (the event graph's: the root causes
    are computed on the corrected times too) as the events: a call's enter or leave as
    the event at its time, else as the last event of its rank before it, but never
    past the next one."""
    shift = tp - ev.t
    for rd in L.trace.ranks:
        c = getattr(rd, "calls", None)
        a, b = np.searchsorted(ev.rank, [rd.rank, rd.rank + 1])
        if c is None or a == b:
            continue
        t, s, new = ev.t[a:b], shift[a:b], tp[a:b]
        for col in ("t0", "t1"):
            x = c[col].astype(np.int64)
            k = np.searchsorted(t, x, side="right") - 1
            moved = x + np.where(k >= 0, s[np.maximum(k, 0)], 0)
            cap = np.where(k + 1 < len(t), new[np.minimum(k + 1, len(t) - 1)], moved)
            c[col][:] = np.minimum(moved, cap)


class Check:
    """The clock condition of one analysis: with correct_clocks (a serial analysis),
    the violations on the recorded times and the correction, before the patterns;
    `found`, fed by the patterns (on the times they see); result() once they are done."""

    def __init__(self, L, ex, correct_clocks=False, min_latency_ns=None):
        if correct_clocks and ex.nproc > 1:
            raise PerfweaveError("--correct-clocks needs a serial analysis (without --parallel)")
        self.found = Found()
        self.before = self.correction = None
        self.mu = 0 if min_latency_ns is None else int(min_latency_ns)
        if correct_clocks:
            self.before = violations(L, ex)
            self.correction = correct(L, self.mu)

    def result(self, L, ex):
        """(number of violations, the result's "clock_condition" document
        (docs/wait-states.md), notes) at the first analysis process, (0, None, []) at
        the others."""
        self.found.resolve(L, ex)
        seen = self.found.pairs(ex)
        if seen is None:
            return 0, None, []
        found = self.before or seen
        n = found["p2p"] + found["collective"]
        doc = {
            "checked": True,
            "violations": n,
            "p2p": found["p2p"],
            "collective": found["collective"],
            "largest_s": found["pairs"][0][5] / 1e9 if found["pairs"] else 0.0,
            "pairs": [
                {"kind": k, "from": a, "to": b, "callpath": p, "count": c, "largest_s": x / 1e9}
                for k, a, b, p, c, x in found["pairs"]
            ],
            "corrected": self.correction is not None,
        }
        notes = []
        if self.correction is not None:
            doc["correction"] = {
                "method": "controlled logical clock",
                "min_latency_s": self.mu / 1e9,
                "gamma": GAMMA,
                "slope": SLOPE,
                "passes": self.correction["passes"],
                "violations_after": seen["p2p"] + seen["collective"],
                "ranks": [
                    {"rank": r, "moved": k, "max_s": mx / 1e9, "mean_s": mean / 1e9}
                    for r, (k, mx, mean) in sorted(self.correction["moved"].items())
                ],
            }
            if n:
                notes.append(
                    f"{n} clock-condition violations ({found['p2p']} messages received "
                    f"before they were sent, {found['collective']} collectives left before "
                    "a source entered) were corrected (--correct-clocks): wait states are "
                    "on the corrected times"
                )
        elif n:
            notes.append(
                f"{n} clock-condition violations: {found['p2p']} messages received before "
                f"they were sent, {found['collective']} collectives left before a source "
                f"entered (largest {doc['largest_s'] * 1e6:.1f} us): the ranks' clocks "
                "disagree by more than those latencies, so waits computed on those events "
                "are too small (a Late Sender whose send starts after the receive ended "
                "counts the whole receive; one the skew hides counts none); "
                "--correct-clocks corrects the times first"
            )
        return n, doc, notes

"""Collective wait states: operations (blocking or not) matched by (communicator,
sequence number); Wait at Barrier/NxN, Late Broadcast, Early Reduce, Barrier and NxN
completion; a nonblocking one's wait charged at its completion call."""

import numpy as np

from perfweave.analysis import metrics as MT
from perfweave.model.grouping import dense_ids
from perfweave.model.trace import COLL_FLAGS, R, Cols
from perfweave.analysis.waitstates.common import CHUNK, MAX64, MIN64, _hash_cols, _route, _table
from perfweave.analysis.waitstates.load import _comm_place

COLLS = np.dtype(
    [
        ("key", "<i8"),
        ("seq", "<i8"),
        ("rank", "<i4"),
        ("path", "<i4"),
        ("role", "<i2"),
        ("nb", "u1"),
        ("sent", "u1"),
        ("recv", "u1"),
        ("root", "u1"),
        ("pad", "<u2"),
        ("csize", "<i4"),
        ("crank", "<i4"),
        ("b", "<i8"),
        ("e", "<i8"),
        ("w", "<i8"),
        ("wpath", "<i4"),
        ("wcall", "<i4"),
    ]
)


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
        if int(seq.min()) >= 0 and int(seq.max()) < 2**40 and len(ukey) < 2**23:
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
        self.ok = (
            (count == self.max(csize))
            & (self.min(csize) == self.max(csize))
            & (self.max(here["nb"]) == 0)
            & (self.min(role) == self.max(role))
        )

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
    return (
        t["role"].astype(np.int64) * 4
        + (f & COLL_FLAGS["nb"]) * 2
        + ((f & COLL_FLAGS["open"]) != 0)
    )


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
    "latest_sender": ("max", lambda t: np.where(t["sent"] > 0, t["b"], MIN64), ("n2n", "n21")),
    "root_b": ("max", lambda t: np.where(t["root"] > 0, t["b"], MIN64), ("12n",)),
    "root_sent": ("max", lambda t: (t["sent"] > 0) & (t["root"] > 0), ("12n",)),
}
_UFUNC = {"max": (np.maximum, MIN64), "min": (np.minimum, MAX64), "sum": (np.add, 0)}

# (wait metric, completion metric or None) of each collective role
COLL_METRICS = {
    "barrier": ("mpi_barrier_wait", "mpi_barrier_completion"),
    "n2n": ("mpi_wait_nxn", "mpi_nxn_completion"),
    "12n": ("mpi_latebroadcast", None),
    "n21": ("mpi_earlyreduce", None),
    "scan": ("mpi_earlyscan", None),
}

# a nonblocking collective completed in a multi-wait, charged once the call's other
# waits are known (_charge_multiwaits): the call, the rank, its path, the metrics
# (MT.INDEX; -1 none) and values of the wait and of the completion
DEFER = np.dtype(
    [
        ("wcall", "<i8"),
        ("rank", "<i4"),
        ("path", "<i4"),
        ("metric", "<i4"),
        ("cmetric", "<i4"),
        ("value", "<i8"),
        ("cvalue", "<i8"),
    ]
)


def _deferred(wcall, rank, path, role, value, cvalue):
    """DEFER rows for collectives of one role."""
    m, cm = COLL_METRICS[role]
    return _table(
        DEFER,
        wcall=wcall,
        rank=rank,
        path=path,
        metric=MT.INDEX[m],
        cmetric=MT.INDEX[cm] if cm else -1,
        value=value,
        cvalue=cvalue,
    )


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
    return ~(nb & ((wrole == R["test"]) | (wrole == R["waitmulti"]))), nb & (
        wrole == R["waitmulti"]
    )


def collectives(L, ex, acc, notes, found=None):
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
    completed in multi-waits, each at the process that owns its rank. found: a
    clockcheck.Found, given the rows with their instance's latest source enter."""
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
    last, csize, roles = every[:nk], every[nk : 2 * nk], every[2 * nk :]
    size = last + 1
    base = np.cumsum(size) - size
    ninst = int(size.sum())
    deferred = [np.zeros(0, DEFER)]
    if not ninst:
        return deferred[0]
    need = {k: v for k, v in COLL_SUMMARY.items() if v[2] is None or any(roles[R[r]] for r in v[2])}
    chunks = [(a, min(a + CHUNK, len(C))) for a in range(0, len(C), CHUNK)]
    S = {k: np.full(ninst, _UFUNC[op][1], np.int64) for k, (op, _, _) in need.items()}
    for a, z in chunks:
        rows = C[a:z]
        g = base[rows["key"]] + rows["seq"]
        for k, (op, f, _) in need.items():
            _UFUNC[op][0].at(S[k], g, np.asarray(f(rows)).astype(np.int64, copy=False))
    for op in ("max", "min", "sum"):  # one reduction per kind over the processes
        names = [k for k, (o, _, _) in need.items() if o == op]
        if names:
            S.update(zip(names, ex.allreduce(np.stack([S[k] for k in names]), op)))
    # an instance is whole when every member of its communicator took part, all alike,
    # and none left it open
    present = S["count"] > 0
    ok = (
        present
        & (S["count"] == np.repeat(csize, size))
        & (S["kmin"] == S["kmax"])
        & ((S["kmax"] & 1) == 0)
    )
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
        completion = np.maximum(
            0, e - np.maximum(np.maximum(earliest_end, np.minimum(latest, e)), w)
        )
        if found is not None:
            found.collectives(gid, here, okr, _source_enter(S, gid, role))
        batch = acc.rows(here["wpath"], here["rank"])
        values = {}
        bar = role == R["barrier"]
        if bar.any():
            values["barrier"] = (bar, wait_full, completion)
        n2n = role == R["n2n"]
        if n2n.any():
            latest_sender = S["latest_sender"][gid]
            overlap = earliest_end > latest
            w_partial = np.where(
                (here["recv"] > 0) & (w < latest_sender),
                np.maximum(0, np.minimum(latest_sender, e) - w),
                0,
            )
            values["n2n"] = (n2n, np.where(overlap, wait_full, w_partial), completion)
        o2n = role == R["12n"]
        if o2n.any():
            root_b = S["root_b"][gid]
            o2n &= (S["root_sent"][gid] > 0) & (here["root"] == 0) & (here["recv"] > 0)
            values["12n"] = (o2n & (w < root_b), np.maximum(0, np.minimum(root_b, e) - w), None)
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
                    deferred.append(
                        _deferred(
                            here["wcall"][d],
                            here["rank"][d],
                            here["wpath"][d],
                            r,
                            wait[d],
                            comp[d] if comp is not None else 0,
                        )
                    )
        scan = np.flatnonzero(role == R["scan"])
        if len(scan):
            scans.append(a + scan)
    if found is not None:
        found.instances = lambda: base[C["key"]] + C["seq"]
    if not roles[R["scan"]]:  # no process has scans: nothing to route
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


def _source_enter(S, gid, role):
    """Per row, the latest enter among its instance's sources (the members whose data
    it needs: clockcheck._ends), from the instance summaries; MIN64 for other roles."""
    out = np.full(len(gid), MIN64)
    for r, k in (("barrier", "latest"), ("n2n", "latest_sender"), ("n21", "latest_sender")):
        m = role == R[r]
        if k in S and m.any():
            out[m] = S[k][gid[m]]
    m = role == R["12n"]
    if "root_b" in S and m.any():
        out[m] = np.where(S["root_sent"][gid[m]] > 0, S["root_b"][gid[m]], MIN64)
    return out


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
    acc.add("mpi_earlyscan", here["wpath"], here["rank"], wait, okr if now is None else okr & now)
    d = np.flatnonzero(okr & later) if later is not None else []
    out = (
        _deferred(here["wcall"][d], here["rank"][d], here["wpath"][d], "scan", wait[d], 0)
        if len(d)
        else none
    )
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

"""Shared pieces of the wait-state analysis: result constants, the accumulator of
(metric, call path, rank) values, and the numpy grouping, joining and routing helpers."""

import numpy as np

from perfweave.analysis import metrics as MT
from perfweave.analysis.exchange import _mix
from perfweave.model.grouping import dense_ids
from perfweave.dtypes import TypeSet


WO_BUFFER = 100  # Late Sender instances a receiver remembers for Wrong Order (Scalasca)

CATS = list(MT.CATEGORY_METRIC)
C = {c: i for i, c in enumerate(CATS)}

WINDOW_EVENTS = TypeSet("WSYNC", "RMA")
MIN64 = np.iinfo(np.int64).min
MAX64 = np.iinfo(np.int64).max
CHUNK = 1 << 18  # rows of a batch: the temporaries of a batch stay in cache


# ---------------------------------------------------------------- helpers


class Acc:
    """Contributions (metric, path, rank, value), summed at the end. Large batches are
    summed per (path, rank) as they come, so that little is kept."""

    def __init__(self):
        self.parts = []

    def add(self, metric, path, rank, value, mask=None):
        """Add value[i] to (metric, path[i], rank[i]) for the rows i of mask (all rows
        if None) whose value is not 0."""
        value = np.asarray(value)
        keep = value != 0
        if mask is not None:
            keep &= mask
        idx = np.flatnonzero(keep)
        if not len(idx):
            return
        p = np.asarray(path)[idx].astype(np.int64)
        r = np.asarray(rank)[idx].astype(np.int64)
        v = value[idx].astype(np.int64)
        w = int(r.max()) + 1 if len(r) else 1
        if (
            len(idx) > 4096
            and int(r.min()) >= 0
            and int(p.min()) >= 0
            and (int(p.max()) + 1) * w < 2**62
        ):
            uniq, inv = dense_ids(p * w + r)
            v = _sum_at(inv, v, len(uniq))
            p, r = np.divmod(uniq, w)
        self.parts.append((np.full(len(p), MT.INDEX[metric], np.int64), p, r, v))

    def rows(self, path, rank):
        """A batch of rows (path, rank) that several metrics are charged to: _Batch."""
        return _Batch(self, path, rank)

    def add_many(self, metric_idx, path, rank, value):
        value = np.asarray(value)
        keep = value != 0
        if keep.any():
            self.parts.append(
                (
                    np.asarray(metric_idx, np.int64)[keep],
                    np.asarray(path, np.int64)[keep],
                    np.asarray(rank, np.int64)[keep],
                    value[keep].astype(np.int64),
                )
            )

    def reduced(self):
        if not self.parts:
            z = np.zeros(0, np.int64)
            return z, z, z, z
        return _reduce(*(np.concatenate(x) for x in zip(*self.parts)))


class _Batch:
    """Rows of one batch grouped by (path, rank) once, for the metrics charged to them:
    each metric's values are summed per group as they are added."""

    def __init__(self, acc, path, rank):
        self.acc = acc
        p, r = np.asarray(path).astype(np.int64), np.asarray(rank).astype(np.int64)
        self.width = int(r.max()) + 1 if len(r) else 1
        if len(r) and (
            int(r.min()) < 0 or int(p.min()) < 0 or (int(p.max()) + 1) * self.width >= 2**62
        ):
            self.uniq = None
            self.path, self.rank = p, r
            return
        self.uniq, self.inv = dense_ids(p * self.width + r)

    def add(self, metric, value, mask):
        if self.uniq is None:
            self.acc.add(metric, self.path, self.rank, value, mask)
            return
        keep = mask & (value != 0)
        idx = np.flatnonzero(keep)
        if not len(idx):
            return
        sums = _sum_at(self.inv[idx], np.asarray(value)[idx].astype(np.int64), len(self.uniq))
        nz = np.flatnonzero(sums)
        p, r = np.divmod(self.uniq[nz], self.width)
        self.acc.parts.append((np.full(len(nz), MT.INDEX[metric], np.int64), p, r, sums[nz]))


def _sum_at(inv, v, n):
    out = np.zeros(n, np.int64)
    np.add.at(out, inv, v)
    return out


def _reduce(m, p, r, v):
    """Sum values of equal (metric, path, rank), exactly (int64)."""
    if not len(m):
        return m, p, r, v
    pmax, rmax = int(p.max()) + 1, int(r.max()) + 1
    if len(MT.IDS) * pmax * rmax < 2**62:
        key = (m * pmax + p) * rmax + r
        order = np.argsort(key, kind="stable")
        ks = key[order]
        start = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    else:
        order = np.lexsort((r, p, m))
        ms, ps, rs = m[order], p[order], r[order]
        start = np.flatnonzero(
            np.r_[True, (ms[1:] != ms[:-1]) | (ps[1:] != ps[:-1]) | (rs[1:] != rs[:-1])]
        )
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

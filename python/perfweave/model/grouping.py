"""Grouping rows by integer keys without sorting them.

The analysis groups millions of rows by keys that take few distinct values (the channel
of a message, the call site of a call, the communicator of a collective). Sorting the
keys (np.unique, np.argsort) costs O(n log n) with poor locality: ~150-250 ns a row on
10^7 rows. Here the keys go through a hash table held in a numpy array instead: every
row writes its key into its slot, reads the slot back, and the rows whose key survived
get the slot's id; the rows that lost a collision try again with a bigger table and
another multiplier. That is a few passes over the rows (~25 ns a row on 10^7 rows, the
table staying in cache). Keys within a small range skip the hashing: a table of the
range marks them. Keys with many distinct values (more than an eighth of the
rows) fall back to np.unique.
"""

import numpy as np

_MULT = (
    0x9E3779B97F4A7C15,
    0xBF58476D1CE4E5B9,
    0x94D049BB133111EB,
    0xD6E8FEB86659FD93,
    0xA0761D6478BD642F,
    0xE7037ED1A0B428DB,
)


def dense_ids(keys):
    """keys (integers) -> (uniq, inv): the distinct keys and, for every row, the index of
    its key in uniq (uniq[inv] == keys). uniq is in no particular order, but the same
    for the same keys."""
    keys = np.asarray(keys)
    n = len(keys)
    if n and keys.dtype.kind in "iu":
        lo, hi = int(keys.min()), int(keys.max())
        if lo == hi:  # one key
            return keys[:1].copy(), np.zeros(n, np.int64)
        if hi - lo < max(4 * n, 1 << 16):  # a small range: a table of it
            return _table_ids(keys, lo, hi - lo + 1)
    if n < 32768 or keys.dtype.kind not in "iu":
        u, inv = np.unique(keys, return_inverse=True)
        return u, inv.reshape(-1).astype(np.int64)
    k = keys.astype(np.int64, copy=False).view(np.uint64)
    inv = np.empty(n, np.int64)
    rows = None  # rows still without an id (None: all)
    parts, base = [], 0
    # a table of ~8 slots per distinct key seen in a sample: small, so that it stays in
    # cache; keys the sample missed collide and get their ids in the next rounds
    sample = np.unique(k[:: max(1, n // 4096)])
    bits = min(22, max(10, (8 * len(sample)).bit_length()))
    for mult in _MULT:
        sub = k if rows is None else k[rows]
        with np.errstate(over="ignore"):
            h = ((sub * np.uint64(mult)) >> np.uint64(64 - bits)).astype(np.intp)
        table = np.empty(1 << bits, np.uint64)
        table[h] = sub  # one key per slot survives
        won = table[h] == sub
        used = np.zeros(1 << bits, bool)
        used[h[won]] = True
        slot_id = np.cumsum(used) - 1
        got = slot_id[h[won]] + base
        if rows is None:
            inv[won] = got
            rows = np.flatnonzero(~won)
        else:
            inv[rows[won]] = got
            rows = rows[~won]
        u = table[used]
        parts.append(u)
        base += len(u)
        if not len(rows):
            break
        if base > n // 8:  # many distinct keys: sorting is the better way
            break
        bits += 2
    if len(rows):
        u, i = np.unique(k[rows], return_inverse=True)
        inv[rows] = base + i.reshape(-1)
        parts.append(u)
    uniq = np.concatenate(parts).view(np.int64)
    return uniq.astype(keys.dtype, copy=False), inv


def _table_ids(keys, lo, span):
    """dense_ids of keys in [lo, lo + span): a table of the span marks the keys present;
    their ranks in it are the ids (uniq sorted)."""
    present = np.zeros(span, bool)
    off = keys - lo if lo else keys
    present[off] = True
    rank = np.cumsum(present) - 1
    return (np.flatnonzero(present) + lo).astype(keys.dtype), rank[off]


def order_by_group(ids, ngroups):
    """A stable order of rows by dense group id (0 <= ids < ngroups): a radix sort for up
    to 2^16 groups."""
    if ngroups <= 1 << 16:
        return np.argsort(ids.astype(np.uint16), kind="stable")
    return np.argsort(ids, kind="stable")


def rank_in_group(ids, ngroups, order=None):
    """For every row, how many rows of its group come before it (in row order, or in the
    given order of the rows)."""
    n = len(ids)
    if not n:
        return np.zeros(0, np.int64)
    if order is not None:
        ids = ids[order]
    o = order_by_group(ids, ngroups)
    count = np.bincount(ids, minlength=ngroups)
    first = np.cumsum(count) - count
    pos = np.empty(n, np.int64)
    pos[o] = np.arange(n) - np.repeat(first, count)
    if order is None:
        return pos
    out = np.empty(n, np.int64)
    out[order] = pos
    return out

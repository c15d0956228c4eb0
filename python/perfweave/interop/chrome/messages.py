"""The ends of the messages of one rank in the Chrome export's first pass, until each
has its number on its channel (Messages, Counters) and goes to its file, and the
channels' counts over all ranks that decide which ends get an arrow (Channels).
Completions are linked to their posts by the model's rule (Posts)."""

import numpy as np

from perfweave.model.trace import channel_numbers, request_posts

# what a flow event needs of one end of a message, kept on disk between the passes
END = np.dtype(
    [
        ("chan", np.uint64),
        ("seq", np.int64),
        ("thread", np.int64),
        ("ts", np.int64),
        ("bytes", np.int64),
    ]
)
# a message end of the first pass until its number is known and it is written: its
# place in the order of posting (k1, thread, idx), whether k1 is known (a receive
# completed before the pass met its post: not yet), the post it waits for (its post
# number and request key), its own k1 if that post never comes, and whether it goes to
# the file (messages to and from real ranks)
PENDING = np.dtype(
    END.descr
    + [
        ("k1", np.int64),
        ("idx", np.int64),
        ("ready", bool),
        ("number", np.int64),
        ("key", np.int64),
        ("own", np.int64),
        ("out", bool),
    ]
)
PENDING_ITEM = np.dtype((np.void, PENDING.itemsize))
assert PENDING.descr[: len(END.descr)] == END.descr


LAST = np.iinfo(np.int64).max


class Posts:
    """Open receive requests: the post number and request key that name each, and its
    place in the order of posting."""

    def __init__(self):
        self.number = np.zeros(0, np.int64)
        self.key = np.zeros(0, np.int64)
        self.k1 = np.zeros(0, np.int64)

    def oldest(self):
        return int(self.k1.min()) if len(self.k1) else LAST

    def link(self, pn, pkey, pk, porder, dn, dkey, dorder):
        """Post the requests (numbers pn, keys pkey, places pk, record order porder) and
        complete those of numbers dn and keys dkey (record order dorder; LAST for
        completions met before) by the model's rule (model/trace.py request_posts); a
        post that completed is no longer open. Returns (place of each completion's post,
        found)."""
        nold = len(self.number)
        alln = np.r_[self.number, np.asarray(pn, np.int64)]
        allkey = np.r_[self.key, np.asarray(pkey, np.int64)]
        allk = np.r_[self.k1, np.asarray(pk, np.int64)]
        if not len(dn):
            self.number, self.key, self.k1 = alln, allkey, allk
            return np.zeros(0, np.int64), np.zeros(0, bool)
        order = np.r_[np.full(nold, -1, np.int64), porder]
        post = request_posts(alln, allkey, order, dn, dkey, dorder)
        used = np.zeros(len(alln), bool)
        used[post[post >= 0]] = True
        self.number, self.key, self.k1 = alln[~used], allkey[~used], allk[~used]
        if not len(allk):  # completions of no post (a damaged trace): nothing to index
            return np.zeros(len(post), np.int64), post >= 0
        return np.where(post >= 0, allk[np.maximum(post, 0)], 0), post >= 0


class Messages:
    """One rank's sends (or receives) between their record and their file: numbered on
    their channel (Counters) when no message can still come before them, and written
    (per thread, in the order of its records) once every earlier one of the thread
    has its number."""

    def __init__(self, owner, which):
        self.owner, self.which = owner, which
        self.rows = np.zeros(0, PENDING)
        self.counts = Counters()

    def add(self, rows):
        if len(self.rows):
            rows = np.concatenate([self.rows.view(PENDING_ITEM), rows.view(PENDING_ITEM)]).view(
                PENDING
            )
        self.rows = rows

    def give_up_waiting(self):
        """The rank's end: a completion whose post never came was posted by itself."""
        w = ~self.rows["ready"]
        self.rows["k1"][w] = self.rows["own"][w]
        self.rows["ready"][w] = True

    def settle(self, below):
        """Number the messages posted before below (the watermark); write those that
        can be."""
        p = self.rows
        todo = np.flatnonzero(p["ready"] & (p["seq"] < 0) & (p["k1"] < below))
        if len(todo):
            todo = todo[np.lexsort((p["idx"][todo], p["thread"][todo], p["k1"][todo]))]
            out = p["out"][todo]
            p["seq"][todo[~out]] = 0  # not to the file, on no real rank's channel
            p["seq"][todo[out]] = self.counts.number(p["chan"][todo[out]])
        if not len(p):
            return
        keep = np.ones(len(p), bool)
        for t in np.unique(p["thread"]).tolist():
            i = np.flatnonzero(p["thread"] == t)
            waits = np.flatnonzero(p["seq"][i] < 0)
            i = i[: waits[0]] if len(waits) else i
            if len(i):
                keep[i] = False
                # the END fields lead each PENDING row: its first bytes
                e = p.view(PENDING_ITEM)[i[p["out"][i]]]
                ends = e.view(np.uint8).reshape(len(e), PENDING.itemsize)[:, : END.itemsize]
                self.owner.put(f"{self.which}-{t}", ends.tobytes())
        if not keep.all():
            self.rows = p.view(PENDING_ITEM)[keep].view(PENDING)


class Counters:
    """Messages so far per channel (64-bit channel hash -> count), as sorted arrays."""

    def __init__(self):
        self.keys = np.zeros(0, np.uint64)
        self.n = np.zeros(0, np.int64)

    def number(self, chan):
        """The numbers of messages of channels chan, given in the order of posting."""
        u, inv = np.unique(chan, return_inverse=True)
        inv = inv.reshape(-1)
        j = np.clip(np.searchsorted(self.keys, u), 0, max(len(self.keys) - 1, 0))
        known = (self.keys[j] == u) if len(self.keys) else np.zeros(len(u), bool)
        base = np.where(known, self.n[j] if len(self.keys) else 0, 0)
        seq = channel_numbers(inv, len(u), before=base)
        cnt = np.bincount(inv, minlength=len(u))
        self.n[j[known]] += cnt[known]
        if not known.all():
            keys = np.r_[self.keys, u[~known]]
            n = np.r_[self.n, cnt[~known]]
            o = np.argsort(keys, kind="stable")
            self.keys, self.n = keys[o], n[o]
        return seq

    def table(self):
        return self.keys, self.n


class Channels:
    """Messages per channel as sent and as received, over all ranks: message k of a
    channel has both ends when k is below both counts (an arrow without its other end
    is left out)."""

    def __init__(self, sends, recvs):
        def merge(parts):
            if not parts:
                return np.zeros(0, np.uint64), np.zeros(0, np.int64)
            u = np.concatenate([p[0] for p in parts])
            n = np.concatenate([p[1] for p in parts])
            uu, inv = np.unique(u, return_inverse=True)
            out = np.zeros(len(uu), np.int64)
            np.maximum.at(out, inv.reshape(-1), n)
            return uu, out

        self.sends, self.recvs = merge(sends), merge(recvs)

    @staticmethod
    def _count(table, chan):
        keys, n = table
        if not len(keys):
            return np.zeros(len(chan), np.int64)
        j = np.clip(np.searchsorted(keys, chan), 0, len(keys) - 1)
        return np.where(keys[j] == chan, n[j], 0)

    def matched(self, chan, seq):
        return seq < np.minimum(self._count(self.sends, chan), self._count(self.recvs, chan))


def hash64(*cols):
    """A 64-bit hash per row of integer columns (splitmix64 steps)."""
    h = np.full(len(cols[0]), 0x9E3779B97F4A7C15, np.uint64)
    with np.errstate(over="ignore"):
        for v in cols:
            h ^= np.asarray(v).astype(np.int64).view(np.uint64)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
            h *= np.uint64(0x94D049BB133111EB)
    return h

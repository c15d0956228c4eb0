"""Version 5 event files (docs/format.md, "Compact records"): 16-byte records in blocks,
decoded into the event records (EVENT_DTYPE) that readers/trace.py returns for every
version, with numpy on whole columns (a loop runs over blocks and event types, never
over records): a whole file (`decode`), or a thread's blocks a bounded number of
records at a time (`Parts`, for the exports); and written from event records
(`encode`, the runtime's encoding in numpy: bench/tracegen.py, the tests).

A head record (kind: the event's type) holds the fields its type's layout
(_format.EVENT_LAYOUTS, from format.h PW_EVENT_LAYOUTS) puts in its slots; each
extension record after it holds one field whole. Times are deltas from the block's
latest BASE record, addresses ids defined by SITE records of the same thread.
"""

import numpy as np

from perfweave._format import (
    EVENT_EXT_FIELDS,
    EVENT_LAYOUTS,
    EVENT_SLOTS,
    RECORDS,
    TRACE_KINDS,
    TRACE_NEXT_POST,
)
from perfweave.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES, SUB

CEVENT = RECORDS["cevent"]
CWIDE = RECORDS["cwide"]
SIZE = CEVENT.itemsize
K = TRACE_KINDS
BLOCK = EVENT_TYPES["BLOCK"]
# the event record's field of each extension kind (PW_CK_EXT + index)
EXT = {K["EXT"] + i: name.lower() for name, i in EVENT_EXT_FIELDS.items()}
SLOT = {v: k for k, v in EVENT_SLOTS.items()}
_TYPE_NAME = {v: k for k, v in EVENT_TYPES.items()}
# fields whose value is -1 where a record holds none (the rest: 0)
_MINUS_ONE = ("peer", "comm")


def is_compact(raw):
    """Whether the bytes of an events file are version 5's: a BLOCK record whose first
    slot is a THREAD record. (A version 2-4 file has a BLOCK type at byte 16, a flat
    one an event type there, below 128.)"""
    return len(raw) >= 2 * SIZE and raw[0] == BLOCK and raw[SIZE] == K["THREAD"]


def _layout(code):
    """Slot codes of (s, a, b, c) and the key's post number of a packed layout."""
    return [SLOT.get(code >> (4 * i) & 15, "NONE") for i in range(4)], SLOT.get(
        code >> 16 & 15, "NONE"
    )


def layout_of(typ):
    name = _TYPE_NAME.get(int(typ))
    return _layout(EVENT_LAYOUTS.get(name, EVENT_LAYOUTS["DEFAULT"]))


def blocks(c, rank, name, fields=("kind", "a", "b", "c")):
    """The blocks of a file with blocks (c: its records; fields: the names of kind,
    committed records, record slots and thread in them, a compact file's by default)
    as (first slot, committed slots, thread), and notes on what was not right. A loop
    over blocks, not records: a block holds --trace-buffer bytes."""
    n, pos = len(c), 0
    out, notes = [], []
    head = c[list(fields)]
    while pos < n:
        kind, committed, slots, thread = (int(v) for v in head[pos].tolist())
        if kind != BLOCK or slots <= 0:
            if kind or committed or slots:  # zeros: a block the rank had not begun
                notes.append(
                    f"rank {rank}: {name}: no block header at record {pos} "
                    f"of {n}; the records after it are ignored"
                )
            break
        have = min(slots, n - pos - 1)
        if not 0 <= committed <= have:
            notes.append(
                f"rank {rank}: {name}: block at record {pos} counts {committed} "
                f"records of {have}; truncated or damaged"
            )
            committed = min(max(committed, 0), have)
        out.append((pos + 1, committed, thread))
        pos += 1 + slots
    return out, notes


def thread_ids(raw):
    """{thread: OS thread id} from the THREAD records of a compact file."""
    n = len(raw) // SIZE
    c = raw[: n * SIZE].view(CEVENT)
    spans, _ = blocks(c, 0, "")
    out = {}
    for first, committed, thread in spans:
        if committed and c["kind"][first] == K["THREAD"] and c["a"][first] > 0:
            out.setdefault(thread, int(c["a"][first]))
    return out


def decode(raw, rank, name):
    """(records, spans, notes) of a compact file's bytes: the events (EVENT_DTYPE) in
    file order, their spans (first, count, thread) one per block, and notes on damage.
    Damaged records become events of type 0 (readers/trace.py's checks drop them)."""
    n = len(raw) // SIZE
    notes = [partial_note(raw, rank, name)] if len(raw) % SIZE else []
    c = raw[: n * SIZE].view(CEVENT)
    spans, block_notes = blocks(c, rank, name)
    notes += block_notes
    dec = Decoder(rank, name)
    out, per_block = dec(c, [(a, k, t, False) for a, k, t in spans])
    notes += dec.notes()
    first = np.r_[0, np.cumsum(per_block)[:-1]] if len(spans) else []
    espans = [(int(a), int(k), int(t)) for a, k, (_, _, t) in zip(first, per_block, spans)]
    return out, espans, notes


def partial_note(raw, rank, name):
    return (
        f"rank {rank}: {name} ends with a partial record ({len(raw) % SIZE} bytes, "
        "ignored): truncated"
    )


# the kinds of records that decode() knows: heads (kind 0 too: damage, an event of type
# 0), extension records, BASE, SITE, THREAD
KNOWN_KINDS = np.zeros(256, bool)
KNOWN_KINDS[: K["EXT"]] = True
KNOWN_KINDS[list(EXT) + [K["BASE"], K["SITE"], K["THREAD"]]] = True


def unknown_note(rank, name, n):
    return f"rank {rank}: {name}: {n} records of unknown kind ignored"


class Decoder:
    """Compact records into event records, a whole file at once or part after part (the
    exports decode a thread's blocks a bounded number of records at a time): what one
    part leaves to the parts after it is kept per thread, the time base of a block cut
    in the middle, the call-site ids (defined before their first use, in any earlier
    block of the thread) and the number of the thread's last post. `unknown` and `bad`
    count the records of unknown kind and the events that refer to a time base or an
    address the records before them do not define."""

    def __init__(self, rank, name):
        self.rank, self.name = rank, name
        self.skey = np.zeros(0, np.int64)  # thread << 32 | site id, sorted
        self.sval = np.zeros(0, np.int64)  # the address of each
        self.base = {}  # thread -> time base where its last part ended (None: none)
        self.post = {}  # thread -> number of its last post
        self.unknown = self.bad = 0

    def notes(self):
        out = [unknown_note(self.rank, self.name, self.unknown)] if self.unknown else []
        if self.bad:
            out.append(
                f"rank {self.rank}: {self.name}: {self.bad} records refer to a time base or "
                "an address that the file does not define; damaged"
            )
        return out

    def __call__(self, c, segs):
        """(records, events of each segment) of segments [(first, count, thread, cont)]
        of c, a file's records: cont says the segment continues the block of its thread's
        segment before, decoded by an earlier call (whose time base it carries); it
        begins with a head, and is its thread's first segment in this call."""
        counts = np.array([k for _, k, _, _ in segs], np.int64)
        offsets = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
        # copied as slices (memcpy), not gathered record by record
        parts = [c[a : a + k] for a, k, _, _ in segs if k]
        sl = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else c[:0]
        w = sl.view(CWIDE)["w"]
        kind = sl["kind"]
        blk = np.repeat(np.arange(len(segs)), counts)
        thr = np.repeat(np.array([t for _, _, t, _ in segs], np.int64), counts)
        head = kind < K["EXT"]  # kind 0 too: a damaged record, an event of type 0
        hpos = np.flatnonzero(head)
        nev = len(hpos)
        out = np.zeros(nev, EVENT_DTYPE)
        for f in _MINUS_ONE:
            out[f] = -1
        ev = np.cumsum(head) - 1  # each record's latest head
        self.unknown += int(len(kind) - np.count_nonzero(KNOWN_KINDS[kind]))
        bases = self._bases(segs, counts, offsets, kind, w)
        self._sites(kind, thr, sl["a"], w)

        typ = kind[hpos]
        out["type"] = typ
        out["flags"] = sl["flags"][hpos]
        bad = np.zeros(nev, bool)  # a time base or an address the file lacks
        t0_ext = np.zeros(nev, bool)
        for t in np.unique(typ).tolist():
            sel = np.flatnonzero(typ == t)
            p = hpos[sel]
            slots, _ = layout_of(t)
            raw_slot = [sl["s"][p], sl["a"][p], sl["b"][p], sl["c"][p]]
            # t0 before t1: a duration is from t0
            for i in sorted(range(4), key=lambda i: slots[i] != "T0_TIME"):
                code, v = slots[i], raw_slot[i]
                if code == "NONE" or code.startswith("KEY"):
                    continue
                field, enc = code.rsplit("_", 1)
                field = field.lower()
                if enc == "U16" or enc == "U32":
                    val = v
                elif enc == "I16":
                    val = v.astype(np.uint16).view(np.int16)
                elif enc == "I32":
                    val = v.astype(np.uint32).view(np.int32)
                elif enc == "TIME":
                    key, value, ok = bases
                    j = np.searchsorted(key, 2 * p, side="right") - 1
                    has_base = ok[j]
                    bad[sel[~has_base]] = True
                    val = np.where(has_base, value[j], 0) + v.astype(np.int64)
                elif enc == "DUR":
                    val = out["t0"][sel] + v.astype(np.int64)
                else:  # ADDR
                    skey, sval = self.skey, self.sval
                    k = (thr[p] << 32) | v.astype(np.int64)
                    j = np.minimum(np.searchsorted(skey, k), max(len(skey) - 1, 0))
                    found = skey[j] == k if len(skey) else np.zeros(len(k), bool)
                    bad[sel[~found]] = True
                    val = np.where(found, sval[j] if len(sval) else 0, 0)
                out[field][sel] = val
        # extension records: a field whole, for the head before them in the same segment
        for code, field in EXT.items():
            m = np.flatnonzero(kind == code)
            m = m[(ev[m] >= 0) & (blk[hpos[np.maximum(ev[m], 0)]] == blk[m])]
            out[field][ev[m]] = w[m]
            if field == "t0":
                t0_ext[ev[m]] = True
        _number_posts(out, typ, thr[hpos], self.post)
        # a request key not stored: the post's number names the post, and stands for it
        for t in np.unique(typ).tolist():
            _, key = layout_of(t)
            if key == "NONE":
                continue
            sel = np.flatnonzero((typ == t) & ~t0_ext)
            number = out["t1" if key == "KEY_T1" else "tag"][sel].astype(np.int64)
            out["t0"][sel] = np.where(number != 0, number, out["t0"][sel])
        if bad.any():
            self.bad += int(bad.sum())
            out["type"][bad] = 0
        per_seg = np.bincount(blk[hpos], minlength=len(segs)) if nev else np.zeros(len(segs), int)
        return out, per_seg

    def _bases(self, segs, counts, offsets, kind, w):
        """The time bases of records of the segments, as (key, value, defined) sorted by
        key, which is twice the position of a BASE record and twice a segment's start less
        one: a timed head at p takes the last one up to 2p (no record of its segment
        before a BASE: the base its segment carries in, none at a block's start). Sets
        each thread's base where its last segment ends."""
        bpos = np.flatnonzero(kind == K["BASE"])
        live = np.flatnonzero(counts > 0)
        carried = [self.base.get(segs[i][2]) if segs[i][3] else None for i in live.tolist()]
        key = np.r_[2 * bpos, 2 * offsets[live] - 1]
        value = np.r_[w[bpos], np.array([b or 0 for b in carried], np.int64)]
        ok = np.r_[np.ones(len(bpos), bool), np.array([b is not None for b in carried], bool)]
        order = np.argsort(key, kind="stable")
        # where each segment ends: its last BASE, else what it carried in
        last = np.searchsorted(bpos, offsets + counts) - 1
        for i, (_, k, t, cont) in enumerate(segs):
            j = int(last[i])
            if k and j >= 0 and bpos[j] >= offsets[i]:
                self.base[t] = int(w[bpos[j]])
            elif not cont:
                self.base[t] = None
        return key[order], value[order], ok[order]

    def _sites(self, kind, thr, a, w):
        """Adds the SITE records' ids to the table; an id defined twice keeps its first
        address."""
        sdef = np.flatnonzero(kind == K["SITE"])
        if not len(sdef):
            return
        skey = np.r_[self.skey, (thr[sdef] << 32) | a[sdef].astype(np.int64)]
        sval = np.r_[self.sval, w[sdef]]
        order = np.argsort(skey, kind="stable")
        skey, sval = skey[order], sval[order]
        first = np.r_[True, skey[1:] != skey[:-1]]
        self.skey, self.sval = skey[first], sval[first]


def _number_posts(out, typ, thread, last):
    """The numbers of posts (nonblocking events of KEY_T1 layouts) that no record holds
    (flag TRACE_NEXT_POST): the thread's previous numbered post's + 1, 1 for its first.
    Posts are numbered per thread in file order, which is the thread's order. last:
    {thread: number of its last post} before these records, updated."""
    keyed = [t for t in np.unique(typ).tolist() if layout_of(t)[1] == "KEY_T1"]
    flags = out["flags"]
    implicit = (flags & TRACE_NEXT_POST) != 0
    nb = (flags & EVENT_FLAGS["NONBLOCKING"]) != 0
    post = np.flatnonzero(np.isin(typ, keyed) & nb & (implicit | (out["t1"] != 0)))
    if not len(post):
        return
    if implicit.any():
        out["flags"] = flags & ~np.uint8(TRACE_NEXT_POST)
    post = post[np.argsort(thread[post], kind="stable")]
    k = np.arange(len(post))
    th = thread[post]
    start = np.flatnonzero(np.r_[True, th[1:] != th[:-1]])
    size = np.diff(np.r_[start, len(post)])
    first = np.repeat(start, size)  # of each one's thread
    explicit = ~implicit[post]
    anchor = np.maximum.accumulate(np.where(explicit, k, -1))
    own = anchor >= first  # a numbered post of the same thread before it
    before = np.repeat(np.array([last.get(t, 0) for t in th[start].tolist()], np.int64), size)
    base = np.where(own, out["t1"][post[np.maximum(anchor, 0)]], before)
    at = np.where(own, anchor, first - 1)
    imp = ~explicit
    out["t1"][post[imp]] = (base + (k - at))[imp]
    ends = np.r_[start[1:], len(post)] - 1
    last.update(zip(th[ends].tolist(), out["t1"][post[ends]].tolist()))


class Parts:
    """A compact file's records decoded a thread at a time, in parts of a bounded number
    of records (`pieces`), for readers that keep one part in memory (the exports): what
    decode() returns for the whole file, without its records all at once. The blocks'
    events are counted first (`events`, `census_notes`), from the records' kinds alone;
    damage found while decoding is counted by `bad` (notes: `late_notes`).

    c: the file's records (a mapping); spans: its blocks (blocks()); release(first,
    count): lets the pages of records [first, first + count) go once decoded."""

    def __init__(self, c, spans, rank, name, release=None):
        self.c, self.spans, self.rank, self.name = c, spans, rank, name
        self.release = release or (lambda first, count: None)
        kinds = c["kind"]
        events, unknown = [], 0
        for a, k, _ in spans:
            heads = 0
            # a part of a block at a time: what is read of the mapping is let go
            for p in range(a, a + k, _CENSUS):
                kind = kinds[p : min(p + _CENSUS, a + k)]
                heads += int(np.count_nonzero(kind < K["EXT"]))
                unknown += int(len(kind) - np.count_nonzero(KNOWN_KINDS[kind]))
                self.release(p, len(kind))
            events.append(heads)
        self.events = events  # of each block
        self.unknown = unknown
        self.bad = {}  # thread -> events found damaged by the last pass over it
        live = [i for i, e in enumerate(events) if e]
        # whether a block's events come right after others of its thread in file order
        self.follows = dict.fromkeys(live, False)
        for i, j in zip(live, live[1:]):
            self.follows[j] = spans[i][2] == spans[j][2]

    def census_notes(self):
        return [unknown_note(self.rank, self.name, self.unknown)] if self.unknown else []

    def late_notes(self):
        dec = Decoder(self.rank, self.name)
        dec.bad = sum(self.bad.values())
        return dec.notes()

    def threads(self):
        return sorted({t for (_, _, t), e in zip(self.spans, self.events) if e})

    def pieces(self, thread, size):
        """The events of thread (a generator) as (records, parts, last): records decoded
        from about `size` compact records (a block is cut before a head, so that a head
        keeps its extension records), parts [(first, count, follows)] of them with
        events, follows whether a part comes right after the one before in the
        thread's file order (readers/trace.py Checker), last whether it is the
        thread's last piece."""
        mine = [i for i, (_, _, t) in enumerate(self.spans) if t == thread]
        live = [i for i in mine if self.events[i]]
        if not live:
            return
        mine = [i for i in mine if i <= live[-1] and self.spans[i][1]]
        dec = Decoder(self.rank, self.name)
        kinds = self.c["kind"]
        segs, n = [], 0
        done = {}  # block -> whether a part of it has had events
        for i in mine:
            a, k, _ = self.spans[i]
            pos, end = a, a + k
            while pos < end:
                cut = pos + min(end - pos, max(size - n, 1))
                cut = _next_head(kinds, cut, end)
                segs.append((pos, cut - pos, thread, pos > a, i))
                n += cut - pos
                pos = cut
                last = i == mine[-1] and pos == end
                if n >= size or last:
                    piece = self._piece(dec, segs, done)
                    segs, n = [], 0
                    if piece[1] or last:
                        yield piece + (last,)
        self.bad[thread] = dec.bad

    def _piece(self, dec, segs, done):
        rec, per_seg = dec(self.c, [s[:4] for s in segs])
        for a, k, *_ in segs:
            self.release(a, k)
        parts, first = [], 0
        for (_, _, _, _, i), m in zip(segs, per_seg.tolist()):
            if m:
                parts.append((first, m, done.get(i, self.follows[i])))
                done[i] = True
                first += m
        return rec, parts


_CENSUS = 1 << 16  # records Parts counts the events of at once


def _next_head(kinds, pos, end):
    """The first head at or after pos before end (a head's extension records follow it,
    at most one per field), else end."""
    while pos < end:
        window = kinds[pos : min(pos + 16, end)]
        heads = np.flatnonzero(window < K["EXT"])
        if len(heads):
            return pos + int(heads[0])
        pos += len(window)
    return end


# the record slots of a block of the runtime's default --trace-buffer (8 MiB): a whole
# number of pages, less the BLOCK record (runtime/core/trace.c new_block)
BLOCK_SLOTS = (8 << 20) // SIZE - 1
SITES = 4096 // 4 * 3  # ids a thread defines at most (PW_SITES' table, three quarters full)
_FIELDS = [name.lower() for name, _ in sorted(EVENT_EXT_FIELDS.items(), key=lambda x: x[1])]
_DEFAULT = np.array([-1 if f in _MINUS_ONE else 0 for f in _FIELDS], np.int64)
U32 = (1 << 32) - 1


def encode(rec, thread=0, tid=0, slots=BLOCK_SLOTS, cut=True):
    """One thread's events (EVENT_DTYPE, in its order) as the blocks of compact records
    that the runtime writes (runtime/core/trace.c encode; docs/format.md "Compact
    records"), for tools that write traces (bench/tracegen.py) and the tests; decode()
    reads them back. Every choice is the runtime's but the time bases: a BASE record
    holds a multiple of 2^32 ticks (the runtime's holds the time of the event that
    needs it), so that the events that need one are found without a loop. Events fill
    blocks of `slots` record slots whole; cut: the last block ends the file, cut after
    its records (as the runtime gives back the end of a thread's last block)."""
    n = len(rec)
    typ = rec["type"]
    field = np.stack([rec[f].astype(np.int64) for f in _FIELDS], axis=1)
    slot = np.zeros((n, 4), np.uint32)
    covered = np.zeros((n, len(_FIELDS)), bool)
    timed = np.zeros(n, bool)
    addr = np.full(n, -1, np.int8)  # the slot of an address id
    flags = rec["flags"].astype(np.uint8)
    t0, t1 = rec["t0"].astype(np.int64), rec["t1"].astype(np.int64)
    key_t1 = np.zeros(n, bool)
    for t in np.unique(typ).tolist():
        sel = np.flatnonzero(typ == t)
        codes, key = layout_of(t)
        for i, code in enumerate(codes):
            if code == "NONE" or code.startswith("KEY"):
                continue
            name, enc = code.rsplit("_", 1)
            f = _FIELDS.index(name.lower())
            v = field[sel, f]
            if enc == "TIME":
                timed[sel] = True
                ok = np.ones(len(sel), bool)
                v = v & U32  # from a base that is a multiple of 2^32
            elif enc == "DUR":
                v = v - t0[sel]
                ok = (v >= 0) & (v <= U32)
            elif enc == "ADDR":
                addr[sel] = i
                continue  # ids below, in the thread's order
            elif enc == "I16":
                ok = (v >= -(1 << 15)) & (v < 1 << 15)
            elif enc == "I32":
                ok = (v >= -(1 << 31)) & (v < 1 << 31)
            elif name == "FN":  # the field is 16 bits
                ok = np.ones(len(sel), bool)
            else:  # U32
                ok = (v >= 0) & (v <= U32)
            slot[sel, i] = np.where(ok, v & U32, 0)
            covered[sel, f] |= ok
        if key == "KEY_T1":
            key_t1[sel] = True
            covered[sel, 0] |= t1[sel] != 0
        elif key == "KEY_TAG":
            covered[sel, 0] |= rec["tag"][sel] != 0
    # addresses: ids in the order of first use, a SITE record before the first
    site_new = np.zeros(n, bool)
    if (addr >= 0).any():
        a = np.flatnonzero(addr >= 0)
        value = rec["bytes"][a].astype(np.int64)
        uniq, first, inv = np.unique(value, return_index=True, return_inverse=True)
        rank_of = np.empty(len(uniq), np.int64)
        rank_of[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        ids = rank_of[inv.reshape(-1)]
        ok = ids < SITES
        site_new[a[first[rank_of < SITES]]] = True
        slot[a[ok], addr[a[ok]]] = ids[ok]
        covered[a[ok], _FIELDS.index("bytes")] = True
    # posts: numbered in the order of posting, mostly the thread's next one
    posts = key_t1 & ((flags & EVENT_FLAGS["NONBLOCKING"]) != 0) & (t1 != 0)
    p = np.flatnonzero(posts)
    prev = np.r_[0, t1[p][:-1]]
    nxt = p[(t1[p] == prev + 1) & ~covered[p, 1]]
    covered[nxt, 1] = True
    flags[nxt] |= TRACE_NEXT_POST
    ext = ~covered & (field != _DEFAULT)
    # a BASE where the time's upper half changes, and at each block's first timed event
    hi = t0 >> 32
    tpos = np.flatnonzero(timed)
    base = np.zeros(n, bool)
    base[tpos] = np.r_[True, hi[tpos][1:] != hi[tpos][:-1]]
    size = 1 + base.astype(np.int64) + site_new + ext.sum(axis=1)
    blocks = _pack(size, slots, np.flatnonzero(~SUB(typ)))
    for a, b in blocks:
        j = np.searchsorted(tpos, a)
        if j < len(tpos) and tpos[j] < b and not base[tpos[j]]:
            base[tpos[j]] = True
            size[tpos[j]] += 1
    return _lay_out(
        rec, typ, flags, slot, field, ext, base, site_new, size, blocks, slots, cut, thread, tid
    )


def _pack(size, slots, heads):
    """The events of each block, [(first, end)]: as many as fit in slots, after the
    THREAD record and room for one BASE record more (a block's first timed event needs
    one). A block begins at one of heads, the events that are no sub-event: a call's
    records are committed together, in one block."""
    cum = np.r_[0, np.cumsum(size)]
    cuts = np.r_[heads[heads > 0], len(size)] if len(size) else np.zeros(1, np.int64)
    out, a = [], 0
    while a < len(size):
        j = int(np.searchsorted(cum[cuts], cum[a] + slots - 2, side="right")) - 1
        if j < 0 or cuts[j] <= a:
            raise ValueError(f"a call of {size[a]}+ records does not fit a block of {slots}")
        out.append((a, int(cuts[j])))
        a = int(cuts[j])
    return out or [(0, 0)]


def _lay_out(
    rec, typ, flags, slot, field, ext, base, site_new, size, blocks, slots, cut, thread, tid
):
    """The records of encode()."""
    nb = len(blocks)
    used = [1 + int(size[a:b].sum()) for a, b in blocks]  # THREAD and the events
    length = (1 + slots) * nb if not cut else (1 + slots) * (nb - 1) + 1 + used[-1]
    out = np.zeros(length, CEVENT)
    wide = out.view(CWIDE)
    # where each event's records begin
    start = np.zeros(len(typ), np.int64)
    for k, (a, b) in enumerate(blocks):
        at = k * (1 + slots)
        out[at]["kind"], out[at]["a"], out[at]["b"], out[at]["c"] = BLOCK, used[k], slots, thread
        wide[at + 1]["kind"], wide[at + 1]["a"], wide[at + 1]["w"] = K["THREAD"], tid, k
        start[a:b] = at + 2 + np.r_[0, np.cumsum(size[a:b])[:-1]]
    b_at = np.flatnonzero(base)
    wide["kind"][start[b_at]] = K["BASE"]
    wide["w"][start[b_at]] = (field[b_at, 0] >> 32) << 32
    s_at = np.flatnonzero(site_new)
    pos = start[s_at] + base[s_at]
    wide["kind"][pos] = K["SITE"]
    wide["a"][pos] = np.arange(len(s_at))
    wide["w"][pos] = rec["bytes"][s_at]
    h = start + base + site_new
    out["kind"][h] = typ
    out["flags"][h] = flags
    out["s"][h] = slot[:, 0]
    out["a"][h], out["b"][h], out["c"][h] = slot[:, 1], slot[:, 2], slot[:, 3]
    # extension records in the order of the fields, after the head
    order = np.cumsum(ext, axis=1) - ext
    for f in range(ext.shape[1]):
        e = np.flatnonzero(ext[:, f])
        at = h[e] + 1 + order[e, f]
        wide["kind"][at] = K["EXT"] + f
        wide["w"][at] = field[e, f]
    return out

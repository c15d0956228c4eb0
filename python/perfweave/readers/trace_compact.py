"""Decoder of version 5 event files (docs/format.md, "Compact records"): 16-byte records in
blocks, turned into the event records (EVENT_DTYPE) that readers/trace.py returns for
every version, with numpy on whole columns (a loop runs over blocks and event types,
never over records).

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
from perfweave.dtypes import EVENT_DTYPE, EVENT_FLAGS, EVENT_TYPES

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
    notes = []
    if len(raw) % SIZE:
        notes.append(
            f"rank {rank}: {name} ends with a partial record ({len(raw) % SIZE} bytes, "
            "ignored): truncated"
        )
    c = raw[: n * SIZE].view(CEVENT)
    spans, block_notes = blocks(c, rank, name)
    notes += block_notes
    counts = np.array([k for _, k, _ in spans], np.int64)
    # the committed slots, block after block
    offsets = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    # copied as slices (memcpy), not gathered record by record
    parts = [c[a : a + k] for a, k, _ in spans if k]
    sl = np.concatenate(parts) if parts else c[:0]
    w = sl.view(CWIDE)["w"]
    kind = sl["kind"]
    blk = np.repeat(np.arange(len(spans)), counts)
    thr = np.repeat(np.array([t for _, _, t in spans], np.int64), counts)
    head = kind < K["EXT"]  # kind 0 too: a damaged record, an event of type 0
    hpos = np.flatnonzero(head)
    nev = len(hpos)
    out = np.zeros(nev, EVENT_DTYPE)
    for f in _MINUS_ONE:
        out[f] = -1
    ev = np.cumsum(head) - 1  # each record's latest head
    known = head | np.isin(kind, list(EXT) + [K["BASE"], K["SITE"], K["THREAD"]])
    if not known.all():
        notes.append(f"rank {rank}: {name}: {int((~known).sum())} records of unknown kind ignored")
    # time bases: the latest BASE of the block (none after a block's start), looked up
    # for the timed heads only
    bases = np.flatnonzero(kind >= K["BASE"])  # BASE, SITE, THREAD: few
    bases = np.union1d(bases[kind[bases] == K["BASE"]], offsets[counts > 0])
    # addresses: (thread, id) of the SITE records
    sdef = np.flatnonzero(kind == K["SITE"])
    skey = (thr[sdef] << 32) | sl["a"][sdef].astype(np.int64)
    order = np.argsort(skey, kind="stable")
    skey, sval = skey[order], w[sdef][order]

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
                j = bases[np.maximum(np.searchsorted(bases, p, side="right") - 1, 0)]
                has_base = (kind[j] == K["BASE"]) & (j <= p) if len(bases) else p < 0
                bad[sel[~has_base]] = True
                val = np.where(has_base, w[j] if len(bases) else 0, 0) + v.astype(np.int64)
            elif enc == "DUR":
                val = out["t0"][sel] + v.astype(np.int64)
            else:  # ADDR
                k = (thr[p] << 32) | v.astype(np.int64)
                j = np.minimum(np.searchsorted(skey, k), max(len(skey) - 1, 0))
                found = skey[j] == k if len(skey) else np.zeros(len(k), bool)
                bad[sel[~found]] = True
                val = np.where(found, sval[j] if len(sval) else 0, 0)
            out[field][sel] = val
    # extension records: a field whole, for the head before them in the same block
    for code, field in EXT.items():
        m = np.flatnonzero(kind == code)
        m = m[(ev[m] >= 0) & (blk[hpos[np.maximum(ev[m], 0)]] == blk[m])]
        out[field][ev[m]] = w[m]
        if field == "t0":
            t0_ext[ev[m]] = True
    _number_posts(out, typ, thr[hpos])
    # a request key not stored: the post's number names the post, and stands for it
    for t in np.unique(typ).tolist():
        _, key = layout_of(t)
        if key == "NONE":
            continue
        sel = np.flatnonzero((typ == t) & ~t0_ext)
        number = out["t1" if key == "KEY_T1" else "tag"][sel].astype(np.int64)
        out["t0"][sel] = np.where(number != 0, number, out["t0"][sel])
    if bad.any():
        notes.append(
            f"rank {rank}: {name}: {int(bad.sum())} records refer to a time base or an "
            "address that the file does not define; damaged"
        )
        out["type"][bad] = 0
    per_block = np.bincount(blk[hpos], minlength=len(spans)) if nev else np.zeros(len(spans), int)
    first = np.r_[0, np.cumsum(per_block)[:-1]] if len(spans) else []
    espans = [(int(a), int(k), int(t)) for a, k, (_, _, t) in zip(first, per_block, spans)]
    return out, espans, notes


def _number_posts(out, typ, thread):
    """The numbers of posts (nonblocking events of KEY_T1 layouts) that no record holds
    (flag TRACE_NEXT_POST): the thread's previous numbered post's + 1, 1 for its first.
    Posts are numbered per thread in file order, which is the thread's order."""
    keyed = [t for t in np.unique(typ).tolist() if layout_of(t)[1] == "KEY_T1"]
    flags = out["flags"]
    implicit = (flags & TRACE_NEXT_POST) != 0
    if not implicit.any():
        return
    nb = (flags & EVENT_FLAGS["NONBLOCKING"]) != 0
    post = np.flatnonzero(np.isin(typ, keyed) & nb & (implicit | (out["t1"] != 0)))
    out["flags"] = flags & ~np.uint8(TRACE_NEXT_POST)
    post = post[np.argsort(thread[post], kind="stable")]
    k = np.arange(len(post))
    th = thread[post]
    start = np.flatnonzero(np.r_[True, th[1:] != th[:-1]])
    first = np.repeat(start, np.diff(np.r_[start, len(post)]))  # of each one's thread
    explicit = ~implicit[post]
    anchor = np.maximum.accumulate(np.where(explicit, k, -1))
    own = anchor >= first  # a numbered post of the same thread before it
    base = np.where(own, out["t1"][post[np.maximum(anchor, 0)]], 0)
    at = np.where(own, anchor, first - 1)
    imp = ~explicit
    out["t1"][post[imp]] = (base + (k - at))[imp]

"""Chrome's Trace Event Format (chrome://tracing, ui.perfetto.dev) from an experiment's
event traces: one process per rank, one thread per recording thread, a complete event
("ph": "X") per MPI call, user region and trace buffer flush, and a flow arrow from each
send to the call that completed its receive. Messages are identified as `perfweave
analyze` matches them (source, destination, communicator, tag, sequence number).

Times are microseconds since the first event of the trace (its time on rank 0's clock,
in ns, is in "otherData"): CLOCK_MONOTONIC nanoseconds as microseconds would need more
digits than a double holds.

The file is written rank by rank, in chunks of records, as it is made: memory follows
the largest rank, not the trace. Events are formatted with numpy as rows of bytes of a
fixed layout per kind (_Rows): numbers are right-aligned in fields as wide as the
largest value of the chunk, names padded after their closing quote; JSON allows the
blanks, and no Python object is made per event.
"""
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave.interop import FLUSH_REGION, SUB, default_output, load, pair_regions, \
    region_names
from perfweave.model.trace import F, T, _to_ns
from perfweave.symbols import Symbolizer

_SUBNAMES = {v: k for k, v in T.items()}
CHUNK = 1 << 16                # records formatted at a time
TAGGED = np.array([T["SEND"], T["RECV"], T["IRECV"]])
RECEIVED = np.array([T["COLL"], T["RMA"]])


# ASCII of two decimal digits, as the little-endian uint16 "dd"
_PAIRS = np.array([(48 + i // 10) | (48 + i % 10) << 8 for i in range(100)], np.uint16)
# ASCII of three decimal digits, zero-padded
_TRIPLES = np.array([[48 + i // 100, 48 + i // 10 % 10, 48 + i % 10] for i in range(1000)],
                    np.uint8)
# lowercase hex of one byte, as the little-endian uint16 "xx"
_HEX = np.array([ord("%x" % (i >> 4)) | ord("%x" % (i & 15)) << 8 for i in range(256)],
                np.uint16)
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


def _decimal(v):
    """Integers as an (n, width) byte matrix of ASCII, right-aligned: blanks, then a
    '-' for negative values, then the digits; width fits the widest value."""
    v = np.asarray(v, np.int64)
    n = len(v)
    neg = v < 0
    a = np.abs(v)
    nd = np.ones(n, np.int64)
    top = int(a.max()) if n else 0
    for p in _POW10[_POW10 <= top].tolist():
        nd += a >= p
    sign = bool(neg.any())
    width = (int(nd.max()) if n else 1) + sign
    # two digits per step, zero-padded to an even width
    pairs = (width + 1) // 2
    m = np.empty((n, pairs), np.uint16)
    x = a.copy()
    for k in range(pairs - 1, -1, -1):
        x, d = np.divmod(x, 100)
        m[:, k] = _PAIRS[d]
    m = m.view(np.uint8)[:, 2 * pairs - width:]
    # leading zeros become blanks (and the sign), added modulo 256 from a table per
    # number of digits
    pos = np.arange(width)
    lead = pos[None, :] < (width - np.arange(width + 1))[:, None]
    delta = np.where(lead, 256 - 16, 0).astype(np.uint8)        # '0' -> ' '
    minus = delta.copy()
    minus[np.arange(1, width), width - 1 - np.arange(1, width)] = 256 - 3   # '0' -> '-'
    table = np.concatenate([delta, minus])
    m += table[nd + neg * (width + 1)]
    return m


class _Rows:
    """n JSON fragments of one layout, built part by part into an (n, width) byte
    matrix: literals, numbers, names from a table, each optionally present (absent: the
    same width of blanks). Each part is a matrix of n rows computed with whole-column
    numpy operations, copied into its columns as one item per row."""

    def __init__(self, n):
        self.n = n
        self.parts = []         # (bytes of a literal, or an (n, w) matrix; present)

    def lit(self, text, present=None):
        self.parts.append((text.encode(), present))

    def name(self, table, index, present=None):
        """table: JSON strings (quoted, escaped); index: which one, per row."""
        enc = [s.encode() for s in table] or [b'""']
        w = max(len(s) for s in enc)
        t = np.full((len(enc), w), 32, np.uint8)
        for i, s in enumerate(enc):
            t[i, :len(s)] = np.frombuffer(s, np.uint8)
        items = t.view(f"V{w}")[:, 0][np.asarray(index, np.int64)]
        self.parts.append((items.view(np.uint8).reshape(self.n, w), present))

    def int(self, values, present=None):
        """Integers right-aligned (a '-' before negative ones)."""
        v = np.asarray(values).astype(np.int64)
        if present is not None:
            v = np.where(present, v, 0)
        self.parts.append((_decimal(v), present))

    def hex(self, values):
        """Unsigned 64-bit values as 16 lowercase hex digits."""
        b = np.asarray(values).astype(">u8").view(np.uint8).reshape(self.n, 8)
        self.parts.append((_HEX[b].view(np.uint8), None))

    def us(self, ns, present=None):
        """Nanoseconds as microseconds with three decimals."""
        ns = np.asarray(ns, np.int64)
        self.int(ns // 1000, present)
        self.lit(".", present)
        self.parts.append((_TRIPLES[ns % 1000], present))

    def width(self):
        return sum(len(p) if isinstance(p, bytes) else p.shape[1] for p, _ in self.parts)

    def fill(self, out):
        """Write the rows into out, an (n, >= width) byte matrix; columns after the
        layout's width become blanks."""
        tmpl = np.full(out.shape[1], 32, np.uint8)
        c = 0
        for p, _ in self.parts:
            w = len(p) if isinstance(p, bytes) else p.shape[1]
            if isinstance(p, bytes):
                tmpl[c:c + w] = np.frombuffer(p, np.uint8)
            c += w
        out[:] = tmpl
        c = 0
        for p, present in self.parts:
            w = len(p) if isinstance(p, bytes) else p.shape[1]
            # one w-byte item per row: much faster than w columns of bytes
            col = out[:, c:c + w].view(f"V{w}")[:, 0]
            if not isinstance(p, bytes):
                col[...] = np.ascontiguousarray(p).view(f"V{w}")[:, 0]
            if present is not None:
                col[~np.asarray(present, bool)] = np.full(w, 32, np.uint8).view(f"V{w}")[0]
            c += w

    def matrix(self):
        out = np.empty((self.n, self.width()), np.uint8)
        if self.n:
            self.fill(out)
        return out


def _interleave(rows, which):
    """The rows of several layouts (_Rows) back to back in the order given by which
    (per output row, the index of its layout) as one byte matrix; narrower rows end in
    blanks."""
    width = max(r.width() for r in rows)
    out = np.empty((len(which), width), np.uint8)
    for k, r in enumerate(rows):
        sel = np.flatnonzero(which == k)
        if not len(sel):
            continue
        if len(sel) == len(which):
            r.fill(out)
        else:
            m = np.empty((len(sel), width), np.uint8)
            r.fill(m)
            out[sel] = m
    return out


def _quoted(names):
    return [json.dumps(str(n)) for n in names]


def export(exp, out=None, force=False, symbolizer=None):
    """Write experiment exp's traces as Chrome trace JSON to out (default
    EXP/export/trace.json). Returns a summary dict (path, events, records, seconds)."""
    t_start = time.perf_counter()
    X = load(exp)
    path = Path(out or default_output(exp, "trace.json"))
    if path.is_dir():
        path = path / "trace.json"
    if path.exists() and not force:
        raise PerfweaveError(f"{path}: already exists (--force replaces it)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ends = tempfile.mkdtemp(prefix=f".{path.name}.flows.", dir=path.parent)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    # one for every rank of the export: it keeps what it found (addr2line runs once)
    symbolizer = symbolizer or Symbolizer()
    try:
        origin, channels = _first_pass(X, ends, path)
        return _second_pass(X, path, ends, origin, channels, symbolizer, t_start)
    finally:
        shutil.rmtree(ends, ignore_errors=True)


def _second_pass(X, path, ends, origin, channels, symbolizer, t_start):
    """Write the file: every rank's events, then what describes the trace."""
    counts = {"events": 0, "calls": 0, "flows": 0, "records": 0}
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp.", dir=path.parent)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            f.write(b'{"traceEvents":[\n')
            first = True
            for r in X.ranks:
                rt = X.rank(r)
                X.notes.extend(rt.notes)
                first = _rank(f, rt, origin, symbolizer, counts, first)
                del rt
                first = _flows(f, ends, r, origin, channels, counts, first)
            other = {"generator": "perfweave export --format chrome",
                     "experiment": str(X.path), "origin_ns": origin,
                     "clock": "ns on rank 0's CLOCK_MONOTONIC; ts = (t - origin_ns) / 1000",
                     "notes": X.notes}
            f.write(b'\n],"displayTimeUnit":"ns","otherData":' +
                    json.dumps(other).encode() + b"}\n")
        os.replace(tmp, path)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {"path": str(path), "events": counts["events"], "calls": counts["calls"],
            "flows": counts["flows"], "records": counts["records"], "ranks": len(X.ranks),
            "seconds": time.perf_counter() - t_start, "notes": X.notes}


# what a flow event needs of one end of a message, kept on disk between the passes
_END = np.dtype([("chan", np.uint64), ("seq", np.int64), ("thread", np.int64),
                 ("ts", np.int64), ("bytes", np.int64)])


def _first_pass(X, ends, path):
    """What the file needs before its first event, from a pass over the ranks that
    keeps little: the time (ns, rank 0's clock) of the trace's first timed record, and
    the channels of messages with their numbers of sends and receives (_Channels).
    Each rank's message ends are matched here (the costliest step after formatting)
    and written to directory ends for _flows, rather than matched again there."""
    from perfweave.model.trace import prepare

    first = []
    sends, recvs = [], []
    for r in X.ranks:
        rf = X.rank_file(r)
        t = rf.records["t0"][np.isin(rf.types, [T["CALL"], T["FLUSH"], T["ENTER"]])]
        if len(t) and rf.meta.get("clock"):
            # ticks become ns by an increasing linear map: the first stays the first
            first.append(int(_to_ns(rf.meta, np.array([t.min()]))[0]))
        del t
        rd = prepare(rf)
        del rf
        for which, per_rank in (("sends", sends), ("recvs", recvs)):
            chan, seq = _channel_ids(rd, r, which)
            per_rank.append(_channel_counts(chan, seq))
            cols = rd.sends if which == "sends" else rd.recvs
            e = np.empty(len(chan), _END)
            e["chan"], e["seq"], e["thread"] = chan, seq, cols["thread"]
            if which == "sends":
                e["ts"], e["bytes"] = cols["e"], 0
            else:
                # the arrow ends inside the receiving call, just before its end
                ce, cb = cols["ce"], cols["cb"]
                e["ts"], e["bytes"] = ce - np.minimum(1, ce - cb), cols["bytes"]
            try:
                np.save(os.path.join(ends, f"{which}-{r}.npy"), e)
            except OSError as err:
                raise PerfweaveError(f"{path}: cannot write ({err.strerror or err})") \
                    from None
        del rd
    return (min(first) if first else 0), _Channels(sends, recvs)


def _channel_ids(rd, r, which):
    """Per message of rank r as sender (which = "sends") or receiver: the hash of its
    channel (source, destination, communicator key, tag) and its number on it."""
    cols = rd.sends if which == "sends" else rd.recvs
    table = rd.send_channels if which == "sends" else rd.recv_channels
    ch = table[cols["chan"]] if len(cols["chan"]) else np.zeros((0, 3), np.int64)
    me = np.full(len(ch), r)
    src, dst = (me, ch[:, 0]) if which == "sends" else (ch[:, 0], me)
    return _hash(src, dst, rd.comm_keys[ch[:, 1]], ch[:, 2]), cols["seq"].astype(np.int64)


def _channel_counts(chan, seq):
    u, inv = np.unique(chan, return_inverse=True)
    n = np.zeros(len(u), np.int64)
    np.maximum.at(n, inv.reshape(-1), seq + 1)
    return u, n


class _Channels:
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


def _write(f, data, first):
    """Write a chunk of events (each starting with ',' unless it is the very first);
    data: bytes or a byte matrix (written as it is, without a copy)."""
    data = memoryview(data).cast("B")
    if not len(data):
        return first
    if first:
        data = data[1:]
    f.write(data)
    return False


def _threads(thread):
    """The threads of a rank's records (grouped by thread, as RankTrace holds them),
    with thread 0 always."""
    starts = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]]) if len(thread) else []
    return sorted(set(thread[starts].tolist()) | {0})


def _meta_events(rt):
    r = rt.rank
    out = [{"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}},
           {"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}}]
    for t in _threads(rt.thread):
        out.append({"ph": "M", "name": "thread_name", "pid": r, "tid": int(t),
                    "args": {"name": "master thread" if t == 0 else f"thread {t}"}})
    return "".join("," + json.dumps(e, separators=(",", ":")) for e in out).encode()


def _rank(f, rt, origin, symbolizer, counts, first):
    rec, typ, thr = rt.rec, rt.rec["type"], rt.thread
    n = len(rec)
    counts["records"] += n
    first = _write(f, _meta_events(rt), first)
    counts["events"] += 2 + len(_threads(thr))
    # each sub-record belongs to the CALL before it in its thread
    is_call = typ == T["CALL"]
    ci = np.flatnonzero(is_call)
    owner = np.cumsum(is_call) - 1
    if len(ci):
        owner[(owner >= 0) & (thr[ci[np.maximum(owner, 0)]] != thr)] = -1
    else:
        owner[:] = -1
    is_sub = np.isin(typ, SUB) & (owner >= 0)
    kept = is_call | is_sub
    # a call's events list closes at its last sub-record
    nxt_sub = np.r_[is_sub[1:], False]
    has_sub = is_call & nxt_sub
    last_sub = is_sub & ~nxt_sub
    fnames = _quoted(list(rt.functions) + ["?"])
    sub_names = _quoted([_SUBNAMES.get(k, "?") for k in range(256)])
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        idx = a + np.flatnonzero(kept[a:b])
        if not len(idx):
            continue
        call = is_call[idx]
        c, u = idx[call], idx[~call]
        # an MPI call: {"name":..,"cat":"MPI","ph":"X","pid":..,"tid":..,"ts":..,"dur":..
        # then "args":{"events":[ if it did something, else }
        R = _Rows(len(c))
        R.lit(',{"name":')
        R.name(fnames, np.minimum(rec["fn"][c].astype(np.int64), len(fnames) - 1))
        R.lit(f',"cat":"MPI","ph":"X","pid":{int(rt.rank)},"tid":')
        R.int(thr[c])
        R.lit(',"ts":')
        R.us(rt.t0[c] - origin)
        R.lit(',"dur":')
        R.us(np.maximum(rt.t1[c] - rt.t0[c], 0))
        hs = has_sub[c]
        R.lit(',"args":{"events":[', hs)
        R.lit('}', ~hs)
        # what it did: {"type":..[,"peer":..][,"tag":..][,"bytes":..][,"bytes_received":..]
        # [,"nonblocking":true]} then , or ]}}
        st = typ[u]
        Q = _Rows(len(u))
        Q.lit('{"type":')
        Q.name(sub_names, st)
        peer = rec["peer"][u]
        Q.lit(',"peer":', peer >= 0)
        Q.int(peer, peer >= 0)
        tagged = np.isin(st, TAGGED)
        Q.lit(',"tag":', tagged)
        Q.int(rec["tag"][u], tagged)
        nb = rec["bytes"][u]
        Q.lit(',"bytes":', nb != 0)
        Q.int(nb, nb != 0)
        got = np.where(np.isin(st, RECEIVED), rec["t1"][u], 0)
        Q.lit(',"bytes_received":', got != 0)
        Q.int(got, got != 0)
        Q.lit(',"nonblocking":true', (rec["flags"][u] & F["NONBLOCKING"]) != 0)
        ls = last_sub[u]
        Q.lit('},', ~ls)
        Q.lit('}]}}', ls)
        first = _write(f, _interleave([R, Q], (~call).astype(np.int64)), first)
        counts["calls"] += len(c)
        counts["events"] += len(c)
    first = _spans(f, rt, origin, symbolizer, counts, first)
    return first


def _complete(f, first, counts, name_table, names, cat, pid, tid, t0, t1, args=None):
    """Complete events ("ph": "X") of one category; args: {"bytes": ...} values."""
    R = _Rows(len(t0))
    R.lit(',{"name":')
    R.name(name_table, names)
    R.lit(f',"cat":"{cat}","ph":"X","pid":{int(pid)},"tid":')
    R.int(tid)
    R.lit(',"ts":')
    R.us(t0)
    R.lit(',"dur":')
    R.us(np.maximum(t1 - t0, 0))
    if args is not None:
        R.lit(',"args":{"bytes":')
        R.int(args)
        R.lit('}')
    R.lit('}')
    counts["events"] += len(t0)
    return _write(f, R.matrix(), first)


def _spans(f, rt, origin, symbolizer, counts, first):
    """Trace buffer flushes (the tracer's own time) and user regions of one rank."""
    rec, typ, thr = rt.rec, rt.rec["type"], rt.thread
    fi = np.flatnonzero(typ == T["FLUSH"])
    for a in range(0, len(fi), CHUNK):
        s = fi[a:a + CHUNK]
        first = _complete(f, first, counts, _quoted([FLUSH_REGION]), np.zeros(len(s), int),
                          "perfweave", rt.rank, thr[s], rt.t0[s] - origin,
                          rt.t1[s] - origin, rec["bytes"][s])
    enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
    if not enter.any():
        return first
    partner = np.full(len(rec), -1, np.int64)
    bounds = np.flatnonzero(np.r_[True, thr[1:] != thr[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        p, _, _ = pair_regions(enter[a:b], leave[a:b])
        partner[a:b] = np.where(p >= 0, p + a, -1)
    ei = np.flatnonzero(enter)
    rnames, _, _ = region_names(rt, enter, symbolizer)
    table, which = np.unique(rnames.astype(str), return_inverse=True)
    table = _quoted(table.tolist())
    end_of_rank = max(rt.t_end, int(rt.t0[ei].max()))
    for a in range(0, len(ei), CHUNK):
        s = ei[a:a + CHUNK]
        end = np.where(partner[s] >= 0, rt.t0[np.maximum(partner[s], 0)], end_of_rank)
        first = _complete(f, first, counts, table, which.reshape(-1)[a:a + CHUNK], "user",
                          rt.rank, thr[s], rt.t0[s] - origin, end - origin)
    return first


def _hash(*cols):
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


def _flows(f, ends, r, origin, channels, counts, first):
    """Flow events of rank r: "s" at each send's call, "f" just before the end of the
    call that completed each receive. Both ends compute the message's id alone from its
    channel and number, so ranks are written one at a time."""
    for which in ("sends", "recvs"):
        e = np.load(os.path.join(ends, f"{which}-{r}.npy"))
        e = e[channels.matched(e["chan"], e["seq"])]
        if not len(e):
            continue
        R = _Rows(len(e))
        R.lit(',{"name":"message","cat":"p2p","ph":"%s","id":"0x' %
              ("s" if which == "sends" else 'f","bp":"e'))
        R.hex(_hash(e["chan"], e["seq"]))
        R.lit(f'","pid":{int(r)},"tid":')
        R.int(e["thread"])
        R.lit(',"ts":')
        R.us(e["ts"] - origin)
        if which == "sends":
            R.lit('}')
            counts["flows"] += len(e)
        else:
            R.lit(',"args":{"bytes":')
            R.int(e["bytes"])
            R.lit('}}')
        first = _write(f, R.matrix(), first)
        counts["events"] += len(e)
    return first

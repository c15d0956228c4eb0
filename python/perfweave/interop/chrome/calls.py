"""The Chrome export's events of a rank's tracks: each process's and thread's name, and a
complete event per MPI call with what it did in its "args"."""

import json

import numpy as np

from perfweave.interop.chrome.formatting import Rows, format_rows, quoted
from perfweave.interop.chrome.sink import write_events

from perfweave.interop import SUB, last_index
from perfweave.model.trace import F, T
from perfweave.dtypes import TypeSet

_SUBNAMES = {v: k for k, v in T.items()}
TAGGED = TypeSet("SEND", "RECV", "IRECV")
RECEIVED = TypeSet("COLL", "RMA")


def meta_events(r, threads):
    out = [
        {"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}},
        {"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}},
    ]
    for t in threads:
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": r,
                "tid": int(t),
                "args": {"name": "master thread" if t == 0 else f"thread {t}"},
            }
        )
    return "".join("," + json.dumps(e, separators=(",", ":")) for e in out).encode()


def mpi_calls(f, c, fnames, origin, counts, first):
    """The MPI calls of one chunk, with what they did."""
    rec, typ, thr = c.rec, c.rec["type"], c.thread
    # each sub-record belongs to the CALL before it (in the chunk: RankExportStream)
    is_call = typ == T["CALL"]
    is_sub = SUB(typ) & (last_index(is_call) >= 0)
    kept = is_call | is_sub
    # a call's events list closes at its last sub-record
    nxt_sub = np.r_[is_sub[1:], False]
    has_sub = is_call & nxt_sub
    last_sub = is_sub & ~nxt_sub
    sub_names = quoted([_SUBNAMES.get(k, "?") for k in range(256)])
    idx = np.flatnonzero(kept)
    if not len(idx):
        return first
    call = is_call[idx]
    c_, u = idx[call], idx[~call]
    # an MPI call: {"name":..,"cat":"MPI","ph":"X","pid":..,"tid":..,"ts":..,"dur":..
    # then "args":{"events":[ if it did something, else }
    R = Rows(len(c_))
    R.lit(',{"name":')
    R.name(fnames, np.minimum(rec["fn"][c_].astype(np.int64), len(fnames) - 1))
    R.lit(f',"cat":"MPI","ph":"X","pid":{int(c.rank)},"tid":')
    R.int(thr[c_])
    R.lit(',"ts":')
    R.us(c.t0[c_] - origin)
    R.lit(',"dur":')
    R.us(np.maximum(c.t1[c_] - c.t0[c_], 0))
    hs = has_sub[c_]
    R.lit(',"args":{"events":[', hs)
    R.lit("}", ~hs)
    # what it did: {"type":..[,"peer":..][,"tag":..][,"bytes":..][,"bytes_received":..]
    # [,"nonblocking":true]} then , or ]}}
    st = typ[u]
    Q = Rows(len(u))
    Q.lit('{"type":')
    Q.name(sub_names, st)
    peer = rec["peer"][u]
    Q.lit(',"peer":', peer >= 0)
    Q.int(peer, peer >= 0)
    tagged = TAGGED(st)
    Q.lit(',"tag":', tagged)
    Q.int(rec["tag"][u], tagged)
    nb = rec["bytes"][u]
    Q.lit(',"bytes":', nb != 0)
    Q.int(nb, nb != 0)
    got = np.where(RECEIVED(st), rec["t1"][u], 0)
    Q.lit(',"bytes_received":', got != 0)
    Q.int(got, got != 0)
    Q.lit(',"nonblocking":true', (rec["flags"][u] & F["NONBLOCKING"]) != 0)
    ls = last_sub[u]
    Q.lit("},", ~ls)
    Q.lit("}]}}", ls)
    first = write_events(f, format_rows([R, Q], (~call).astype(np.int8), f.buffer), first)
    counts["calls"] += len(c_)
    counts["events"] += len(c_)
    return first

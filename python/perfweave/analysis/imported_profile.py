"""The MPI profile of an imported experiment, computed from its traces (from_traces).

An OTF2 trace has no profile; `perfweave report` wants the one that `perfweave run`
writes at MPI_Finalize (docs/format.md, profile.pwprof). `perfweave import` builds it
from the records it wrote, rank by rank, with the runtime's conventions: one site per
(rank, function) (an OTF2 trace has no call sites), bytes counted by the call that posts
them (a send or receive request's size at MPI_Isend/MPI_Irecv, as the runtime's
call_bytes does), `MPI_Init`/`MPI_Finalize` outside the MPI time, message-size buckets
of max(sent, received) per call; encode gives it as the bytes of a profile file, which
interop/profile.py writes. Here, below the exports, so that perfweave.open can compute
it in memory for an experiment imported by an older perfweave, which has none.
"""

import json

import numpy as np

from perfweave._format import (
    FAMILIES,
    HIST_BUCKETS as BUCKETS,
    HIST_FAMILY_MASK,
    PROFILE_EVENTS_KEY,
)
from perfweave.analysis.trace_source import load
from perfweave.dtypes import (
    COUNT_DTYPE,
    FRAME_DTYPE,
    HIST_DTYPE,
    MODULE_ARRAY_DTYPES,
    PROFILE_VERSION,
    RANK_DTYPE,
    SITE_DTYPE,
)
from perfweave.model.profile import BRACKET, STATES, Profile
from perfweave.model.trace import T, family
from perfweave.readers.profile import END_MARKER, MAGIC


def bucket(size):
    """Message-size bucket (docs/format.md, hist; analysis/mpi.py bucket_range is its
    inverse): 0 for 0, b for 2^(b-1)..2^b - 1, 33 from 2^32: the bit length."""
    size = np.maximum(np.asarray(size, np.int64), 0)
    b = np.zeros(len(size), np.int64)
    for k in range(BUCKETS - 1):  # b = number of powers of two <= size
        b += size >= (1 << k)
    return np.minimum(b, BUCKETS - 1)


def call_bytes(rec, typ, n_calls, call):
    """Bytes sent and received by each call (index call of every record into the
    calls): sends and posted receives count where they are posted; a receive that
    completes a request counts at its post (IRECV), a blocking one where it is."""
    sent = np.zeros(n_calls, np.int64)
    recv = np.zeros(n_calls, np.int64)
    own = call >= 0
    b, t1 = rec["bytes"].astype(np.int64), rec["t1"].astype(np.int64)
    s = own & ((typ == T["SEND"]) | (typ == T["COLL"]) | (typ == T["RMA"]))
    np.add.at(sent, call[s], b[s])
    r = own & (((typ == T["RECV"]) & (rec["t0"] == 0)) | (typ == T["IRECV"]))
    np.add.at(recv, call[r], np.maximum(b[r], 0))
    r2 = own & ((typ == T["COLL"]) | (typ == T["RMA"]))
    np.add.at(recv, call[r2], t1[r2])
    return sent, recv


def from_traces(path):
    """A Profile of experiment path's traces (perfweave import's experiments)."""
    X = load(path)
    ranks, sites, hist = [], [], []
    index = {}  # function name -> index, over all ranks
    hosts, host_index = [], {}
    for rt in X.each():
        rec, typ = rt.rec, rt.rec["type"]
        is_call = typ == T["CALL"]
        ci = np.flatnonzero(is_call)
        # every record belongs to the latest CALL before it in its thread
        call = np.cumsum(is_call) - 1
        if len(ci):
            other = (call >= 0) & (rt.thread[ci[np.maximum(call, 0)]] != rt.thread)
            call[other] = -1
        local = np.array([index.setdefault(f, len(index)) for f in rt.functions] + [-1], np.int64)
        fn = local[np.minimum(rec["fn"][ci].astype(np.int64), len(local) - 1)]
        dur = np.maximum(rt.t1[ci] - rt.t0[ci], 0)
        sent, recv = call_bytes(rec, typ, len(ci), call)
        host = host_index.setdefault(rt.host, len(host_index))
        if host == len(hosts):
            hosts.append(rt.host)
        counted = ~np.isin(fn, [index[f] for f in BRACKET if f in index]) & (fn >= 0)
        row = np.zeros(1, RANK_DTYPE)
        row["rank"], row["host"] = rt.rank, host
        state = rt.meta.get("state", "no-finalize")
        row["state"] = STATES.index(state) if state in STATES else 1
        row["nthreads"] = len(np.unique(rt.thread[ci])) if len(ci) else 0
        row["thread_level"] = -1
        row["t_init_leave"], row["t_fini_enter"] = rt.t_begin, rt.t_end
        row["t_start"] = row["t_init_enter"] = rt.t_begin
        row["t_end"] = rt.t_end
        row["app_ns"] = rt.t_end - rt.t_begin
        row["mpi_ns"] = int(dur[counted].sum())
        row["mpi_calls"] = int(counted.sum())
        ranks.append(row)
        if not len(ci):
            continue
        ok = fn >= 0
        u, inv = np.unique(fn[ok], return_inverse=True)
        s = np.zeros(len(u), SITE_DTYPE)
        s["rank"], s["fn"], s["object"], s["first_frame"] = rt.rank, u, -1, -1
        s["count"] = np.bincount(inv, minlength=len(u))
        s["total_ns"] = np.bincount(inv, dur[ok], minlength=len(u))
        s["min_ns"] = np.full(len(u), np.iinfo(np.int64).max)
        np.minimum.at(s["min_ns"], inv, dur[ok])
        np.maximum.at(s["max_ns"], inv, dur[ok])
        s["bytes_sent"] = np.bincount(inv, sent[ok], minlength=len(u))
        s["bytes_recv"] = np.bincount(inv, recv[ok], minlength=len(u))
        sites.append(s)
        size = np.maximum(sent, recv)[ok]
        key = fn[ok] * BUCKETS + bucket(size)
        uk, kinv = np.unique(key, return_inverse=True)
        h = np.zeros(len(uk), HIST_DTYPE)
        h["rank"], h["fn"], h["bucket"] = rt.rank, uk // BUCKETS, uk % BUCKETS
        h["count"] = np.bincount(kinv, minlength=len(uk))
        h["bytes"] = np.bincount(kinv, size, minlength=len(uk))
        h["total_ns"] = np.bincount(kinv, dur[ok], minlength=len(uk))
        hist.append(h)
    functions = list(index)
    fam = [family(f) for f in functions]
    counted = {f for i, f in enumerate(FAMILIES) if HIST_FAMILY_MASK >> i & 1}
    keep = np.array([f in counted for f in fam] + [False])
    h = np.concatenate(hist) if hist else np.zeros(0, HIST_DTYPE)
    h = h[keep[np.minimum(h["fn"], len(functions))]] if len(h) else h
    p = Profile(
        ranks=np.concatenate(ranks) if ranks else np.zeros(0, RANK_DTYPE),
        sites=np.concatenate(sites) if sites else np.zeros(0, SITE_DTYPE),
        frames=np.zeros(0, FRAME_DTYPE),
        hist=h,
        functions=functions,
        families=fam,
        objects=[],
        buildids=[],
        hosts=hosts,
        modules=[{"name": "mpi", "version": PROFILE_VERSION, "first": 0, "count": len(functions)}],
        world_size=X.world_size,
    )
    # a rank that did not finalize makes the profile partial, as its own file would
    p.partial = bool((p.ranks["state"] != 0).any())
    p.notes.extend(X.notes)
    return p


def encode(profile):
    """profile as the bytes of a profile file, in the layout runtime/core/writer.c
    writes (docs/format.md, "Profile files"): the header line padded to a multiple of 64
    bytes, the arrays back to back, the end marker. Its partial flag and its notes (what
    reading the traces found: "notes", a key the runtime never writes) go in the header,
    for the readers to show them."""
    arrays = {
        "ranks": profile.ranks.astype(RANK_DTYPE),
        "sites": profile.sites.astype(SITE_DTYPE),
        "frames": profile.frames.astype(FRAME_DTYPE),
        "hist": profile.hist.astype(HIST_DTYPE),
        "counts": profile.counts.astype(COUNT_DTYPE),
    }
    # the modules' arrays after the core's, as the runtime writes them (comms: none from
    # traces yet)
    arrays.update({k: profile.arrays[k].astype(d) for k, d in MODULE_ARRAY_DTYPES.items()})
    described, offset = {}, 0
    for name, a in arrays.items():
        described[name] = {
            "offset": offset,
            "count": len(a),
            "itemsize": a.dtype.itemsize,
            "dtype": [list(f) for f in a.dtype.descr],
        }
        offset += a.nbytes
    header = {
        "format": MAGIC,
        "version": PROFILE_VERSION,
        "partial": bool(profile.partial),
        "world_size": int(profile.world_size),
        "hist_buckets": int(profile.hist_buckets),
        "hosts": list(profile.hosts),
        "objects": list(profile.objects),
        "buildids": list(profile.buildids),
        "modules": list(profile.modules),
        "functions": list(profile.functions),
        "families": list(profile.families),
        PROFILE_EVENTS_KEY: list(profile.counters),
        "states": list(STATES),
        "notes": list(profile.notes),
        "arrays": described,
        "data_bytes": offset,
    }
    line = json.dumps(header, separators=(",", ":")).encode()
    line += b" " * (-(len(line) + 1) % 64) + b"\n"
    return b"".join([line, *(a.tobytes() for a in arrays.values()), END_MARKER])


def content(path):
    """The bytes of the profile.pwprof that perfweave import writes for experiment path,
    from its traces (what an experiment imported by an older perfweave lacks)."""
    return encode(from_traces(path))

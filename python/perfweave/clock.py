"""The clocks of a traced run (docs/format.md, `rank-R.json` "clock"): a rank's counter
ticks and local CLOCK_MONOTONIC times onto rank 0's clock, the rank's application time,
and the offsets of ranks that share a host made one. The model, the wait-state analysis
and the exports put times on one clock through these functions alone, so they agree."""

import numpy as np


def to_ns(meta, ticks):
    """Ticks of the rank's counter -> ns of rank 0's CLOCK_MONOTONIC (docs/format.md)."""
    c = meta.get("clock") or {}
    tk, ns = c.get("ticks", [0, 1]), c.get("ns", [0, 1])
    span = tk[1] - tk[0]
    rate = (ns[1] - ns[0]) / span if span else 1.0
    oi, of = c.get("offset_init_ns", 0), c.get("offset_fini_ns", 0)
    ti, tf = c.get("t_init_ns", 0), c.get("t_fini_ns", 0)
    if rate == 1.0 and (of == oi or tf <= ti) and isinstance(oi, int):
        return ticks + (ns[0] - tk[0] - oi)  # a ns counter: exact, in integers
    with np.errstate(over="ignore", invalid="ignore"):  # (fields that hold no time)
        local = ns[0] + (ticks - tk[0]).astype(np.float64) * rate
        if of != oi and tf > ti:
            off = oi + (of - oi) * (local - ti) / (tf - ti)
        else:
            off = oi
        return np.rint(local - off).astype(np.int64)


def rank0_clock(t_init_ns, t_fini_ns, ticks=(0, 1), ns=(0, 1)):
    """The "clock" of a rank-R.json (docs/format.md) for records written on rank 0's
    clock, as the ideal run and imported or generated traces are: ticks to ns through
    the two calibration points (ticks are ns by default), no offset to rank 0, the
    application time from t_init_ns to t_fini_ns."""
    return {
        "ticks": list(ticks),
        "ns": list(ns),
        "offset_init_ns": 0,
        "offset_init_err_ns": 0,
        "offset_fini_ns": 0,
        "offset_fini_err_ns": 0,
        "t_init_ns": t_init_ns,
        "t_fini_ns": t_fini_ns,
    }


def global_ns_one(meta, local_ns):
    """A local CLOCK_MONOTONIC time (ns) of the JSON -> rank 0's clock."""
    return int(global_ns(meta, np.array([local_ns]))[0])


def global_ns(meta, local_ns):
    """Local CLOCK_MONOTONIC times (ns, an array) of the rank of meta -> rank 0's clock
    (the I/O segment trace's times, say), as to_ns maps the rank's ticks."""
    c = meta.get("clock") or {}
    oi, of = c.get("offset_init_ns", 0), c.get("offset_fini_ns", 0)
    ti, tf = c.get("t_init_ns", 0), c.get("t_fini_ns", 0)
    if of == oi or tf <= ti:  # a constant offset: exact, in integers
        return np.asarray(local_ns).astype(np.int64) - int(round(oi))
    local = np.asarray(local_ns, np.float64)
    return np.rint(local - (oi + (of - oi) * (local - ti) / (tf - ti))).astype(np.int64)


def app_window(meta, span):
    """The rank's application time: MPI_Init done to MPI_Finalize entered (rank 0's
    clock); from its records' span (model/trace.py time_span) when the JSON lacks them."""
    c = meta.get("clock") or {}
    lo, hi = span if span is not None else (0, 0)
    tb = global_ns_one(meta, c["t_init_ns"]) if c.get("t_init_ns") else lo
    te = global_ns_one(meta, c["t_fini_ns"]) if c.get("t_fini_ns") else hi
    if span is not None:
        te = max(te, hi) if meta.get("state") != "complete" else te
    return tb, max(te, tb)


def host_clocks(metas, ex):
    """Ranks on one host read one CLOCK_MONOTONIC, so their offsets to rank 0 are one
    value: exactly 0 on rank 0's host, elsewhere the host's best-measured offset (the
    smallest round trip). Measured per rank, the offsets carry the error of each
    ping-pong (tens of microseconds on busy cores), enough to reorder a post and the
    start it releases. metas: {rank: (meta, note)}, updated in place."""

    def clock(m):
        return m.get("clock") if m and m.get("host") else None

    mine = [
        (
            r,
            m["host"],
            m["clock"].get("offset_init_ns", 0),
            m["clock"].get("offset_init_err_ns", 0),
            m["clock"].get("offset_fini_ns", 0),
            m["clock"].get("offset_fini_err_ns", 0),
        )
        for r, (m, _) in metas.items()
        if clock(m)
    ]
    allc = [c for part in ex.allgather(mine) for c in part]
    host0 = next((c[1] for c in allc if c[0] == 0), None)
    best = {}
    for rank, host, oi, ei, of, ef in allc:
        b = best.setdefault(host, [None, None])
        if b[0] is None or ei < b[0][1]:
            b[0] = (oi, ei)
        if b[1] is None or ef < b[1][1]:
            b[1] = (of, ef)
    for r, (m, note) in metas.items():
        if not clock(m):
            continue
        c = dict(m["clock"])
        if m["host"] == host0:
            c["offset_init_ns"] = c["offset_fini_ns"] = 0
        else:
            c["offset_init_ns"], c["offset_fini_ns"] = best[m["host"]][0][0], best[m["host"]][1][0]
        metas[r] = (dict(m, clock=c), note)

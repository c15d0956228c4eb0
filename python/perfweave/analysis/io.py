"""The I/O profile's analysis (the io module's data, model/io.py): the I/O share of the
wall time split into open/close, read/write and metadata (the paper's I/O slides), per
file pattern (out.0001..out.0400) and per rank, effective rates, imbalance across ranks,
MPI-IO and POSIX/stdio layers both shown (never subtracted), call sites, and advice tied
to call sites.

analyze(io, symbolizer, waitstates, timelines) -> IoResult; its tables are numpy structured
arrays (a field per column):
  per_rank   rank, wall_s, io_s (POSIX and stdio, overlapping threads once), open_close_s,
             read_write_s, meta_s, mpiio_s, bytes_read, bytes_written
  files      pattern, files, layer, fs, memory, ranks, readers, writers, opens, closes,
             reads, writes, stats, bytes_read, bytes_written, mmap_bytes_est (an estimate),
             open_s, close_s, read_s,
             write_s, meta_s, time_s, read_mbs, write_mbs, imbalance (slowest rank's time /
             the mean over ranks with calls), forms (MPI-IO: opens, reads and writes per
             form, indep/coll/split/nb, and views; {} for other layers)
  callsites  pattern, layer, op, where (function (file:line)), calls, bytes, time_s
over_time: read and write bytes over time summed over processes (over_time below).
segments: the segment trace's committed segments and dropped calls, summed over processes
(None: no process made one).
"""

import re
from dataclasses import dataclass

import numpy as np

from perfweave._format import IO_FORMS, IO_FS_TYPES, IO_LAYERS, IO_OPS
from perfweave.analysis.timeline import slice_edges
from perfweave.symbols import Symbolizer

OP = {name: i for i, name in enumerate(IO_OPS)}
OPEN_CLOSE = [OP["open"], OP["close"]]
READ_WRITE = [OP["read"], OP["write"]]
META = [OP["seek"], OP["stat"], OP["sync"], OP["meta"], OP["mmap"]]
FS_NAMES = {v: k.lower() for k, v in IO_FS_TYPES.items()}
MPIIO = IO_LAYERS.index("mpiio")

# advice thresholds (docs/io.md "Advice")
IO_SHARE_PCT = 5.0  # I/O under this % of the wall time: no I/O advice
OPEN_CLOSE_SHARE = 0.5  # opens and closes this share of a disk file pattern's I/O time
SMALL_WRITE_BYTES = 4096  # a formatted write smaller than this is small
SMALL_WRITES = 1000
IMBALANCE = 1.5  # slowest rank's time / mean
# the wait-state metrics that are waits for a late rank in a collective (docs/io.md
# "Advice"): what a rank slow in its writes makes the others wait at the next one
LATE_RANK_WAITS = ("mpi_barrier_wait", "mpi_wait_nxn", "mpi_earlyreduce", "mpi_latebroadcast")
SLICES = 8  # over-time slices without a node timeline (analysis/timeline.py SLICES)
# what records the data (api.py table(): the NoData message); declared, the result's tables
# are perfweave.open(path).table(kind, NAME) DataFrames
RECORDED_BY = "`perfweave run` records it unless --no-io"


@dataclass
class IoResult:
    wall_s: float  # summed over processes
    io_s: float  # POSIX and stdio time, summed over processes (overlaps once)
    open_close_s: float
    read_write_s: float
    meta_s: float
    mpiio_s: float
    processes: int
    killed: int
    per_rank: np.ndarray
    files: np.ndarray
    callsites: np.ndarray
    advice: list
    notes: list
    over_time: list = None
    segments: dict = None

    def to_json(self):
        def rows(t):
            return [{k: _plain(r[k]) for k in t.dtype.names} for r in t]

        return {
            "wall_s": self.wall_s,
            "io_s": self.io_s,
            "io_pct": 100 * self.io_s / self.wall_s if self.wall_s else 0.0,
            "open_close_s": self.open_close_s,
            "read_write_s": self.read_write_s,
            "meta_s": self.meta_s,
            "mpiio_s": self.mpiio_s,
            "processes": self.processes,
            "killed": self.killed,
            "per_rank": rows(self.per_rank),
            "files": rows(self.files),
            "callsites": rows(self.callsites),
            "advice": self.advice,
            "notes": list(self.notes),
            "over_time": self.over_time or [],
            "segments": self.segments,
        }


def _zeros(fields, n):
    return np.zeros(n, fields)


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def pattern_of(names):
    """Each name's pattern: digit runs as '#', so out.0001 .. out.0400 are one."""
    return [re.sub(r"\d+", "#", n) for n in names]


def _pattern_label(members):
    members = sorted(members)
    return members[0] if len(members) == 1 else f"{members[0]}..{members[-1]}"


def analyze(io, symbolizer=None, waitstates=None, timelines=()):
    """The IoResult of IoProfile io. waitstates: the experiment's WaitStatesResult (or
    None): the small-writes advice says what the waits for a late rank cost; timelines:
    its node timelines (model/timeline.py), whose slices the rates over time take."""
    recs = io.records
    procs = io.processes
    t = recs["time_ns"] / 1e9 if len(recs) else np.zeros((0, len(IO_OPS)))
    posix = recs["layer"] != MPIIO
    oc = t[:, OPEN_CLOSE].sum(axis=1)
    rw = t[:, READ_WRITE].sum(axis=1)
    me = t[:, META].sum(axis=1)
    # per rank (a process without a rank: its own row, rank -1)
    nproc = len(procs)
    pr = _zeros(
        [
            ("rank", "<i8"),
            ("wall_s", "<f8"),
            ("io_s", "<f8"),
            ("open_close_s", "<f8"),
            ("read_write_s", "<f8"),
            ("meta_s", "<f8"),
            ("mpiio_s", "<f8"),
            ("bytes_read", "<i8"),
            ("bytes_written", "<i8"),
        ],
        nproc,
    )
    pr["rank"] = procs["rank"]
    pr["wall_s"] = procs["wall_s"]
    pr["io_s"] = procs["busy_s"]
    p = recs["process"]
    np.add.at(pr["open_close_s"], p[posix], oc[posix])
    np.add.at(pr["read_write_s"], p[posix], rw[posix])
    np.add.at(pr["meta_s"], p[posix], me[posix])
    np.add.at(pr["mpiio_s"], p[~posix], t[~posix].sum(axis=1))
    np.add.at(pr["bytes_read"], p[posix], recs["bytes_read"][posix])
    np.add.at(pr["bytes_written"], p[posix], recs["bytes_written"][posix])
    files = _files(io, recs, t)
    sites = _callsites(io, symbolizer)
    res = IoResult(
        wall_s=float(procs["wall_s"].sum()),
        io_s=float(procs["busy_s"].sum()),
        open_close_s=float(pr["open_close_s"].sum()),
        read_write_s=float(pr["read_write_s"].sum()),
        meta_s=float(pr["meta_s"].sum()),
        mpiio_s=float(pr["mpiio_s"].sum()),
        processes=nproc,
        killed=int((procs["state"] == "killed").sum()),
        per_rank=pr,
        files=files,
        callsites=sites,
        advice=[],
        notes=list(io.notes),
    )
    if len(recs) and recs["mmap_bytes"].sum() > 0:
        res.notes.append(
            f"{int(recs['mmap_bytes'].sum()):,} bytes of mapped files touched: an estimate "
            "(the mappings' resident pages at munmap; readahead counts too)"
        )
    res.segments = _segments(res, procs)
    res.advice = _advice(res, recs, io, waitstates)
    res.over_time = over_time(io, timelines)
    return res


def _segments(res, procs):
    """The segment trace's totals; a note when calls were left out of it."""
    traced = procs[procs["segments"] >= 0] if len(procs) else procs
    if not len(traced):
        return None
    out = {
        "processes": len(traced),
        "segments": int(traced["segments"].sum()),
        "dropped": int(traced["segments_dropped"].sum()),
        "forks_dropped": int(traced["segments_forks_dropped"].sum()),
    }
    if out["dropped"]:
        res.notes.append(
            f"segment trace: {out['dropped']:,} calls dropped, {out['segments']:,} kept "
            "(--io-trace-max)"
        )
    if out["forks_dropped"]:
        res.notes.append(f"I/O segment trace: {out['forks_dropped']} forked children made none")
    return out


def _files(io, recs, t):
    pats = pattern_of(io.files)
    members = {}
    for name, pat in zip(io.files, pats):
        members.setdefault(pat, []).append(name)
    patid = {pat: i for i, pat in enumerate(members)}
    fpat = np.array([patid[p] for p in pats], np.int64)
    key = fpat[recs["file"]] * len(IO_LAYERS) + recs["layer"] if len(recs) else np.zeros(0, int)
    keys, inv = np.unique(key, return_inverse=True)
    out = _zeros(
        [
            ("pattern", "O"),
            ("files", "<i8"),
            ("layer", "O"),
            ("fs", "O"),
            ("memory", "?"),
            ("ranks", "<i8"),
            ("readers", "<i8"),
            ("writers", "<i8"),
            ("opens", "<i8"),
            ("closes", "<i8"),
            ("reads", "<i8"),
            ("writes", "<i8"),
            ("stats", "<i8"),
            ("bytes_read", "<i8"),
            ("bytes_written", "<i8"),
            ("mmap_bytes_est", "<i8"),  # an estimate: resident pages of mappings at munmap
            ("open_s", "<f8"),
            ("close_s", "<f8"),
            ("read_s", "<f8"),
            ("write_s", "<f8"),
            ("meta_s", "<f8"),
            ("time_s", "<f8"),
            ("read_mbs", "<f8"),
            ("write_mbs", "<f8"),
            ("imbalance", "<f8"),
            ("forms", "O"),
        ],
        len(keys),
    )
    pnames = list(members)
    out["pattern"] = [_pattern_label(members[pnames[k // len(IO_LAYERS)]]) for k in keys]
    out["files"] = [len(members[pnames[k // len(IO_LAYERS)]]) for k in keys]
    out["layer"] = [IO_LAYERS[k % len(IO_LAYERS)] for k in keys]
    first = {}
    for i, f in enumerate(recs["file"]):
        first.setdefault(inv[i], f)
    out["fs"] = [
        FS_NAMES.get(io.fs_types[first[i]], hex(io.fs_types[first[i]] & 0xFFFFFFFF))
        if io.fs_types[first[i]]
        else "?"
        for i in range(len(keys))
    ]
    out["memory"] = [io.memory[first[i]] for i in range(len(keys))]
    for k in ("opens", "closes", "reads", "writes", "stats", "bytes_read", "bytes_written"):
        np.add.at(out[k], inv, recs[k])
    np.add.at(out["mmap_bytes_est"], inv, recs["mmap_bytes"])
    for col, op in (("open_s", "open"), ("close_s", "close"), ("read_s", "read")):
        np.add.at(out[col], inv, t[:, OP[op]])
    np.add.at(out["write_s"], inv, t[:, OP["write"]])
    np.add.at(out["meta_s"], inv, t[:, META].sum(axis=1))
    tt = t.sum(axis=1)
    np.add.at(out["time_s"], inv, tt)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["read_mbs"] = np.where(out["read_s"] > 0, out["bytes_read"] / out["read_s"] / 1e6, 0)
        out["write_mbs"] = np.where(
            out["write_s"] > 0, out["bytes_written"] / out["write_s"] / 1e6, 0
        )
    out["forms"] = _forms(recs, inv, len(keys), out["layer"])
    # ranks, readers, writers, imbalance: per (group, rank)
    rk = recs["process"].astype(np.int64)
    gr = inv * (int(rk.max()) + 1 if len(rk) else 1) + rk
    u, ginv = np.unique(gr, return_inverse=True)
    g_of = u // (int(rk.max()) + 1 if len(rk) else 1)
    per_t = np.zeros(len(u))
    per_r = np.zeros(len(u), np.int64)
    per_w = np.zeros(len(u), np.int64)
    np.add.at(per_t, ginv, tt)
    np.add.at(per_r, ginv, recs["reads"])
    np.add.at(per_w, ginv, recs["writes"])
    np.add.at(out["ranks"], g_of, 1)
    np.add.at(out["readers"], g_of, per_r > 0)
    np.add.at(out["writers"], g_of, per_w > 0)
    mx = np.zeros(len(keys))
    np.maximum.at(mx, g_of, per_t)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = out["time_s"] / np.maximum(out["ranks"], 1)
        out["imbalance"] = np.where(mean > 0, mx / mean, 1.0)
    return out[np.argsort(-out["time_s"], kind="stable")]


def _forms(recs, inv, n, layers):
    """Per group, MPI-IO only: {"opens"|"reads"|"writes": {form: calls}, "views": n} of
    the forms with calls (IO_FORMS); {} for other layers."""
    sums = {}
    for k in ("form_opens", "form_reads", "form_writes"):
        sums[k] = np.zeros((n, len(IO_FORMS)), np.int64)
        np.add.at(sums[k], inv, recs[k])
    views = np.zeros(n, np.int64)
    np.add.at(views, inv, recs["views"])
    out = []
    for g in range(n):
        if layers[g] != "mpiio":
            out.append({})
            continue
        d = {
            k[5:]: {f: int(x) for f, x in zip(IO_FORMS, sums[k][g]) if x}
            for k in ("form_opens", "form_reads", "form_writes")
        }
        out.append(d | {"views": int(views[g])})
    return out


def _callsites(io, symbolizer):
    s = io.sites
    out = _zeros(
        [
            ("pattern", "O"),
            ("layer", "O"),
            ("op", "O"),
            ("where", "O"),
            ("ranks", "<i8"),
            ("calls", "<i8"),
            ("bytes", "<i8"),
            ("time_s", "<f8"),
        ],
        0,
    )
    if not len(s):
        return out
    pats = pattern_of(io.files)
    labels = {}
    for name, pat in zip(io.files, pats):
        labels.setdefault(pat, []).append(name)
    symbolizer = symbolizer or Symbolizer()
    where = np.empty(len(s), object)
    for obj in np.unique(s["object"]):
        m = s["object"] == obj
        if obj < 0:
            where[m] = [f"{int(o):#x}" for o in s["offset"][m]]
            continue
        locs = symbolizer.resolve(io.objects[obj], s["offset"][m])
        where[m] = [loc.short() for loc in locs]
    key = [
        (pats[f], layer, op, w) for f, layer, op, w in zip(s["file"], s["layer"], s["op"], where)
    ]
    groups = {}
    for i, k in enumerate(key):
        groups.setdefault(k, []).append(i)
    out = np.zeros(len(groups), out.dtype)
    for j, ((pat, layer, op, w), idx) in enumerate(groups.items()):
        idx = np.array(idx)
        out[j]["pattern"] = _pattern_label(labels[pat])
        out[j]["layer"] = IO_LAYERS[layer]
        out[j]["op"] = IO_OPS[op]
        out[j]["where"] = w
        out[j]["ranks"] = len(np.unique(s["process"][idx]))
        out[j]["calls"] = s["count"][idx].sum()
        out[j]["bytes"] = s["bytes"][idx].sum()
        out[j]["time_s"] = s["time_ns"][idx].sum() / 1e9
    return out[np.argsort(-out["time_s"], kind="stable")]


def _top_site(res, pattern, ops):
    c = res.callsites
    m = (c["pattern"] == pattern) & np.isin(c["op"], ops)
    if not m.any():
        return None
    return c[m][np.argmax(c["time_s"][m])]


def _slowest_rank(recs, io, pattern):
    """The rank (of a process with one) with the most I/O time on file pattern, or None."""
    pats = pattern_of(io.files)
    want = re.sub(r"\d+", "#", pattern.split("..")[0])
    m = np.array([pats[f] == want for f in recs["file"]], bool) & (recs["layer"] != MPIIO)
    m &= recs["rank"] >= 0
    if not m.any():
        return None
    ranks, inv = np.unique(recs["rank"][m], return_inverse=True)
    t = np.bincount(inv, recs["time_ns"][m].sum(axis=1))
    return int(ranks[np.argmax(t)])


def late_rank_waits(waitstates, exclude=None):
    """(seconds, largest call path's name, its seconds, metric ids with time) of the
    LATE_RANK_WAITS metrics of waitstates, summed over the ranks but exclude."""
    ids = [m for m in LATE_RANK_WAITS if m in set(waitstates.metrics["id"].tolist())]
    v = waitstates.values[np.isin(waitstates.values["metric"], ids)]
    if exclude is not None:
        v = v[v["rank"] != exclude]
    v = v[v["value"] > 0]
    if not len(v):
        return 0.0, "", 0.0, []
    paths, inv = np.unique(v["callpath"], return_inverse=True)
    per = np.bincount(inv, v["value"])
    worst = int(paths[np.argmax(per)])
    cp = waitstates.callpaths[waitstates.callpaths["id"] == worst]
    name = ""
    if len(cp):
        name = cp["name"][0] or (cp["labels"][0][-1] if cp["labels"][0] else "")
    used = [m for m in ids if (v["metric"] == m).any()]
    return float(v["value"].sum()), name or f"call path {worst}", float(per.max()), used


def _advice(res, recs, io, waitstates=None):
    out = []
    if not res.wall_s or 100 * res.io_s / res.wall_s < IO_SHARE_PCT:
        return out
    for f in res.files:
        if f["layer"] == "mpiio" or f["time_s"] <= 0:
            continue
        share = (f["open_s"] + f["close_s"]) / f["time_s"]
        pct = 100 * f["time_s"] / res.wall_s
        if not f["memory"] and share >= OPEN_CLOSE_SHARE and pct >= IO_SHARE_PCT:
            site = _top_site(res, f["pattern"], ["open", "close"])
            at = f" (most of it at {site['where']}: {site['calls']:,} calls)" if site else ""
            out.append(
                {
                    "rule": "io_open_close",
                    "severity": pct,
                    "text": f"{f['pattern']} ({f['fs']}) takes {pct:.1f} % of the wall time "
                    f"in I/O, {100 * share:.0f} % of it opening and closing "
                    f"({f['opens']:,} opens){at}. What usually helps: keep the file open, or "
                    "put it in a memory-backed directory (/dev/shm) and copy it out at the end.",
                    "evidence": {"pattern": f["pattern"], "open_close_share": share},
                }
            )
        small = f["writes"] >= SMALL_WRITES and f["bytes_written"] / max(f["writes"], 1) < (
            SMALL_WRITE_BYTES
        )
        if small and f["imbalance"] >= IMBALANCE and pct >= IO_SHARE_PCT:
            site = _top_site(res, f["pattern"], ["write"])
            at = f" (most at {site['where']})" if site else ""
            evidence = {"pattern": f["pattern"], "imbalance": f["imbalance"]}
            severity = pct
            if waitstates is None:
                waits = (
                    " Run with --trace and perfweave analyze to see the waits it causes in "
                    "barriers and collectives."
                )
            else:
                slow = _slowest_rank(recs, io, f["pattern"])
                wait_s, where, where_s, used = late_rank_waits(waitstates, slow)
                # the waits as a share of the processes' summed wall time, as pct is
                severity = pct + 100 * wait_s / res.wall_s
                evidence.update(wait_s=wait_s, wait_callpath=where, wait_metrics=used)
                waits = (
                    f" The other ranks waited {wait_s:.3g} s in barriers and collectives for "
                    f"a late rank (wait states), most at {where} ({where_s:.3g} s)."
                    if wait_s
                    else " The wait states show no waits for a late rank in barriers or "
                    "collectives."
                )
            out.append(
                {
                    "rule": "io_small_writes",
                    "severity": float(severity),
                    "text": f"{f['pattern']}: {f['writes']:,} small writes (mean "
                    f"{f['bytes_written'] / f['writes']:.0f} bytes){at} take "
                    f"{pct:.1f} % of the wall time, the slowest rank {f['imbalance']:.1f}x the "
                    f"mean: the others wait for it at the next synchronisation.{waits} What "
                    "usually helps: binary instead of formatted output, collective MPI-IO, or "
                    "HDF5.",
                    "evidence": evidence,
                }
            )
    return out


def over_time(io, timelines=(), slices=SLICES):
    """Read and write bytes over time, summed over processes: a list of groups, each
    {host, clock, slices: [{t0_s, t1_s, read_bytes, write_bytes, read_mbs, write_mbs}]}.
    A host with a node timeline: up to `slices` slices of it (analysis/timeline.py
    slice_edges, s since the timeline's first tick; the processes' bins placed by their
    t_start_ns on the same clock), clock "node timeline". The other processes: one group
    (host None), clock "process start": `slices` equal slices (past SLICES, none narrower
    than the processes' finest bin) from the earliest start (each host's
    processes by their t_start_ns, the hosts' earliest starts taken as one instant)
    to the last end. A bin's bytes go to the slices it overlaps in proportion; bytes
    before the first slice count in it, after the last in the last. [] without bins."""
    have = [i for i, b in enumerate(io.bins) if b is not None and i < len(io.processes)]
    if not have:
        return []
    procs = io.processes
    nodes = {}
    for tl in timelines or ():
        edges = slice_edges(tl, slices)
        if edges is not None:
            nodes[tl.host] = (int(tl.t[0]), edges)
    hosts = [str(h or "") for h in procs["host"]]
    if len(nodes) == 1 and all(not h for h in hosts):  # a model without hosts
        hosts = [next(iter(nodes))] * len(procs)
    groups = {}
    for i in have:
        groups.setdefault(hosts[i] if hosts[i] in nodes else None, []).append(i)
    out = []
    for host in sorted(groups, key=lambda h: (h is None, h or "")):
        members = groups[host]
        if host is not None:
            origin, edges = nodes[host]
            offsets = [(int(procs["t_start_ns"][i]) - origin) / 1e9 for i in members]
        else:
            first = {}
            for i in members:
                h, t = hosts[i], int(procs["t_start_ns"][i])
                first[h] = min(first.get(h, t), t)
            offsets = [(int(procs["t_start_ns"][i]) - first[hosts[i]]) / 1e9 for i in members]
            end = max(o + float(procs["wall_s"][i]) for o, i in zip(offsets, members))
            if end <= 0:
                end = max(o + io.bins[i][0] * len(io.bins[i][1]) for o, i in zip(offsets, members))
            finest = min(io.bins[i][0] for i in members)
            n = min(slices, max(SLICES, int(end / finest) if finest > 0 else slices))
            edges = np.linspace(0, end, n + 1)
        rd = np.zeros(len(edges) - 1)
        wr = np.zeros(len(edges) - 1)
        for o, i in zip(offsets, members):
            bin_s, r, w = io.bins[i]
            rd += _spread(edges, o, bin_s, r)
            wr += _spread(edges, o, bin_s, w)
        width = np.diff(edges)
        with np.errstate(divide="ignore", invalid="ignore"):
            rm = np.where(width > 0, rd / width / 1e6, 0.0)
            wm = np.where(width > 0, wr / width / 1e6, 0.0)
        out.append(
            {
                "host": host,
                "clock": "process start" if host is None else "node timeline",
                "processes": len(members),
                "slices": [
                    {
                        "t0_s": float(edges[k]),
                        "t1_s": float(edges[k + 1]),
                        "read_bytes": float(rd[k]),
                        "write_bytes": float(wr[k]),
                        "read_mbs": float(rm[k]),
                        "write_mbs": float(wm[k]),
                    }
                    for k in range(len(edges) - 1)
                ],
            }
        )
    return out


def _spread(edges, offset, bin_s, values):
    """The bytes of bins [offset + i bin_s, offset + (i + 1) bin_s) per slice of edges."""
    v = np.asarray(values, np.float64)
    nz = np.flatnonzero(v)
    out = np.zeros(len(edges) - 1)
    if not len(nz) or bin_s <= 0:
        return out
    lo = offset + nz * bin_s
    hi = lo + bin_s
    x = v[nz]
    e0, e1 = edges[:-1], edges[1:]
    over = np.clip(np.minimum(hi[:, None], e1) - np.maximum(lo[:, None], e0), 0, None)
    out += (x[:, None] * over / bin_s).sum(axis=0)
    before = np.clip(np.minimum(hi, edges[0]) - lo, 0, bin_s) / bin_s
    after = np.clip(hi - np.maximum(lo, edges[-1]), 0, bin_s) / bin_s
    out[0] += (x * before).sum()
    out[-1] += (x * after).sum()
    return out

"""Reader of the io module's record stores (io/*.pwio; docs/format.md "I/O profile"):
the model of model/io.py. A store is read as it is, whether its process ended (the
header's state) or was killed (state -1: "killed", the counts up to then). A file that
cannot be read is left out with a note. A store's segment trace (NAME.segments beside
NAME.pwio, with --trace) is read with it: its committed slots."""

import re

import numpy as np


from perfweave.errors import FormatError
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import SparseFile
from perfweave._format import FILES, IO_MAGIC_NUMBER, IO_SEGMENTS_MAGIC_NUMBER, RECORDS, STATES
from perfweave.model.io import (
    MAXED,
    PROCESS_DTYPE,
    RECORD_DTYPE,
    SEGMENT_DTYPE,
    SITE_DTYPE,
    SUMMED,
    IoProfile,
)

VERSION = FILES["io"].version
# version 1: no solo_ticks, the header's last field; the header page's padding there is
# zero, so a version 1 store reads with version 2's layout (its busy_ticks is the time).
# versions 1 and 2: io_rec without the MPI-IO forms and views, its last fields (read as 0)
READ_VERSIONS = (1, 2, VERSION)
PAGE = 4096
BINS = 256  # io_store.c PW_IO_BINS
HEADER, FILE, OBJECT, REC, SITE, SEG_HEADER, SEGMENT = (
    RECORDS[k]
    for k in ("io_header", "io_file", "io_object", "io_rec", "io_site")
    + ("io_segments_header", "io_segment")
)
SEGMENTS_VERSION = FILES["io_segments"].version
REC_V3 = ("form_opens", "form_reads", "form_writes", "views")
REC_V2 = np.dtype([d for d in REC.descr if d[0] not in REC_V3])
MAX_OBJECTS = 256


def _page(n):
    return (n + PAGE - 1) // PAGE * PAGE


def _text(a):
    return a.tobytes().split(b"\0", 1)[0].decode("utf-8", "replace")


def read_io(path):
    """The IoProfile of experiment path (an empty one without io/)."""
    out = IoProfile()
    d = path / "io"
    if not d.is_dir():
        return out
    names, objects = {}, {}
    recs, sites, procs, segs = [], [], [], []
    for f in sorted(d.glob("*.pwio")):
        try:
            got = _read_store(f, len(procs), names, objects, out)
        except (OSError, ValueError, FormatError) as e:
            out.notes.append(f"I/O profile: {f.name}: {e}; left out")
            continue
        if got is None:
            continue
        p, r, s, b, g = got
        procs.append(p)
        recs.append(r)
        sites.append(s)
        out.bins.append(b)
        segs.append(g)
    out.processes = np.array(procs, PROCESS_DTYPE) if procs else out.processes
    if recs:
        out.records = np.concatenate(recs)
        out.sites = np.concatenate(sites)
        out.segments = np.concatenate(segs)
    out.files = list(names)
    out.objects = list(objects)
    return out


def kept_ranks(path):
    """The ranks (-1: none) of the processes whose stores in experiment path counted a
    call (a thread block in use), from their headers alone. A process that loaded the
    runtime and made no call (a wrapper that exec'd the program, a helper of the
    launcher) counted nothing: its store is not data. Unreadable stores are left out."""
    out = []
    d = path / "io"
    for f in sorted(d.glob("*.pwio")) if d.is_dir() else ():
        try:
            m = SparseFile(f)
            if m.size < HEADER.itemsize:
                continue
            h = m[: HEADER.itemsize].view(HEADER)[0]
        except (OSError, FormatError):
            continue
        if int(h["magic"]) == IO_MAGIC_NUMBER and int(h["nthreads"]) > 0:
            out.append(int(h["rank"]))
    return out


def _read_store(f, index, names, objects, out):
    m = SparseFile(f)
    if m.size < HEADER.itemsize:
        raise ValueError("shorter than its header")
    h = m[: HEADER.itemsize].view(HEADER)[0]
    if int(h["magic"]) != IO_MAGIC_NUMBER:
        raise ValueError("not an I/O record store")
    if int(h["version"]) not in READ_VERSIONS:
        raise ValueError(
            f"version {int(h['version'])} (this perfweave reads "
            f"{', '.join(map(str, READ_VERSIONS))})"
        )
    nf, nt, ns = int(h["max_files"]), int(h["max_threads"]), int(h["max_sites"])
    rec_t = REC if int(h["version"]) >= 3 else REC_V2
    files_at = _page(HEADER.itemsize)
    objects_at = files_at + _page(FILE.itemsize * nf)
    blocks_at = objects_at + _page(OBJECT.itemsize * MAX_OBJECTS)
    recs_off = _page(3 * 8 + 2 * BINS * 8)
    sites_off = recs_off + _page(rec_t.itemsize * nf * 3)
    block = sites_off + _page(SITE.itemsize * ns)
    if m.size < blocks_at + block * nt:
        raise ValueError("shorter than its layout")
    npt = float(h["ns_per_tick"]) or 1.0
    # the process's names into the experiment's
    ftab = m[files_at : files_at + FILE.itemsize * nf].view(FILE)
    fmap = np.full(nf, -1, np.int64)
    for i in np.flatnonzero(ftab["hash"]):
        name = _text(ftab["path"][i])
        if name not in names:
            names[name] = len(names)
            out.fs_types.append(int(ftab["fs_type"][i]))
            out.memory.append(bool(ftab["memory"][i]))
        fmap[i] = names[name]
    otab = m[objects_at : objects_at + OBJECT.itemsize * MAX_OBJECTS].view(OBJECT)
    omap = np.full(MAX_OBJECTS + 1, -1, np.int64)
    for i in np.flatnonzero(otab["hash"]):
        name = _text(otab["path"][i])
        objects.setdefault(name, len(objects))
        omap[i] = objects[name]
    used = min(int(h["nthreads"]), nt)
    rank = int(h["rank"])
    rows, srows, starts, tids = [], [], [], []
    bin_s, rbins, wbins = None, None, None
    for t in range(used):
        b = blocks_at + t * block
        th = m[b : b + (3 + 2 * BINS) * 8].view("<i8")
        if th[1] <= 0:  # a block taken but never set up (no room on disk for it)
            continue
        tids.append(int(th[0]))
        r = m[b + recs_off : b + recs_off + rec_t.itemsize * nf * 3].view(rec_t)
        r = r[r["first_tick"] != 0]
        if rec_t is not REC:
            r = _widen(r)
        rows.append(r)
        starts.append(np.full(len(r), th[2], np.int64))
        s = m[b + sites_off : b + sites_off + SITE.itemsize * ns].view(SITE)
        srows.append(s[s["count"] > 0])
        width = th[1] * npt / 1e9
        rb, wb = th[3 : 3 + BINS].astype(np.int64), th[3 + BINS :].astype(np.int64)
        if bin_s is None:
            bin_s, rbins, wbins = width, rb, wb
        else:  # to the wider width of the two (widths double)
            while width > bin_s * 1.5:
                rbins, wbins, bin_s = _halve(rbins), _halve(wbins), bin_s * 2
            while bin_s > width * 1.5:
                rb, wb, width = _halve(rb), _halve(wb), width * 2
            rbins, wbins = rbins + rb, wbins + wb
    recs = _merge(
        np.concatenate(rows) if rows else np.zeros(0, REC),
        np.concatenate(starts) if starts else np.zeros(0, np.int64),
        index,
        rank,
        fmap,
        npt,
    )
    s = np.concatenate(srows) if srows else np.zeros(0, SITE)
    st = np.zeros(len(s), SITE_DTYPE)
    st["process"], st["rank"] = index, rank
    st["file"] = fmap[s["file"]]
    st["layer"], st["op"], st["offset"] = s["layer"], s["op"], s["offset"]
    st["object"] = omap[np.where(s["object"] >= 0, s["object"], MAX_OBJECTS)]
    st["count"], st["bytes"] = s["count"], s["bytes"]
    st["time_ns"] = s["ticks"] * npt
    state = int(h["state"])
    wall_s = (int(h["t_end"]) - int(h["t_start"])) / 1e9
    if not 0 <= state < len(STATES):
        # killed: t_end is as old as the header's last update; the process lived at
        # least from its threads' first bins to the end of its last call
        last = max((int(r["last_tick"].max()) for r in rows if len(r)), default=0)
        first = min((int(x[0]) for x in starts if len(x)), default=last)
        wall_s = max(wall_s, (last - first) * npt / 1e9)
    seg, seg_counts = _read_segments(f, index, rank, fmap, tids, npt, out)
    p = (
        rank,
        int(h["pid"]),
        int(h["parent_pid"]),
        STATES[state] if 0 <= state < len(STATES) else "killed",
        wall_s,
        (int(h["busy_ticks"]) + int(h["solo_ticks"])) * npt / 1e9,
        used,
        int(h["dropped_files"]) + int(h["dropped_threads"]) + int(h["dropped_sites"]),
        int(h["forks_dropped"]),
        bool(h["mmap_estimated"]),
        _host(f.name, int(h["pid"])),
        int(h["t_start"]),
        *seg_counts,
    )
    bins = (bin_s, rbins, wbins) if bin_s is not None else None
    return p, recs, st, bins, seg


def _read_segments(store, index, rank, fmap, tids, npt, out):
    """The committed segments of store's segment trace (SEGMENT_DTYPE) and the process's
    (segments, dropped, forks dropped); (-1, 0, 0) without one."""
    none = np.zeros(0, SEGMENT_DTYPE), (-1, 0, 0)
    f = store.with_suffix(".segments")
    if not f.exists():
        return none
    try:
        m = SparseFile(f)
        if m.size < PAGE:
            raise ValueError("shorter than its header")
        h = m[: SEG_HEADER.itemsize].view(SEG_HEADER)[0]
        if int(h["magic"]) != IO_SEGMENTS_MAGIC_NUMBER:
            raise ValueError("not an I/O segment trace")
        if int(h["version"]) != SEGMENTS_VERSION or int(h["record_size"]) != SEGMENT.itemsize:
            raise ValueError(
                f"version {int(h['version'])} (this perfweave reads {SEGMENTS_VERSION})"
            )
    except (OSError, ValueError, FormatError) as e:
        out.notes.append(f"I/O segment trace: {f.name}: {e}; left out")
        return none
    n = max(0, min(int(h["next"]), int(h["capacity"]), (m.size - PAGE) // SEGMENT.itemsize))
    r = m[PAGE : PAGE + n * SEGMENT.itemsize].view(SEGMENT)
    r = r[(r["t1"] != 0) & (r["file"] >= 0) & (r["file"] < len(fmap))]
    g = np.zeros(len(r), SEGMENT_DTYPE)
    g["process"], g["rank"] = index, rank
    g["thread"], g["file"] = r["thread"], fmap[r["file"]]
    tid = np.array(tids + [0], np.int64)
    g["tid"] = tid[np.where((r["thread"] >= 0) & (r["thread"] < len(tids)), r["thread"], -1)]
    g["layer"], g["op"] = r["layer"], r["op"]
    g["bytes"], g["offset"] = r["bytes"], r["offset"]
    rate = float(h["ns_per_tick"]) or npt
    base, tick0 = int(h["ns_start"]), int(h["tick_start"])
    for k in ("t0", "t1"):
        g[k + "_ns"] = base + np.rint((r[k] - tick0) * rate).astype(np.int64)
    return g, (len(g), int(h["dropped"]), int(h["forks_dropped"]))


def _widen(r):
    """Records of an older layout as REC, the fields it lacks 0."""
    out = np.zeros(len(r), REC)
    for k in r.dtype.names:
        out[k] = r[k]
    return out


def _host(name, pid):
    """The host of a store named HOST.PID.pwio or HOST.PID.N.pwio ("" if not so named)."""
    m = re.match(rf"^(.*)\.{pid}(\.\d+)?\.pwio$", name)
    return m.group(1) if m else ""


def _halve(a):
    """Bins of twice the width: pairs summed, the second half empty."""
    return np.concatenate([a.reshape(-1, 2).sum(axis=1), np.zeros(len(a) // 2, a.dtype)])


def _merge(r, start, index, rank, fmap, npt):
    """The threads' records of one process summed per (file, layer)."""
    key = r["file"].astype(np.int64) * 3 + r["layer"]
    keys, inv = np.unique(key, return_inverse=True)
    out = np.zeros(len(keys), RECORD_DTYPE)
    out["process"], out["rank"] = index, rank
    out["file"] = fmap[keys // 3]
    out["layer"] = keys % 3
    for k in SUMMED:
        np.add.at(out[k], inv, r[k])
    for k in MAXED:
        out[k] = -1
        np.maximum.at(out[k], inv, r[k])
    for k in ("size_read", "size_write", "calls", "form_opens", "form_reads", "form_writes"):
        np.add.at(out[k], inv, r[k])
    np.add.at(out["time_ns"], inv, r["ticks"] * npt)
    common = [{} for _ in range(len(keys))]
    for i in np.flatnonzero((r["access_count"] > 0).any(axis=1)):
        d = common[inv[i]]
        for size, n in zip(r["access_size"][i].tolist(), r["access_count"][i].tolist()):
            if n:
                d[size] = d.get(size, 0) + n
    for j, d in enumerate(common):
        top = sorted(d.items(), key=lambda p: (-p[1], p[0]))[:4]
        for k, (size, n) in enumerate(top):
            out["access_size"][j, k], out["access_count"][j, k] = size, n
    for k, src in (("max_read_s", "max_read_ticks"), ("max_write_s", "max_write_ticks")):
        np.maximum.at(out[k], inv, r[src] * npt / 1e9)
    out["first_s"] = np.inf
    np.minimum.at(out["first_s"], inv, (r["first_tick"] - start) * npt / 1e9)
    np.maximum.at(out["last_s"], inv, (r["last_tick"] - start) * npt / 1e9)
    return out


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "io",
    "io",
    read_io,
    "I/O per file, layer and process (perfweave run --io)",
    kept_ranks=lambda path: kept_ranks(path),
)

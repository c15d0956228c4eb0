"""Reader of a process's call-site tables (tables/NAME.pwtab and tables/NAME.json,
docs/format.md "Call-site tables"): what a process that ended without saving (SIGKILL, an
MPI library's _exit) had counted up to that moment, as one profile file's header and
arrays (readers/profile.py ProfileFile), so that readers/experiment.py merges it with the
files the other ranks saved.

The tables file is read with pread (files.SparseFile), never mapped: a page of it that
the file system never backed (a full tmpfs) would fault in a mapping."""

from pathlib import Path

import numpy as np

from perfweave._format import RECORDS, STATES, TABLE_KINDS, TABLES_MAGIC_NUMBER
from perfweave._format import TABLES_PAGE as PAGE
from perfweave.errors import FormatError
from perfweave.model.profile import BRACKET
from perfweave.dtypes import (
    COUNT_DTYPE,
    FRAME_DTYPE,
    HIST_BUCKETS,
    HIST_DTYPE,
    PROFILE_VERSION,
    RANK_DTYPE,
    SITE_DTYPE,
)
from perfweave.readers.files import SparseFile
from perfweave.readers.profile import MAGIC as PROFILE_MAGIC
from perfweave.readers.profile import ProfileFile, check_arrays, with_zero_fields
from perfweave.readers.table_description import KIND, VERSIONS, read_description

HEAD = RECORDS["tables_head"]
BLOCK = RECORDS["table_block"]
SLOT = RECORDS["table_site"]
# version 1's rank record: the profile's before its version 5 (no MPI_Pcontrol region)
RANK_V1 = np.dtype([(n, RANK_DTYPE[n]) for n in RANK_DTYPE.names if not n.startswith("region_")])
KILLED = STATES.index("killed")


def read_tables(path, doc=None):
    """The ProfileFile of the process that tables/NAME.json (path; doc: its
    read_description, if read already) describes: its rank record (state "killed" when
    it ended without saving), sites, frames, histograms and counter values, durations in
    ns. FormatError when either file is damaged."""
    path = Path(path)
    doc = read_description(path) if doc is None else doc
    data = path.with_suffix(".pwtab")
    try:
        f = SparseFile(data)
    except FileNotFoundError:
        raise FormatError(f"{data}: cannot read: no such file") from None
    except OSError as e:
        raise FormatError(f"{data}: cannot read: {e.strerror}") from None
    head = np.frombuffer(f[0 : HEAD.itemsize].tobytes(), HEAD)[0]
    bad = _bad_head(head, doc, f.size)
    if bad:
        raise FormatError(f"{data}: corrupt ({bad})")
    rdt = RANK_DTYPE if head["version"] == KIND.version else RANK_V1
    rank = with_zero_fields(
        np.frombuffer(f[HEAD.itemsize : HEAD.itemsize + rdt.itemsize].tobytes(), rdt).copy(),
        RANK_DTYPE,
    )
    slot = _slot_dtype(head)
    nfn = len(doc["functions"])
    tables, hist, lasts, dropped = [], np.zeros((nfn, HIST_BUCKETS, 3), np.int64), [], 0
    off = PAGE
    while off + PAGE <= head["bytes"]:
        b = np.frombuffer(f[off : off + BLOCK.itemsize].tobytes(), BLOCK)[0]
        n, kind = int(b["bytes"]), int(b["kind"])
        if kind == 0:  # a block the process was making when it ended
            break
        size = PAGE + (n + PAGE - 1) // PAGE * PAGE
        if n < 0 or off + size > head["bytes"]:
            raise FormatError(f"{data}: corrupt (a block at {off} runs past the file)")
        body = f[off + PAGE : off + PAGE + n]
        if kind == TABLE_KINDS["SITES"]:
            if n != int(head["nslots"]) * slot.itemsize:
                raise FormatError(f"{data}: corrupt (a table of {n} bytes)")
            s = np.frombuffer(body.tobytes(), slot)
            tables.append(s[(s["used"] != 0) & (s["count"] > 0)])
            lasts.append(int(b["last_tick"]))
            dropped += int(b["dropped"])
        elif kind == TABLE_KINDS["HIST"]:
            first, count = int(b["first"]), int(b["count"])
            if (
                not (0 <= first and count >= 0 and first + count <= nfn)
                or n != count * hist[0].nbytes
            ):
                raise FormatError(f"{data}: corrupt (a histogram of functions {first}+{count})")
            hist[first : first + count] += np.frombuffer(body.tobytes(), np.int64).reshape(
                count, *hist.shape[1:]
            )
        else:
            raise FormatError(f"{data}: corrupt (a block of kind {kind})")
        off += size
    header, arrays = _profile(data, doc, head, rank, tables, hist, lasts, dropped)
    check_arrays(data, header, arrays)
    pf = ProfileFile(path=str(data), header=header, arrays=arrays)
    if head["private_pages"] > 0:
        pf.notes.append(
            f"{data}: {head['private_pages']} pages of its call-site tables found no disk "
            "space: the call sites they held are not in it"
        )
    return pf


def _bad_head(head, doc, size):
    """What is wrong with a tables file's head, or None."""
    if head["magic"] != TABLES_MAGIC_NUMBER or head["version"] not in VERSIONS:
        return "not a tables file of this version"
    if head["pid"] != doc["pid"]:
        return f"pid {head['pid']}, its description says {doc['pid']}"
    depth, nev = int(head["callsite_depth"]), int(head["nevents"])
    least = SLOT.itemsize + 8 * max(depth - 1, 0)
    if not (1 <= depth <= 64 and nev == len(doc["counters"]) and 0 < head["nslots"] < 1 << 32):
        return "table shape"
    if not (least <= head["events_offset"] and head["events_offset"] % 8 == 0):
        return "slot layout"
    if head["entry_size"] != head["events_offset"] + (8 * (2 * nev + 2) if nev else 0):
        return "slot size"
    if not (PAGE <= head["bytes"] <= size) or not head["ns_per_tick"] > 0:
        return "file size or clock"
    return None


def _slot_dtype(head):
    """A slot: table_site, the caller frames, then the counters' values."""
    names, formats, offsets = list(SLOT.names), [SLOT[n] for n in SLOT.names], []
    offsets = [SLOT.fields[n][1] for n in SLOT.names]
    if head["callsite_depth"] > 1:
        names.append("frames")
        formats.append(np.dtype(("<u8", (int(head["callsite_depth"]) - 1,))))
        offsets.append(SLOT.itemsize)
    if head["nevents"]:
        names.append("events")
        formats.append(np.dtype(("<i8", (2 * int(head["nevents"]) + 2,))))
        offsets.append(int(head["events_offset"]))
    return np.dtype(
        {
            "names": names,
            "formats": formats,
            "offsets": offsets,
            "itemsize": int(head["entry_size"]),
        }
    )


def _objects(doc, addresses):
    """(object index, offset) of each address, by the description's loaded objects: -1
    and the address itself outside them; 0 is an overflow site (-1, 0)."""
    objs = doc["objects"]
    start = np.array([o["start"] for o in objs], np.int64)
    end = np.array([o["end"] for o in objs], np.int64)
    base = np.array([o["base"] for o in objs], np.int64)
    order = np.argsort(start, kind="stable")
    a = addresses.astype(np.int64)
    i = np.searchsorted(start[order], a, "right") - 1
    j = order[np.maximum(i, 0)] if len(objs) else np.zeros(len(a), np.int64)
    inside = (i >= 0) & (a < end[j]) & (a != 0) if len(objs) else np.zeros(len(a), bool)
    obj = np.where(inside, j, -1).astype(np.int32)
    off = np.where(inside, a - (base[j] if len(objs) else 0), a)
    return obj, off


def _profile(data, doc, head, rank, tables, hist, lasts, dropped):
    """The profile header and arrays of one process's tables (the file data)."""
    npt = float(head["ns_per_tick"])

    def ns(ticks):
        return np.rint(np.asarray(ticks, np.float64) * npt).astype(np.int64)

    me = int(doc["rank"])
    s = np.concatenate(tables) if tables else np.zeros(0, _slot_dtype(head))
    sites = np.zeros(len(s), SITE_DTYPE)
    sites["rank"], sites["fn"], sites["count"] = me, s["fn"], s["count"]
    sites["object"], sites["offset"] = _objects(doc, s["ra"])
    for k in ("total", "min", "max"):
        sites[f"{k}_ns"] = ns(s[k])
    sites["bytes_sent"], sites["bytes_recv"] = s["bytes_sent"], s["bytes_recv"]
    nframes = s["nframes"].astype(np.int64)
    if (nframes < 0).any() or (nframes > max(int(head["callsite_depth"]) - 1, 0)).any():
        raise FormatError(f"{data}: corrupt (a site's frames)")
    sites["nframes"] = nframes
    sites["first_frame"] = np.where(nframes > 0, np.cumsum(nframes) - nframes, -1)
    frames = np.zeros(int(nframes.sum()), FRAME_DTYPE)
    if len(frames):
        deep = np.arange(head["callsite_depth"] - 1) < nframes[:, None]
        frames["object"], frames["offset"] = _objects(doc, s["frames"][deep])
    counts = np.zeros(0, COUNT_DTYPE)
    nev = int(head["nevents"])
    if nev and len(s):
        ev = s["events"]
        site, event = np.nonzero((ev[:, :nev] != 0) | (ev[:, nev : 2 * nev] != 0))
        counts = np.zeros(len(site), COUNT_DTYPE)
        counts["site"], counts["event"] = site, event
        counts["inside"], counts["before"] = ev[site, event], ev[site, nev + event]
        counts["inside_ns"], counts["before_ns"] = ev[site, 2 * nev], ev[site, 2 * nev + 1]
    fn, bucket = np.nonzero(hist[:, :, 0])
    h = np.zeros(len(fn), HIST_DTYPE)
    h["rank"], h["fn"], h["bucket"] = me, fn, bucket
    h["count"], h["bytes"], h["total_ns"] = (
        hist[fn, bucket, 0],
        hist[fn, bucket, 1],
        ns(hist[fn, bucket, 2]),
    )
    r = rank if rank["pid"][0] == doc["pid"] and rank["rank"][0] == me else np.zeros(1, RANK_DTYPE)
    if r is not rank:
        r["rank"], r["pid"], r["thread_level"] = me, doc["pid"], -1
    r["host"] = 0
    r["state"] = head["state"] if 0 <= head["state"] < len(STATES) else KILLED
    r["t_start"] = head["t_start"]
    if not r["t_fini_enter"][0]:  # the end of the latest recorded call
        last = max(lasts, default=0)
        r["t_fini_enter"] = (
            head["t_start"] + ns(last - head["tick_start"]) if last else r["t_init_leave"]
        )
    r["t_end"] = r["t_fini_enter"]
    begun = r["t_init_leave"] if r["t_init_leave"][0] else r["t_start"]
    r["app_ns"] = np.maximum(r["t_fini_enter"] - begun, 0)
    r["nthreads"] = len(tables)
    mpi = next((m for m in doc["modules"] if m.get("name") == "mpi"), None)
    if mpi is not None:
        ids = [
            i
            for i in range(mpi.get("first", 0), mpi.get("first", 0) + mpi.get("count", 0))
            if 0 <= i < len(doc["functions"]) and doc["functions"][i] not in BRACKET
        ]
        mine = np.isin(sites["fn"], ids)
        r["mpi_ns"], r["mpi_calls"] = sites["total_ns"][mine].sum(), sites["count"][mine].sum()
    r["sites_dropped"] = dropped
    # the record as the rank left it: its MPI_Pcontrol region not complete, unknown
    r["region_intervals"] = r["region_ns"] = r["region_mpi_ns"] = 0
    r["table_capacity"] = doc.get("max_callsites", 0)
    r["table_bytes"] = len(tables) * int(head["nslots"]) * int(head["entry_size"])
    objects = doc["objects"]
    if not all(isinstance(o, dict) and "path" in o and "buildid" in o for o in objects):
        raise FormatError(f"{data}: corrupt (an object without path or build-id)")
    header = {
        "format": PROFILE_MAGIC,
        "version": PROFILE_VERSION,
        "partial": True,
        "world_size": max(int(doc.get("world_size", 0)), me + 1, 1),
        "hist_buckets": HIST_BUCKETS,
        "hosts": [doc["host"]],
        "objects": [o["path"] for o in objects],
        "buildids": [o["buildid"] for o in objects],
        "modules": doc["modules"],
        "functions": doc["functions"],
        "families": doc["families"],
        "counters": doc["counters"],
        "states": list(STATES),
    }
    arrays = {"ranks": r, "sites": sites, "frames": frames, "hist": h, "counts": counts}
    return header, arrays

"""The I/O profile (perfweave run --io) as darshan-parser's text: one row per counter,
`<module> <rank> <record id> <counter> <value> <file name> <mount pt> <fs type>` separated
by tabs, under '#' comment lines, so that tools written for darshan-parser's output read it.
The mapping, and what Darshan has that we do not: docs/io.md "Darshan-comparable export"."""

import hashlib
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from perfweave._format import IO_FS_TYPES, IO_LAYERS, IO_OPS
from perfweave.errors import PerfweaveError
from perfweave.interop import default_output

MODULES = {"posix": "POSIX", "stdio": "STDIO", "mpiio": "MPIIO"}
BIN_NAMES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M")
BIN_NAMES += ("10M_100M", "100M_1G", "1G_PLUS")
FS_NAMES = {v: k.lower() for k, v in IO_FS_TYPES.items()}
OP = {name: i for i, name in enumerate(IO_OPS)}
# the ops whose time Darshan adds to META_TIME (ours: sync too, see docs/io.md)
META_OPS = ("open", "close", "seek", "stat", "sync", "meta", "mmap")


def record_id(name):
    """A 64-bit id of a file name (Darshan hashes the path too; ours is not its hash)."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "little")


def _counters(layer, r):
    """(counter, value) of one record of ours, in Darshan's names and order."""
    m = MODULES[layer]
    t = r["time_ns"] / 1e9
    c = r["calls"]
    rows = []
    if layer == "mpiio":
        # our MPI-IO layer does not tell independent from collective calls: Darshan's
        # INDEP_ and COLL_ counts are not written (docs/io.md)
        rows += [("MPIIO_SYNCS", r["syncs"])]
    else:
        rows += [(f"{m}_OPENS", r["opens"]), (f"{m}_READS", r["reads"])]
        rows += [(f"{m}_WRITES", r["writes"]), (f"{m}_SEEKS", r["seeks"])]
    if layer == "posix":
        rows += [("POSIX_STATS", r["stats"]), ("POSIX_MMAPS", r["mmaps"])]
        rows += [("POSIX_FSYNCS", r["syncs"])]
    if layer == "stdio":
        rows += [("STDIO_FLUSHES", r["syncs"])]
    rows += [(f"{m}_BYTES_READ", r["bytes_read"]), (f"{m}_BYTES_WRITTEN", r["bytes_written"])]
    if layer != "mpiio":
        rows += [(f"{m}_MAX_BYTE_READ", max(int(r["max_byte_read"]), 0))]
        rows += [(f"{m}_MAX_BYTE_WRITTEN", max(int(r["max_byte_written"]), 0))]
    if layer == "posix":
        for k in ("CONSEC_READS", "CONSEC_WRITES", "SEQ_READS", "SEQ_WRITES"):
            rows.append((f"POSIX_{k}", r[k.lower()]))
    if layer != "stdio":
        rows.append((f"{m}_RW_SWITCHES", r["rw_switches"]))
        agg = "_AGG" if layer == "mpiio" else ""
        for what, key in (("READ", "size_read"), ("WRITE", "size_write")):
            for name, v in zip(BIN_NAMES, r[key]):
                rows.append((f"{m}_SIZE_{what}{agg}_{name}", v))
        pairs = [(int(s), int(n)) for s, n in zip(r["access_size"], r["access_count"]) if n]
        pairs.sort(key=lambda p: (-p[1], p[0]))  # Darshan's order: most frequent first
        pairs += [(0, 0)] * (4 - len(pairs))
        for i, (s, n) in enumerate(pairs[:4], 1):
            rows += [(f"{m}_ACCESS{i}_ACCESS", s)]
        for i, (s, n) in enumerate(pairs[:4], 1):
            rows += [(f"{m}_ACCESS{i}_COUNT", n)]
    ints = [(k, int(v)) for k, v in rows]
    first, last = float(r["first_s"]), float(r["last_s"])
    first = 0.0 if not np.isfinite(first) else first
    floats = [(f"{m}_F_OPEN_START_TIMESTAMP", first if c[OP["open"]] else 0.0)]
    floats += [(f"{m}_F_CLOSE_END_TIMESTAMP", last if c[OP["close"]] else 0.0)]
    floats += [(f"{m}_F_READ_TIME", t[OP["read"]]), (f"{m}_F_WRITE_TIME", t[OP["write"]])]
    floats += [(f"{m}_F_META_TIME", sum(t[OP[k]] for k in META_OPS))]
    if layer != "stdio":
        floats += [(f"{m}_F_MAX_READ_TIME", float(r["max_read_s"]))]
        floats += [(f"{m}_F_MAX_WRITE_TIME", float(r["max_write_s"]))]
    return ints + [(k, float(v)) for k, v in floats]


def darshan_text(io, exe="", nprocs=None):
    """darshan-parser's text of IoProfile io, as a str."""
    out = [
        "# darshan log version: 3.41 (perfweave I/O profile; docs/io.md)",
        f"# exe: {exe}",
        f"# nprocs: {nprocs if nprocs is not None else len(io.processes)}",
        "# rank -1: a process without an MPI rank (not a shared record)",
        "# mount pt: UNKNOWN (perfweave keeps the file system type, not its mount point)",
    ]
    recs = io.records
    for layer in IO_LAYERS:
        sel = recs[recs["layer"] == IO_LAYERS.index(layer)]
        if not len(sel):
            continue
        m = MODULES[layer]
        out += ["", "# " + "*" * 55, f"# {m} module data", "# " + "*" * 55]
        out.append(
            "#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>"
        )
        for r in sel[np.lexsort((sel["file"], sel["rank"]))]:
            f = int(r["file"])
            name = io.files[f]
            fs = int(io.fs_types[f]) if f < len(io.fs_types) else 0
            fs_name = FS_NAMES.get(fs, "UNKNOWN" if fs == 0 else f"0x{fs & 0xFFFFFFFF:x}")
            head = f"{m}\t{int(r['rank'])}\t{record_id(name)}\t"
            tail = f"\t{name}\tUNKNOWN\t{fs_name}"
            for k, v in _counters(layer, r):
                val = str(v) if isinstance(v, int) else f"{v:.6f}"
                out.append(f"{head}{k}\t{val}{tail}")
    return "\n".join(out) + "\n"


def export(exp, out=None, force=False):
    """Write experiment exp's I/O profile as darshan-parser text to out (default
    EXP/export/darshan.txt). Returns a summary dict (path, records, rows, seconds, notes)."""
    import perfweave

    t0 = time.perf_counter()
    io = perfweave.open(exp).io
    if not io:
        raise PerfweaveError(f"{exp}: no I/O profile (perfweave run --io)")
    path = Path(out or default_output(exp, "darshan.txt"))
    if path.is_dir():
        path = path / "darshan.txt"
    if path.exists() and not force:
        raise PerfweaveError(f"{path}: already exists (--force replaces it)")
    text = darshan_text(io)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    rows = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
    return {
        "path": path,
        "records": len(io.records),
        "rows": rows,
        "ranks": len(set(io.processes["rank"].tolist())),
        "seconds": time.perf_counter() - t0,
        "notes": list(io.notes),
    }

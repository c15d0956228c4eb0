"""The I/O profile (perfweave run --io) as darshan-parser's text: one row per counter,
`<module> <rank> <record id> <counter> <value> <file name> <mount pt> <fs type>` separated
by tabs, under '#' comment lines, so that tools written for darshan-parser's output read it.
The mapping, and what Darshan has that we do not: docs/io.md "Darshan-comparable export"."""

import hashlib
import os
import tempfile
import time

import numpy as np

from perfweave._format import IO_FORMS, IO_FS_TYPES, IO_LAYERS, IO_OPS
from perfweave import progress
from perfweave.errors import PerfweaveError
from perfweave.interop import output_file

# darshan-parser's module names (the section titles and the rows' first column)
MODULES = {"posix": "POSIX", "stdio": "STDIO", "mpiio": "MPI-IO"}
BIN_NAMES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M")
BIN_NAMES += ("10M_100M", "100M_1G", "1G_PLUS")
FS_NAMES = {v: k.lower() for k, v in IO_FS_TYPES.items()}
OP = {name: i for i, name in enumerate(IO_OPS)}
FORM = {name: i for i, name in enumerate(IO_FORMS)}
# the ops whose time goes to Darshan's META_TIME: a sync's goes to WRITE_TIME, as
# Darshan's fsync, fflush and MPI_File_sync do; a mapping's to none (docs/io.md)
META_OPS = ("open", "close", "seek", "stat", "meta")
# the standard streams as Darshan's STDIO module names them
STD_STREAMS = {f"<{s}>": f"<{s.upper()}>" for s in ("stdin", "stdout", "stderr")}
NOT_KEPT = -1  # darshan-parser's value of a counter that was not monitored


RANKS = "FASTEST_RANK FASTEST_RANK_BYTES SLOWEST_RANK SLOWEST_RANK_BYTES"
F_RANKS = "F_FASTEST_RANK_TIME F_SLOWEST_RANK_TIME F_VARIANCE_RANK_TIME F_VARIANCE_RANK_BYTES"
F_TIMES = """F_OPEN_START_TIMESTAMP F_READ_START_TIMESTAMP F_WRITE_START_TIMESTAMP
    F_CLOSE_START_TIMESTAMP F_OPEN_END_TIMESTAMP F_READ_END_TIMESTAMP F_WRITE_END_TIMESTAMP
    F_CLOSE_END_TIMESTAMP F_READ_TIME F_WRITE_TIME F_META_TIME F_MAX_READ_TIME
    F_MAX_WRITE_TIME"""
# Every counter of each module in darshan-parser's order (Darshan 3.4's
# darshan-{posix,stdio,mpiio}-log-format.h, their *_NUM_INDICES left out), without the
# module's prefix: (integers, floating-point ones). NAME_BINS: the 10 size bins; a '#': 1-4.
SPECS = {
    "posix": (
        f"""OPENS FILENOS DUPS READS WRITES SEEKS STATS MMAPS FSYNCS FDSYNCS RENAME_SOURCES
        RENAME_TARGETS RENAMED_FROM MODE BYTES_READ BYTES_WRITTEN MAX_BYTE_READ
        MAX_BYTE_WRITTEN CONSEC_READS CONSEC_WRITES SEQ_READS SEQ_WRITES RW_SWITCHES
        MEM_NOT_ALIGNED MEM_ALIGNMENT FILE_NOT_ALIGNED FILE_ALIGNMENT MAX_READ_TIME_SIZE
        MAX_WRITE_TIME_SIZE SIZE_READ_BINS SIZE_WRITE_BINS STRIDE#_STRIDE STRIDE#_COUNT
        ACCESS#_ACCESS ACCESS#_COUNT {RANKS}""",
        f"{F_TIMES} {F_RANKS}",
    ),
    "stdio": (
        f"""OPENS FDOPENS READS WRITES SEEKS FLUSHES BYTES_WRITTEN BYTES_READ MAX_BYTE_READ
        MAX_BYTE_WRITTEN {RANKS}""",
        f"""F_META_TIME F_WRITE_TIME F_READ_TIME F_OPEN_START_TIMESTAMP
        F_CLOSE_START_TIMESTAMP F_WRITE_START_TIMESTAMP F_READ_START_TIMESTAMP
        F_OPEN_END_TIMESTAMP F_CLOSE_END_TIMESTAMP F_WRITE_END_TIMESTAMP
        F_READ_END_TIMESTAMP {F_RANKS}""",
    ),
    "mpiio": (
        f"""INDEP_OPENS COLL_OPENS INDEP_READS INDEP_WRITES COLL_READS COLL_WRITES
        SPLIT_READS SPLIT_WRITES NB_READS NB_WRITES SYNCS HINTS VIEWS MODE BYTES_READ
        BYTES_WRITTEN RW_SWITCHES MAX_READ_TIME_SIZE MAX_WRITE_TIME_SIZE
        SIZE_READ_AGG_BINS SIZE_WRITE_AGG_BINS ACCESS#_ACCESS ACCESS#_COUNT {RANKS}""",
        f"{F_TIMES} {F_RANKS}",
    ),
}


def _expand(prefix, spec):
    out = []
    for w in spec.split():
        if w.endswith("_BINS"):
            out += [f"{prefix}_{w[:-5]}_{b}" for b in BIN_NAMES]
        elif "#" in w:
            out += [f"{prefix}_{w.replace('#', str(i))}" for i in range(1, 5)]
        else:
            out.append(f"{prefix}_{w}")
    return out


PREFIX = {"posix": "POSIX", "stdio": "STDIO", "mpiio": "MPIIO"}
COUNTERS = {
    layer: (_expand(PREFIX[layer], ints), _expand(PREFIX[layer], floats))
    for layer, (ints, floats) in SPECS.items()
}


def record_id(name):
    """A 64-bit id of a file name (Darshan hashes the path too; ours is not its hash)."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "little")


def common_accesses(sizes, counts):
    """The 4 (size, count) of _ACCESS1..4 in Darshan's order: most frequent first, a tie
    the larger size first; a 0-byte access is never one (Darshan skips a 0 value);
    (0, 0) fills the rest."""
    pairs = [(int(s), int(n)) for s, n in zip(sizes, counts) if n and s]
    pairs.sort(key=lambda p: (-p[1], -p[0]))
    return (pairs + [(0, 0)] * 4)[:4]


def _known(layer, r):
    """{Darshan counter: value} of what one record of ours holds (docs/io.md)."""
    m = PREFIX[layer]
    t = r["time_ns"] / 1e9
    c = r["calls"]
    v = {f"{m}_BYTES_READ": r["bytes_read"], f"{m}_BYTES_WRITTEN": r["bytes_written"]}
    if layer == "mpiio":
        v["MPIIO_SYNCS"] = r["syncs"]
        # a store before version 3 has no forms: its counts are not split (left -1)
        fo, fr, fw = r["form_opens"], r["form_reads"], r["form_writes"]
        if (fo.sum(), fr.sum(), fw.sum()) == (r["opens"], r["reads"], r["writes"]):
            v["MPIIO_INDEP_OPENS"], v["MPIIO_COLL_OPENS"] = fo[FORM["indep"]], fo[FORM["coll"]]
            for f in ("INDEP", "COLL", "SPLIT", "NB"):
                v[f"MPIIO_{f}_READS"] = fr[FORM[f.lower()]]
                v[f"MPIIO_{f}_WRITES"] = fw[FORM[f.lower()]]
            v["MPIIO_VIEWS"] = r["views"]
    else:
        v.update({f"{m}_OPENS": r["opens"], f"{m}_READS": r["reads"]})
        v.update({f"{m}_WRITES": r["writes"], f"{m}_SEEKS": r["seeks"]})
        v[f"{m}_MAX_BYTE_READ"] = max(int(r["max_byte_read"]), 0)
        v[f"{m}_MAX_BYTE_WRITTEN"] = max(int(r["max_byte_written"]), 0)
    if layer == "posix":
        v.update({"POSIX_STATS": r["stats"], "POSIX_MMAPS": r["mmaps"]})
        v["POSIX_FSYNCS"] = r["syncs"]  # fsync and fdatasync
        for k in ("CONSEC_READS", "CONSEC_WRITES", "SEQ_READS", "SEQ_WRITES"):
            v[f"POSIX_{k}"] = r[k.lower()]
    if layer == "stdio":
        v["STDIO_FLUSHES"] = r["syncs"]
    if layer != "stdio":
        v[f"{m}_RW_SWITCHES"] = r["rw_switches"]
        agg = "_AGG" if layer == "mpiio" else ""
        for what, key in (("READ", "size_read"), ("WRITE", "size_write")):
            for name, x in zip(BIN_NAMES, r[key]):
                v[f"{m}_SIZE_{what}{agg}_{name}"] = x
        for i, (s, n) in enumerate(common_accesses(r["access_size"], r["access_count"]), 1):
            v[f"{m}_ACCESS{i}_ACCESS"], v[f"{m}_ACCESS{i}_COUNT"] = s, n
        v[f"{m}_F_MAX_READ_TIME"] = float(r["max_read_s"])
        v[f"{m}_F_MAX_WRITE_TIME"] = float(r["max_write_s"])
    first, last = float(r["first_s"]), float(r["last_s"])
    first = 0.0 if not np.isfinite(first) else first
    v[f"{m}_F_OPEN_START_TIMESTAMP"] = first if c[OP["open"]] else 0.0
    v[f"{m}_F_CLOSE_END_TIMESTAMP"] = last if c[OP["close"]] else 0.0
    v[f"{m}_F_READ_TIME"] = float(t[OP["read"]])
    v[f"{m}_F_WRITE_TIME"] = float(t[OP["write"]] + t[OP["sync"]])
    v[f"{m}_F_META_TIME"] = float(sum(t[OP[k]] for k in META_OPS))
    return v


def _counters(layer, r):
    """(counter, value) of one record of ours: every counter of Darshan's module in its
    order, NOT_KEPT (an int, or a float for the F_ counters) where we have no value."""
    v = _known(layer, r)
    ints, floats = COUNTERS[layer]
    return [(k, int(v.get(k, NOT_KEPT))) for k in ints] + [
        (k, float(v.get(k, NOT_KEPT))) for k in floats
    ]


def darshan_logs(io):
    """The Darshan logs the processes of io would have made: [(processes, forked_from)],
    processes an array of process indices. Darshan writes one log per MPI job (its ranks:
    records of rank R) and one per process without MPI (DARSHAN_ENABLE_NONMPI: a log of
    nprocs 1 whose records are rank 0; a forked child's says fork_parent=PID in its
    metadata). The MPI job first, then the other processes in the order of their start."""
    p = io.processes
    ranked = np.flatnonzero(p["rank"] >= 0)
    alone = np.flatnonzero(p["rank"] < 0)
    alone = alone[np.argsort(p["t_start_ns"][alone], kind="stable")]
    logs = [(ranked, 0)] if len(ranked) else []
    return logs + [(np.array([i]), int(p["parent_pid"][i])) for i in alone.tolist()]


def darshan_text(io, exe="", processes=None, forked_from=0):
    """darshan-parser's text of one Darshan log (darshan_logs) of IoProfile io, as a str:
    the records of processes (default: every process, as one MPI job), rank 0 for a
    process without an MPI rank as Darshan's non-MPI mode writes it."""
    procs = np.arange(len(io.processes)) if processes is None else np.asarray(processes)
    ranks = io.processes["rank"][procs]
    out = [
        "# darshan log version: 3.41",
        "# perfweave I/O profile, not a Darshan log (docs/io.md, Darshan-comparable export)",
        f"# exe: {exe}",
        f"# nprocs: {int((ranks >= 0).sum()) or len(procs)}",
    ]
    if forked_from:
        out.append(f"# metadata: fork_parent = {forked_from}")
    out += [
        "# mount pt: UNKNOWN (perfweave keeps the file system type, not its mount point)",
        "# a value of -1: a counter perfweave does not keep (docs/io.md)",
    ]
    recs = io.records[np.isin(io.records["process"], procs)]
    for layer in ("posix", "mpiio", "stdio"):  # darshan-parser's order: by module id
        sel = recs[recs["layer"] == IO_LAYERS.index(layer)]
        if not len(sel):
            continue
        m = MODULES[layer]
        out += ["", "# " + "*" * 55, f"# {m} module data", "# " + "*" * 55, ""]
        out.append(
            "#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>"
        )
        for r in sel[np.lexsort((sel["file"], sel["rank"]))]:
            f = int(r["file"])
            name = io.files[f]
            name = STD_STREAMS.get(name, name)
            fs = int(io.fs_types[f]) if f < len(io.fs_types) else 0
            fs_name = FS_NAMES.get(fs, "UNKNOWN" if fs == 0 else f"0x{fs & 0xFFFFFFFF:x}")
            head = f"{m}\t{max(int(r['rank']), 0)}\t{record_id(name)}\t"
            tail = f"\t{name}\tUNKNOWN\t{fs_name}"
            for k, v in _counters(layer, r):
                val = str(v) if isinstance(v, int) else f"{v:.6f}"
                out.append(f"{head}{k}\t{val}{tail}")
    return "\n".join(out) + "\n"


def _log_path(path, io, procs, first):
    """The first log's file is path; a process's own log beside it, NAME.HOST.PID.txt."""
    if first:
        return path
    p = io.processes[int(procs[0])]
    return path.with_name(f"{path.stem}.{p['host'] or 'host'}.{int(p['pid'])}{path.suffix}")


def export(exp, out=None, force=False):
    """Write experiment exp's I/O profile as darshan-parser text: the MPI job's log to out
    (default EXP/export/darshan.txt), each process without an MPI rank as a log of its own
    (darshan_logs), beside it as NAME.HOST.PID.txt (the first log to out when there is no
    MPI job). Returns a summary dict (path, paths, records, rows, seconds, notes)."""
    from perfweave.interop.profile import open_upgraded

    t0 = time.perf_counter()
    upgraded = []
    e = open_upgraded(exp, upgraded.append)
    io = e.io
    if not io:
        raise PerfweaveError(f"{exp}: no I/O profile (perfweave run records one unless --no-io)")
    path = output_file(exp, out, "darshan.txt", force)
    try:
        exe = (e.meta or {}).get("program") or ""
    except (OSError, ValueError, PerfweaveError):
        exe = ""
    logs = darshan_logs(io)
    paths = [_log_path(path, io, procs, i == 0) for i, (procs, _) in enumerate(logs)]
    for p in paths[1:]:
        if p.exists() and not force:
            raise PerfweaveError(f"{p}: already exists (--force replaces it)")
    rows = 0
    with progress.task("darshan: writing", len(paths), "log") as bar:
        for p, (procs, forked_from) in zip(paths, logs):
            text = darshan_text(io, exe=exe, processes=procs, forked_from=forked_from)
            _write_text(p, text)
            rows += sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
            bar.step()
    return {
        "path": path,
        "paths": paths,
        "records": len(io.records),
        "rows": rows,
        "ranks": len(set(io.processes["rank"].tolist())),
        "seconds": time.perf_counter() - t0,
        "notes": upgraded + list(io.notes),
    }


def _write_text(path, text):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None

"""The io module's data (runtime/modules/io.c, `perfweave run --io`): per process, the
counters of each (file, layer) with the threads merged, the call sites, and read and
write bytes over time. readers/io.py builds it from io/*.pwio, `from_literal` from plain
values (tests); analysis/io.py works on it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import IO_FORMS, IO_HIST_BINS, IO_LAYERS, IO_OPS

# counters summed over threads (Darshan's names, lower case)
SUMMED = (
    "opens closes reads writes seeks stats syncs metas mmaps bytes_read bytes_written "
    "seq_reads seq_writes consec_reads consec_writes rw_switches mmap_bytes views"
).split()
MAXED = ("max_byte_read", "max_byte_written")
NOPS = len(IO_OPS)

RECORD_DTYPE = np.dtype(
    [("process", "<i4"), ("rank", "<i4"), ("file", "<i4"), ("layer", "<i4")]
    + [(k, "<i8") for k in SUMMED + list(MAXED)]
    + [
        ("size_read", "<i8", (IO_HIST_BINS,)),
        ("size_write", "<i8", (IO_HIST_BINS,)),
        ("calls", "<i8", (NOPS,)),
        # mpiio: opens, reads and writes per IO_FORMS (indep, coll, split, nb: Darshan's
        # MPIIO_INDEP_/COLL_/SPLIT_/NB_); 0 in other layers and in stores before version 3
        ("form_opens", "<i8", (len(IO_FORMS),)),
        ("form_reads", "<i8", (len(IO_FORMS),)),
        ("form_writes", "<i8", (len(IO_FORMS),)),
        ("access_size", "<i8", (4,)),  # the 4 most frequent access sizes (Darshan's
        ("access_count", "<i8", (4,)),  # ACCESS1..4): of the first 4 each thread saw
        ("time_ns", "<f8", (NOPS,)),  # summed over the process's threads
        ("first_s", "<f8"),  # since the process's start
        ("last_s", "<f8"),
        ("max_read_s", "<f8"),
        ("max_write_s", "<f8"),
    ]
)
SITE_DTYPE = np.dtype(
    [
        ("process", "<i4"),
        ("rank", "<i4"),
        ("file", "<i4"),
        ("layer", "<i4"),
        ("op", "<i4"),
        ("object", "<i4"),  # index of IoProfile.objects, -1 unknown
        ("offset", "<u8"),
        ("count", "<i8"),
        ("bytes", "<i8"),
        ("time_ns", "<f8"),
    ]
)
PROCESS_DTYPE = np.dtype(
    [
        ("rank", "<i4"),
        ("pid", "<i8"),
        ("parent_pid", "<i8"),
        ("state", "O"),  # a PW_STATES name, or "killed" (the store was never closed)
        ("wall_s", "<f8"),  # from the module's start to the end (or the last update)
        ("busy_s", "<f8"),  # in POSIX or stdio calls, overlaps between threads once
        ("threads", "<i4"),
        ("dropped", "<i8"),  # calls on files, threads or sites past the bounds
        ("forks_dropped", "<i4"),
        ("mmap_estimated", "?"),
        ("host", "O"),  # from the store's name (HOST.PID.pwio); "" unknown
        ("t_start_ns", "<i8"),  # the header's t_start: the bins' start (CLOCK_MONOTONIC)
        ("segments", "<i8"),  # committed segments of its segment trace; -1 none made
        ("segments_dropped", "<i8"),  # calls past the segment trace's bound (or disk)
        ("segments_forks_dropped", "<i8"),  # children that made no segment trace
    ]
)
# the segment trace (--io --trace): one row per call the store counted
SEGMENT_DTYPE = np.dtype(
    [
        ("process", "<i4"),
        ("rank", "<i4"),
        ("thread", "<i4"),  # the process's I/O thread (its store's thread block)
        ("tid", "<i8"),  # that thread's OS id (the process's pid: its main thread)
        ("file", "<i4"),
        ("layer", "<i4"),
        ("op", "<i4"),
        ("t0_ns", "<i8"),  # CLOCK_MONOTONIC of the process's host, as t_start_ns
        ("t1_ns", "<i8"),
        ("bytes", "<i8"),
        ("offset", "<i8"),  # -1: unknown or none
    ]
)


@dataclass
class IoProfile:
    """files: names (global index), with fs_types (statfs f_type) and memory (bool) per
    file; records: RECORD_DTYPE, one per (process, file, layer); sites: SITE_DTYPE;
    processes: PROCESS_DTYPE (index = process); bins: per process (bin_s, read, write)
    arrays of bytes per bin, the first bin starting at the process's t_start_ns (None: no
    bins); segments: SEGMENT_DTYPE, the segment trace (empty without --trace); objects:
    paths; notes: what could not be read."""

    files: list = field(default_factory=list)
    fs_types: list = field(default_factory=list)
    memory: list = field(default_factory=list)
    records: np.ndarray = field(default_factory=lambda: np.zeros(0, RECORD_DTYPE))
    sites: np.ndarray = field(default_factory=lambda: np.zeros(0, SITE_DTYPE))
    processes: np.ndarray = field(default_factory=lambda: np.zeros(0, PROCESS_DTYPE))
    bins: list = field(default_factory=list)
    segments: np.ndarray = field(default_factory=lambda: np.zeros(0, SEGMENT_DTYPE))
    objects: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def __bool__(self):
        return len(self.processes) > 0

    @classmethod
    def from_literal(
        cls, processes, files, records, sites=(), objects=(), notes=(), bins=None, segments=()
    ):
        """An IoProfile of plain values. processes: dicts of PROCESS_DTYPE fields (rank,
        wall_s, busy_s at least); files: (name, fs_type, memory) tuples; records: dicts
        with process, file (index of files), layer (a name of IO_LAYERS) and any
        counters; time_ns and calls as {op name: value}, form_opens, form_reads and
        form_writes as {form name: value}; sites and segments: dicts likewise; bins: per
        process (bin_s, read bytes per bin, write bytes per bin) or None."""
        procs = np.zeros(len(processes), PROCESS_DTYPE)
        for i, p in enumerate(processes):
            procs[i]["state"] = "complete"
            procs[i]["host"] = ""
            procs[i]["segments"] = -1
            for k, v in p.items():
                procs[i][k] = v
        recs = np.zeros(len(records), RECORD_DTYPE)
        for i, r in enumerate(records):
            for k, v in r.items():
                if k == "layer":
                    v = IO_LAYERS.index(v)
                if k in ("time_ns", "calls"):
                    for op, x in v.items():
                        recs[i][k][IO_OPS.index(op)] = x
                    continue
                if k.startswith("form_"):
                    for form, x in v.items():
                        recs[i][k][IO_FORMS.index(form)] = x
                    continue
                recs[i][k] = v
            recs[i]["rank"] = procs[r["process"]]["rank"]
        st, sg = _rows(sites, SITE_DTYPE, procs), _rows(segments, SEGMENT_DTYPE, procs)
        return cls(
            files=[f[0] for f in files],
            fs_types=[f[1] for f in files],
            memory=[bool(f[2]) for f in files],
            records=recs,
            sites=st,
            segments=sg,
            processes=procs,
            bins=[
                None
                if b is None
                else (float(b[0]), np.asarray(b[1], np.int64), np.asarray(b[2], np.int64))
                for b in (bins if bins is not None else [None] * len(procs))
            ],
            objects=list(objects),
            notes=list(notes),
        )


def _rows(rows, dtype, procs):
    """Sites or segments of from_literal: dicts, layer and op by name."""
    out = np.zeros(len(rows), dtype)
    for i, s in enumerate(rows):
        for k, v in s.items():
            if k == "layer":
                v = IO_LAYERS.index(v)
            elif k == "op":
                v = IO_OPS.index(v)
            out[i][k] = v
        out[i]["rank"] = procs[s["process"]]["rank"]
    return out

"""Chrome's Trace Event Format (chrome://tracing, ui.perfetto.dev) from an experiment's
event traces: one process per rank, one thread per recording thread, a complete event
("ph": "X") per MPI call, user region, trace buffer flush and I/O segment (the io
module's segment trace, `--io --trace`: "write out.0001", category "io"), and a flow
arrow from each send to the call that completed its receive. Messages are identified as `perfweave
analyze` matches them (source, destination, communicator, tag, sequence number).

Times are microseconds since the first event of the trace (its time on rank 0's clock,
in ns, is in "otherData"): CLOCK_MONOTONIC nanoseconds as microseconds would need more
digits than a double holds.

The file is written rank by rank, each rank read in chunks of records
(RankExportStream), as it is made: memory follows neither the trace nor the records of a
rank, but what carries from one chunk to the next (open requests, channels, open user
regions). This package's modules, one job each: first_pass (what the file needs before
its first event; the message ends, numbered in messages), second_pass (the file, rank by
rank), one emitter per kind of event (calls, spans, io, flows), formatting (each kind of
event a layout, Rows, filled with a chunk's columns and written by the C loop of
libperfweave-json.so, or with numpy where that library is not built; no Python object
per event) and sink (the thread that writes them to the file). This module holds the
entry point, export.
"""

import shutil
import tempfile
import time

from perfweave.errors import PerfweaveError
from perfweave.interop import load, output_file
from perfweave.interop.chrome.first_pass import first_pass
from perfweave.interop.chrome.io import io_segments
from perfweave.interop.chrome.second_pass import second_pass
from perfweave.symbols import Symbolizer


def export(exp, out=None, force=False, symbolizer=None):
    """Write experiment exp's traces as Chrome trace JSON to out (default
    EXP/export/trace.json). Returns a summary dict (path, events, records, seconds)."""
    t_start = time.perf_counter()
    X = load(exp)
    path = output_file(exp, out, "trace.json", force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ends = tempfile.mkdtemp(prefix=f".{path.name}.flows.", dir=path.parent)
    except OSError as e:
        raise PerfweaveError(f"{path}: cannot write ({e.strerror or e})") from None
    # one for every rank of the export: it keeps what it found (addr2line runs once)
    symbolizer = symbolizer or Symbolizer()
    try:
        origin, channels, found = first_pass(X, ends, path)
        segments = io_segments(X)
        if any(len(s) for s in segments.values()):
            origin = min(origin, min(int(s["t0"].min()) for s in segments.values() if len(s)))
        return second_pass(X, path, ends, origin, channels, found, symbolizer, t_start, segments)
    finally:
        shutil.rmtree(ends, ignore_errors=True)

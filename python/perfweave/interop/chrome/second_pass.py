"""The Chrome export's second pass: the file, rank by rank (its calls, flushes, user regions,
I/O segments and flow arrows), then what describes the trace."""

import json
import os
import tempfile
import time

from perfweave import progress
from perfweave.interop.chrome.calls import meta_events, mpi_calls
from perfweave.interop.chrome.flows import flows
from perfweave.interop.chrome.formatting import quoted
from perfweave.interop.chrome.io import segment_events
from perfweave.interop.chrome.sink import Sink, cannot_write, write_events
from perfweave.interop.chrome.spans import spans


def second_pass(X, path, ends, origin, channels, found, symbolizer, t_start, segments):
    """Write the file: every rank's events, then what describes the trace."""
    counts = {"events": 0, "calls": 0, "flows": 0, "records": 0}
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp.", dir=path.parent)
    except OSError as e:
        raise cannot_write(path, e) from None
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as raw:
            f = Sink(raw)
            try:
                f.write(b'{"traceEvents":[\n')
                first = True
                with progress.task("Chrome trace: writing", len(X.ranks), "rank") as bar:
                    for r in X.ranks:
                        first = rank_events(f, X, found[r], origin, symbolizer, counts, first)
                        first = segment_events(f, r, segments.get(r), origin, counts, first)
                        first = flows(f, found[r], origin, channels, counts, first)
                        bar.step()
                other = {
                    "generator": "perfweave export --format chrome",
                    "experiment": str(X.path),
                    "origin_ns": origin,
                    "clock": "ns on rank 0's CLOCK_MONOTONIC; ts = (t - origin_ns) / 1000",
                    "notes": X.notes,
                }
                f.write(
                    b'\n],"displayTimeUnit":"ns","otherData":' + json.dumps(other).encode() + b"}\n"
                )
            finally:
                f.close()
        os.replace(tmp, path)
    except OSError as e:
        raise cannot_write(path, e) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return {
        "path": str(path),
        "events": counts["events"],
        "calls": counts["calls"],
        "flows": counts["flows"],
        "records": counts["records"],
        "io_segments": counts.get("segments", 0),
        "ranks": len(X.ranks),
        "seconds": time.perf_counter() - t_start,
        "notes": X.notes,
    }


def rank_events(f, X, p, origin, symbolizer, counts, first):
    """Rank p.rank's events chunk by chunk (RankExportStream): its MPI calls as they come;
    its flushes and user regions, which follow all its calls in the file, to temporary
    files until then."""
    r = p.rank
    first = write_events(f, meta_events(r, p.threads), first)
    counts["events"] += 2 + len(p.threads)
    # the first pass's stream: its file open, its spans found; a second pass anew
    stream = p.stream
    fnames = quoted(list(stream.functions) + ["?"])
    regions = {}  # thread -> its file of the ends of its ENTERs
    try:
        later = [tempfile.TemporaryFile(dir=p.ends) for _ in range(2)]
    except OSError as e:
        raise cannot_write(p.path, e) from None
    try:
        for c in stream.chunks():
            counts["records"] += len(c.rec)
            first = mpi_calls(f, c, fnames, origin, counts, first)
            spans(later, c, p, regions, origin, symbolizer, counts)
        for t in later:
            t.seek(0)
            f.copy(t)
    finally:
        for t in later + list(regions.values()):
            t.close()
    X.notes.extend(stream.finish_notes())
    return first

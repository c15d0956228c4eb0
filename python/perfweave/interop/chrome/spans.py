"""The Chrome export's complete events of spans: trace buffer flushes (the tracer's own
time, "cat": "perfweave") and user regions ("cat": "user")."""

import numpy as np

from perfweave.interop import FLUSH_REGION, region_names
from perfweave.interop.chrome.first_pass import NEVER
from perfweave.interop.chrome.formatting import Rows, format_rows, quoted
from perfweave.interop.chrome.sink import cannot_write, write_events
from perfweave.model.trace import T


def complete(f, counts, name_table, names, cat, pid, tid, t0, t1, args=None):
    """Complete events ("ph": "X") of one category; args: {"bytes": ...} values."""
    R = Rows(len(t0))
    R.lit(',{"name":')
    R.name(name_table, names)
    R.lit(f',"cat":"{cat}","ph":"X","pid":{int(pid)},"tid":')
    R.int(tid)
    R.lit(',"ts":')
    R.us(t0)
    R.lit(',"dur":')
    R.us(np.maximum(t1 - t0, 0))
    if args is not None:
        R.lit(',"args":{"bytes":')
        R.int(args)
        R.lit("}")
    R.lit("}")
    counts["events"] += len(t0)
    write_events(f, format_rows([R]), False)


def spans(later, c, p, regions, origin, symbolizer, counts):
    """Trace buffer flushes (the tracer's own time) to later[0] and user regions to
    later[1], of one chunk; a region's end is in its thread's file of the first pass."""
    rec, typ, thr = c.rec, c.rec["type"], c.thread
    s = np.flatnonzero(typ == T["FLUSH"])
    if len(s):
        complete(
            later[0],
            counts,
            quoted([FLUSH_REGION]),
            np.zeros(len(s), int),
            "perfweave",
            c.rank,
            thr[s],
            c.t0[s] - origin,
            c.t1[s] - origin,
            rec["bytes"][s],
        )
    enter = typ == T["ENTER"]
    ei = np.flatnonzero(enter)
    if not len(ei):
        return
    t = int(thr[0])
    if t not in regions:
        try:
            regions[t] = open(p.file(f"regions-{t}"), "rb")
        except OSError as e:
            raise cannot_write(p.path, e) from None
    end = np.fromfile(regions[t], np.int64, count=len(ei))
    end = np.where(end == NEVER, p.end_of_rank, end)
    rnames, _, _ = region_names(c, enter, symbolizer)
    table, which = np.unique(rnames.astype(str), return_inverse=True)
    complete(
        later[1],
        counts,
        quoted(table.tolist()),
        which.reshape(-1),
        "user",
        c.rank,
        thr[ei],
        c.t0[ei] - origin,
        end - origin,
    )

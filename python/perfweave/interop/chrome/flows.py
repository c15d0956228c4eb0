"""The Chrome export's flow arrows: "s" at each send's call, "f" in the call that completed
its receive, read back from the first pass's files of message ends."""

import os

import numpy as np

from perfweave.interop.chrome.formatting import Rows, format_rows
from perfweave.interop.chrome.messages import END, hash64
from perfweave.interop.chrome.sink import write_events


def flows(f, p, origin, channels, counts, first):
    """Flow events of rank p.rank: "s" at each send's call, "f" just before the end of
    the call that completed each receive, read from the first pass's files in chunks.
    Both ends compute the message's id alone from its channel and number, so ranks are
    written one at a time."""
    from perfweave.interop import CHUNK_RECORDS

    r = p.rank
    for which in ("sends", "recvs"):
        for t in p.threads:
            name = p.file(f"{which}-{t}")
            if not os.path.exists(name):
                continue
            left = os.path.getsize(name) // END.itemsize
            with open(name, "rb") as src:
                while left:
                    e = np.fromfile(src, END, count=min(left, CHUNK_RECORDS))
                    left -= len(e)
                    if not len(e):
                        break
                    first = _flow_rows(
                        f, r, which, e[channels.matched(e["chan"], e["seq"])], origin, counts, first
                    )
    return first


def _flow_rows(f, r, which, e, origin, counts, first):
    if not len(e):
        return first
    R = Rows(len(e))
    R.lit(
        ',{"name":"message","cat":"p2p","ph":"%s","id":"0x'
        % ("s" if which == "sends" else 'f","bp":"e')
    )
    R.hex(hash64(e["chan"], e["seq"]))
    R.lit(f'","pid":{int(r)},"tid":')
    R.int(e["thread"])
    R.lit(',"ts":')
    R.us(e["ts"] - origin)
    if which == "sends":
        R.lit("}")
        counts["flows"] += len(e)
    else:
        R.lit(',"args":{"bytes":')
        R.int(e["bytes"])
        R.lit("}}")
    counts["events"] += len(e)
    return write_events(f, format_rows([R], buffer=f.buffer), first)

"""Reader and writer of the compact profile, profile.pwcompact (docs/format.md "Compact
profile"; the runtime's writer: runtime/modules/mpi_compact.c, which writes the same bytes
for the same summary).

One line of JSON (padded with spaces to a multiple of 64 bytes), the arrays through the
header's codec (zlib, or none), the end marker PWEND\\n\\n\\n. top_values is stored with
its bytes shuffled (byte j of value i at j * count + i), which zlib compresses far better
than the values themselves: their high bytes are alike. Version 1 (a sketch of the time
only, its fields in the node records) is read into version 2's records, the other
metrics without a sketch.
"""

import json
import zlib


import numpy as np

from perfweave._format import FILES
from perfweave.errors import FormatError
from perfweave.model.compact import (
    CNODE,
    CPAIR,
    CSTAT,
    FRAME,
    METRICS,
    NODE_METRICS,
    RANK_COMM,
    SUB_BITS,
    TIME,
    CompactProfile,
)
from perfweave.readers.files import read_bytes

MAGIC = FILES["compact"].magic
VERSION = FILES["compact"].version
NAME = "profile.pwcompact"
END_MARKER = b"PWEND\n\n\n"
ZLIB_LEVEL = 6  # zlib's default; the runtime's compress2 uses the same
SKETCH = np.dtype([("count", "<i4")])
VALUES = np.dtype([("value", "<i8")])
# the arrays in file order: name, record dtype
ARRAYS = (
    ("nodes", CNODE),
    ("frames", FRAME),
    ("stats", CSTAT),
    ("top_values", VALUES),
    ("sketch_counts", SKETCH),
    ("pairs", CPAIR),
    ("rank_comm", VALUES),
)
SHUFFLED = ("top_values", "rank_comm")
# version 1's records: the time's sketch in the node's, statistics without one
CNODE_V1 = np.dtype([
    ("fn", "<i4"), ("object", "<i4"), ("nframes", "<i4"), ("sketch_len", "<i4"),
    ("offset", "<i8"), ("first_frame", "<i8"), ("sketch_first", "<i8"),
    ("sketch_key0", "<i4"), ("pad", "<i4"),
])  # fmt: skip
CSTAT_V1 = np.dtype([
    ("node", "<i4"), ("metric", "<i4"), ("n", "<i4"), ("argmin", "<i4"), ("argmax", "<i4"),
    ("pad", "<i4"), ("min", "<i8"), ("max", "<i8"), ("sum", "<i8"), ("mean", "<f8"),
    ("m2", "<f8"),
])  # fmt: skip
ARRAYS_OF = {
    1: tuple((n, {"nodes": CNODE_V1, "stats": CSTAT_V1}.get(n, dt)) for n, dt in ARRAYS[:5]),
    2: ARRAYS[:5],  # without the matrix's summary
    VERSION: ARRAYS,
}


def _dtype_list(dt):
    return [[name, dt[name].str.replace("=", "<").replace("|", "")] for name in dt.names]


def _shuffle(values):
    return np.ascontiguousarray(values.astype("<i8").view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(raw, count):
    b = np.frombuffer(raw, np.uint8, 8 * count).reshape(8, count)
    return np.ascontiguousarray(b.T).view("<i8").reshape(-1)


def _cjson(v):
    """v as the runtime's JSON writer writes it (runtime/core/json.c): compact, '"' and '\\'
    escaped, control characters as \\u00XX, everything else as it is (UTF-8)."""
    if isinstance(v, dict):
        return "{" + ",".join(_cjson(str(k)) + ":" + _cjson(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_cjson(x) for x in v) + "]"
    if isinstance(v, str):
        out = []
        for c in v:
            if c in '"\\':
                out.append("\\" + c)
            elif ord(c) < 0x20 or ord(c) == 0x7F:
                out.append(f"\\u{ord(c):04x}")
            else:
                out.append(c)
        return '"' + "".join(out) + '"'
    return str(int(v))


def encode(p, codec="zlib"):
    """The bytes of p's file."""
    parts = {
        "nodes": p.nodes.astype(CNODE).tobytes(),
        "frames": p.frames.astype(FRAME).tobytes(),
        "stats": p.stats.astype(CSTAT).tobytes(),
        "top_values": _shuffle(np.asarray(p.top_values).reshape(-1)),
        "sketch_counts": np.asarray(p.sketch_counts, "<i4").tobytes(),
        "pairs": np.asarray(p.pairs if p.pairs is not None else [], CPAIR).tobytes(),
        "rank_comm": _shuffle(
            np.asarray(p.rank_comm).reshape(-1)
            if p.rank_comm is not None
            else np.zeros(len(RANK_COMM) * int(p.world_size), np.int64)
        ),
    }
    arrays, off = {}, 0
    for name, dt in ARRAYS:
        count = len(parts[name]) // dt.itemsize
        arrays[name] = {"offset": off, "count": count, "itemsize": dt.itemsize}
        arrays[name]["dtype"] = _dtype_list(dt)
        off += len(parts[name])
    data = b"".join(parts[name] for name, _ in ARRAYS)
    stored = zlib.compress(data, ZLIB_LEVEL) if codec == "zlib" else data
    header = {
        "format": MAGIC,
        "version": VERSION,
        "world_size": int(p.world_size),
        "codec": codec,
        "sub_bits": SUB_BITS,
        "metrics": list(METRICS),
        "top_nodes": [int(i) for i in p.top_nodes],
        "functions": list(p.functions),
        "objects": list(p.objects),
        "buildids": list(p.buildids),
        "arrays": arrays,
        "data_bytes": len(data),
        "stored_bytes": len(stored),
    }
    line = _cjson(header).encode()
    line += b" " * (-(len(line) + 1) % 64) + b"\n"
    return line + stored + END_MARKER


def _corrupt(path, what):
    return FormatError(f"{path}: corrupt compact profile ({what})")


def decode(raw, path):
    """The CompactProfile of a file's bytes; FormatError (one line) when they are not one."""
    nl = raw.find(b"\n")
    if nl < 0 or not raw.startswith(b"{"):
        raise FormatError(f"{path}: not a perfweave compact profile")
    try:
        header = json.loads(raw[:nl])
    except (ValueError, UnicodeDecodeError):
        raise FormatError(f"{path}: not a perfweave compact profile") from None
    if not isinstance(header, dict) or header.get("format") != MAGIC:
        raise FormatError(f"{path}: not a perfweave compact profile")
    version = header.get("version")
    if version not in ARRAYS_OF:
        raise FormatError(
            f"{path}: compact profile version {version} is not supported "
            f"(this perfweave reads {', '.join(map(str, sorted(ARRAYS_OF)))})"
        )
    if header.get("sub_bits") != SUB_BITS:
        raise _corrupt(
            path, f"sketch sub_bits {header.get('sub_bits')!r}, this perfweave's: {SUB_BITS}"
        )
    try:
        stored_bytes, data_bytes = int(header["stored_bytes"]), int(header["data_bytes"])
        start = nl + 1
        if len(raw) < start + stored_bytes + len(END_MARKER):
            raise FormatError(
                f"{path}: truncated ({len(raw)} bytes, header announces "
                f"{start + stored_bytes + len(END_MARKER)})"
            )
        if raw[start + stored_bytes : start + stored_bytes + len(END_MARKER)] != END_MARKER:
            raise _corrupt(path, "no end marker after the data")
        stored = raw[start : start + stored_bytes]
        if header["codec"] == "zlib":
            data = zlib.decompress(stored)
        elif header["codec"] == "none":
            data = stored
        else:
            raise _corrupt(path, f"unknown codec {header['codec']!r}")
        if len(data) != data_bytes:
            raise _corrupt(path, "data_bytes")
        arrays = {}
        for name, dt in ARRAYS_OF[version]:
            desc = header["arrays"][name]
            count, off = int(desc["count"]), int(desc["offset"])
            if desc["itemsize"] != dt.itemsize or [list(f) for f in desc["dtype"]] != _dtype_list(
                dt
            ):
                raise _corrupt(path, f"array {name}: not this version's records")
            if count < 0 or off < 0 or off + count * dt.itemsize > data_bytes:
                raise _corrupt(path, f"array {name} runs past the data")
            if name in SHUFFLED:
                arrays[name] = _unshuffle(data[off : off + 8 * count], count)
            else:
                arrays[name] = np.frombuffer(data, dt, count, off).copy()
        world = int(header["world_size"])
        top = np.asarray(header["top_nodes"], np.int64)
        lists = [header[k] for k in ("functions", "objects", "buildids")]
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, zlib.error) as e:
        raise _corrupt(path, e) from None
    if version == 1:
        arrays["nodes"], arrays["stats"] = _from_v1(arrays["nodes"], arrays["stats"], path)
    p = CompactProfile(
        world_size=world,
        functions=lists[0],
        objects=lists[1],
        buildids=lists[2],
        nodes=arrays["nodes"],
        frames=arrays["frames"],
        stats=arrays["stats"],
        sketch_counts=arrays["sketch_counts"]["count"],
        top_nodes=top,
        top_values=arrays["top_values"],
        header=header,
        pairs=arrays.get("pairs"),
        rank_comm=arrays.get("rank_comm"),
    )
    _check(p, path)
    if len(top):
        p.top_values = p.top_values.reshape(len(top), world)
    if p.rank_comm is not None:
        p.rank_comm = p.rank_comm.reshape(len(RANK_COMM), world)
    return p


def _from_v1(nodes, stats, path):
    """Version 1's node and statistics records as version 2's: the time's sketch moved
    from the node to its time row, the other rows without a sketch."""
    out_n = np.zeros(len(nodes), CNODE)
    for k in ("fn", "object", "nframes", "offset", "first_frame"):
        out_n[k] = nodes[k]
    out_s = np.zeros(len(stats), CSTAT)
    for k in CSTAT_V1.names:
        if k != "pad":
            out_s[k] = stats[k]
    timed = np.flatnonzero((stats["node"] >= 0) & (stats["metric"] == TIME))
    owner = stats["node"][timed]
    if len(owner) and owner.max() >= len(nodes):
        raise _corrupt(path, "statistics records")
    for k in ("sketch_first", "sketch_len", "sketch_key0"):
        out_s[k][timed] = nodes[k][owner]
    return out_n, out_s


def _check(p, path):
    """Cross-references, so that later stages can index with them."""
    nn = len(p.nodes)
    if p.world_size < 1 or len(p.top_values) != len(p.top_nodes) * p.world_size:
        raise _corrupt(path, "world_size or top_values")
    if len(p.top_nodes) and (p.top_nodes.min() < 0 or p.top_nodes.max() >= nn):
        raise _corrupt(path, "top_nodes")
    if p.rank_comm is not None and len(p.rank_comm) != len(RANK_COMM) * p.world_size:
        raise _corrupt(path, "rank_comm")
    if (
        p.pairs is not None
        and len(p.pairs)
        and (
            p.pairs["sender"].min() < 0
            or p.pairs["receiver"].min() < 0
            or max(p.pairs["sender"].max(), p.pairs["receiver"].max()) >= p.world_size
        )
    ):
        raise _corrupt(path, "pairs")
    if not all(isinstance(x, str) for x in p.functions + p.objects + p.buildids):
        raise _corrupt(path, "functions, objects or buildids")
    if len(p.objects) != len(p.buildids):
        raise _corrupt(path, "objects and buildids differ in length")
    n = p.nodes
    if nn and (
        n["fn"].min() < 0
        or n["fn"].max() >= len(p.functions)
        or n["object"].min() < -1
        or n["object"].max() >= len(p.objects)
        or (
            (n["nframes"] > 0)
            & ((n["first_frame"] < 0) | (n["first_frame"] + n["nframes"] > len(p.frames)))
        ).any()
    ):
        raise _corrupt(path, "node records")
    s = p.stats
    if len(s) and (
        s["node"].min() < -1
        or s["node"].max() >= nn
        or s["metric"].min() < 0
        or s["metric"].max() >= len(METRICS)
        or s["argmin"].min() < 0
        or s["argmax"].max() >= p.world_size
        or (s["n"] < 1).any()
        or (s["sketch_len"] < 0).any()
        or (s["sketch_first"] < 0).any()
        or (s["sketch_first"] + s["sketch_len"] > len(p.sketch_counts)).any()
    ):
        raise _corrupt(path, "statistics records")
    # node-major, every node metric: CompactProfile.sketch indexes the rows so
    nm = len(NODE_METRICS)
    if len(s) < nn * nm or not (
        np.array_equal(s["node"][: nn * nm], np.repeat(np.arange(nn), nm))
        and np.array_equal(s["metric"][: nn * nm], np.tile(np.arange(nm), nn))
    ):
        raise _corrupt(path, "statistics records out of order")


def read_compact(path):
    """The compact profile file path."""
    try:
        raw = read_bytes(path)
    except FileNotFoundError:
        raise FormatError(f"{path}: cannot read: no such file") from None
    return decode(raw, path)


def of_profile(pf, codec="zlib"):
    """The compact profile the runtime writes beside pf (a ProfileFile of profile.pwprof,
    readers/profile.py), made here from pf's per-rank rows with the runtime's operations in
    its order: its file's bytes (tests compare the two)."""
    from perfweave.model import compact as cp

    h, sites, frames = pf.header, pf.arrays["sites"], pf.arrays["frames"]
    framed = sites[sites["nframes"] > 0]
    rows = [np.arange(f, f + n) for f, n in zip(framed["first_frame"], framed["nframes"])]
    named = np.concatenate([sites["object"]] + [frames["object"][r] for r in rows])
    used = set(int(o) for o in named if o >= 0)
    objs = sorted(used, key=lambda o: (h["objects"][o].encode(), h["buildids"][o].encode()))
    omap = {o: i for i, o in enumerate(objs)}

    def ident(s):
        f = frames[s["first_frame"] : s["first_frame"] + s["nframes"]] if s["nframes"] > 0 else []
        path = (
            tuple((omap.get(int(o), -1), int(x)) for o, x in zip(f["object"], f["offset"]))
            if len(f)
            else ()
        )
        return (int(s["fn"]), omap.get(int(s["object"]), -1), int(s["offset"]), path)

    keys = [ident(s) for s in sites]
    universe = sorted(set(keys))
    node_id = {k: i for i, k in enumerate(universe)}
    table = np.zeros(len(universe), CNODE)
    all_frames, first = [], 0
    for i, (fn, o, off, path) in enumerate(universe):
        table[i]["fn"], table[i]["object"], table[i]["offset"] = fn, o, off
        table[i]["nframes"], table[i]["first_frame"] = len(path), first if path else -1
        all_frames.extend(path)
        first += len(path)
    fr = np.zeros(len(all_frames), FRAME)
    if all_frames:
        fr["object"], fr["offset"] = zip(*all_frames)
    world = int(h["world_size"])
    nm = len(cp.NODE_METRICS)
    vals = np.zeros((world, len(universe), nm), np.int64)
    have = np.zeros((world, len(universe)), bool)
    ids = np.array([node_id[k] for k in keys], np.int64)
    cols = ("count", "total_ns", "bytes_sent", "bytes_recv")
    for m, col in enumerate(cols):
        np.add.at(vals[:, :, m], (sites["rank"], ids), sites[col])
    have[sites["rank"], ids] = True
    ranks = {int(r["rank"]): r for r in pf.arrays["ranks"]}

    def leaf(r):
        sel = np.flatnonzero(have[r])
        rv = {k: int(ranks[r][k]) if r in ranks else 0 for k in cp.RANK_METRICS}
        return cp.Summary.leaf(r, sel, vals[r, sel], rv)

    summary = cp.tree_reduce(leaf, world)
    prof = cp.profile_from_summary(
        summary, table, fr, h["functions"], [h["objects"][o] for o in objs],
        [h["buildids"][o] for o in objs], world, lambda sel: vals[:, sel, cp.TIME].T,
    )  # fmt: skip
    comms = pf.arrays.get("comms")
    if comms is None:
        comms = np.zeros(0, cp.RECORDS["comm"])
    prof.pairs, prof.rank_comm = cp.matrix_summary(comms, world)
    return encode(prof, codec)

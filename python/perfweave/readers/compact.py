"""Reader and writer of the compact profile, profile.pwcompact (docs/format.md "Compact
profile"; the runtime's writer: runtime/modules/mpi_compact.c, which writes the same bytes
for the same summary).

One line of JSON (padded with spaces to a multiple of 64 bytes), the arrays through the
header's codec (zlib, or none), the end marker PWEND\\n\\n\\n. top_values is stored with
its bytes shuffled (byte j of value i at j * count + i), which zlib compresses far better
than the values themselves: their high bytes are alike.
"""

import json
import zlib

import numpy as np

from perfweave._format import FILES, RECORDS
from perfweave.errors import FormatError
from perfweave.model.compact import CNODE, CSTAT, FRAME, METRICS, SUB_BITS, CompactProfile
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
)
assert RECORDS["frame"] == FRAME


def _dtype_list(dt):
    return [[name, dt[name].str.replace("=", "<").replace("|", "")] for name in dt.names]


def _shuffle(values):
    return np.ascontiguousarray(values.astype("<i8").view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(raw, count):
    b = np.frombuffer(raw, np.uint8, 8 * count).reshape(8, count)
    return np.ascontiguousarray(b.T).view("<i8").reshape(-1)


def encode(p, codec="zlib"):
    """The bytes of p's file."""
    parts = {
        "nodes": p.nodes.astype(CNODE).tobytes(),
        "frames": p.frames.astype(FRAME).tobytes(),
        "stats": p.stats.astype(CSTAT).tobytes(),
        "top_values": _shuffle(np.asarray(p.top_values).reshape(-1)),
        "sketch_counts": np.asarray(p.sketch_counts, "<i4").tobytes(),
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
    line = json.dumps(header, separators=(",", ":")).encode()
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
    if header.get("version") != VERSION:
        raise FormatError(
            f"{path}: compact profile version {header.get('version')} is not supported "
            f"(this perfweave reads {VERSION})"
        )
    if header.get("sub_bits") != SUB_BITS:
        raise _corrupt(path, f"sketch sub_bits {header.get('sub_bits')!r}, this perfweave's: {SUB_BITS}")
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
        for name, dt in ARRAYS:
            desc = header["arrays"][name]
            count, off = int(desc["count"]), int(desc["offset"])
            if desc["itemsize"] != dt.itemsize or [list(f) for f in desc["dtype"]] != _dtype_list(dt):
                raise _corrupt(path, f"array {name}: not this version's records")
            if count < 0 or off < 0 or off + count * dt.itemsize > data_bytes:
                raise _corrupt(path, f"array {name} runs past the data")
            if name == "top_values":
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
    )
    _check(p, path)
    if len(top):
        p.top_values = p.top_values.reshape(len(top), world)
    return p


def _check(p, path):
    """Cross-references, so that later stages can index with them."""
    nn = len(p.nodes)
    if p.world_size < 1 or len(p.top_values) != len(p.top_nodes) * p.world_size:
        raise _corrupt(path, "world_size or top_values")
    if len(p.top_nodes) and (p.top_nodes.min() < 0 or p.top_nodes.max() >= nn):
        raise _corrupt(path, "top_nodes")
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
        or n["sketch_len"].min() < 1
        or (n["sketch_first"] < 0).any()
        or (n["sketch_first"] + n["sketch_len"] > len(p.sketch_counts)).any()
        or ((n["nframes"] > 0) & ((n["first_frame"] < 0) | (n["first_frame"] + n["nframes"] > len(p.frames)))).any()
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
    ):
        raise _corrupt(path, "statistics records")


def read_compact(path):
    """The compact profile file path."""
    try:
        raw = read_bytes(path)
    except FileNotFoundError:
        raise FormatError(f"{path}: cannot read: no such file") from None
    return decode(raw, path)

"""Reader of profile files (`*.pwprof`, docs/format.md).

A profile file is one line of JSON (the header, padded with spaces to a multiple
of 64 bytes), the arrays it describes, and the end marker `PWEND\\n\\n\\n`.
"""

import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.errors import FormatError

from perfweave._format import HIST_BUCKETS
from perfweave.readers.files import read_bytes

# MAGIC: the format's name, for the readers of files that embed profile data
from perfweave.readers.profile_header import MAGIC, parse_header  # noqa: F401

END_MARKER = b"PWEND\n\n\n"


@dataclass
class ProfileFile:
    path: str
    header: dict
    arrays: dict  # name -> numpy structured array
    notes: list = field(default_factory=list)  # what the reader could not tell from it


# the numpy codes of format.h's fields: little-endian integers and floats (no strings,
# objects or byte orders numpy would warn about or the readers would misread)
_FIELD_TYPE = re.compile(r"[<|]?[iuf][1248]")


def with_zero_fields(a, dtype):
    """a's records with the fields of dtype it lacks (fields of a later version, such as
    the ranks' region_* of version 5) added after its own, zero."""
    missing = [(n, dtype[n]) for n in dtype.names if n not in (a.dtype.names or ())]
    if not missing:
        return a
    out = np.zeros(len(a), np.dtype(a.dtype.descr + missing))
    for name in a.dtype.names or ():
        out[name] = a[name]
    return out


def _upgrade_arrays(header, arrays):
    """Ranks without the MPI_Pcontrol region's fields (before version 5) get them, zero
    (no region); sites' and frames' loaded object, "module" before version 3, as
    "object"."""
    from perfweave.dtypes import RANK_DTYPE

    ranks = arrays.get("ranks")
    if header["version"] < 5 and ranks is not None and ranks.dtype.names:
        arrays["ranks"] = with_zero_fields(ranks, RANK_DTYPE)
    if header["version"] >= 3:
        return
    for name in ("sites", "frames"):
        a = arrays.get(name)
        if a is not None and "module" in a.dtype.names and "object" not in a.dtype.names:
            a.dtype.names = ["object" if n == "module" else n for n in a.dtype.names]


def read_profile(path, raw=None):
    """The profile file path. raw: its content, where it is not on disk (the profile of
    an experiment imported by an older perfweave, computed for a read only when the
    experiment cannot be written: interop/profile.py open_upgraded)."""
    if raw is None:
        try:
            raw = read_bytes(path)
        except FileNotFoundError:
            raise FormatError(f"{path}: cannot read: no such file") from None
    nl = raw.find(b"\n")
    if nl < 0:
        raise FormatError(f"{path}: not a perfweave profile file")
    header = parse_header(raw[:nl], path)
    start = nl + 1
    data_bytes = header.get("data_bytes")
    if not isinstance(data_bytes, int) or data_bytes < 0:
        raise FormatError(f"{path}: corrupt header (data_bytes)")
    if len(raw) < start + data_bytes + len(END_MARKER):
        raise FormatError(
            f"{path}: truncated ({len(raw)} bytes, header announces "
            f"{start + data_bytes + len(END_MARKER)})"
        )
    if raw[start + data_bytes : start + data_bytes + len(END_MARKER)] != END_MARKER:
        raise FormatError(f"{path}: corrupt (no end marker after the arrays)")
    arrays = {}
    try:
        for name, desc in header["arrays"].items():
            if not all(
                isinstance(desc.get(k), int) and desc[k] >= 0
                for k in ("offset", "count", "itemsize")
            ):
                raise FormatError(f"{path}: array {name}: bad offset, count or itemsize")
            fields = desc["dtype"]
            if not isinstance(fields, list) or not all(
                isinstance(f, list)
                and len(f) == 2
                and isinstance(f[0], str)
                and isinstance(f[1], str)
                and _FIELD_TYPE.fullmatch(f[1])
                for f in fields
            ):
                raise FormatError(
                    f"{path}: array {name}: bad dtype (fields of "
                    "[name, little-endian integer or float code])"
                )
            dtype = np.dtype([tuple(field) for field in fields])
            if dtype.itemsize != desc["itemsize"]:
                raise FormatError(f"{path}: array {name}: itemsize mismatch")
            off = start + desc["offset"]
            if desc["offset"] + desc["count"] * dtype.itemsize > data_bytes:
                raise FormatError(f"{path}: array {name} runs past the data")
            arrays[name] = np.frombuffer(raw, dtype, desc["count"], off).copy()
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise FormatError(f"{path}: corrupt header ({e})") from None
    _upgrade_arrays(header, arrays)
    check_arrays(path, header, arrays)
    return ProfileFile(path=str(path), header=header, arrays=arrays)


def check_arrays(path, header, arrays):
    """Structure and cross-references of a profile's header and arrays (a file's, or
    those readers/tables.py builds), so that later stages can trust them."""
    from perfweave import dtypes

    def bad(what):
        raise FormatError(f"{path}: corrupt ({what})")

    lists = {k: header.get(k) for k in ("functions", "families", "objects", "buildids", "hosts")}
    for k, v in lists.items():
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            bad(f"header {k} is not a list of strings")
    if len(lists["functions"]) != len(lists["families"]):
        bad("functions and families differ in length")
    if len(lists["objects"]) != len(lists["buildids"]):
        bad("objects and buildids differ in length")
    _check_modules(header.get("modules"), len(lists["functions"]), bad)
    for name, ref in (
        ("ranks", dtypes.RANK_DTYPE),
        ("sites", dtypes.SITE_DTYPE),
        ("frames", dtypes.FRAME_DTYPE),
        ("hist", dtypes.HIST_DTYPE),
    ):
        if name not in arrays:
            bad(f"no {name} array")
        missing = set(ref.names) - set(arrays[name].dtype.names or ())
        if missing:
            bad(f"{name} lacks {', '.join(sorted(missing))}")
        _same_types(arrays[name], ref, name, bad)
    nfn, nobj, nhost = len(lists["functions"]), len(lists["objects"]), len(lists["hosts"])
    sites, frames, hist, ranks = (arrays[k] for k in ("sites", "frames", "hist", "ranks"))

    def in_range(values, lo, hi, what):
        if len(values) and (values.min() < lo or values.max() >= hi):
            bad(f"{what} out of range")

    in_range(sites["fn"], 0, nfn, "sites.fn")
    in_range(hist["fn"], 0, nfn, "hist.fn")
    in_range(hist["bucket"], 0, int(header.get("hist_buckets", HIST_BUCKETS)), "hist.bucket")
    in_range(sites["object"], -1, nobj, "sites.object")
    in_range(frames["object"], -1, nobj, "frames.object")
    in_range(ranks["host"], 0, max(nhost, 1), "ranks.host")
    # ranks index per-rank tables: -1 (no MPI) or below world_size
    nrank = max(header.get("world_size", 0), 1)
    for what, a in (("ranks", ranks), ("sites", sites), ("hist", hist)):
        in_range(a["rank"], -1, nrank, f"{what}.rank")
    deep = sites[sites["nframes"] > 0]
    if len(deep) and (
        (deep["first_frame"] < 0).any()
        or (deep["first_frame"] + deep["nframes"] > len(frames)).any()
    ):
        bad("sites.first_frame out of range")
    counts = arrays.get("counts")
    if counts is not None:  # --counters (files of older runs have none)
        missing = {"site", "event", "inside", "before"} - set(counts.dtype.names or ())
        if missing:
            bad(f"counts lacks {', '.join(sorted(missing))}")
        _same_types(counts, dtypes.COUNT_DTYPE, "counts", bad)
        ctrs = header.get("counters", [])
        if not isinstance(ctrs, list) or not all(isinstance(x, str) for x in ctrs):
            bad("header counters is not a list of strings")
        in_range(counts["site"], 0, len(sites), "counts.site")
        in_range(counts["event"], 0, len(ctrs), "counts.event")
    if (sites["nframes"] < 0).any() or (sites["count"] < 0).any():
        bad("negative counts")


def _check_modules(modules, nfunctions, bad):
    """The header's modules: each a name, its functions' ids first..first+count-1, and
    strings; together they own every function, once, in order."""
    if not isinstance(modules, list):
        bad("header modules is not a list")
    at = 0
    for m in modules:
        if not (
            isinstance(m, dict)
            and isinstance(m.get("name"), str)
            and all(isinstance(m.get(k), int) and m[k] >= 0 for k in ("first", "count"))
            and all(isinstance(v, (str, int)) for v in m.values())
        ):
            bad("header modules: an entry without name, first and count")
        if m["first"] != at:
            bad(f"header modules: {m['name']}'s functions do not follow the previous module's")
        at += m["count"]
    if at != nfunctions:
        bad("header modules do not own every function")


def _same_types(array, ref, name, bad):
    """The fields of this version's layout have its types (the file names its own)."""
    for f in ref.names:
        if f in array.dtype.names and array.dtype[f] != ref[f]:
            bad(f"{name}.{f} has type {array.dtype[f].str}, not {ref[f].str}")

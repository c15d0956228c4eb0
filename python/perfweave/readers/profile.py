"""Reader of profile files (`*.pwprof`, docs/format.md).

A profile file is one line of JSON (the header, padded with spaces to a multiple
of 64 bytes), the arrays it describes, and the end marker `PWEND\\n\\n\\n`.
"""
import json
from dataclasses import dataclass

import numpy as np

from perfweave.errors import FormatError

from perfweave.readers.dtypes import PROFILE_VERSION

MAGIC = "perfweave-profile"
SUPPORTED_VERSIONS = (1, PROFILE_VERSION)   # 1: counts without inside_ns/before_ns
END_MARKER = b"PWEND\n\n\n"


@dataclass
class ProfileFile:
    path: str
    header: dict
    arrays: dict  # name -> numpy structured array


def read_profile(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    nl = raw.find(b"\n")
    if nl < 0 or not raw.startswith(b"{"):
        raise FormatError(f"{path}: not a perfweave profile file")
    try:
        header = json.loads(raw[:nl])
    except ValueError:
        raise FormatError(f"{path}: corrupt header") from None
    if header.get("format") != MAGIC:
        raise FormatError(f"{path}: not a perfweave profile file")
    if header.get("version") not in SUPPORTED_VERSIONS:
        raise FormatError(f"{path}: profile format version {header.get('version')} is not "
                          f"supported (this perfweave reads {SUPPORTED_VERSIONS})")
    start = nl + 1
    data_bytes = header.get("data_bytes")
    if not isinstance(data_bytes, int) or data_bytes < 0:
        raise FormatError(f"{path}: corrupt header (data_bytes)")
    if len(raw) < start + data_bytes + len(END_MARKER):
        raise FormatError(f"{path}: truncated ({len(raw)} bytes, header announces "
                          f"{start + data_bytes + len(END_MARKER)})")
    if raw[start + data_bytes:start + data_bytes + len(END_MARKER)] != END_MARKER:
        raise FormatError(f"{path}: corrupt (no end marker after the arrays)")
    arrays = {}
    try:
        for name, desc in header["arrays"].items():
            if not all(isinstance(desc.get(k), int) and desc[k] >= 0
                       for k in ("offset", "count", "itemsize")):
                raise FormatError(f"{path}: array {name}: bad offset, count or itemsize")
            dtype = np.dtype([tuple(field) for field in desc["dtype"]])
            if dtype.itemsize != desc["itemsize"]:
                raise FormatError(f"{path}: array {name}: itemsize mismatch")
            off = start + desc["offset"]
            if desc["offset"] + desc["count"] * dtype.itemsize > data_bytes:
                raise FormatError(f"{path}: array {name} runs past the data")
            arrays[name] = np.frombuffer(raw, dtype, desc["count"], off).copy()
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise FormatError(f"{path}: corrupt header ({e})") from None
    _check(path, header, arrays)
    return ProfileFile(path=str(path), header=header, arrays=arrays)


def _check(path, header, arrays):
    """Structure and cross-references, so that later stages can trust the file."""
    from perfweave.readers import dtypes

    def bad(what):
        raise FormatError(f"{path}: corrupt ({what})")

    lists = {k: header.get(k) for k in ("functions", "families", "modules", "buildids", "hosts")}
    for k, v in lists.items():
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            bad(f"header {k} is not a list of strings")
    if len(lists["functions"]) != len(lists["families"]):
        bad("functions and families differ in length")
    if len(lists["modules"]) != len(lists["buildids"]):
        bad("modules and buildids differ in length")
    for name, ref in (("ranks", dtypes.RANK_DTYPE), ("sites", dtypes.SITE_DTYPE),
                      ("frames", dtypes.FRAME_DTYPE), ("hist", dtypes.HIST_DTYPE)):
        if name not in arrays:
            bad(f"no {name} array")
        missing = set(ref.names) - set(arrays[name].dtype.names)
        if missing:
            bad(f"{name} lacks {', '.join(sorted(missing))}")
    nfn, nmod, nhost = len(lists["functions"]), len(lists["modules"]), len(lists["hosts"])
    sites, frames, hist, ranks = (arrays[k] for k in ("sites", "frames", "hist", "ranks"))

    def in_range(values, lo, hi, what):
        if len(values) and (values.min() < lo or values.max() >= hi):
            bad(f"{what} out of range")

    in_range(sites["fn"], 0, nfn, "sites.fn")
    in_range(hist["fn"], 0, nfn, "hist.fn")
    in_range(hist["bucket"], 0, int(header.get("hist_buckets", 34)), "hist.bucket")
    in_range(sites["module"], -1, nmod, "sites.module")
    in_range(frames["module"], -1, nmod, "frames.module")
    in_range(ranks["host"], 0, max(nhost, 1), "ranks.host")
    deep = sites[sites["nframes"] > 0]
    if len(deep) and ((deep["first_frame"] < 0).any() or
                      (deep["first_frame"] + deep["nframes"] > len(frames)).any()):
        bad("sites.first_frame out of range")
    counts = arrays.get("counts")
    if counts is not None:             # --counters (files of older runs have none)
        missing = {"site", "event", "inside", "before"} - set(counts.dtype.names)
        if missing:
            bad(f"counts lacks {', '.join(sorted(missing))}")
        ctrs = header.get("counters", [])
        if not isinstance(ctrs, list) or not all(isinstance(x, str) for x in ctrs):
            bad("header counters is not a list of strings")
        in_range(counts["site"], 0, len(sites), "counts.site")
        in_range(counts["event"], 0, len(ctrs), "counts.event")
    if (sites["nframes"] < 0).any() or (sites["count"] < 0).any():
        bad("negative counts")

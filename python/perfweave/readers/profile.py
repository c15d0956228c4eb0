"""Reader of profile files (`*.pwprof`, docs/format.md).

A profile file is one line of JSON (the header, padded with spaces to a multiple
of 64 bytes), the arrays it describes, and the end marker `PWEND\\n\\n\\n`.
"""
import json
from dataclasses import dataclass

import numpy as np

from perfweave.errors import FormatError

MAGIC = "perfweave-profile"
SUPPORTED_VERSIONS = (1,)
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
    data_bytes = header.get("data_bytes", -1)
    if len(raw) < start + data_bytes + len(END_MARKER):
        raise FormatError(f"{path}: truncated ({len(raw)} bytes, header announces "
                          f"{start + data_bytes + len(END_MARKER)})")
    if raw[start + data_bytes:start + data_bytes + len(END_MARKER)] != END_MARKER:
        raise FormatError(f"{path}: corrupt (no end marker after the arrays)")
    arrays = {}
    try:
        for name, desc in header["arrays"].items():
            dtype = np.dtype([tuple(field) for field in desc["dtype"]])
            if dtype.itemsize != desc["itemsize"]:
                raise FormatError(f"{path}: array {name}: itemsize mismatch")
            off = start + desc["offset"]
            if desc["offset"] + desc["count"] * dtype.itemsize > data_bytes:
                raise FormatError(f"{path}: array {name} runs past the data")
            arrays[name] = np.frombuffer(raw, dtype, desc["count"], off).copy()
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{path}: corrupt header ({e})") from None
    return ProfileFile(path=str(path), header=header, arrays=arrays)

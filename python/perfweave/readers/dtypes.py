"""numpy dtypes of the profile records, read from include/perfweave/format.h.

The records are declared once, as X-macro lists in format.h; files carry their
own dtype in their header, so readers never need these. They exist for building
profiles from literals (tests) and for checking that a file matches this
version's layout.
"""
import re
from importlib import resources
from pathlib import Path

import numpy as np

_FIELD = re.compile(r'X\(\s*\w+\s*,\s*"([<>|]?\w+)"\s*,\s*(\w+)\s*\)')
_EVTYPE = re.compile(r'X\(\s*(\w+)\s*,\s*(\d+)\s*\)')


def _format_h():
    packaged = resources.files("perfweave").joinpath("include/format.h")
    if packaged.is_file():
        return packaged.read_text()
    source = Path(__file__).resolve().parents[3] / "include" / "perfweave" / "format.h"
    return source.read_text()


def _dtype(text, macro):
    m = re.search(r"#define %s\(X\)(.*?)(?:\n\s*\n|\n#)" % macro, text, re.S)
    if not m:
        raise RuntimeError(f"format.h has no {macro}")
    return np.dtype([(name, code) for code, name in _FIELD.findall(m.group(1))])


_TEXT = _format_h()
RANK_DTYPE = _dtype(_TEXT, "PW_RANK_FIELDS")
SITE_DTYPE = _dtype(_TEXT, "PW_SITE_FIELDS")
FRAME_DTYPE = _dtype(_TEXT, "PW_FRAME_FIELDS")
HIST_DTYPE = _dtype(_TEXT, "PW_HIST_FIELDS")
COUNT_DTYPE = _dtype(_TEXT, "PW_COUNT_FIELDS")
SAMPLE_DTYPE = _dtype(_TEXT, "PW_SAMPLE_FIELDS")
TIMELINE_VERSION = int(re.search(r"#define PW_TIMELINE_VERSION (\d+)", _TEXT).group(1))
PROFILE_VERSION = int(re.search(r"#define PW_PROFILE_VERSION (\d+)", _TEXT).group(1))

# traces: the 40-byte event record, its type codes (PW_EVENT_TYPES) and flags (PW_EVF_*)
EVENT_DTYPE = _dtype(_TEXT, "PW_EVENT_FIELDS")
TRACE_VERSION = int(re.search(r"#define PW_TRACE_VERSION (\d+)", _TEXT).group(1))
_m = re.search(r"#define PW_EVENT_TYPES\(X\)(.*?)(?:\n\s*\n|\n#)", _TEXT, re.S)
EVENT_TYPES = {name: int(v) for name, v in _EVTYPE.findall(_m.group(1))}
EVENT_FLAGS = {name: int(v) for name, v in
               re.findall(r"#define PW_EVF_(\w+) (\d+)", _TEXT)}


class TypeSet:
    """A set of event record types, tested on a whole column of types at once:
    `SET(types)` (or `SET[types]`) is a bool array, True where a record's type is in
    the set. A uint8 column is tested by comparisons, one or two per run of consecutive
    type codes (~0.1 ns a record); a table indexed by the types costs ~2.4 ns a record,
    and it is the way for other integer columns."""

    def __init__(self, *names):
        codes = sorted({EVENT_TYPES[n] for n in names})
        self.codes = codes
        self.lut = np.zeros(256, bool)
        self.lut[codes] = True
        self.runs = []                  # (first, last) of runs of consecutive codes
        for c in codes:
            if self.runs and self.runs[-1][1] == c - 1:
                self.runs[-1] = (self.runs[-1][0], c)
            else:
                self.runs.append((c, c))

    def __call__(self, types):
        types = np.asarray(types)
        if types.dtype != np.uint8:
            return self.lut[types]
        out = None
        for a, b in self.runs:
            if a == b:
                hit = types == np.uint8(a)
            else:                       # a <= t <= b as one unsigned comparison
                hit = np.subtract(types, np.uint8(a), dtype=np.uint8) <= np.uint8(b - a)
            out = hit if out is None else np.logical_or(out, hit, out=out)
        return out if out is not None else np.zeros(types.shape, bool)

    __getitem__ = __call__

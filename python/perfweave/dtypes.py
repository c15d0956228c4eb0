"""The record dtypes and codes of the experiment format, under the names the readers, the
model and the writers use (below them all: it imports nothing of perfweave but _format).

Everything here comes from perfweave._format, which the build generates from the format
headers (include/perfweave/format.h and include/perfweave/format/; runtime/core/
gen_format.c): the format is declared once, in C, and Python holds no copy. Files also
carry their own dtype in their header; these exist for checking that a file matches this
version's layout, for building experiments from literals (tests) and for the writers of
perfweave import.
"""

import numpy as np

from perfweave._format import (
    EVENT_FLAGS,
    EVENT_TYPES,
    FILES,
    HIST_BUCKETS,
    PROFILE_ARRAYS,
    RECORDS,
    SAMPLE_COUNTERS,
    SAMPLE_FRAMES,
)

RANK_DTYPE = RECORDS["rank"]
SITE_DTYPE = RECORDS["site"]
FRAME_DTYPE = RECORDS["frame"]
HIST_DTYPE = RECORDS["hist"]
COUNT_DTYPE = RECORDS["count"]
COMM_DTYPE = RECORDS["comm"]  # the communication matrix's rows (profile version 6)
PROFILE_VERSION = FILES["profile"].version
# the arrays of a profile file, in file order: name -> dtype (format.h's, then each module's
# PW_PROFILE_ARRAYS_<module>: the mpi module's "comms"); MODULE_ARRAY_DTYPES: the modules'
PROFILE_ARRAY_DTYPES = {name: RECORDS[rec] for name, (_, rec) in PROFILE_ARRAYS.items()}
MODULE_ARRAY_DTYPES = {
    name: RECORDS[rec] for name, (part, rec) in PROFILE_ARRAYS.items() if part != "core"
}

# traces: the 40-byte event record, its type codes (PW_EVENT_TYPES) and flags (PW_EVF_*)
EVENT_DTYPE = RECORDS["event"]
TRACE_VERSION = FILES["trace"].version

# the node timeline's record (one value of one series at one tick)
TIMELINE_DTYPE = RECORDS["timeline"]
TIMELINE_VERSION = FILES["timeline"].version

# the sampler's record (one sample of one thread)
SAMPLE_DTYPE = RECORDS["sample"]
SAMPLES_VERSION = FILES["samples"].version

__all__ = [
    "COUNT_DTYPE",
    "EVENT_DTYPE",
    "EVENT_FLAGS",
    "EVENT_TYPES",
    "FRAME_DTYPE",
    "HIST_BUCKETS",
    "HIST_DTYPE",
    "MODULE_ARRAY_DTYPES",
    "PROFILE_ARRAY_DTYPES",
    "PROFILE_VERSION",
    "RANK_DTYPE",
    "SAMPLE_COUNTERS",
    "SAMPLE_DTYPE",
    "SAMPLE_FRAMES",
    "SAMPLES_VERSION",
    "SITE_DTYPE",
    "TIMELINE_DTYPE",
    "TIMELINE_VERSION",
    "TRACE_VERSION",
    "SPANS",
    "SUB",
    "TypeSet",
]


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
        self.runs = []  # (first, last) of runs of consecutive codes
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
            else:  # a <= t <= b as one unsigned comparison
                hit = np.subtract(types, np.uint8(a), dtype=np.uint8) <= np.uint8(b - a)
            out = hit if out is None else np.logical_or(out, hit, out=out)
        return out if out is not None else np.zeros(types.shape, bool)

    __getitem__ = __call__


# the records with a duration (t0..t1), and the sub-events: the records after a CALL that
# belong to it (docs/format.md, event types)
SPANS = TypeSet("CALL", "FLUSH")
SUB = TypeSet("SEND", "RECV", "IRECV", "SEND_DONE", "COLL", "WIN", "RMA", "WSYNC", "COLL_DONE")

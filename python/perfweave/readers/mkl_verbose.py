"""MKL_VERBOSE's call description lines (oneMKL's verbose mode, MKL_VERBOSE=1: one line
per call of a BLAS, LAPACK or FFT function, on the program's output or in the file of
MKL_VERBOSE_OUTPUT_FILE), for `perfweave report --mkl-verbose LOG` (docs/mathlib.md
"MKL_VERBOSE"). perfweave never captures the program's output: the user gives the log.

A line, as Intel documents it ("Call Description Line"):

    MKL_VERBOSE DGEMM(N,N,1000,1000,1000,0x7ff...,0x...,1000,0x...,1000,0x...,0x...,1000) \
43.21ms CNR:OFF Dyn:1 FastMM:1 TID:0 NThr:8

the function (without the cblas_ prefix), its arguments, the time (s, ms, us or ns), then
CNR:, Dyn:, FastMM:, TID: (the calling OpenMP thread) and NThr: (threads used). The
version line (MKL_VERBOSE oneMKL 2024.0 ...), the sparse BLAS's BEGIN lines (its END
line has the time) and any text before MKL_VERBOSE on a line (a launcher's rank tag) are
taken into account; other lines are skipped and counted."""

import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.errors import PerfweaveError
from perfweave.model.table import table

_LINE = re.compile(
    r"MKL_VERBOSE\s+(?:END\s+)?(?P<name>[A-Za-z_][\w]*)\((?P<args>[^)]*)\)\s+"
    r"(?P<time>[0-9.]+(?:[eE][-+]?\d+)?)(?P<unit>ns|us|ms|s)\b(?P<rest>.*)"
)
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_FIELD = re.compile(r"\b(TID|NThr):(\d+)")


@dataclass
class MklVerbose:
    """The calls of an MKL_VERBOSE log: calls, one row per line: routine (lower case,
    as MKL prints it: dgemm, fft), time_s, tid, nthr (-1 where not printed), args (the
    argument list as printed); lines (read), skipped (lines with MKL_VERBOSE that are no
    call: the version line, BEGIN lines, a format not known)."""

    path: str
    calls: np.ndarray
    lines: int = 0
    skipped: int = 0
    notes: list = field(default_factory=list)

    def summary(self):
        """Per routine: calls, time, share of the log's time, the most threads used;
        the MathLibResult's `mkl_verbose`."""
        c = self.calls
        total = float(c["time_s"].sum())
        rows = []
        for r in sorted(set(c["routine"])):
            mine = c[c["routine"] == r]
            t = float(mine["time_s"].sum())
            rows.append(
                {
                    "routine": r,
                    "calls": len(mine),
                    "time_s": t,
                    "pct": 100 * t / total if total else 0.0,
                    "threads": int(mine["nthr"].max()),
                }
            )
        rows.sort(key=lambda x: (-x["time_s"], x["routine"]))
        return {
            "path": self.path,
            "lines": self.lines,
            "skipped": self.skipped,
            "calls": len(c),
            "time_s": total,
            "routines": rows,
        }


def parse(lines, path="-"):
    """The MklVerbose of an iterable of lines."""
    rows = {"routine": [], "time_s": [], "tid": [], "nthr": [], "args": []}
    n = skipped = 0
    for line in lines:
        n += 1
        if "MKL_VERBOSE" not in line:
            continue
        m = _LINE.search(line)
        if not m:
            skipped += 1
            continue
        f = dict(_FIELD.findall(m["rest"]))
        rows["routine"].append(m["name"].lower())
        rows["time_s"].append(float(m["time"]) * _UNIT[m["unit"]])
        rows["tid"].append(int(f.get("TID", -1)))
        rows["nthr"].append(int(f.get("NThr", -1)))
        rows["args"].append(m["args"])
    calls = table(
        {
            "routine": np.array(rows["routine"], object),
            "time_s": np.array(rows["time_s"], np.float64),
            "tid": np.array(rows["tid"], np.int64),
            "nthr": np.array(rows["nthr"], np.int64),
            "args": np.array(rows["args"], object),
        },
        len(rows["routine"]),
    )
    return MklVerbose(path, calls, n, skipped)


def read(path):
    """The MklVerbose of the log file path; PerfweaveError (one line) when it cannot be
    read or holds no MKL_VERBOSE call."""
    try:
        with open(path, errors="replace") as f:
            out = parse(f, str(path))
    except OSError as e:
        raise PerfweaveError(f"--mkl-verbose {path}: {e.strerror}") from None
    if not len(out.calls):
        raise PerfweaveError(
            f"--mkl-verbose {path}: no MKL_VERBOSE call line in {out.lines} lines (run the "
            "program with MKL_VERBOSE=1 and give its output)"
        )
    return out

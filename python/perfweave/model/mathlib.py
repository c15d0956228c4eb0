"""The mathlib module's data (runtime/modules/mathlib.c, `perfweave run --mathlib`): the
program's BLAS, CBLAS, LAPACK, LAPACKE and FFTW calls per process, by routine, size class
and call site, the library that answered each routine, the calls made inside another
math-library call (internal), and the FFTW plans. readers/mathlib.py builds it from the
files (docs/format.md "Math-library calls"), `from_literal` from plain values (tests);
analysis/mathlib.py reads it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave.model.table import table

# the columns of MathLib.calls, .plans and .internal (model/table.py tables)
CALL_COLUMNS = (
    "process routine group library object offset b0 b1 b2 chars count total_ns min_ns "
    "max_ns flops bytes dim0_sum dim1_sum dim2_sum"
).split()
PLAN_COLUMNS = (
    "process gen routine object offset kind rank n0 n1 n2 howmany procs size sign flags "
    "inplace "
    "live plan_ns executes exec_ns flops"
).split()
INTERNAL_COLUMNS = ["process", "routine", "group", "library", "calls"]


@dataclass(frozen=True)
class MathLibProcess:
    """One measured process (mathlib/rank-R.* or mathlib/HOST.PID.*)."""

    rank: int  # -1: a process without an MPI rank
    pid: int
    host: str
    state: str
    t_start: int  # ns, CLOCK_MONOTONIC: the process's measured life
    t_end: int
    threads: int  # threads that made math-library calls
    dropped: int = 0  # calls folded into overflow sites (--mathlib-max-sites)
    plans_dropped: int = 0  # plans beyond the plan table
    unknown_plan_executes: int = 0  # executes of plans no wrapped planner made


@dataclass
class MathLib:
    """Every process's records, one table each with a `process` column (index of
    processes):

    calls: one row per (process, routine, size class, call site): routine, group (the
      interface: blas1 ... fftw, cublas, cufft), library (the object that answered), object
      and offset (the call site; object "" and offset 0 for the overflow site), b0 b1 b2 (log2
      bucket of each dim: floor(log2 d) + 1, 0 none), chars (transpose, uplo, ...
      letters), count, total_ns, min_ns, max_ns, flops, bytes, dim0_sum ... (sums of
      each dim over the calls).
    plans: one row per FFTW plan created: gen (creation order), routine (the planner),
      object, offset (where), kind (c2c r2c c2r), rank, n0 n1 n2, howmany, procs (an MPI
      plan's communicator size, 1 otherwise), size (product of the (global) dims),
      sign, flags, inplace, live (not destroyed), plan_ns, executes, exec_ns, flops (an
      MPI plan's: this process's share, the global transform's / procs).
    internal: one row per (process, routine) with calls inside another math-library
      call: routine, group, library, calls."""

    processes: list = field(default_factory=list)
    calls: np.ndarray = None
    plans: np.ndarray = None
    internal: np.ndarray = None
    not_wrapped: list = field(default_factory=list)  # [(routine, why)]
    notes: list = field(default_factory=list)

    def __post_init__(self):
        for name, cols in (
            ("calls", CALL_COLUMNS),
            ("plans", PLAN_COLUMNS),
            ("internal", INTERNAL_COLUMNS),
        ):
            if getattr(self, name) is None:
                setattr(self, name, empty(cols))

    def __bool__(self):
        """Whether the run recorded any of the module's data."""
        return bool(self.processes)

    @classmethod
    def from_literal(cls, processes, not_wrapped=(), notes=()):
        """A MathLib of plain values: processes, dicts of MathLibProcess's fields (host
        "h", pid 0, state "complete", t_start 0, threads 1 unless given) with "calls",
        "plans" (lists of dicts of the tables' columns but process; a call may give
        "dims" (d0, d1, d2) for every call instead of b0... and dim_sums, and "site"
        for module) and "internal" ({routine: calls})."""
        procs, calls, plans, internal = [], [], [], []
        for i, p in enumerate(processes):
            p = dict(p)
            rows = p.pop("calls", [])
            prows = p.pop("plans", [])
            inner = p.pop("internal", {})
            base = {"host": "h", "pid": 0, "state": "complete", "t_start": 0, "threads": 1}
            procs.append(MathLibProcess(**{**base, **p}))
            for c in rows:
                c = dict(c)
                dims = list(c.pop("dims", ())) + [0] * 3
                n = c.get("count", 1)
                row = {"process": i, "group": "", "library": "", "object": "", "offset": 0}
                row.update({f"b{k}": bucket(dims[k]) for k in range(3)})
                row.update({f"dim{k}_sum": dims[k] * n for k in range(3)})
                row.update({"chars": "", "count": 1, "total_ns": 0, "flops": 0.0, "bytes": 0.0})
                if "site" in c:
                    c["object"] = c.pop("site")
                row.update(c)
                row.setdefault("min_ns", row["total_ns"] // max(row["count"], 1))
                row.setdefault("max_ns", row["total_ns"] // max(row["count"], 1))
                calls.append(row)
            for k, pl in enumerate(prows):
                pl = dict(pl)
                dims = list(pl.pop("dims", (0,))) + [0] * 3
                row = {"process": i, "gen": k, "object": "", "offset": 0, "kind": "c2c"}
                row.update(
                    {"rank": len([d for d in dims if d]), "howmany": 1, "procs": 1, "sign": -1}
                )
                row.update({f"n{j}": dims[j] for j in range(3)})
                row["size"] = float(np.prod([d for d in dims if d]))
                row.update({"flags": 0, "inplace": False, "live": False, "plan_ns": 0})
                row.update({"executes": 0, "exec_ns": 0, "flops": 0.0})
                row.update(pl)
                plans.append(row)
            for r, n in inner.items():
                internal.append(
                    {"process": i, "routine": r, "group": "", "library": "", "calls": n}
                )
        return cls(
            procs,
            rows_table(calls, CALL_COLUMNS),
            rows_table(plans, PLAN_COLUMNS),
            rows_table(internal, INTERNAL_COLUMNS),
            list(not_wrapped),
            list(notes),
        )


_TEXT = {"routine", "group", "library", "object", "chars", "kind"}
_FLOAT = {"flops", "bytes", "size"}


def empty(columns):
    """A table of no rows with the columns' types."""
    return np.zeros(
        0, [(c, object if c in _TEXT else np.float64 if c in _FLOAT else np.int64) for c in columns]
    )


def rows_table(rows, columns):
    if not rows:
        return empty(columns)
    cols = {}
    for c in columns:
        v = [r[c] for r in rows]
        if c in _FLOAT:
            v = np.array(v, np.float64)
        elif c not in _TEXT:
            v = np.array(v, np.int64)
        cols[c] = v
    return table(cols)


def bucket(d):
    """The size class of a dimension: floor(log2 d) + 1, 0 for d <= 0 (mathlib.h)."""
    return int(d).bit_length() if d > 0 else 0

"""The math-library profile (runtime/modules/mathlib.c): the program's BLAS, LAPACK and
FFTW time by routine, call site and size class, its flops rate and arithmetic intensity,
the FFTW plans, and advice. numpy grouping over the model's tables (model/mathlib.py).

Thresholds of the advice (docs/mathlib.md "Advice"):"""

import os
import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.model.table import records, table
from perfweave.symbols import Symbolizer

SMALL_GEMM_FLOPS = 2 * 32**3  # a gemm below this (2mnk of 32^3) is small ...
SMALL_GEMM_CALLS = 1000  # ... and this many of them from one site: batch them
SMALL_GEMM_PCT = 5.0  # ... taking this % of the math time
PLAN_REUSE = 0.5  # plans created per execute at least this: plans made per transform
PLAN_REUSE_MIN = 10  # ... with at least this many plans
# loaded objects of the reference (unoptimised) BLAS and LAPACK: Debian's alternatives
REFERENCE_LIBS = ("/blas/libblas.so", "/lapack/liblapack.so", "libblas.so.3", "liblapack.so.3")
GEMM = re.compile(r"(cblas_)?[sdcz]gemm(_|_64_)?")
OPTIMISED = ("openblas", "mkl", "blis", "atlas", "armpl", "essl", "accelerate", "flexiblas")


def _group(keys):
    """Row groups of the key columns: (unique keys as a table, inverse)."""
    if not len(keys):
        return keys, np.zeros(0, np.int64)
    names = keys.dtype.names
    codes = [np.unique(keys[n].astype(str), return_inverse=True)[1] for n in names]
    combo = np.stack(codes, 1) if codes else np.zeros((len(keys), 0))
    uniq, first, inv = np.unique(combo, axis=0, return_index=True, return_inverse=True)
    return keys[first], inv.reshape(-1)


def _sums(values, inv, n):
    return np.bincount(inv, weights=values, minlength=n) if n else np.zeros(0)


def _rate(flops, seconds):
    return np.divide(flops, seconds * 1e9, out=np.zeros(len(flops)), where=seconds > 0)


def _dims(sums, counts):
    """Mean dims as 'm x n x k' (only the dims the routine has)."""
    out = []
    for row, c in zip(sums, counts):
        ds = [str(int(round(d / c))) for d in row if d > 0] if c else []
        out.append("x".join(ds))
    return out


def is_reference(path):
    p = (path or "").lower()
    return bool(p) and not any(o in p for o in OPTIMISED) and any(r in p for r in REFERENCE_LIBS)


@dataclass
class MathLibResult:
    """The math-library profile (analyze). Times in seconds, rates in GF/s.

    routines: one row per routine, by time: routine, group, library, calls, internal
      (calls made inside another math-library call, not in calls), time_s, pct (of the
      math time), mean_s, flops, gflops (flops / time), bytes, intensity (flops / byte).
    callsites: one row per (routine, call site), by time: routine, where (file:line or
      object+offset; "(overflow)" for calls beyond --mathlib-max-sites), function (the
      caller), calls, time_s, pct (of the math time), routine_pct (of the routine's),
      gflops.
    size_classes: one row per (routine, size class), by time: routine, chars (the
      transpose/uplo letters), dims (mean dims, 'm x n x k'), b0 b1 b2 (log2 buckets),
      calls, time_s, mean_s, flops, gflops.
    plans: one row per FFTW plan, by process then creation: process, rank, gen, routine,
      kind, dims, howmany, sign, flags, inplace, live, plan_s, executes, exec_s, flops,
      gflops.
    advice: [{"rule", "text"}]."""

    processes: int
    ranks: int
    threads: int
    calls: int
    internal_calls: int
    time_s: float
    process_time_s: float  # the processes' measured lives, summed
    pct_of_process: float  # time_s / process_time_s, %
    flops: float
    gflops: float
    libraries: list  # [{"library", "routines", "time_s", "reference"}]
    routines: np.ndarray
    callsites: np.ndarray
    size_classes: np.ndarray
    plans: np.ndarray
    plans_created: int
    plan_executes: int
    dropped: int
    not_wrapped: list
    advice: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_json(self):
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("routines", "callsites", "size_classes", "plans"):
            d[k] = records(d[k])
        d["not_wrapped"] = [list(x) for x in self.not_wrapped]
        return d


def analyze(ml, symbolizer=None):
    """The MathLibResult of a MathLib model (model/mathlib.py)."""
    symbolizer = symbolizer or Symbolizer()
    c = ml.calls
    t = c["total_ns"] / 1e9
    total = float(t.sum())
    procs = ml.processes
    life = sum(max(p.t_end - p.t_start, 0) for p in procs) / 1e9

    # per routine
    keys, inv = _group(c[["routine", "group", "library"]])
    n = len(keys)
    calls = _sums(c["count"], inv, n)
    time = _sums(t, inv, n)
    flops = _sums(c["flops"], inv, n)
    nbytes = _sums(c["bytes"], inv, n)
    internal = {r: 0 for r in keys["routine"]}
    extra = {}
    for r, g, lib, k in zip(
        ml.internal["routine"], ml.internal["group"], ml.internal["library"], ml.internal["calls"]
    ):
        if r in internal:
            internal[r] += int(k)
        else:
            extra.setdefault((r, g, lib), 0)
            extra[(r, g, lib)] += int(k)
    rows = {
        "routine": list(keys["routine"]) + [k[0] for k in extra],
        "group": list(keys["group"]) + [k[1] for k in extra],
        "library": list(keys["library"]) + [k[2] for k in extra],
        "calls": np.concatenate([calls, np.zeros(len(extra))]).astype(np.int64),
        "internal": np.array(
            [internal[r] for r in keys["routine"]] + list(extra.values()), np.int64
        ),
        "time_s": np.concatenate([time, np.zeros(len(extra))]),
        "flops": np.concatenate([flops, np.zeros(len(extra))]),
        "bytes": np.concatenate([nbytes, np.zeros(len(extra))]),
    }
    tt, cc = rows["time_s"], rows["calls"]
    rows["pct"] = 100 * tt / total if total else np.zeros(len(tt))
    rows["mean_s"] = np.divide(tt, cc, out=np.zeros(len(tt)), where=cc > 0)
    rows["gflops"] = _rate(rows["flops"], tt)
    rows["intensity"] = np.divide(
        rows["flops"], rows["bytes"], out=np.zeros(len(tt)), where=rows["bytes"] > 0
    )
    order = ["routine", "group", "library", "calls", "internal", "time_s", "pct", "mean_s"]
    order += ["flops", "gflops", "bytes", "intensity"]
    routines = table({k: rows[k] for k in order})
    routines = routines[np.lexsort((routines["routine"].astype(str), -routines["time_s"]))]

    # per call site
    keys, inv = _group(c[["routine", "module", "offset"]])
    n = len(keys)
    s_time = _sums(t, inv, n)
    s_flops = _sums(c["flops"], inv, n)
    r_time = dict(zip(routines["routine"], routines["time_s"]))
    where, func = [], []
    locs = {}
    for mod in set(keys["module"]):
        if mod:
            offs = keys["offset"][keys["module"] == mod]
            locs.update({(mod, o): loc for o, loc in zip(offs, symbolizer.resolve(mod, offs))})
    for mod, off in zip(keys["module"], keys["offset"]):
        loc = locs.get((mod, off))
        if not mod and not off:
            where.append("(overflow)")
            func.append("")
        elif loc is None:
            where.append(f"{off:#x}")
            func.append("")
        else:
            where.append(
                f"{os.path.basename(loc.file)}:{loc.line}"
                if loc.file and loc.line
                else f"{os.path.basename(mod)}+{off:#x}"
            )
            func.append(loc.function)
    rt = np.array([r_time.get(r, 0) for r in keys["routine"]])
    callsites = table(
        {
            "routine": keys["routine"],
            "where": where,
            "function": func,
            "calls": _sums(c["count"], inv, n).astype(np.int64),
            "time_s": s_time,
            "pct": 100 * s_time / total if total else np.zeros(n),
            "routine_pct": np.divide(100 * s_time, rt, out=np.zeros(n), where=rt > 0),
            "gflops": _rate(s_flops, s_time),
        },
        n,
    )
    callsites = callsites[np.argsort(-callsites["time_s"], kind="stable")]

    # per size class
    keys, inv = _group(c[["routine", "chars", "b0", "b1", "b2"]])
    n = len(keys)
    z_calls = _sums(c["count"], inv, n)
    z_time = _sums(t, inv, n)
    z_flops = _sums(c["flops"], inv, n)
    dsum = np.stack([_sums(c[f"dim{k}_sum"], inv, n) for k in range(3)], 1) if n else []
    sizes = table(
        {
            "routine": keys["routine"],
            "chars": keys["chars"],
            "dims": _dims(dsum, z_calls),
            **{f"b{k}": keys[f"b{k}"].astype(np.int64) for k in range(3)},
            "calls": z_calls.astype(np.int64),
            "time_s": z_time,
            "mean_s": np.divide(z_time, z_calls, out=np.zeros(n), where=z_calls > 0),
            "flops": z_flops,
            "gflops": _rate(z_flops, z_time),
        },
        n,
    )
    sizes = sizes[np.argsort(-sizes["time_s"], kind="stable")]

    # FFTW plans
    p = ml.plans
    rank_of = np.array([pr.rank for pr in procs] + [-1], np.int64)
    plans = table(
        {
            "process": p["process"],
            "rank": rank_of[p["process"]] if len(p) else np.zeros(0, np.int64),
            "gen": p["gen"],
            "routine": p["routine"],
            "kind": p["kind"],
            "dims": [
                "x".join(str(int(d)) for d in row[: max(r, 1)] if d)
                for row, r in zip(np.stack([p["n0"], p["n1"], p["n2"]], 1), p["rank"])
            ]
            if len(p)
            else [],
            "howmany": p["howmany"],
            "sign": p["sign"],
            "flags": p["flags"],
            "inplace": p["inplace"].astype(bool),
            "live": p["live"].astype(bool),
            "plan_s": p["plan_ns"] / 1e9,
            "executes": p["executes"],
            "exec_s": p["exec_ns"] / 1e9,
            "flops": p["flops"],
            "gflops": _rate(p["flops"], p["exec_ns"] / 1e9),
        },
        len(p),
    )

    libs = {}
    for r in records(routines, ["routine", "library", "time_s"]):
        lib = libs.setdefault(r["library"], {"library": r["library"], "routines": 0, "time_s": 0.0})
        lib["routines"] += 1
        lib["time_s"] += r["time_s"]
    libraries = sorted(libs.values(), key=lambda x: -x["time_s"])
    for lib in libraries:
        lib["reference"] = is_reference(lib["library"])

    tot_flops = float(c["flops"].sum())
    res = MathLibResult(
        processes=len(procs),
        ranks=sum(pr.rank >= 0 for pr in procs),
        threads=sum(pr.threads for pr in procs),
        calls=int(c["count"].sum()),
        internal_calls=int(ml.internal["calls"].sum()),
        time_s=total,
        process_time_s=life,
        pct_of_process=100 * total / life if life else 0.0,
        flops=tot_flops,
        gflops=tot_flops / total / 1e9 if total else 0.0,
        libraries=libraries,
        routines=routines,
        callsites=callsites,
        size_classes=sizes,
        plans=plans,
        plans_created=len(p),
        plan_executes=int(p["executes"].sum()),
        dropped=sum(pr.dropped for pr in procs),
        not_wrapped=list(ml.not_wrapped),
        notes=list(ml.notes),
    )
    res.advice = advise(res)
    return res


def advise(res):
    """The advice rules over a result: [{"rule", "text"}]."""
    out = []
    total = res.time_s
    for z in records(res.size_classes):
        if (
            GEMM.fullmatch(z["routine"])
            and z["calls"] >= SMALL_GEMM_CALLS
            and z["flops"] / max(z["calls"], 1) < SMALL_GEMM_FLOPS
            and total
            and 100 * z["time_s"] / total >= SMALL_GEMM_PCT
        ):
            out.append(
                {
                    "rule": "small_gemm",
                    "text": f"{z['calls']:,} calls of {z['routine']} of size {z['dims']} take "
                    f"{100 * z['time_s'] / total:.0f} % of the math-library time at "
                    f"{z['gflops']:.2f} GF/s: batch them (a batched gemm) or use a small-matrix "
                    "kernel (libxsmm, or an inlined loop of known size)",
                }
            )
    if res.plans_created >= PLAN_REUSE_MIN and res.plan_executes:
        if res.plans_created / res.plan_executes >= PLAN_REUSE:
            out.append(
                {
                    "rule": "fftw_plan_reuse",
                    "text": f"{res.plans_created:,} FFTW plans created for "
                    f"{res.plan_executes:,} executes: create each plan once and reuse it "
                    "(fftw_execute_dft on new arrays of the same layout)",
                }
            )
    for lib in res.libraries:
        if lib["reference"] and lib["time_s"] > 0:
            out.append(
                {
                    "rule": "reference_library",
                    "text": f"{lib['library']} (the reference BLAS/LAPACK, unoptimised) "
                    f"answered {lib['routines']} routine(s) for {lib['time_s']:.3f} s: link "
                    "an optimised library (OpenBLAS, BLIS, MKL; on Debian: update-alternatives "
                    "for libblas.so.3 and liblapack.so.3)",
                }
            )
    return out

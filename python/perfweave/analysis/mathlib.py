"""The math-library profile (runtime/modules/mathlib.c): the program's BLAS, LAPACK and
FFTW time by routine, call site and size class, its flops rate and arithmetic intensity,
the FFTW plans, and advice. numpy grouping over the model's tables (model/mathlib.py).

Thresholds of the advice (docs/mathlib.md "Advice"):"""

import os
import re
from dataclasses import dataclass, field

import numpy as np

from perfweave.analysis.samples.names import served_routine
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
STATIC_PCT = 1.0  # a routine sampled at least this % of the app time, no call seen: static
# what records the data (api.py table(): the NoData message); declared, the result's tables
# are perfweave.open(path).table(kind, NAME) DataFrames
RECORDED_BY = "`perfweave run` records BLAS, LAPACK and FFTW calls by default"


def routine_key(name):
    """One spelling of a routine for matching the wrappers' names, the samples' and
    MKL_VERBOSE's: lower case without the Fortran underscore, the ILP64 suffix and the
    CBLAS prefix (dgemm_, DGEMM, cblas_dgemm, dgemm_64_ -> dgemm)."""
    n = (name or "").lower()
    for suffix in ("_64_", "_64", "_"):
        if n.endswith(suffix) and len(n) > len(suffix):
            n = n[: -len(suffix)]
            break
    return n[len("cblas_") :] if n.startswith("cblas_") else n


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
    dims_hist: the histogram of each routine's dimensions: one row per (routine, dim,
      log2 bucket) with calls, by routine's time, dim, bucket: routine, dim (0, 1, 2: the
      spec's first three tagged dims, m n k for gemm), bucket (floor(log2 d) + 1), lo, hi
      (the sizes it holds: 2^(bucket-1) to 2^bucket - 1), calls, time_s, pct (of the
      routine's calls).
    plans: one row per FFTW plan, by process then creation: process, rank, gen, routine,
      kind, dims, howmany, sign, flags, inplace, live, plan_s, executes, exec_s, flops,
      gflops.
    sampled: the math libraries in the samples' split of the app time (analysis/
      sampling.py, its `mathlib`; None without samples): {"pct", "routines": [{"routine",
      "object", "static", "pct", "math_pct", "calls" (the wrappers' user calls of that
      routine), "callers": [{"name", "function", "file", "line", "pct", "routine_pct"}]}]}.
    static: routines the samples show (at least STATIC_PCT % of the app time) but of
      which the wrappers saw no call: a library linked statically (or called without
      the PLT): [{"routine", "object", "pct", "text"}].
    mkl_verbose: the MKL_VERBOSE lines given to `perfweave report --mkl-verbose`
      (readers/mkl_verbose.py), None without: {"path", "lines", "calls", "time_s",
      "routines": [{"routine", "calls", "time_s", "pct", "threads"}]}.
    advice: [{"rule", "severity", "text", "evidence"}] (the report's Advice section shows them)."""

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
    dims_hist: np.ndarray
    plans_created: int
    plan_executes: int
    dropped: int
    not_wrapped: list
    sampled: dict = None
    static: list = field(default_factory=list)
    mkl_verbose: dict = None
    advice: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_json(self):
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("routines", "callsites", "size_classes", "plans", "dims_hist"):
            d[k] = records(d[k])
        d["not_wrapped"] = [list(x) for x in self.not_wrapped]
        return d


def analyze(ml, symbolizer=None, sampled=None, mkl_verbose=None):
    """The MathLibResult of a MathLib model (model/mathlib.py); sampled: the samples'
    view (SamplesResult.mathlib: analysis/samples/tables.py), mkl_verbose: MKL_VERBOSE's
    calls (readers/mkl_verbose.py MklVerbose), each None without."""
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
    keys, inv = _group(c[["routine", "object", "offset"]])
    n = len(keys)
    s_time = _sums(t, inv, n)
    s_flops = _sums(c["flops"], inv, n)
    r_time = dict(zip(routines["routine"], routines["time_s"]))
    where, func = [], []
    locs = {}
    for mod in set(keys["object"]):
        if mod:
            offs = keys["offset"][keys["object"] == mod]
            locs.update({(mod, o): loc for o, loc in zip(offs, symbolizer.resolve(mod, offs))})
    for mod, off in zip(keys["object"], keys["offset"]):
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
    dims_hist = _dims_hist(c, routines)

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
        dims_hist=dims_hist,
        plans_created=len(p),
        plan_executes=int(p["executes"].sum()),
        dropped=sum(pr.dropped for pr in procs),
        not_wrapped=list(ml.not_wrapped),
        notes=list(ml.notes),
    )
    if sampled:
        res.sampled, res.static = _sampled(sampled, routines)
    if mkl_verbose is not None:
        res.mkl_verbose = mkl_verbose.summary()
    res.advice = advise(res)
    return res


def _dims_hist(c, routines):
    """MathLibResult.dims_hist of the calls table c."""
    parts = []
    for k in range(3):
        b = c[f"b{k}"].astype(np.int64)
        have = b > 0
        parts.append(
            (
                c["routine"][have],
                np.full(have.sum(), k),
                b[have],
                c["count"][have],
                c["total_ns"][have] / 1e9,
            )
        )
    rt = np.concatenate([x[0] for x in parts]).astype(object)
    dim, bk, cnt, tm = (np.concatenate([x[i] for x in parts]) for i in range(1, 5))
    keys = table({"routine": rt, "dim": dim.astype(np.int64), "bucket": bk.astype(np.int64)})
    keys, inv = _group(keys)
    n = len(keys)
    calls = _sums(cnt, inv, n).astype(np.int64)
    per_routine = {}
    for r, d, x in zip(keys["routine"], keys["dim"], calls):
        per_routine[(r, d)] = per_routine.get((r, d), 0) + int(x)
    total = np.array([per_routine[(r, d)] for r, d in zip(keys["routine"], keys["dim"])])
    out = table(
        {
            "routine": keys["routine"],
            "dim": keys["dim"].astype(np.int64),
            "bucket": keys["bucket"].astype(np.int64),
            "lo": (1 << np.maximum(keys["bucket"].astype(np.int64) - 1, 0)),
            "hi": (1 << keys["bucket"].astype(np.int64)) - 1,
            "calls": calls,
            "time_s": _sums(tm, inv, n),
            "pct": np.divide(100 * calls, total, out=np.zeros(n), where=total > 0),
        },
        n,
    )
    rank = {r: i for i, r in enumerate(routines["routine"])}
    order = np.lexsort(
        (out["bucket"], out["dim"], [rank.get(r, len(rank)) for r in out["routine"]])
    )
    return out[order]


def _sampled(sampled, routines):
    """The samples' view of the math libraries with the wrappers' calls of each routine,
    and the routines the samples show but the wrappers never saw called (static).

    A routine the samples serve (a kernel counts for the routine it serves:
    samples/classification.py _math_frames) is said not seen only when the wrappers saw
    no call of it in any thread, the program's nor a library's (internal calls). Then:
    found by its name in the executable (or a library of the program's), the math
    library is linked statically; in a shared math library, only when samples show the
    program calling it without the wrappers (unwrapped_pct): a library's own threads,
    and stacks that end inside the library, show no caller either way."""
    calls, seen = {}, set()
    for r, n, k in zip(routines["routine"], routines["calls"], routines["internal"]):
        calls[routine_key(r)] = calls.get(routine_key(r), 0) + int(n)
        if n or k:
            seen.add(routine_key(r))
    out = dict(sampled)
    out["routines"] = [
        dict(r, calls=calls.get(routine_key(r["routine"]), 0)) for r in sampled.get("routines", [])
    ]
    static = []
    for r in out["routines"]:
        if routine_key(r["routine"]) in seen or served_routine(r["routine"]) != r["routine"]:
            continue  # seen; or no routine of a library's interface (its threads' own code)
        if (r["pct"] if r["static"] else r.get("unwrapped_pct", 0.0)) < STATIC_PCT:
            continue
        if not r["static"] and not len(routines):
            continue  # a shared library, the wrappers saw nothing (--no-mathlib): no claim
        where = os.path.basename(r["object"] or "?")
        how = (
            f"the library is linked statically into {where}"
            if r["static"]
            else f"{where} calls it without the wrappers (not through the PLT)"
        )
        static.append(
            {
                "routine": r["routine"],
                "object": r["object"],
                "pct": r["pct"],
                "text": f"{r['routine']} takes {r['pct']:.1f} % of the app time's samples but no "
                f"call of it was seen: {how}; its calls, sizes and flops are not counted (link "
                "the shared library, e.g. -lopenblas instead of libopenblas.a, to have them)",
            }
        )
    return out, static


def advise(res):
    """The advice rules over a result: [{"rule", "severity", "text", "evidence"}], the
    severity the share of the processes' measured time concerned, % (the report's Advice
    section ranks them with the other rules')."""
    out = []
    total = res.time_s
    life = res.process_time_s

    def of_life(seconds):
        return 100 * seconds / life if life else 0.0

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
                    "severity": of_life(z["time_s"]),
                    "evidence": {"routine": z["routine"], "dims": z["dims"], "calls": z["calls"]},
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
                    "severity": of_life(float(res.plans["plan_s"].sum()))
                    if len(res.plans)
                    else 0.0,
                    "evidence": {"plans": res.plans_created, "executes": res.plan_executes},
                    "text": f"{res.plans_created:,} FFTW plans created for "
                    f"{res.plan_executes:,} executes: create each plan once and reuse it "
                    "(fftw_execute_dft on new arrays of the same layout)",
                }
            )
    for st in res.static:
        out.append(
            {
                "rule": "static_library",
                "severity": st["pct"],
                "evidence": {"routine": st["routine"], "object": st["object"]},
                "text": st["text"],
            }
        )
    for lib in res.libraries:
        if lib["reference"] and lib["time_s"] > 0:
            out.append(
                {
                    "rule": "reference_library",
                    "severity": of_life(lib["time_s"]),
                    "evidence": {"library": lib["library"], "time_s": lib["time_s"]},
                    "text": f"{lib['library']} (the reference BLAS/LAPACK, unoptimised) "
                    f"answered {lib['routines']} routine(s) for {lib['time_s']:.3f} s: link "
                    "an optimised library (OpenBLAS, BLIS, MKL; on Debian: update-alternatives "
                    "for libblas.so.3 and liblapack.so.3)",
                }
            )
    return out

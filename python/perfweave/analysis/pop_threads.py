"""The thread-level (OpenMP) POP factors of an MPI+OpenMP run, from its samples
(docs/pop.md "MPI+OpenMP: the sampled thread factors").

The trace has the process level (each rank's time outside MPI, analysis/pop.py); what
the other threads did in that time only the samples tell: each sample has its thread,
its wall-time weight (the time since its thread's previous sample) and its activity
(analysis/samples/classification.py). A sample is useful when it computes (compute,
math library, allocation), and in a parallel region when a frame of its stack is a
region the compiler outlined (gcc's foo._omp_fn.N, clang's .omp_outlined.).

Per rank r with n_r threads sampled in the region, P_r its process-useful time (trace),
S_r the main thread's useful time outside parallel regions, u_t each thread's useful
time in parallel regions and U the useful time of all its threads, the losses against
the threads' capacity C = sum n_r P_r are
  serialisation  (n_r - 1) S_r           (the other threads idle while the master runs
                                          serial code)
  load balance   n_r (max_t u_t - mean_t u_t)
  the rest       what C - U leaves (fork/join, scheduling, the runtime's own work)
which add up to C - sum U; the multiplicative factors are the matching ratios, each of
what the losses above it leave."""

import numpy as np

from perfweave.analysis.samples import _seconds, classify
from perfweave.analysis.samples.classification import ACTIVITIES, MATHLIB
from perfweave.analysis.samples.rooting import _outlined
from perfweave.clock import global_ns
from perfweave.symbols import Symbolizer

USEFUL = ("compute", MATHLIB, "alloc")
NO_SAMPLES = "n/a: no samples"
ONE_THREAD = "n/a: one thread"
# the outlined functions are found among a sample's innermost frames: a parallel
# region's work seldom calls deeper than this
FRAMES = 16
# above this share of the serial time in samples whose stacks are cut short, a note
UNROOTED_SHARE = 0.05


def _in_intervals(iv, t):
    """Whether each time of t lies in one of the disjoint sorted [begin, end) rows iv."""
    if not len(iv):
        return np.zeros(len(t), bool)
    k = np.searchsorted(iv[:, 0], t, side="right") - 1
    return (k >= 0) & (t < iv[np.maximum(k, 0), 1])


# a frame that shows the stack reaches the program's root (a C or Fortran main program)
_ROOTS = {"main", "MAIN__", "__libc_start_main", "__libc_start_call_main"}


def _frames_of(p, sel, sym):
    """For the samples sel of process p: (in a parallel region: a frame is an outlined
    region; rooted: that, or a frame is the program's root, so a sample without an
    outlined frame is known to be outside the regions)."""
    rec = p.records
    depth = np.minimum(rec["depth"][sel].astype(np.int64), FRAMES)
    kinds = {}  # (object, offset) -> 2: outlined, 1: a root, 0: other
    wanted = {}
    for i, s in enumerate(sel.tolist()):
        for k in range(int(depth[i])):
            m = int(rec["object"][s, k])
            if m >= 0:
                wanted.setdefault(m, set()).add(int(rec["offset"][s, k]))
    for m, offs in wanted.items():
        path = p.objects[m] if m < len(p.objects) else ""
        if not path or path.startswith("["):
            continue
        offs = sorted(offs)
        for o, L in zip(offs, sym.resolve(path, offs)):
            chain = [f for f in [*(f for f, _, _ in L.inlined_into), L.function] if f]
            outlined = any(_outlined(f) for f in chain)
            root = any(f in _ROOTS or f.startswith("program ") for f in chain)
            kinds[(m, o)] = 2 if outlined else int(root)
    par, rooted = np.zeros(len(sel), bool), np.zeros(len(sel), bool)
    for i, s in enumerate(sel.tolist()):
        k = (
            max(
                (kinds.get((int(rec["object"][s, j]), int(rec["offset"][s, j])), 0))
                for j in range(int(depth[i]))
            )
            if depth[i]
            else 0
        )
        par[i], rooted[i] = k == 2, k >= 1
    return par, rooted


def rank_threads(procs, metas, region, symbolizer=None):
    """{rank: {"threads": [slot...], "par": [u_t ns...], "useful": [ns...],
    "serial_ns", "samples": [per thread...]}} of the sampled ranks in the region (metas: rank -> the
    trace's description, for its clock)."""
    sym = symbolizer or Symbolizer()
    procs = [p for p in procs if len(p.records) and p.rank >= 0]
    acts = classify(procs, sym, list(ACTIVITIES))
    useful_idx = [ACTIVITIES.index(a) for a in USEFUL]
    out = {}
    for p, act in zip(procs, acts):
        r = p.rank
        iv = region.intervals.get(r)
        if iv is None or not len(iv):
            continue
        rec = p.records
        w = (_seconds(p) * 1e9).astype(np.int64)
        t = global_ns(metas.get(r) or {}, rec["t"].astype(np.int64))
        inside = _in_intervals(iv, t)
        useful = inside & np.isin(act, useful_idx)
        par = np.zeros(len(rec), bool)
        rooted = np.zeros(len(rec), bool)
        sel = np.flatnonzero(useful)
        par[sel], rooted[sel] = _frames_of(p, sel, sym)
        th = rec["thread"].astype(np.int64)
        slots = sorted(set(th[inside].tolist()))
        out[r] = {
            "threads": slots,
            "par": [int(w[useful & par & (th == k)].sum()) for k in slots],
            "useful": [int(w[useful & (th == k)].sum()) for k in slots],
            "serial_ns": int(w[useful & ~par & (th == 0)].sum()),
            # the main thread's useful samples whose stack stops short of both an
            # outlined region and the program's root: counted as serial, uncertain
            "unrooted_ns": int(w[useful & ~rooted & (th == 0)].sum()),
            "samples": [int((inside & (th == k)).sum()) for k in slots],
        }
    return out


def thread_factors(per_rank, process_useful, runtime_ns):
    """The hybrid factors (docs/pop.md) from rank_threads' per_rank and the trace's
    process-useful time per rank (ns), or a note string where they do not apply."""
    if not per_rank:
        return NO_SAMPLES
    ranks = sorted(r for r in per_rank if r in process_useful)
    if not ranks or max(len(per_rank[r]["threads"]) for r in ranks) < 2:
        return ONE_THREAD
    T = float(runtime_ns)
    n = np.array([len(per_rank[r]["threads"]) for r in ranks], np.float64)
    P = np.array([process_useful[r] for r in ranks], np.float64)
    S = np.array([per_rank[r]["serial_ns"] for r in ranks], np.float64)
    U = float(sum(sum(per_rank[r]["useful"]) for r in ranks))
    mx = np.array([max(per_rank[r]["par"]) for r in ranks], np.float64)
    mean = np.array([np.mean(per_rank[r]["par"]) for r in ranks], np.float64)
    total = T * n.sum()
    C = float((n * P).sum())
    if T <= 0 or C <= 0:
        return NO_SAMPLES
    loss = {
        "serialisation": float(((n - 1) * S).sum()),
        "load_balance": float((n * (mx - mean)).sum()),
    }
    loss["other"] = C - U - loss["serialisation"] - loss["load_balance"]
    # each multiplicative factor is the share its loss leaves of what the ones above it
    # leave, so that their product is the OpenMP parallel efficiency
    after_ser = C - loss["serialisation"]
    after_lb = after_ser - loss["load_balance"]
    mul = {
        "parallel_efficiency": U / total,
        "mpi_parallel_efficiency": C / total,
        "omp_parallel_efficiency": U / C,
        "omp_serialisation_efficiency": after_ser / C,
        "omp_load_balance": after_lb / after_ser if after_ser > 0 else None,
        "omp_region_efficiency": U / after_lb if after_lb > 0 else None,
    }
    add = {
        "parallel_efficiency": U / total,
        "mpi_parallel_efficiency": 1 - (total - C) / total,
        "omp_parallel_efficiency": 1 - (C - U) / total,
        "omp_serialisation_efficiency": 1 - loss["serialisation"] / total,
        "omp_load_balance": 1 - loss["load_balance"] / total,
        "omp_region_efficiency": 1 - loss["other"] / total,
    }
    notes = []
    unrooted = sum(per_rank[r].get("unrooted_ns", 0) for r in ranks)
    if unrooted > UNROOTED_SHARE * max(float(S.sum()), 1.0):
        notes.append(
            f"{unrooted / 1e9:.3f} s of the main threads' serial time ({unrooted / S.sum():.0%}) "
            "is from samples whose stack stops before both a parallel region and main: "
            "some may be in parallel regions (OpenMP serialisation overstated, load balance "
            "understated); complete stacks need libunwind or frame pointers (docs/samples.md)"
        )
    return {
        "source": "sampled",
        "notes": notes,
        "threads": int(n.sum()),
        "multiplicative": mul,
        "additive": add,
        "ranks": [
            {
                "rank": r,
                "threads": per_rank[r]["threads"],
                "samples": per_rank[r]["samples"],
                "process_useful_s": process_useful[r] / 1e9,
                "serial_s": per_rank[r]["serial_ns"] / 1e9,
                "unrooted_s": per_rank[r].get("unrooted_ns", 0) / 1e9,
                "parallel_useful_s": [x / 1e9 for x in per_rank[r]["par"]],
                "useful_s": [x / 1e9 for x in per_rank[r]["useful"]],
                "omp_load_balance": (
                    float(np.mean(per_rank[r]["par"]) / max(per_rank[r]["par"]))
                    if max(per_rank[r]["par"]) > 0
                    else None
                ),
            }
            for r in ranks
        ],
    }


def _all_threads(threads, process_useful):
    """(useful time of all threads in s, their number) of an experiment for the hybrid
    scaling: its sampled threads' where it has thread factors, its ranks' (the trace's
    process level) where each has one thread; None otherwise."""
    if isinstance(threads, dict):
        return sum(sum(r["useful_s"]) for r in threads["ranks"]), threads["threads"]
    if threads == ONE_THREAD and process_useful:
        return sum(process_useful.values()) / 1e9, len(process_useful)
    return None


def hybrid_scaling(threads, process_useful, base_threads, base_process_useful, weak=False):
    """pypop's MPI+OpenMP Computational Scaling (the useful time of all threads of the
    baseline / of the experiment) and Global Efficiency (that x the hybrid Parallel
    Efficiency) of an experiment against a baseline, each given by its thread factors
    (thread_factors) and its trace's process-useful time per rank (ns); weak scaling
    expects the useful time to grow with the threads. A note string where they do not
    apply: the experiment without thread factors, the baseline without them nor one
    thread per rank."""
    if not isinstance(threads, dict):
        return f"n/a: the experiment has no thread factors ({threads})"
    base = _all_threads(base_threads, base_process_useful)
    if base is None:
        return f"n/a: the reference has no thread factors ({base_threads})"
    (u, n), (u_base, n_base) = _all_threads(threads, process_useful), base
    if u <= 0 or u_base <= 0:
        return "n/a: no useful time sampled"
    ratio = n / n_base
    cs = u_base * (ratio if weak else 1.0) / u
    return {
        "source": "sampled",
        "threads_ratio": ratio,
        "computation_scaling": cs,
        "global_efficiency": cs * threads["multiplicative"]["parallel_efficiency"],
    }

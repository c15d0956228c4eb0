"""Which routines are bound by memory bandwidth: the figures of `perfweave boundness`
(docs/boundness.md) from its runs (launch/boundness.py), baseline and beside a
memory-bandwidth stressor, interleaved and repeated.

run_facts(path) -> dict: what one run's experiment says of each routine (a function
anywhere on a sampled stack: inclusive time): its samples, the wall time they stand for
and the CPU time it got. A thread's CPU time (its clock, read by the runtime at the
process's end: samples/NAME.json "threads" cpu_ns) is shared among the routines by their
share of the thread's sampled wall time. CPU time, not wall time: a co-runner on a
machine with no idle core also takes cores from the program, which lengthens its wall
time whatever its routines do; a thread waiting for a core uses no CPU time, while one
waiting on memory does.

summarize(command, runs, setup, not_available) -> BoundnessResult (model/boundness.py).
A routine's slowdown is the ratio of its mean CPU time beside the stressor to its mean
CPU time in the baseline. Its 95 % interval joins two errors on the log scale: the rounds'
(analysis/overhead.py's paired bootstrap over rounds: round i's two runs saw the same
state of the machine) and the samples' (a share of n samples is a binomial proportion:
the log of its share p has the variance (1 - p) / (n p)), each interval's half-width the
square root of the sum of their squares. The verdict, with LOW and HIGH:

  bandwidth-bound  the interval's low end >= LOW and the slowdown >= HIGH;
  mixed            the low end >= LOW and the slowdown < HIGH (slowed, less);
  compute-bound    the slowdown < LOW and the interval's high end < HIGH;
  undetermined     otherwise: the interval is too wide (more rounds, or samples).

The control (control()): before each run pw-stream's probe times reference triads over
working sets from the core's own cache up to the last-level cache and a register-only
FMA chain, alone before a baseline run and beside the stressor before a stressor run;
their slowdowns, with the rounds' interval, are the stressor's bite on this machine. It
bites when the rule judges one of the triads bandwidth-bound. Where none is, the
experiment has no power to tell a routine that memory does not bound from one the
stressor did not reach: a routine the rule would call compute-bound, or undetermined, is
undetermined with the control's reason. A routine slowed past the thresholds is still
judged by its own interval.
"""

import math

import numpy as np

from perfweave.analysis import heap as heap_analysis
from perfweave.analysis import samples as samples_analysis
from perfweave.analysis.overhead import LEVEL, RESAMPLES, bootstrap
from perfweave.model.boundness import ROUTINE_COLUMNS, BoundnessResult, empty_routines
from perfweave.model.table import table

LOW = 1.10  # a slowdown below this is no slowdown (this machine's noise of CPU time)
HIGH = 1.30  # ... at least this, a bandwidth-bound routine's
MIN_SHARE_PCT = 1.0  # routines with less of the baseline's CPU time are left out
LIVE_SITES = 5  # heap sites shown per routine
BUSY_ON_CORE = 0.5  # alone on a core less than this share of their time: a busy machine
Z = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
RULE = (
    f"slowdown = CPU time beside the stressor / CPU time alone (means over rounds); "
    f"bandwidth-bound: interval low end >= {LOW} and slowdown >= {HIGH}; mixed: low end "
    f">= {LOW}, slowdown < {HIGH}; compute-bound: slowdown < {LOW} and interval high end "
    f"< {HIGH}; otherwise undetermined; where the rule judges none of the control's "
    "reference triads bandwidth-bound, a routine not bandwidth-bound or mixed is undetermined"
)


def run_facts(path, symbolizer=None):
    """One run's figures: cpu_s and sampled_s (the sampled threads' CPU time and the wall
    time their samples stand for), samples, threads (sampled threads), cpu_estimated
    (a thread without its CPU time was given its sampled wall time), routines {name:
    [cpu_s, wall_s, samples]}, heap_sites (with --heap: the sites by byte-seconds, each
    where, bytes, peak_bytes, byte_s, live_pct, live_pct_of), routine_live (with --heap
    and the sites' timelines: {routine: [samples, [[site index of heap_sites, samples
    taken while it was live], ...]]}, the LIVE_SITES sites live during most of them)."""
    from perfweave.readers.experiment import open_experiment

    exp = open_experiment(path)
    facts = {
        "cpu_s": 0.0,
        "sampled_s": 0.0,
        "samples": 0,
        "threads": 0,
        "cpu_estimated": False,
        "routines": {},
        "heap_sites": [],
        "routine_live": None,
    }
    procs = [p for p in exp.samples if len(p.records)]
    result = samples_analysis.analyze(procs, symbolizer) if procs else None
    if result is not None:
        _routines(result.samples, {p.name: p.meta for p in procs}, facts)
    heap = exp.heap
    if heap:
        hr = heap_analysis.analyze(heap, symbolizer)
        keys = ("where", "bytes", "peak_bytes", "byte_s", "live_pct", "live_pct_of")
        facts["heap_sites"] = [{k: _plain(s[k]) for k in keys} for s in hr.sites]
        if result is not None and hr.live["timelines"]:
            metas = {p.name: p.meta for p in procs}
            live = heap_analysis.routines_live(heap, hr, result.samples, metas)
            facts["routine_live"] = _most_live(live, hr.sites["byte_s"])
    return facts


def _most_live(live, byte_s):
    """{routine: [samples, [[site, samples while live], ...]]} of routines_live's table:
    the LIVE_SITES sites live during most of a routine's samples (then by byte-seconds)."""
    out = {}
    for name in np.unique(live["routine"]).tolist():
        rows = live[live["routine"] == name]
        rows = rows[np.lexsort((-byte_s[rows["site"]], -rows["live_samples"]))][:LIVE_SITES]
        out[name] = [
            int(rows["samples"][0]),
            [[int(r["site"]), int(r["live_samples"])] for r in rows],
        ]
    return out


def measurer():
    """run_facts of one experiment path after another, with one Symbolizer for all: the
    runs of one command have the same objects, resolved once."""
    from perfweave.symbols import Symbolizer

    symbolizer = Symbolizer()
    return lambda path: run_facts(path, symbolizer)


def _plain(v):
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and math.isnan(v) else v


def _routines(samples, metas, facts):
    """Share each sampled thread's CPU time among the routines on its samples' stacks."""
    routines = facts["routines"]
    threads = sorted(set(zip(samples["process"].tolist(), samples["thread"].tolist())))
    for process, thread in threads:
        rows = samples[(samples["process"] == process) & (samples["thread"] == thread)]
        wall = float(rows["seconds"].sum())
        if wall <= 0:
            continue
        slots = metas[process].get("threads", [])
        cpu_ns = slots[thread].get("cpu_ns", -1) if thread < len(slots) else -1
        if cpu_ns is None or cpu_ns < 0:
            cpu, facts["cpu_estimated"] = wall, True
        else:
            cpu = cpu_ns / 1e9
        facts["cpu_s"] += cpu
        facts["sampled_s"] += wall
        facts["samples"] += len(rows)
        facts["threads"] += 1
        stacks, inverse = np.unique(rows["stack"].astype(str), return_inverse=True)
        seconds = np.bincount(inverse.reshape(-1), rows["seconds"], minlength=len(stacks))
        counts = np.bincount(inverse.reshape(-1), minlength=len(stacks))
        for stack, s, n in zip(stacks.tolist(), seconds.tolist(), counts.tolist()):
            for name in set(stack.split(";")) - {""}:
                r = routines.setdefault(name, [0.0, 0.0, 0])
                r[0] += cpu * s / wall
                r[1] += s
                r[2] += n


def _interval(base, stressed, shares, counts):
    """(slowdown, lo, hi): the rounds' paired bootstrap of the ratio of means, widened by
    the samples' binomial error on the log scale. shares, counts: per variant the
    routine's pooled share of the sampled time and the samples it was drawn from."""
    est, lo, hi = bootstrap(stressed, base, lambda a, b: a / b)
    if not (est > 0 and lo > 0 and hi > 0):
        return est, lo, hi
    # a share of 1 less an ulp's rounding can pass 1 (a routine on every sample's stack)
    var = sum(max(1 - p, 0.0) / (n * p) for p, n in zip(shares, counts) if n > 0 and p > 0)
    binomial = Z * math.sqrt(var)
    below = math.hypot(math.log(est / lo), binomial)
    above = math.hypot(math.log(hi / est), binomial)
    return est, est * math.exp(-below), est * math.exp(above)


def verdict(slowdown, lo, hi):
    """The verdict of a slowdown and its interval (the module's rule, RULE)."""
    if not np.isfinite([slowdown, lo, hi]).all():
        return "undetermined"
    if lo >= LOW:
        return "bandwidth-bound" if slowdown >= HIGH else "mixed"
    if slowdown < LOW and hi < HIGH:
        return "compute-bound"
    return "undetermined"


TOO_WIDE = "the interval is too wide to tell (more rounds, or a shorter sample interval)"


def judged(slowdown, lo, hi, control):
    """(verdict, reason) of a routine: the rule's verdict, and when it is undetermined
    why. control: control()'s (None: no control ran); where it did not bite, a routine
    the rule does not find slowed is undetermined, for the control's reason."""
    v = verdict(slowdown, lo, hi)
    if v in ("bandwidth-bound", "mixed"):
        return v, ""
    if control is not None and not control["bites"]:
        return "undetermined", control["reason"]
    return v, TOO_WIDE if v == "undetermined" else ""


def _control_times(run):
    """The control's probe times of a run (its co-runner's last line): {bytes: [each
    triad's], triad_s: [CPU seconds per pass of each], fma_s}, {} where it has none."""
    pairs = _pairs(run.facts.get("corunner", ""))
    try:
        sizes = [int(b) for b in pairs["control_bytes"].split(",")]
        times = [float(t) for t in pairs["control_triad_s"].split(",")]
        fma = float(pairs["control_fma_s"])
    except (KeyError, ValueError):
        return {}
    return {"bytes": sizes, "triad_s": times, "fma_s": fma} if len(sizes) == len(times) else {}


def _mib(n):
    return f"{n / 2**20:.0f} MiB"


def control(base, stressed, setup):
    """The control's figures of the paired runs (None where they have no probe times):
    kernel (setup's), rounds; triads, per working set (bytes) its slowdown, lo, hi (the
    ratio of mean CPU time beside the stressor to alone, and the rounds' paired bootstrap
    interval) and verdict (the rule's); fma_slowdown, fma_lo, fma_hi likewise; bytes,
    triad_slowdown, triad_lo, triad_hi: the most slowed triad's; bites (the rule judges
    a triad bandwidth-bound: the stressor loaded the memory system) and reason (why not;
    "" where it did)."""
    pairs = [(_control_times(b), _control_times(s)) for b, s in zip(base, stressed)]
    pairs = [(b, s) for b, s in pairs if b and s and b["bytes"] == s["bytes"]]
    if not pairs or any(b["bytes"] != pairs[0][0]["bytes"] for b, _ in pairs):
        return None
    info = setup.get("stressor", {}).get("control", {})
    out = {"kernel": info.get("kernel", ""), "rounds": len(pairs), "triads": []}
    alone = np.array([b["triad_s"] for b, _ in pairs])  # rounds x working sets
    beside = np.array([s["triad_s"] for _, s in pairs])
    for k, size in enumerate(pairs[0][0]["bytes"]):
        est, lo, hi = bootstrap(beside[:, k], alone[:, k], lambda a, b: a / b)
        triad = {"bytes": size, "slowdown": est, "lo": lo, "hi": hi}
        out["triads"].append({**triad, "verdict": verdict(est, lo, hi)})
    est, lo, hi = bootstrap(
        np.array([s["fma_s"] for _, s in pairs]),
        np.array([b["fma_s"] for b, _ in pairs]),
        lambda a, b: a / b,
    )
    out.update({"fma_slowdown": est, "fma_lo": lo, "fma_hi": hi})
    best = max(out["triads"], key=lambda t: t["slowdown"])
    out.update({"bytes": best["bytes"], "triad_slowdown": best["slowdown"]})
    out.update({"triad_lo": best["lo"], "triad_hi": best["hi"]})
    out["bites"] = any(t["verdict"] == "bandwidth-bound" for t in out["triads"])
    sizes = out["triads"][0]["bytes"], out["triads"][-1]["bytes"]
    over = _mib(sizes[0]) if len(out["triads"]) == 1 else f"{_mib(sizes[0])} to {_mib(sizes[1])}"
    out["reason"] = (
        ""
        if out["bites"]
        else f"the stressor did not load the memory system: no reference triad (over {over}) "
        f"was judged bandwidth-bound beside it; the most slowed, over {_mib(best['bytes'])}, "
        f"ran {best['slowdown']:.2f} x ({best['lo']:.2f}-{best['hi']:.2f}): a routine not "
        "slowed may be bandwidth-bound all the same"
    )
    return out


def _live_sites(facts, routine, share_pct):
    """The heap sites whose objects were live during some of a routine's samples (facts:
    run_facts'). Measured where the sites have timelines (routine_live): live_during_pct,
    the share of the routine's samples taken while the site was live. Otherwise a lower
    bound (live_during_pct_min): with the site live live_pct % of its processes' time and
    the routine sampled share_pct % of it, at least live_pct + share_pct - 100 % of that
    time holds both (a record without timelines keeps each site's time live, not when)."""
    heap_sites = facts.get("heap_sites") or []
    measured = facts.get("routine_live")
    if measured is not None:
        n, hits = measured.get(routine, [0, []])
        out = [{**heap_sites[i], "live_during_pct": 100.0 * k / n} for i, k in hits if n > 0]
        return sorted(out, key=lambda s: (-s["live_during_pct"], -s["byte_s"]))
    out = []
    for s in heap_sites:
        live = s.get("live_pct")
        if live is None or share_pct <= 0:
            continue
        overlap = max(0.0, live + share_pct - 100.0) * 100.0 / share_pct
        if overlap > 0:
            out.append({**s, "live_during_pct_min": min(overlap, 100.0)})
    out.sort(key=lambda s: (-s["live_during_pct_min"], -s["byte_s"]))
    return out[:LIVE_SITES]


def summarize(command, runs, setup, not_available=()):
    """The BoundnessResult of runs: launch/overhead.py Runs of the variants "baseline"
    and "stressor", whose facts are run_facts' (and the co-runner's last line)."""
    by = {"baseline": [], "stressor": []}
    for r in sorted(runs, key=lambda r: r.round):
        by[r.variant].append(r)
    base, stressed = by["baseline"], by["stressor"]
    n = min(len(base), len(stressed))
    base, stressed = base[:n], stressed[:n]
    notes = []
    ctl = control(base, stressed, setup)
    names = {k for r in base for k in r.facts["routines"]}
    base_cpu = sum(r.facts["cpu_s"] for r in base)
    rows, live = [], {}
    for name in names:

        def per_run(rs, i):
            return np.array([r.facts["routines"].get(name, [0.0, 0.0, 0])[i] for r in rs])

        cpu_b, cpu_s = per_run(base, 0), per_run(stressed, 0)
        share = 100 * cpu_b.sum() / base_cpu if base_cpu > 0 else 0.0
        if share < MIN_SHARE_PCT:
            continue
        count_b, count_s = int(per_run(base, 2).sum()), int(per_run(stressed, 2).sum())
        pooled = [
            per_run(rs, 1).sum() / max(sum(r.facts["sampled_s"] for r in rs), 1e-300)
            for rs in (base, stressed)
        ]
        totals = [sum(r.facts["samples"] for r in rs) for rs in (base, stressed)]
        if cpu_b.sum() > 0 and cpu_s.sum() > 0:
            slowdown, lo, hi = _interval(cpu_b, cpu_s, pooled, totals)
        else:
            slowdown = lo = hi = math.nan
        wall_b, wall_s = per_run(base, 1).sum(), per_run(stressed, 1).sum()
        judgement, reason = judged(slowdown, lo, hi, ctl)
        rows.append(
            {
                "routine": name,
                "baseline_cpu_s": float(cpu_b.mean()),
                "stressor_cpu_s": float(cpu_s.mean()),
                "baseline_samples": count_b,
                "stressor_samples": count_s,
                "baseline_share_pct": share,
                "slowdown": slowdown,
                "slowdown_lo": lo,
                "slowdown_hi": hi,
                "wall_slowdown": wall_s / wall_b if wall_b > 0 else math.nan,
                "verdict": judgement,
                "reason": reason,
            }
        )
        if base and base[0].facts.get("heap_sites"):
            live[name] = _live_sites(base[0].facts, name, 100 * pooled[0])
    rows.sort(key=lambda r: (-r["baseline_cpu_s"], r["routine"]))
    routines = (
        table({c: [r[c] for r in rows] for c in ROUTINE_COLUMNS}, len(rows))
        if rows
        else empty_routines()
    )
    kept = []
    for r in base + stressed:
        f = r.facts
        kept.append(
            {
                "experiment": f"{r.variant}-{r.round + 1}",
                "variant": r.variant,
                "round": r.round + 1,
                "wall_s": r.wall_s,
                "cpu_s": f["cpu_s"],
                "sampled_s": f["sampled_s"],
                "samples": f["samples"],
                "threads": f["threads"],
                # the share of their sampled life the threads were on a core
                "on_core": f["cpu_s"] / f["sampled_s"] if f["sampled_s"] > 0 else None,
                "stressor": _stressor_line(f.get("corunner", ""))
                if r.variant == "stressor"
                else {},
                "control": _control_times(r),
            }
        )
    on_core = [
        np.mean([k["on_core"] for k in kept if k["variant"] == v and k["on_core"]] or [0])
        for v in ("baseline", "stressor")
    ]
    if on_core[1] < 0.9 * on_core[0]:
        notes.append(
            f"the stressor also took cores from the program (its threads were on a core "
            f"{100 * on_core[1]:.0f} % of their sampled time beside it, {100 * on_core[0]:.0f} "
            "% alone): the slowdowns are of CPU time, which waiting for a core does not add to"
        )
    if 0 < on_core[0] < BUSY_ON_CORE:
        notes.append(
            f"the machine was busy: alone, the program's threads were on a core only "
            f"{100 * on_core[0]:.0f} % of their time, and whatever ran meanwhile shared "
            "their caches and memory as the stressor does: a routine's sensitivity reads "
            "smaller than on an idle machine"
        )
    if ctl is None:
        notes.append(
            "no control ran (the stressor's probe said nothing): whether the stressor loaded "
            "the memory system is unknown"
        )
    elif not ctl["bites"]:
        notes.append(ctl["reason"])
    if ctl is not None and ctl["fma_slowdown"] >= LOW:
        notes.append(
            f"the stressor also slowed the control's register-only FMA chain "
            f"{ctl['fma_slowdown']:.2f} x: it takes more than the memory system here (a "
            "core's sibling thread, the clock): compute-bound routines may read slowed"
        )
    if any(r.facts["cpu_estimated"] for r in base + stressed):
        notes.append(
            "some threads' CPU time was not recorded (threads that ended by pthread_exit, "
            "or an older runtime): their sampled wall time stands for it"
        )
    if n < 5:
        notes.append(
            f"{n} rounds: the bootstrap draws from few distinct resamples, its intervals "
            "are rough (use -r 5 or more)"
        )
    setup = {
        **setup,
        "rule": {"low": LOW, "high": HIGH, "text": RULE, "min_share_pct": MIN_SHARE_PCT},
        "interval": {
            "method": "paired bootstrap over rounds (ratio of means), widened by the "
            "samples' binomial error on the log scale",
            "resamples": RESAMPLES,
            "level": LEVEL,
        },
    }
    return BoundnessResult(
        list(command), n, setup, kept, routines, live, list(not_available), notes, ctl
    )


def _pairs(line):
    """The stressor's last line ("done seconds S bytes B ...") as {word: value}; {} when
    it said nothing."""
    words = line.split()
    if not words or words[0] != "done":
        return {}
    return dict(zip(words[1::2], words[2::2]))


def _stressor_line(line):
    """The stressor's last line ("done seconds S bytes B bytes_per_s R threads N") as
    {bytes_per_s, seconds}; {} when it said nothing."""
    pairs = _pairs(line)
    try:
        return {"seconds": float(pairs["seconds"]), "bytes_per_s": float(pairs["bytes_per_s"])}
    except (KeyError, ValueError):
        return {}


RECORDED_BY = "run the program with `perfweave boundness`, and open one of its runs"


def analyze(result):
    """The tables of a saved result (readers/boundness.py: what the verb computed with
    summarize when it ran) for perfweave.open(path).table("boundness", "routines")."""
    return result

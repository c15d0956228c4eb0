"""Plain-English advice from rules over the report's data (report/data.py collect):
the MPI profile, the wait states (perfweave analyze), the node timeline and the samples
(perfweave run --sample: analysis/samples/).

Each rule looks at one thing, fires only past a stated threshold, and says what it saw
with the numbers and what usually helps. advise(data) -> [advice dicts], most important
first: {"rule", "severity" (share of the time concerned, %), "text", "evidence"}.
Every percentage in a text says what it is of: the MPI profile's and the wait states'
are of the app time (MPI_Init's return to MPI_Finalize's entry), the samples' of the
samples in the app time (the start-up in MPI_Init and the shutdown are left out: on a
short run they can be most of the samples) or, for a function's share per rank, of the
rank's samples. The thresholds are module constants, documented in docs/mpi-profile.md
("Advice").
"""

import os

from perfweave.analysis.samples.names import OMP_LOCKS

FUNCTION_PCT = 20.0  # an MPI function taking this % of the app time: communication-bound
IMBALANCE_AVG_MAX = 0.85  # outside-MPI time mean/max below this: computation imbalanced
WAIT_PCT = 5.0  # a wait-state pattern taking this % of the time
SMALL_MESSAGE_BYTES = 256
SMALL_MESSAGE_CALLS = 10000
SMALL_MESSAGE_PCT = 5.0
MPI_LIGHT_PCT = 5.0  # below this, MPI is not where the time goes
STARTUP_OVER_APP = 1.0  # start-up in MPI_Init at least this many times the app time
# from the samples
SAMPLE_IMBALANCE = 1 - IMBALANCE_AVG_MAX  # a function's (max - mean) / max over ranks
SAMPLE_IMBALANCE_POINTS = 5.0  # ... and the slowest rank this many points of its time above
SAMPLE_IMBALANCE_MAX = 3  # at most this many functions named
SAMPLE_WORK_SHARE = 0.5  # ... each computing (not in MPI, asleep, waiting) this much
LINE_DOMINANT = 0.5  # one line with this share of its function's samples is named
ACTIVITY_PCT = {
    "io": 10.0,
    "alloc": 10.0,
    "thread_sync": 10.0,  # % of the app's samples
    "omp_sync": 10.0,
}
SAMPLED_MPI_PCT = FUNCTION_PCT  # MPI in the samples, where no MPI profile exists

_HELP = {
    "coll": "fewer or larger collectives (combine small ones), nonblocking collectives "
    "overlapped with computation, or fewer ranks taking part (sub-communicators)",
    "p2p": "fewer, larger messages, nonblocking calls overlapped with computation, or a "
    "rank placement that keeps neighbours on one node",
    "rma": "fewer synchronisations (larger epochs) or passive-target locks instead of fences",
    "sync": "fewer synchronisations: most waits at a barrier are imbalance before it",
    "file": "collective or larger I/O calls, or fewer ranks writing",
    "other": "fewer calls of it",
}


def _where(site):
    return f"{site['function']} at {site['where']}" if site else "?"


def rule_communication_bound(data):
    m = data["mpi_profile"]
    out = []
    for f in m.get("functions", []):
        if f["app_pct"] < FUNCTION_PCT:
            continue
        sites = [c for c in m.get("callsites", []) if c["function"] == f["name"]]
        top = max(sites, key=lambda c: c["time_s"]) if sites else None
        share = f" ({top['time_s'] / f['time_s'] * 100:.0f} % of it)" if top and f["time_s"] else ""
        out.append(
            {
                "rule": "communication_bound",
                "severity": f["app_pct"],
                "text": f"{f['name']} takes {f['app_pct']:.1f} % of the app time "
                f"({f['time_s']:.3g} s summed over {f['ranks']} ranks): "
                f"communication-bound there. Its largest call site is "
                f"{_where(top)}{share}. What usually helps: "
                f"{_HELP.get(f['family'], _HELP['other'])}.",
                "evidence": {
                    "function": f["name"],
                    "app_pct": f["app_pct"],
                    "callsite": top["id"] if top else None,
                },
            }
        )
    return out


def rule_load_imbalance(data):
    m = data["mpi_profile"]
    ranks = m.get("per_rank", [])
    if len(ranks) < 2:
        return []
    out_s = [r["app_s"] - r["mpi_s"] for r in ranks]
    mean = sum(out_s) / len(out_s)
    worst = max(range(len(ranks)), key=lambda i: out_s[i])
    if not out_s[worst] or mean / out_s[worst] >= IMBALANCE_AVG_MAX:
        return []
    r = ranks[worst]
    above = 100 * (out_s[worst] / mean - 1) if mean else 0.0
    # where the others wait: the call site whose time varies most between ranks
    sites = [c for c in m.get("callsites", []) if c["ranks"] > 1 and c["app_pct"] >= 1]
    wait = max(sites, key=lambda c: c["cov"] * c["time_s"]) if sites else None
    waits = (
        f" The others wait for it in MPI, most at {_where(wait)} (its time varies "
        f"between ranks by a COV of {wait['cov']:.2f})."
        if wait
        else ""
    )
    severity = 100 * (1 - mean / out_s[worst])
    return [
        {
            "rule": "load_imbalance",
            "severity": severity,
            "text": f"Computation is imbalanced: rank {r['rank']} computes {above:.0f} % "
            f"longer than the mean (outside MPI {out_s[worst]:.3g} s against "
            f"{mean:.3g} s; mean/max {mean / out_s[worst]:.2f}).{waits} What "
            "usually helps: a better decomposition of the work, or dynamic load "
            "balancing.",
            "evidence": {
                "rank": r["rank"],
                "outside_s": out_s[worst],
                "mean_outside_s": mean,
                "callsite": wait["id"] if wait else None,
            },
        }
    ]


_WAIT_HELP = {
    "mpi_latesender": "receivers wait for senders that post their sends late: post the "
    "sends earlier (or the receives later), or balance the work before them",
    "mpi_latereceiver": "synchronous sends wait for late receivers: post receives earlier or "
    "use buffered/nonblocking sends",
    "mpi_latesender_wo": "messages arrive in another order than they are received: receive "
    "in arrival order (MPI_ANY_SOURCE, MPI_Waitany)",
    "mpi_wait_nxn": "ranks enter an all-to-all collective at different times: the imbalance "
    "is in the work before it",
    "mpi_barrier_wait": "ranks reach a barrier at different times: remove the barrier if "
    "nothing needs it, else balance the work before it",
    "mpi_latebroadcast": "the root of a broadcast is late: the others wait for it",
    "mpi_earlyreduce": "the root of a reduction is early and waits for the others",
}


# the patterns whose causes the delay analysis names (analysis/rootcause.py)
_EXPLAINED = {
    "mpi_latesender",
    "mpi_latesender_wo",
    "mpi_lswo_different",
    "mpi_lswo_same",
    "mpi_latereceiver",
    "mpi_barrier_wait",
    "mpi_wait_nxn",
    "mpi_latebroadcast",
    "mpi_earlyreduce",
    "mpi_rma_sync_late_post",
    "mpi_rma_early_wait",
    "mpi_rma_wait_at_fence",
}


def _causes(ws):
    rc = ws.get("root_causes") or {}
    return rc if rc.get("causes") and rc.get("pct", 0) >= WAIT_PCT else None


def rule_root_causes(data):
    """Who caused the waiting (the delay analysis): the rank(s) and call path whose
    excess time the waits come from, and what removing it saves on the ideal replay."""
    ws = data.get("wait_states") or {}
    rc = _causes(ws)
    if not rc:
        return []
    top = rc["causes"][0]
    same = [c for c in rc["causes"] if c["callpath"] == top["callpath"]]
    ranks = ", ".join(str(c["rank"]) for c in same)
    cost = sum(c["cost_s"] for c in same)
    short = sum(c["short_s"] for c in same)
    saves = [c["saves_s"] for c in same if c["saves_s"] is not None]
    text = (
        f"Rank{'s' if len(same) > 1 else ''} {ranks} at {top['callpath'] or '?'} caused "
        f"{cost:.3g} s of waiting ({short:.3g} s directly, {cost - short:.3g} s through "
        "waits it propagated)"
    )
    if saves:
        text += f"; without it the run is {sum(saves):.3g} s shorter on an ideal network"
    text += ": balance that work before other changes."
    return [
        {
            "rule": "root_cause",
            "severity": rc["pct"],
            "text": text,
            "evidence": {
                "ranks": [c["rank"] for c in same],
                "callpath": top["callpath"],
                "cost_s": cost,
                "saves_s": sum(saves) if saves else None,
            },
        }
    ]


def rule_wait_states(data):
    ws = data.get("wait_states") or {}
    out = []
    explained = _causes(ws) is not None
    for p in ws.get("patterns", []):
        if p["pct"] < WAIT_PCT or (explained and p["id"] in _EXPLAINED):
            continue
        help_ = _WAIT_HELP.get(p["id"], "see docs/wait-states.md for what it means")
        out.append(
            {
                "rule": "wait_state",
                "severity": p["pct"],
                "text": f"{p['name']}: {p['pct']:.1f} % of the app time "
                f"({p['time_s']:.3g} s), "
                f"most at {p['callpath'] or '?'}: {help_}.",
                "evidence": {"pattern": p["id"], "pct": p["pct"], "callpath": p["callpath"]},
            }
        )
    return out


def rule_small_messages(data):
    out = []
    for f in data["mpi_profile"].get("functions", []):
        if (
            f["family"] != "p2p"
            or f["calls"] < SMALL_MESSAGE_CALLS
            or f["mean_bytes"] >= SMALL_MESSAGE_BYTES
            or f["app_pct"] < SMALL_MESSAGE_PCT
        ):
            continue
        out.append(
            {
                "rule": "small_messages",
                "severity": f["app_pct"],
                "text": f"{f['name']} moves many small messages: {f['calls']} calls of "
                f"{f['mean_bytes']:.0f} bytes on average take {f['app_pct']:.1f} % "
                "of the app time: latency-bound. What usually helps: aggregate the "
                "messages (pack several into one), or exchange less often.",
                "evidence": {
                    "function": f["name"],
                    "calls": f["calls"],
                    "mean_bytes": f["mean_bytes"],
                },
            }
        )
    return out


def rule_mpi_light(data):
    m = data["mpi_profile"]
    if not m.get("mpi") or m["mpi_pct"]["max"] >= MPI_LIGHT_PCT:
        return []
    return [
        {
            "rule": "mpi_light",
            "severity": 100 - m["mpi_pct"]["mean"],
            "text": f"MPI takes only {m['mpi_pct']['mean']:.1f} % of the app time on average "
            f"(at most {m['mpi_pct']['max']:.1f} % on a rank): the time is in the "
            "computation, and communication is not what to optimise first.",
            "evidence": {"mpi_pct_mean": m["mpi_pct"]["mean"]},
        }
    ]


def rule_startup(data):
    """The start-up in MPI_Init (analysis/phases.py) as long as the app time or longer:
    the run's figures describe its start more than the program."""
    su = data.get("startup")
    if (
        not su
        or not su["app_time_s"]["mean"]
        or su["init_s"]["mean"] < STARTUP_OVER_APP * su["app_time_s"]["mean"]
    ):
        return []
    init, app = su["init_s"], su["app_time_s"]
    return [
        {
            "rule": "startup",
            "severity": 100 * init["mean"] / (init["mean"] + app["mean"]),
            "text": f"Start-up is longer than the program: {init['mean']:.3g} s per rank in "
            f"MPI_Init on average (at most {init['max']:.3g} s: launcher and MPI "
            f"wire-up) against {app['mean']:.3g} s of app time, which the "
            "percentages of the app time describe. What usually helps: a longer "
            "run (more steps, a larger problem).",
            "evidence": {
                "init_s_mean": init["mean"],
                "init_s_max": init["max"],
                "app_s_mean": app["mean"],
            },
        }
    ]


def rule_sites_dropped(data):
    n = data["mpi_profile"].get("sites_dropped", 0)
    if not n:
        return []
    return [
        {
            "rule": "sites_dropped",
            "severity": 0.0,
            "text": f"{n} calls went to overflow sites because the call-site tables were "
            "full: run again with a larger --max-callsites to see where they were.",
            "evidence": {"sites_dropped": n},
        }
    ]


def _samples(data):
    sm = data.get("samples")
    return sm if sm and not sm.get("error") and sm.get("samples") else None


def _app_share(sm):
    """The activities' shares of the samples in the app time, and what they are of."""
    return sm.get("app_activity_pct") or {}, (
        "of the app time's samples" if "phase_pct" in sm else "of the samples"
    )


def _line_of(sm, function, activities=None):
    """The source line of a function to name: its largest line (by the activities given,
    else all of them) when it holds LINE_DOMINANT of the function's share, else None."""

    def share(r):
        return (
            sum(v for k, v in r["by_activity_pct"].items() if k in activities)
            if activities
            else r["pct"]
        )

    lines = [r for r in sm.get("lines", []) if r.get("function") == function and r.get("line")]
    if not lines:
        return None
    top = max(lines, key=share)
    total = sum(share(r) for r in lines)
    return top if total and share(top) >= LINE_DOMINANT * total else None


def _place(sm, activities):
    """Where the samples of these activities are most (the function, with its line when
    one line dominates): (text, function row) or ("?", None)."""
    rows = [
        r for r in sm.get("functions", []) if any(a in r["by_activity_pct"] for a in activities)
    ]
    if not rows:
        return "?", None
    f = max(rows, key=lambda r: sum(r["by_activity_pct"].get(a, 0) for a in activities))
    line = _line_of(sm, f["name"], activities)
    where = f" at {os.path.basename(line['file'])}:{line['line']}" if line else ""
    return f"{f['name']}(){where}", f


def rule_sampled_imbalance(data):
    """A function whose share of the ranks' samples differs most between ranks."""
    sm = _samples(data)
    if not sm or len(sm.get("ranks", [])) < 2:
        return []
    out = []
    for f in sm.get("functions", []):
        pr = f["per_rank_pct"]
        work = sum(f["by_activity_pct"].get(a, 0) for a in ("compute", "io", "alloc", "mathlib"))
        if (
            f["imbalance"] < SAMPLE_IMBALANCE
            or pr["max"] - pr["mean"] < SAMPLE_IMBALANCE_POINTS
            or work < SAMPLE_WORK_SHARE * f["pct"]
        ):
            continue
        line = _line_of(sm, f["name"])
        where = f" at {os.path.basename(line['file'])}:{line['line']}" if line else ""
        above = 100 * (pr["max"] / pr["mean"] - 1) if pr["mean"] else 0.0
        act, of = _app_share(sm)
        mpi = sum(v for k, v in act.items() if k.startswith("mpi_"))
        waits = f" Meanwhile the other ranks wait: MPI takes {mpi:.0f} % {of}." if mpi >= 1 else ""
        out.append(
            {
                "rule": "sampled_imbalance",
                "severity": pr["max"] - pr["mean"],
                "text": f"Load imbalance: rank {f['worst_rank']} computes {above:.0f} % longer "
                f"than the mean in {f['name']}(){where} ({pr['max']:.0f} % of its samples "
                f"there against a mean of {pr['mean']:.0f} % over "
                f"{len(sm['ranks'])} ranks, {pr['min']:.0f} % at the least).{waits} "
                "What usually helps: a better decomposition of the work (less of it "
                "for that rank), or dynamic load balancing (work handed out in smaller "
                "pieces to whichever rank is free).",
                "evidence": {
                    "rank": f["worst_rank"],
                    "function": f["name"],
                    "file": line["file"] if line else None,
                    "line": line["line"] if line else None,
                    "above_mean_pct": above,
                    "per_rank_pct": pr,
                },
            }
        )
        if len(out) == SAMPLE_IMBALANCE_MAX:
            break
    return out


# how the library functions behind an activity are named in the advice
_CALL_NAMES = {
    "lll_lock_wait": "mutex locks (pthread_mutex_lock)",
    "lll_lock_wait_private": "libc's internal locks",
    "lll_lock_wake": "mutex unlocks (waking a waiter)",
    "futex_abstimed_wait_common": "futex waits (pthread_join, condition variables, semaphores)",
    "futex_wait": "futex waits",
    "int_malloc": "malloc",
    "int_free": "free",
    "sysmalloc_mmap": "malloc's mmap",
    "unlink_chunk": "free",
}
_ACTIVITY_TEXT = {
    "io": (
        "I/O takes {pct:.0f} % {of}, in {calls}, most from {where}: I/O-bound "
        "there. What to try: fewer, larger writes (buffer them), fsync/fdatasync only "
        "where the data must be safe on disk, I/O overlapped with computation (a "
        "separate thread or asynchronous I/O), or a faster file system (node-local "
        "scratch for temporary files; collective MPI-IO from many ranks).{profile}"
    ),
    "alloc": (
        "Memory allocation takes {pct:.0f} % {of}, in {calls}, most from "
        "{where}: allocation-bound there. What to try: allocate once outside the "
        "loop and reuse the buffers, a pool for many small objects{mmap}, or with many "
        "threads a scalable allocator (jemalloc, tcmalloc)."
    ),
    "thread_sync": (
        "Threads wait on synchronisation {pct:.0f} % {of}, in {calls}, "
        "most from {where}: contention between threads. What to try: hold "
        "locks for less time (move work out of the critical section), "
        "finer-grained locks, per-thread copies merged at the end, or atomics "
        "instead of locks; for barriers and joins, balance the work between "
        "threads (e.g. OpenMP schedule(dynamic))."
    ),
    "omp_sync": (
        "Threads wait in the OpenMP runtime {pct:.0f} % {of}, most in "
        "{where}: OpenMP barrier/wait: threads wait at the end of parallel regions "
        "and loops for the slowest, an imbalance among threads. What to try: "
        "schedule(dynamic) or schedule(guided) for loops whose iterations differ, "
        "an even share of the work per thread, nowait where a loop's barrier is not "
        "needed, and fewer threads where the parallel part is short{locks}."
    ),
}


# the I/O item of a run without the I/O profile (on unless perfweave run --no-io, docs/io.md)
_IO_PROFILE_HINT = (
    " Which files, how the time splits into open/close, read/write and metadata, and "
    "which lines call: this run has no I/O profile; run again without --no-io."
)


def rule_sampled_activities(data):
    """I/O, memory allocation, thread synchronisation: past its share of the samples."""
    sm = _samples(data)
    if not sm:
        return []
    out = []
    shares, of = _app_share(sm)
    for act, threshold in ACTIVITY_PCT.items():
        pct = shares.get(act, 0.0)
        if pct < threshold:
            continue
        fns = sm.get("activity_functions", {}).get(act, [])
        named = {}
        for c in fns:
            label = _CALL_NAMES.get(c["name"], c["name"])
            named[label] = named.get(label, 0) + c["pct"]
        calls = (
            ", ".join(
                f"{n} ({v:.0f} %)"
                for n, v in sorted(named.items(), key=lambda kv: -kv[1])[:3]
                if v >= 0.5
            )
            or "?"
        )
        where, f = _place(sm, (act,))
        locks = (
            "; for its critical sections and OpenMP locks ("
            + ", ".join(sorted({c["name"] for c in fns if c["name"] in OMP_LOCKS}))
            + "), shorter critical "
            "sections, reductions or atomics"
            if any(c["name"] in OMP_LOCKS for c in fns)
            else ""
        )
        mmap = (
            ": large blocks that malloc maps and unmaps each time can be kept, or "
            "M_MMAP_THRESHOLD raised (MALLOC_MMAP_THRESHOLD_)"
            if any(c["name"] in ("mmap", "munmap", "sysmalloc_mmap") for c in fns)
            else ""
        )
        out.append(
            {
                "rule": f"sampled_{act}",
                "severity": pct,
                "text": _ACTIVITY_TEXT[act].format(
                    pct=pct,
                    of=of,
                    calls=calls,
                    where=where,
                    mmap=mmap,
                    locks=locks,
                    profile=_IO_PROFILE_HINT if act == "io" and not data.get("io") else "",
                ),
                "evidence": {
                    "activity": act,
                    "pct": pct,
                    "function": f["name"] if f else None,
                    "calls": [c["name"] for c in fns[:3]],
                },
            }
        )
    return out


_FAMILY = {
    "p2p": "point-to-point",
    "coll": "collectives",
    "rma": "one-sided",
    "sync": "synchronisation",
    "file": "MPI-IO",
    "other": "other calls",
}


def rule_sampled_mpi(data):
    """MPI time seen from the samples, where no MPI profile exists."""
    sm = _samples(data)
    if not sm or data["mpi_profile"].get("mpi"):
        return []
    shares, of = _app_share(sm)
    fam = {k: v for k, v in shares.items() if k.startswith("mpi_") and v > 0}
    pct = sum(fam.values())
    if pct < SAMPLED_MPI_PCT:
        return []
    top = max(fam, key=fam.get)
    where, _ = _place(sm, tuple(fam))
    parts = ", ".join(
        f"{_FAMILY.get(k[4:], k[4:])} {v:.0f} %"
        for k, v in sorted(fam.items(), key=lambda kv: -kv[1])
    )
    # above --full-profile-ranks the compact profile has the MPI time per call site but no
    # caller paths or families per rank: the samples still place it
    why = (
        "only the compact MPI profile was written"
        if data.get("compact")
        else "no MPI profile was written"
    )
    return [
        {
            "rule": "sampled_mpi",
            "severity": pct,
            "text": f"MPI takes {pct:.0f} % {of} ({parts}), most called from "
            f"{where}: communication-bound there ({why}, so these are the samples' "
            "numbers). What usually helps: "
            f"{_HELP.get(top[4:], _HELP['other'])}.",
            "evidence": {"pct": pct, "families": fam},
        }
    ]


def rule_sections(data):
    """The advice a module's section gives of its own (its data's "advice": items of
    this module's form, e.g. analysis/io.py's, thresholds in its docs): every section's,
    so that a new module's advice reaches the report's without a rule here."""
    out = []
    for name, value in data.items():
        if isinstance(value, dict) and isinstance(value.get("advice"), list):
            out += [
                {"severity": 0.0, "evidence": {}, **a, "section": name}
                for a in value["advice"]
                if isinstance(a, dict) and "rule" in a and "text" in a
            ]
    return out


RULES = (
    rule_communication_bound,
    rule_load_imbalance,
    rule_root_causes,
    rule_wait_states,
    rule_small_messages,
    rule_mpi_light,
    rule_startup,
    rule_sites_dropped,
    rule_sampled_imbalance,
    rule_sampled_activities,
    rule_sampled_mpi,
    rule_sections,
)


def advise(data):
    out = []
    for rule in RULES:
        out += rule(data)
    out.sort(key=lambda a: -a["severity"])
    return out

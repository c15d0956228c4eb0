"""Plain-English advice from rules over the report's data (report/data.py collect):
the MPI profile, the wait states (perfweave analyze) and the node timeline.

Each rule looks at one thing, fires only past a stated threshold, and says what it saw
with the numbers and what usually helps. advise(data) -> [advice dicts], most important
first: {"rule", "severity" (share of the run concerned, %), "text", "evidence"}.
The thresholds are module constants, documented in docs/mpi-profile.md ("Advice").
"""

FUNCTION_PCT = 20.0       # an MPI function taking this % of the run: communication-bound
IMBALANCE_AVG_MAX = 0.85  # outside-MPI time mean/max below this: computation imbalanced
WAIT_PCT = 5.0            # a wait-state pattern taking this % of the time
SMALL_MESSAGE_BYTES = 256
SMALL_MESSAGE_CALLS = 10000
SMALL_MESSAGE_PCT = 5.0
MPI_LIGHT_PCT = 5.0       # below this, MPI is not where the time goes

_HELP = {
    "coll": "fewer or larger collectives (combine small ones), nonblocking collectives "
            "overlapped with computation, or fewer ranks taking part (sub-communicators)",
    "p2p": "fewer, larger messages, nonblocking calls overlapped with computation, or a "
           "rank placement that keeps neighbours on one node",
    "rma": "fewer synchronisations (larger epochs) or passive-target locks instead of "
           "fences",
    "sync": "fewer synchronisations: most waits at a barrier are imbalance before it",
    "io": "collective or larger I/O calls, or fewer ranks writing",
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
        share = f" ({top['time_s'] / f['time_s'] * 100:.0f} % of it)" if top and f["time_s"] \
            else ""
        out.append({
            "rule": "communication_bound", "severity": f["app_pct"],
            "text": f"{f['name']} takes {f['app_pct']:.1f} % of the run "
                    f"({f['time_s']:.3g} s summed over {f['ranks']} ranks): "
                    f"communication-bound there. Its largest call site is "
                    f"{_where(top)}{share}. What usually helps: "
                    f"{_HELP.get(f['family'], _HELP['other'])}.",
            "evidence": {"function": f["name"], "app_pct": f["app_pct"],
                         "callsite": top["id"] if top else None}})
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
    waits = (f" The others wait for it in MPI, most at {_where(wait)} (its time varies "
             f"between ranks by a COV of {wait['cov']:.2f})." if wait else "")
    severity = 100 * (1 - mean / out_s[worst])
    return [{"rule": "load_imbalance", "severity": severity,
             "text": f"Computation is imbalanced: rank {r['rank']} computes {above:.0f} % "
                     f"longer than the mean (outside MPI {out_s[worst]:.3g} s against "
                     f"{mean:.3g} s; mean/max {mean / out_s[worst]:.2f}).{waits} What "
                     "usually helps: a better decomposition of the work, or dynamic load "
                     "balancing.",
             "evidence": {"rank": r["rank"], "outside_s": out_s[worst], "mean_outside_s": mean,
                          "callsite": wait["id"] if wait else None}}]


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


def rule_wait_states(data):
    ws = data.get("wait_states") or {}
    out = []
    for p in ws.get("patterns", []):
        if p["pct"] < WAIT_PCT:
            continue
        help_ = _WAIT_HELP.get(p["id"], "see docs/wait-states.md for what it means")
        out.append({"rule": "wait_state", "severity": p["pct"],
                    "text": f"{p['name']}: {p['pct']:.1f} % of the time ({p['time_s']:.3g} s), "
                            f"most at {p['callpath'] or '?'}: {help_}.",
                    "evidence": {"pattern": p["id"], "pct": p["pct"],
                                 "callpath": p["callpath"]}})
    return out


def rule_small_messages(data):
    out = []
    for f in data["mpi_profile"].get("functions", []):
        if f["family"] != "p2p" or f["calls"] < SMALL_MESSAGE_CALLS or \
                f["mean_bytes"] >= SMALL_MESSAGE_BYTES or f["app_pct"] < SMALL_MESSAGE_PCT:
            continue
        out.append({"rule": "small_messages", "severity": f["app_pct"],
                    "text": f"{f['name']} moves many small messages: {f['calls']} calls of "
                            f"{f['mean_bytes']:.0f} bytes on average take {f['app_pct']:.1f} % "
                            "of the run: latency-bound. What usually helps: aggregate the "
                            "messages (pack several into one), or exchange less often.",
                    "evidence": {"function": f["name"], "calls": f["calls"],
                                 "mean_bytes": f["mean_bytes"]}})
    return out


def rule_mpi_light(data):
    m = data["mpi_profile"]
    if not m.get("mpi") or m["mpi_pct"]["max"] >= MPI_LIGHT_PCT:
        return []
    return [{"rule": "mpi_light", "severity": 100 - m["mpi_pct"]["mean"],
             "text": f"MPI takes only {m['mpi_pct']['mean']:.1f} % of the run on average "
                     f"(at most {m['mpi_pct']['max']:.1f} % on a rank): the time is in the "
                     "computation, and communication is not what to optimise first.",
             "evidence": {"mpi_pct_mean": m["mpi_pct"]["mean"]}}]


def rule_sites_dropped(data):
    n = data["mpi_profile"].get("sites_dropped", 0)
    if not n:
        return []
    return [{"rule": "sites_dropped", "severity": 0.0,
             "text": f"{n} calls went to overflow sites because the call-site tables were "
                     "full: run again with a larger --max-callsites to see where they were.",
             "evidence": {"sites_dropped": n}}]


RULES = (rule_communication_bound, rule_load_imbalance, rule_wait_states,
         rule_small_messages, rule_mpi_light, rule_sites_dropped)


def advise(data):
    out = []
    for rule in RULES:
        out += rule(data)
    out.sort(key=lambda a: -a["severity"])
    return out

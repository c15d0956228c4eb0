"""The text of `perfweave pop` (docs/pop.md): the POP factors in POP's names and order,
one column per way of taking the ideal runtime and per variant (multiplicative,
additive), then the useful time per location and the scaling against references."""

from perfweave.analysis.pop import FACTORS

IDEALS = (("replay", "replay"), ("critical_path", "crit.path"))


def _pct(v):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{100 * v:.1f}%"


def _value(doc, variant, ideal, key):
    if key in doc["scaling"]:
        # the scaling factors are ratios, alike in both variants; the global efficiency
        # is the product of the multiplicative ones only
        if key == "global_efficiency" and variant == "additive":
            return None
        return doc["scaling"][key]
    v = doc[variant].get(key)
    if v is None:
        v = doc["ideal"][ideal][variant].get(key)
    return v


def render(doc):
    """The lines of a PopResult's JSON document (PopResult.to_json)."""
    reg = doc["region"]
    how = "MPI_Pcontrol(1) .. MPI_Pcontrol(0)" if reg["marked"] else "MPI_Init .. MPI_Finalize"
    u = doc["useful"]
    out = [
        f"POP efficiency metrics: {doc['experiment']} ({doc['ranks']} ranks)",
        f"region: {how}, runtime {reg['runtime_s']:.6f} s",
        f"useful time: mean {u['mean_s']:.6f} s, max {u['max_s']:.6f} s, "
        f"total {u['total_s']:.6f} s over {len(u['seconds'])} locations",
    ]
    for k, label in IDEALS:
        t = doc["ideal"][k]["t_ideal_s"]
        why = doc["ideal"][k].get("note")
        what = "ideal-network replay" if k == "replay" else "critical path of useful computation"
        out.append(
            f"ideal runtime ({what}): "
            + (f"{t:.6f} s" if t is not None else f"n/a{': ' + why if why else ''}")
        )
    cols = [(v, k) for v in ("multiplicative", "additive") for k, _ in IDEALS]
    rows = []
    for key, name, depth in FACTORS:
        if (key == "global_efficiency" or "scaling" in key) and key not in doc["scaling"]:
            continue  # without a reference run
        rows.append(("  " * depth + name, [_pct(_value(doc, v, k, key)) for v, k in cols]))
    width = max(len(r[0]) for r in rows) + 2
    w = max(12, *(len(v) + 2 for r in rows for v in r[1]))
    out.append("")
    out.append(" " * width + f"{'multiplicative':^{2 * w}}{'additive':^{2 * w}}")
    out.append(" " * width + "".join(f"{lab:>{w}}" for _ in range(2) for _, lab in IDEALS))
    for name, vals in rows:
        out.append(f"{name:<{width}}" + "".join(f"{v:>{w}}" for v in vals))
    sc = doc["scaling"]
    if sc:
        ref = doc["references"][0]
        out.append("")
        out.append(
            f"scaling against {ref['experiment']} ({ref['ranks']} ranks), {sc['mode']} scaling "
            f"(ranks ratio {sc['ranks_ratio']:.3g})"
        )
        hy = sc.get("hybrid")
        if isinstance(hy, dict):
            out.append(
                f"  MPI+OpenMP (sampled): Computation Scaling {_pct(hy['computation_scaling'])}, "
                f"Global Efficiency {_pct(hy['global_efficiency'])} (threads ratio "
                f"{hy['threads_ratio']:.3g})"
            )
        elif hy is not None:
            out.append(f"  MPI+OpenMP (sampled): {hy}")
    out += _threads(doc.get("threads"))
    for ref in doc["references"]:
        out += _threads(ref.get("threads"), f" of {ref['experiment']}")
    out.append("")
    io = u.get("io_seconds")
    if io is None:
        out.append("useful time per location (s):")
        for loc, s in zip(u["locations"], u["seconds"]):
            out.append(f"  rank {loc['rank']} thread {loc['thread']}: {s:.6f}")
    else:
        out.append("useful time and I/O time outside MPI (not useful) per location (s):")
        for loc, s, t in zip(u["locations"], u["seconds"], io):
            out.append(f"  rank {loc['rank']} thread {loc['thread']}: {s:.6f}  I/O {t:.6f}")
    for n in doc["notes"]:
        out.append(f"note: {n}")
    return out


# the hybrid rows (analysis/pop_threads.py), in pypop's order
THREAD_FACTORS = (
    ("parallel_efficiency", "Hybrid Parallel Efficiency", 0),
    ("mpi_parallel_efficiency", "MPI Parallel Efficiency", 1),
    ("omp_parallel_efficiency", "OpenMP Parallel Efficiency", 1),
    ("omp_serialisation_efficiency", "OpenMP Serialisation Efficiency", 2),
    ("omp_load_balance", "OpenMP Load Balance", 2),
    ("omp_region_efficiency", "OpenMP Region Efficiency", 2),
)


def _threads(th, of=""):
    """The lines of the sampled thread factors (of a reference: of names it), or the
    line saying why there are none."""
    if th is None:
        return []
    if isinstance(th, str):
        return ["", f"thread factors{of} (sampled): {th}"]
    out = ["", f"thread factors{of} (sampled, {th['threads']} threads):"]
    width = max(len(n) + 2 * d for _, n, d in THREAD_FACTORS) + 4
    out.append(" " * width + f"{'multiplicative':>16}{'additive':>12}")
    for key, name, depth in THREAD_FACTORS:
        m, a = th["multiplicative"].get(key), th["additive"].get(key)
        out.append(f"{'  ' * (depth + 1) + name:<{width}}{_pct(m):>16}{_pct(a):>12}")
    for r in th["ranks"]:
        par = " ".join(f"{x:.3f}" for x in r["parallel_useful_s"])
        out.append(
            f"  rank {r['rank']}: {len(r['threads'])} threads, serial {r['serial_s']:.3f} s, "
            f"in parallel regions {par} s, OpenMP LB {_pct(r['omp_load_balance'])}"
        )
    out += [f"note: {n}" for n in th.get("notes", ())]
    return out

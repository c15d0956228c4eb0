"""The MPI profile of a compact profile (model/compact.py): by function and by call site,
each call site with the statistics over the ranks that called it (min, mean, max, the
ranks of min and max, standard deviation, median and 90th percentile from the sketch; the
90th percentiles of its calls and bytes per rank too),
and the job's MPI share from the ranks' app_ns and mpi_ns. What a compact profile cannot
tell (per-rank tables, a function's per-rank balance, message sizes, counters) is said in
`missing`."""

import numpy as np

from perfweave.model.compact import RELATIVE_ERROR
from perfweave.model.profile import BRACKET
from perfweave.symbols import Symbolizer

MISSING = (
    "per-rank rows (MPI time of each rank, its call sites), a function's balance across "
    "ranks, message-size histograms, counters and caller frames' names: above "
    "--full-profile-ranks only the compact profile is written"
)


def analyze(p, top=20, symbolizer=None):
    """A dict for the report (perfweave report --json "compact")."""
    symbolizer = symbolizer or Symbolizer()
    ns = 1e-9
    app = p.rank_stats("app_ns")
    mpi = p.rank_stats("mpi_ns")
    calls = p.node_stats("calls")
    time = p.node_stats("time_ns")
    sent = p.node_stats("bytes_sent")
    recv = p.node_stats("bytes_recv")
    fn = p.nodes["fn"]
    # MPI_Init and MPI_Finalize bracket the application's time: not MPI time (as mpi_ns)
    shown = ~np.isin(np.asarray(p.functions, dtype=object)[fn], BRACKET) if len(fn) else fn > 0
    funcs = []
    for f in np.unique(fn[shown]):
        sel = fn == f
        funcs.append(
            {
                "name": p.functions[int(f)],
                "callsites": int(sel.sum()),
                "calls": int(calls["sum"][sel].sum()),
                "time_s": float(time["sum"][sel].sum()) * ns,
                "bytes_sent": int(sent["sum"][sel].sum()),
                "bytes_recv": int(recv["sum"][sel].sum()),
            }
        )
    funcs.sort(key=lambda r: (-r["time_s"], r["name"]))
    order = np.lexsort((np.arange(len(p.nodes)), -time["sum"]))
    order = order[shown[order]][:top]
    sites = []
    for i in order:
        node = p.nodes[i]
        obj = p.objects[node["object"]] if node["object"] >= 0 else ""
        where = symbolizer.resolve(obj, [int(node["offset"])])[0].short()
        t = time[i]
        mean = float(t["mean"])
        sites.append(
            {
                "function": p.functions[int(node["fn"])],
                "where": where,
                "ranks": int(t["n"]),
                "calls": int(calls["sum"][i]),
                "time_s": float(t["sum"]) * ns,
                "min_s": float(t["min"]) * ns,
                "mean_s": mean * ns,
                "max_s": float(t["max"]) * ns,
                "argmin": int(t["argmin"]),
                "argmax": int(t["argmax"]),
                "std_s": float(np.sqrt(max(t["m2"], 0.0) / t["n"])) * ns,
                "median_s": p.quantile(int(i), 0.5) * ns,
                "p90_s": p.quantile(int(i), 0.9) * ns,
                # NaN from a version-1 file: it kept the time's sketch only
                "calls_p90": p.quantile(int(i), 0.9, "calls"),
                "bytes_sent": int(sent["sum"][i]),
                "sent_p90": p.quantile(int(i), 0.9, "bytes_sent"),
                "bytes_recv": int(recv["sum"][i]),
                "recv_p90": p.quantile(int(i), 0.9, "bytes_recv"),
                "imbalance": float(t["max"]) / mean if mean > 0 else 0.0,
                "per_rank_kept": bool(int(i) in set(int(x) for x in p.top_nodes)),
            }
        )
    app_s, mpi_s = float(app["sum"]) * ns, float(mpi["sum"]) * ns
    return {
        "ranks": p.world_size,
        "app_s": app_s,
        "mpi_s": mpi_s,
        "mpi_pct": 100.0 * mpi_s / app_s if app_s > 0 else 0.0,
        "rank_mpi_s": {
            "min": float(mpi["min"]) * ns,
            "mean": float(mpi["mean"]) * ns,
            "max": float(mpi["max"]) * ns,
            "argmin": int(mpi["argmin"]),
            "argmax": int(mpi["argmax"]),
        },
        "functions": funcs[:top],
        "callsites": sites,
        "callsite_count": int(shown.sum()),
        "sketch_relative_error": RELATIVE_ERROR,
        "missing": MISSING,
    }

"""The gpu module's analysis (runtime/modules/gpu.c; docs/gpu.md): per rank, device and
stream, kernel time by demangled name with launches, grid and block; copies by direction
and memory kinds with bytes and rates; each device's busy and idle share of the process's
measured life; the host's time blocked waiting for the device (CUPTI's synchronisation
records) and its share. `analyze` takes the model (model/gpu.py, ExperimentDir.gpu)."""

import ctypes
import ctypes.util
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from perfweave.model.table import records, table

RECORDED_BY = "run a program that uses CUDA under `perfweave run` (the gpu module is on by default)"

# advice thresholds (docs/gpu.md "Advice")
HOST_WAIT_PCT = 10.0  # the host waited for the GPU at least this % of the ranks' time
IDLE_PCT = 50.0  # a device idle at least this % of its rank's measured life
PAGEABLE_PCT = 10.0  # copies touching pageable memory: at least this % of the copy time
COPY_SHARE_PCT = 1.0  # ... when the copies take at least this % of the ranks' time


@lru_cache(maxsize=None)
def _cxa_demangle():
    """libstdc++'s __cxa_demangle through ctypes, None where there is none."""
    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        f = ctypes.CDLL(name).__cxa_demangle
    except (OSError, AttributeError):
        return None
    f.restype = ctypes.c_void_p
    f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return f


@lru_cache(maxsize=4096)
def demangle(name):
    """A kernel's C++ name as written (`_Z7stencilPKdPdi` -> `stencil(double const*,
    double*, int)`); a name that is not mangled, or that fails, as it is."""
    f = _cxa_demangle()
    if not name.startswith("_Z") or f is None:
        return name
    status = ctypes.c_int(0)
    p = f(name.encode(), None, None, ctypes.byref(status))
    if not p or status.value != 0:
        return name
    try:
        return ctypes.string_at(p).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(p))


@dataclass
class GpuResult:
    """The GPU activity of every process that loaded CUDA.

    per_rank: rank, host, pid, status, wall_s (measured life), kernel_s, copy_s, gpu_wait_s
    (host blocked in synchronisation), gpu_wait_pct (of wall_s), records, dropped, lost.
    devices: rank, device, busy_s, busy_pct and idle_pct (of the rank's wall_s), first_s and
    last_s (from the rank's start).
    kernels: rank, device, stream, name (demangled), mangled, grid, block, launches, time_s,
    mean_s, min_s, max_s; most time first.
    copies: rank, device, stream, direction (HtoD, DtoH, ..., memset), src_kind, dst_kind,
    count, bytes, time_s, rate_gbs (bytes / time, GB/s).
    syncs: rank, stream (-1: the context), type, count, time_s, max_s.
    apis: rank, layer (runtime, driver), name, count, time_s."""

    processes: int
    active: int
    launches: int
    kernel_s: float
    copy_bytes: int
    copy_s: float
    gpu_wait_s: float
    dropped: int
    lost: int
    per_rank: np.ndarray
    devices: np.ndarray
    kernels: np.ndarray
    copies: np.ndarray
    syncs: np.ndarray
    apis: np.ndarray
    lines: list  # one line per process whose GPU activity could not be recorded
    notes: list
    advice: list = None  # analysis/advice.py rule_sections' items

    def to_json(self):
        out = {
            k: getattr(self, k)
            for k in (
                "processes", "active", "launches", "kernel_s", "copy_bytes", "copy_s",
                "gpu_wait_s", "dropped", "lost", "lines", "notes", "advice",
            )
        }  # fmt: skip
        for k in ("per_rank", "devices", "kernels", "copies", "syncs", "apis"):
            out[k] = records(getattr(self, k))
        return out


def _rank_col(p, n):
    return [p.rank] * n


def _stack(parts, columns):
    """One table of the processes' parts ({column: list}), concatenated in order."""
    return table({c: [v for part in parts for v in part[c]] for c in columns})


def analyze(gpu):
    """The GpuResult of a Gpu."""
    procs = list(gpu.processes)
    per_rank, devices, kernels, copies, syncs, apis, lines = [], [], [], [], [], [], []
    for p in procs:
        if p.status != "active":
            who = f"rank {p.rank}" if p.rank >= 0 else f"{p.host}:{p.pid}"
            lines.append(f"{who}: {p.note}")
        k, c, s, a, b = p.kernels, p.copies, p.syncs, p.apis, p.busy
        wall = p.wall_ns
        ns = 1e-9
        per_rank.append(
            {
                "rank": [p.rank], "host": [p.host], "pid": [p.pid], "status": [p.status],
                "wall_s": [wall * ns], "kernel_s": [int(k["total_ns"].sum()) * ns],
                "copy_s": [int(c["total_ns"].sum()) * ns],
                "gpu_wait_s": [int(s["total_ns"].sum()) * ns],
                "gpu_wait_pct": [100.0 * int(s["total_ns"].sum()) / wall if wall else 0.0],
                "records": [p.records], "dropped": [p.dropped], "lost": [p.lost],
            }
        )  # fmt: skip
        busy_pct = 100.0 * b["busy_ns"] / wall if wall else np.zeros(len(b))
        devices.append(
            {
                "rank": _rank_col(p, len(b)), "device": b["device"].tolist(),
                "busy_s": (b["busy_ns"] * ns).tolist(), "busy_pct": list(busy_pct),
                "idle_pct": list(100.0 - busy_pct),
                "first_s": ((b["first_ns"] - p.t_start_ns) * ns).tolist(),
                "last_s": ((b["last_ns"] - p.t_start_ns) * ns).tolist(),
            }
        )  # fmt: skip
        grid = [f"{r['grid_x']}x{r['grid_y']}x{r['grid_z']}" for r in k]
        block = [f"{r['block_x']}x{r['block_y']}x{r['block_z']}" for r in k]
        count = np.maximum(k["count"], 1)
        kernels.append(
            {
                "rank": _rank_col(p, len(k)), "device": k["device"].tolist(),
                "stream": k["stream"].tolist(), "name": [demangle(n) for n in k["name"]],
                "mangled": list(k["name"]), "grid": grid, "block": block,
                "launches": k["count"].tolist(), "time_s": (k["total_ns"] * ns).tolist(),
                "mean_s": (k["total_ns"] / count * ns).tolist(),
                "min_s": (k["min_ns"] * ns).tolist(), "max_s": (k["max_ns"] * ns).tolist(),
            }
        )  # fmt: skip
        secs = c["total_ns"] * ns
        copies.append(
            {
                "rank": _rank_col(p, len(c)), "device": c["device"].tolist(),
                "stream": c["stream"].tolist(), "direction": list(c["direction"]),
                "src_kind": list(c["src_kind"]), "dst_kind": list(c["dst_kind"]),
                "count": c["count"].tolist(), "bytes": c["bytes"].tolist(),
                "time_s": secs.tolist(),
                "rate_gbs": np.where(secs > 0, c["bytes"] / np.where(secs > 0, secs, 1) / 1e9,
                                     0.0).tolist(),
            }
        )  # fmt: skip
        syncs.append(
            {
                "rank": _rank_col(p, len(s)), "stream": s["stream"].tolist(),
                "type": list(s["type"]), "count": s["count"].tolist(),
                "time_s": (s["total_ns"] * ns).tolist(), "max_s": (s["max_ns"] * ns).tolist(),
            }
        )  # fmt: skip
        apis.append(
            {
                "rank": _rank_col(p, len(a)), "layer": list(a["layer"]), "name": list(a["name"]),
                "count": a["count"].tolist(), "time_s": (a["total_ns"] * ns).tolist(),
            }
        )  # fmt: skip
    cols = {
        "per_rank": ["rank", "host", "pid", "status", "wall_s", "kernel_s", "copy_s",
                     "gpu_wait_s", "gpu_wait_pct", "records", "dropped", "lost"],
        "devices": ["rank", "device", "busy_s", "busy_pct", "idle_pct", "first_s", "last_s"],
        "kernels": ["rank", "device", "stream", "name", "mangled", "grid", "block", "launches",
                    "time_s", "mean_s", "min_s", "max_s"],
        "copies": ["rank", "device", "stream", "direction", "src_kind", "dst_kind", "count",
                   "bytes", "time_s", "rate_gbs"],
        "syncs": ["rank", "stream", "type", "count", "time_s", "max_s"],
        "apis": ["rank", "layer", "name", "count", "time_s"],
    }  # fmt: skip
    t = {
        name: _stack(parts, cols[name])
        for name, parts in (
            ("per_rank", per_rank), ("devices", devices), ("kernels", kernels),
            ("copies", copies), ("syncs", syncs), ("apis", apis),
        )
    }  # fmt: skip
    for name, key in (("kernels", "time_s"), ("copies", "time_s"), ("apis", "time_s")):
        if len(t[name]):
            t[name] = t[name][np.argsort(-t[name][key], kind="stable")]
    pr = t["per_rank"]
    res = GpuResult(
        processes=len(procs),
        active=sum(p.status == "active" for p in procs),
        launches=int(t["kernels"]["launches"].sum()) if len(t["kernels"]) else 0,
        kernel_s=float(pr["kernel_s"].sum()) if len(pr) else 0.0,
        copy_bytes=int(t["copies"]["bytes"].sum()) if len(t["copies"]) else 0,
        copy_s=float(pr["copy_s"].sum()) if len(pr) else 0.0,
        gpu_wait_s=float(pr["gpu_wait_s"].sum()) if len(pr) else 0.0,
        dropped=sum(p.dropped for p in procs),
        lost=sum(p.lost for p in procs),
        lines=lines,
        notes=list(gpu.notes),
        **t,
    )
    res.advice = _advice(res)
    return res


def _advice(res):
    """What the figures suggest, thresholds above: the host waiting for the GPU, a device
    idle, copies through pageable memory."""
    out = []
    wall = float(res.per_rank["wall_s"].sum()) if len(res.per_rank) else 0.0
    if not wall or not res.active:
        return out
    wait_pct = 100 * res.gpu_wait_s / wall
    if wait_pct >= HOST_WAIT_PCT:
        out.append(
            {
                "rule": "gpu_host_wait",
                "severity": wait_pct,
                "text": f"The host waited {wait_pct:.1f} % of the ranks' time for the GPU "
                "(stream, event and device synchronisation). What usually helps: give the "
                "host (or MPI) work to do while kernels run, with streams and asynchronous "
                "copies, and synchronise as late as the data allows.",
                "evidence": {"gpu_wait_s": res.gpu_wait_s, "wall_s": wall},
            }
        )
    rank_wall = {int(r["rank"]): float(r["wall_s"]) for r in res.per_rank}
    for d in res.devices:
        if d["idle_pct"] >= IDLE_PCT:
            out.append(
                {
                    "rule": "gpu_idle",
                    # its idle time, as a share of the ranks' summed time
                    "severity": float(d["idle_pct"]) * rank_wall.get(int(d["rank"]), 0) / wall,
                    "text": f"GPU {d['device']} of rank {d['rank']} ran no kernel or copy "
                    f"{d['idle_pct']:.0f} % of the rank's time: the work on it is small "
                    "against the host's, or waits for the host (launches, copies, MPI).",
                    "evidence": {"rank": int(d["rank"]), "device": int(d["device"])},
                }
            )
    c = res.copies
    if len(c) and 100 * res.copy_s / wall >= COPY_SHARE_PCT:
        pageable = (c["src_kind"] == "pageable") | (c["dst_kind"] == "pageable")
        share = 100 * float(c["time_s"][pageable].sum()) / max(res.copy_s, 1e-12)
        if share >= PAGEABLE_PCT:
            out.append(
                {
                    "rule": "gpu_pageable_copies",
                    "severity": share * res.copy_s / wall,
                    "text": f"{share:.0f} % of the copy time is from or to pageable host "
                    f"memory ({int(c['bytes'][pageable].sum()):,} bytes): such copies are "
                    "staged and cannot overlap kernels. What usually helps: pinned buffers "
                    "(cudaHostAlloc, cudaHostRegister).",
                    "evidence": {"pageable_share_pct": share},
                }
            )
    return out

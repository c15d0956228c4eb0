"""The gpu module's data (runtime/modules/gpu.c, `perfweave run`, on by default): per
process that loaded CUDA, CUPTI's activity records aggregated per device, context and
stream: kernels (by name, grid and block), copies and memsets (by direction and memory
kinds), the host's waits for the device, CUDA API calls, and each device's busy time.
readers/gpu.py builds it from gpu/*.json, `from_literal` from plain values (tests)."""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import (
    GPU_API_COLUMNS,
    GPU_BUSY_COLUMNS,
    GPU_COPY_COLUMNS,
    GPU_KERNEL_COLUMNS,
    GPU_SYNC_COLUMNS,
)

# the text columns of each table (the others are int64)
_TEXT = {"name", "direction", "src_kind", "dst_kind", "type", "layer"}
TABLES = {
    "kernels": GPU_KERNEL_COLUMNS,
    "copies": GPU_COPY_COLUMNS,
    "syncs": GPU_SYNC_COLUMNS,
    "apis": GPU_API_COLUMNS,
    "busy": GPU_BUSY_COLUMNS,
}


def rows_table(columns, rows):
    """A structured array of rows (lists in the order of columns)."""
    dt = [(c, object if c in _TEXT else np.int64) for c in columns]
    out = np.zeros(len(rows), dt)
    for i, r in enumerate(rows):
        out[i] = tuple(r)
    return out


@dataclass
class GpuProcess:
    """One process that loaded CUDA (gpu/rank-R.json or gpu/HOST.PID.json). Times are ns
    on the process's CLOCK_MONOTONIC (t_start_ns: the measurement's start)."""

    rank: int
    pid: int
    host: str
    state: str
    status: str  # "active", or why not ("no-cupti", "cupti-error")
    note: str  # the one line the report prints when not active
    cuda: str
    cupti: str
    clock: str  # "callback" or "offset"
    clock_offset_ns: int
    t_start_ns: int
    t_end_ns: int
    records: int
    dropped: int
    lost: int
    buffers: int
    kernels: np.ndarray
    copies: np.ndarray
    syncs: np.ndarray
    apis: np.ndarray
    busy: np.ndarray

    @property
    def wall_ns(self):
        return max(self.t_end_ns - self.t_start_ns, 0)


@dataclass
class Gpu:
    """Every process's GPU activity (ranks in order, then processes without a rank) and
    what could not be read (notes)."""

    processes: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def __bool__(self):
        return bool(self.processes)

    @classmethod
    def from_literal(cls, processes, notes=()):
        """A Gpu of plain values: processes, dicts of GpuProcess's fields whose tables are
        lists of rows (missing ones empty; host "h", state "complete", status "active")."""
        out = []
        for p in processes:
            p = {
                "host": "h", "pid": 0, "state": "complete", "status": "active", "note": "",
                "cuda": "libcudart.so.12", "cupti": "libcupti.so.12", "clock": "callback",
                "clock_offset_ns": 0, "records": 0, "dropped": 0, "lost": 0, "buffers": 0,
                "t_start_ns": 0, "t_end_ns": 0,
                **p,
            }  # fmt: skip
            for name, cols in TABLES.items():
                p[name] = rows_table(cols, p.get(name, []))
            out.append(GpuProcess(**p))
        return cls(sorted(out, key=process_key), list(notes))


def process_key(p):
    """The order of Gpu.processes."""
    return (p.rank < 0, p.rank, p.host, p.pid)

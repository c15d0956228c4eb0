"""The wait-state analysis that `perfweave analyze` saves into an experiment
(analysis/waitstates.json, docs/wait-states.md; analysis/waitstates/ computes it) as
tables: readers/results.py builds it from the file (`from_json`), the report's section
(report/sections/wait_states.py) and the Python API (`wait_states()`) read it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave.model.table import column, table


@dataclass
class WaitStatesResult:
    """The saved wait-state analysis. Tables (numpy structured arrays,
    model/table.py):

    metrics: one row per metric of the tree (analysis/metrics.py), depth first: id, name,
      parent (the parent's id, None for a root), unit (s, count, bytes), depth,
      description, total (in its unit: seconds, a count, bytes), pct (of the total time,
      or of its root metric's total).
    callpaths: one row per call path: id, name ('main > solve > MPI_Recv @ solver.c:88'),
      function and where (of its leaf; "" without).
    values: every non-zero value, by metric (in the order of metrics), then as saved:
      metric (id), callpath (id), rank, value (in the metric's unit)."""

    metrics: np.ndarray
    callpaths: np.ndarray
    values: np.ndarray
    complete: bool = False
    notes: list = field(default_factory=list)
    world_size: int = 0
    events: int = 0

    @classmethod
    def from_json(cls, doc):
        """The result of the saved document doc (checked: readers/results.py)."""
        ms = doc.get("metrics", [])
        cps = doc.get("callpaths", [])
        metrics = table(
            {
                "id": column([m["id"] for m in ms]),
                "name": column([m["name"] for m in ms]),
                "parent": column([m.get("parent") for m in ms]),
                "unit": column([m.get("unit", "") for m in ms]),
                "depth": np.array([m.get("depth", 0) for m in ms], np.int64),
                "description": column([m.get("description", "") for m in ms]),
                "total": np.array([m["total"] for m in ms], np.float64),
                "pct": np.array([m["pct"] for m in ms], np.float64),
            },
            len(ms),
        )
        callpaths = table(
            {
                "id": np.array([cp["id"] for cp in cps], np.int64),
                **{k: column([cp.get(k, "") for cp in cps]) for k in ("name", "function", "where")},
            },
            len(cps),
        )
        rows = [(m["id"], p, r, v) for m in ms for p, r, v in m["values"]]
        values = table(
            {
                "metric": column([x[0] for x in rows]),
                "callpath": np.array([x[1] for x in rows], np.int64),
                "rank": np.array([x[2] for x in rows], np.int64),
                "value": np.array([x[3] for x in rows], np.float64),
            },
            len(rows),
        )
        return cls(
            metrics,
            callpaths,
            values,
            complete=bool(doc.get("complete", False)),
            notes=list(doc.get("notes", [])),
            world_size=int(doc.get("world_size", 0)),
            events=int(doc.get("events", 0)),
        )

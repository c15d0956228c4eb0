"""The wait-state analysis as tables: what analysis/waitstates/ returns, what `perfweave
analyze` prints and saves into an experiment (analysis/waitstates.json, docs/wait-states.md:
`to_json`), and what readers/results.py reads back from the file (`from_json`). The report's
section (report/sections/wait_states.py), the analyze text (report/waitstates.py) and the
Python API (`wait_states()`) read it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave.model.table import column, records, table

FORMAT = "perfweave-waitstates"
VERSION = 1
# the values table: one row per non-zero (metric, call path, rank)
VALUES_DTYPE = np.dtype(
    [("metric", object), ("callpath", np.int64), ("rank", np.int64), ("value", np.float64)]
)
COUNTS = (
    "messages",
    "unmatched_sends",
    "unmatched_receives",
    "collectives",
    "incomplete_collectives",
    "fences",
    "access_epochs",
    "exposure_epochs",
    "clock_violations",
)


def split_site(text):
    """A label's 'path|buildid|offset' (a call site's or a function's address) ->
    (path, offset) or None."""
    parts = text.split("|")
    if len(parts) != 3 or not parts[2]:
        return None
    try:
        return parts[0], int(parts[2], 16)
    except ValueError:
        return None


@dataclass
class WaitStatesResult:
    """A wait-state analysis. Tables (numpy structured arrays, model/table.py):

    metrics: one row per metric of the tree (analysis/metrics.py), depth first: id, name,
      parent (the parent's id, None for a root), unit (s, count, bytes), depth,
      description, total (in its unit: seconds, a count, bytes), pct (of the total time,
      or of its root metric's total).
    callpaths: one row per call path: id, parent (the id of the path one frame shorter,
      None for a root), labels (a tuple, from the root: "program", then
      "F:object|buildid|offset" or "N:name" for user functions, "M:MPI_Function@site"
      for an MPI call site), name ('main > solve > MPI_Recv @ solver.c:88'), function
      and where (of its leaf; "" until named: report/waitstates.py name_paths).
    values: every non-zero value, by metric (in the order of metrics): metric (id),
      callpath (id), rank, value (in the metric's unit).
    ranks: one row per analysed rank: rank, host, state, complete, time_s (MPI_Init to
      MPI_Finalize).

    counts: {messages, unmatched_sends, unmatched_receives, collectives,
    incomplete_collectives, fences, access_epochs, exposure_epochs, clock_violations};
    analysis: {load_s,
    patterns_s, processes}; complete: every rank's trace whole and every pattern
    computed, else notes say why."""

    metrics: np.ndarray
    callpaths: np.ndarray
    values: np.ndarray
    ranks: np.ndarray = field(default_factory=lambda: _ranks([]))
    complete: bool = False
    notes: list = field(default_factory=list)
    world_size: int = 0
    events: int = 0
    counts: dict = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    analysis: dict = field(default_factory=dict)
    experiment: str = ""
    # the clock condition (analysis/waitstates/clockcheck.py check; docs/wait-states.md):
    # violations per (kind, from rank, to rank, call path) and the correction, if made
    clock: dict = field(default_factory=dict)

    def metric(self, mid):
        """The row of metric mid as a dict."""
        return records(self.metrics[self.metrics["id"] == mid])[0]

    def values_of(self, mid):
        """The values table's rows of metric mid."""
        return self.values[self.values["metric"] == mid]

    def per_rank(self, mid):
        """{rank: the metric summed over call paths} (ranks with a value)."""
        v = self.values_of(mid)
        ranks, inv = np.unique(v["rank"], return_inverse=True)
        return dict(zip(ranks.tolist(), np.bincount(inv, v["value"]).tolist()))

    def to_json(self):
        """The saved document (docs/wait-states.md, "The JSON result")."""
        values = {mid: [] for mid in self.metrics["id"].tolist()}
        v = self.values
        for mid, p, r, x in zip(*(v[k].tolist() for k in ("metric", "callpath", "rank", "value"))):
            values[mid].append([p, r, x])
        metrics = []
        for m in records(self.metrics):
            unit = m["unit"]
            total = m["total"] if unit == "s" else int(m["total"])
            vals = (
                values[m["id"]] if unit == "s" else [[p, r, int(x)] for p, r, x in values[m["id"]]]
            )
            metrics.append({**m, "total": total, "values": vals})
        paths = [
            {
                "id": cp["id"],
                "labels": list(cp["labels"]),
                "parent": cp["parent"],
                **({k: cp[k] for k in ("name", "function", "where")} if cp["name"] else {}),
            }
            for cp in records(self.callpaths)
        ]
        return {
            "format": FORMAT,
            "version": VERSION,
            "experiment": self.experiment,
            "complete": self.complete,
            "notes": list(self.notes),
            "world_size": self.world_size,
            "ranks": records(self.ranks),
            "events": self.events,
            "counts": dict(self.counts),
            "analysis": dict(self.analysis),
            "metrics": metrics,
            "callpaths": paths,
            **({"clock_condition": self.clock} if self.clock else {}),
        }

    @classmethod
    def from_json(cls, doc):
        """The result of the saved document doc (checked: readers/results.py)."""
        ms = doc.get("metrics", [])
        rows = [(m["id"], p, r, v) for m in ms for p, r, v in m["values"]]
        return cls.from_literal(
            ms,
            doc.get("callpaths", []),
            rows,
            ranks=doc.get("ranks", []),
            complete=bool(doc.get("complete", False)),
            notes=list(doc.get("notes", [])),
            world_size=int(doc.get("world_size", 0)),
            events=int(doc.get("events", 0)),
            counts={**dict.fromkeys(COUNTS, 0), **doc.get("counts", {})},
            analysis=dict(doc.get("analysis", {})),
            experiment=str(doc.get("experiment", "")),
            clock=dict(doc.get("clock_condition", {})),
        )

    @classmethod
    def from_literal(cls, metrics, callpaths, values, ranks=(), **kw):
        """A result from plain rows (tests, from_json): metrics: dicts with id, name,
        total, pct (and parent, unit, depth, description); callpaths: dicts with id (and
        labels, parent, name, function, where); values: (metric id, callpath, rank,
        value); ranks: dicts with rank (and host, state, complete, time_s); kw: the
        other fields."""
        ms, cps = list(metrics), list(callpaths)
        mt = table(
            {
                "id": column([m["id"] for m in ms]),
                "name": column([m["name"] for m in ms]),
                "parent": column([m.get("parent") for m in ms]),
                "unit": column([m.get("unit", "s") for m in ms]),
                "depth": np.array([m.get("depth", 0) for m in ms], np.int64),
                "description": column([m.get("description", "") for m in ms]),
                "total": np.array([m["total"] for m in ms], np.float64),
                "pct": np.array([m["pct"] for m in ms], np.float64),
            },
            len(ms),
        )
        labels = np.empty(len(cps), object)
        labels[:] = [tuple(cp.get("labels", ())) for cp in cps]
        ct = table(
            {
                "id": np.array([cp["id"] for cp in cps], np.int64),
                "parent": column([cp.get("parent") for cp in cps]),
                "labels": labels,
                **{k: column([cp.get(k, "") for cp in cps]) for k in ("name", "function", "where")},
            },
            len(cps),
        )
        rows = list(values)
        vt = np.zeros(len(rows), VALUES_DTYPE)
        for i, name in enumerate(VALUES_DTYPE.names):
            vt[name] = [x[i] for x in rows]
        return cls(mt, ct, vt, _ranks(ranks), **kw)


def _ranks(rows):
    rows = list(rows)
    return table(
        {
            "rank": np.array([r["rank"] for r in rows], np.int64),
            "host": column([r.get("host", "") for r in rows]),
            "state": column([r.get("state", "") for r in rows]),
            "complete": np.array([bool(r.get("complete", False)) for r in rows], bool),
            "time_s": np.array([r.get("time_s", 0.0) for r in rows], np.float64),
        },
        len(rows),
    )

"""The call-stack samples of one process (runtime/modules/samples.c, `perfweave run
--sample`; docs/format.md "Samples"): its records in the file's layout (SAMPLE_DTYPE: time,
thread slot, activity, depth, frames as (object index, offset), counters) and its description
(samples/NAME.json: rank, pid, host, activities, threads, objects, ...). readers/samples.py
builds one per process from the files (`ExperimentDir.samples`, a list of them),
`from_literal` from plain values (tests); analysis/samples/ and analysis/timebins.py
take the list."""

from dataclasses import dataclass

import numpy as np

from perfweave._format import ACTIVITIES
from perfweave.dtypes import SAMPLE_COUNTERS, SAMPLE_DTYPE, SAMPLE_FRAMES


@dataclass
class ProcessSamples:
    name: str  # the files' name: rank-R, or HOST.PID without MPI
    meta: dict  # the description (samples/NAME.json)
    records: np.ndarray  # SAMPLE_DTYPE
    objects: list  # paths of the loaded objects; records' object indexes them (-1: unknown)

    @property
    def rank(self):
        return int(self.meta.get("rank", -1))

    @classmethod
    def from_literal(
        cls,
        samples,
        objects=(),
        rank=0,
        activities=tuple(ACTIVITIES),
        threads=1,
        interval_ns=1_000_000,
        counters=(),
        **meta,
    ):
        """One process's samples of plain values. samples: dicts with `frames`
        ([(object, offset), ...], innermost first; object a path of `objects` or its
        index) and optionally `t` (ns; default sample i at (i + 1) * interval_ns),
        `thread` (slot, 0: the main thread), `activity` (a name of `activities` or its
        index; default compute) and `counters` (the events' cumulative values at the
        sample, -1: not read). The description: rank, pid (1000 + rank), host "h", activities,
        `threads` slots (slot k: tid pid + k, every sample kept, `interval_ns`),
        `counters` (the events' names), t_start 0 and t_end the last sample's time;
        `meta` adds or replaces keys."""
        objects = list(objects)
        rec = np.zeros(len(samples), SAMPLE_DTYPE)
        rec["object"] = -1
        rec["counters"] = -1
        for i, s in enumerate(samples):
            frames = list(s.get("frames", ()))
            if len(frames) > SAMPLE_FRAMES:
                raise ValueError(f"sample {i}: more than {SAMPLE_FRAMES} frames")
            activity = s.get("activity", "compute")
            rec["t"][i] = s.get("t", (i + 1) * interval_ns)
            rec["thread"][i] = s.get("thread", 0)
            rec["activity"][i] = (
                activities.index(activity) if isinstance(activity, str) else activity
            )
            rec["depth"][i] = len(frames)
            for k, (m, o) in enumerate(frames):
                rec["object"][i, k] = objects.index(m) if isinstance(m, str) else m
                rec["offset"][i, k] = o
            values = list(s.get("counters", ()))[:SAMPLE_COUNTERS]
            rec["counters"][i, : len(values)] = values
        pid = meta.get("pid", 1000 + max(rank, 0))
        slots = max(threads, int(rec["thread"].max()) + 1 if len(rec) else 0)
        kept = np.bincount(rec["thread"], minlength=slots) if len(rec) else [0] * slots
        desc = {
            "rank": rank,
            "pid": pid,
            "host": "h",
            "frames": SAMPLE_FRAMES,
            "counters": list(counters),
            "samples": len(rec),
            "dropped": {"threads": 0, "timers": 0, "memory": 0},
            "t_start": 0,
            "t_end": int(rec["t"].max()) if len(rec) else 0,
            "activities": list(activities),
            "threads": [
                {
                    "tid": pid + k,
                    "taken": int(kept[k]),
                    "kept": int(kept[k]),
                    "thinned": 0,
                    "interval_ns": interval_ns,
                }
                for k in range(slots)
            ],
            "objects": [[m, ""] for m in objects],
            **meta,
        }
        name = f"rank-{rank}" if rank >= 0 else f"{desc['host']}.{pid}"
        return cls(name, desc, rec, objects)

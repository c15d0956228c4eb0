"""The result of `perfweave boundness` (docs/boundness.md): per routine of the program its
CPU time in the baseline runs and beside the memory-bandwidth stressor, the slowdown with
its interval and the verdict, with what the runs and the machine were. What
analysis/boundness.py makes, what the verb saves as BOUNDNESS/boundness.json (`to_json`)
and what readers/boundness.py reads back (`from_json`); the report's section and the
Python API (`boundness()`) read it."""

from dataclasses import dataclass, field

import numpy as np

from perfweave.model.table import records

FORMAT = "perfweave-boundness"
VERSION = 1
VERDICTS = ("bandwidth-bound", "compute-bound", "mixed", "undetermined")
# the routines table's columns, in order (docs/boundness.md "The JSON result")
ROUTINE_COLUMNS = (
    "routine",
    "baseline_cpu_s",
    "stressor_cpu_s",
    "baseline_samples",
    "stressor_samples",
    "baseline_share_pct",
    "slowdown",
    "slowdown_lo",
    "slowdown_hi",
    "wall_slowdown",
    "verdict",
    "reason",
)


@dataclass
class BoundnessResult:
    """command, rounds; setup: the stressor, the machine and the rule (JSON's "setup");
    runs: one dict per kept run; routines: a table of ROUTINE_COLUMNS, most baseline CPU
    time first; live_sites: {routine: [heap sites live while it ran]} (with --heap);
    not_available: what this machine could not vary, one line each; notes; control: the
    control's figures (analysis/boundness.py control(): the reference triad's and FMA
    chain's slowdowns beside the stressor with their intervals, bites, reason), None
    where no control ran."""

    command: list
    rounds: int
    setup: dict
    runs: list
    routines: np.ndarray
    live_sites: dict = field(default_factory=dict)
    not_available: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    control: dict = None

    def verdict(self, routine):
        """The verdict of one routine (KeyError when it was not sampled)."""
        rows = self.routines[self.routines["routine"] == routine]
        if not len(rows):
            raise KeyError(routine)
        return str(rows["verdict"][0])

    def to_json(self):
        rows = records(self.routines)
        for r in rows:
            # an undefined figure (a routine not sampled in one variant) is null, not NaN
            r.update({k: None for k, v in r.items() if isinstance(v, float) and v != v})
            r["live_sites"] = self.live_sites.get(r["routine"], [])
        return {
            "format": FORMAT,
            "version": VERSION,
            "command": list(self.command),
            "rounds": self.rounds,
            "setup": self.setup,
            "not_available": list(self.not_available),
            "runs": list(self.runs),
            "routines": rows,
            "notes": list(self.notes),
            "control": self.control,
        }

    @classmethod
    def from_json(cls, doc):
        rows = doc.get("routines", [])
        routines = empty_routines()
        if rows:
            routines = np.zeros(len(rows), routines.dtype)
            for c in ROUTINE_COLUMNS:
                kind = routines.dtype[c].kind
                nan = np.nan if kind == "f" else "" if kind == "O" else 0
                routines[c] = [nan if r.get(c) is None else r[c] for r in rows]
        return cls(
            command=list(doc.get("command", [])),
            rounds=int(doc.get("rounds", 0)),
            setup=dict(doc.get("setup", {})),
            runs=list(doc.get("runs", [])),
            routines=routines,
            live_sites={r["routine"]: r.get("live_sites", []) for r in rows},
            not_available=list(doc.get("not_available", [])),
            notes=list(doc.get("notes", [])),
            control=doc.get("control"),
        )


def empty_routines():
    """A routines table of no rows."""
    kinds = {"routine": object, "verdict": object, "reason": object}
    kinds.update({c: np.int64 for c in ("baseline_samples", "stressor_samples")})
    return np.zeros(0, [(c, kinds.get(c, np.float64)) for c in ROUTINE_COLUMNS])

"""Reader of the results perfweave saves into an experiment: analysis/waitstates.json
(`perfweave analyze`, docs/wait-states.md), checked so that report and the Python API
can trust its structure, as the model of model/waitstates.py."""

from pathlib import Path

from perfweave.errors import FormatError
from perfweave.model.waitstates import WaitStatesResult
from perfweave.readers.files import check, read_json

WAITSTATES_FILE = Path("analysis") / "waitstates.json"

# the keys readers use, with their types
WAITSTATES_SCHEMA = {
    "complete": bool,
    "notes": [str],
    "world_size": int,
    "events": int,
    "metrics": [
        {
            "id": str,
            "name": str,
            "parent": str,
            "unit": str,
            "depth": int,
            "total": float,
            "pct": float,
            "values": [[float]],
        }
    ],
    "callpaths": [{"id": int, "labels": [str], "name": str, "function": str, "where": str}],
}


def saved_waitstates(exp):
    """The saved wait-state analysis of experiment exp, None when there is none
    (readers/kinds.py: Experiment.waitstates); FormatError when it is damaged."""
    try:
        return read_waitstates(exp)
    except FileNotFoundError:
        return None


def read_waitstates(exp):
    """The saved wait-state analysis of experiment exp (a WaitStatesResult);
    FileNotFoundError when there is none, FormatError when it is damaged."""
    path = Path(exp) / WAITSTATES_FILE
    res = check(
        read_json(path, "wait-state analysis"), WAITSTATES_SCHEMA, path, "wait-state analysis"
    )
    for m in res.get("metrics", []):
        if not {"id", "name", "total", "pct", "values"} <= m.keys() or not all(
            len(v) == 3 and all(isinstance(x, int) for x in v[:2]) for v in m["values"]
        ):
            raise FormatError(f"{path}: corrupt wait-state analysis (metric {m.get('id')})")
    if not all("id" in cp for cp in res.get("callpaths", [])):
        raise FormatError(f"{path}: corrupt wait-state analysis (call path without id)")
    return WaitStatesResult.from_json(res)

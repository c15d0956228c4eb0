"""Reader of the results perfweave saves into an experiment: analysis/waitstates.json
(`perfweave analyze`, docs/wait-states.md), checked so that report and the Python API
can trust its structure, as the model of model/waitstates.py."""

from pathlib import Path

from perfweave.errors import FormatError
from perfweave.model.waitstates import COUNTS, FORMAT, VERSION, WaitStatesResult
from perfweave.readers.files import check, read_result, short

WAITSTATES_FILE = Path("analysis") / "waitstates.json"

# every key of the document (docs/wait-states.md, "The JSON result"), with its type
WAITSTATES_SCHEMA = {
    "format": str,
    "version": int,
    "experiment": str,
    "complete": bool,
    "notes": [str],
    "world_size": int,
    "ranks": [{"rank": int, "host": str, "state": str, "complete": bool, "time_s": float}],
    "events": int,
    "counts": dict.fromkeys(COUNTS, int),
    "analysis": {"processes": int, "load_s": float, "patterns_s": float},
    "metrics": [
        {
            "id": str,
            "name": str,
            "parent": str,
            "unit": str,
            "depth": int,
            "description": str,
            "total": float,
            "pct": float,
            "values": [[float]],
        }
    ],
    "callpaths": [
        {"id": int, "parent": int, "labels": [str], "name": str, "function": str, "where": str}
    ],
    "clock_condition": {
        "checked": bool,
        "violations": int,
        "p2p": int,
        "collective": int,
        "largest_s": float,
        "pairs": [
            {"kind": str, "from": int, "to": int, "callpath": int, "count": int, "largest_s": float}
        ],
        "corrected": bool,
        "correction": {
            "method": str,
            "min_latency_s": float,
            "gamma": float,
            "slope": float,
            "passes": int,
            "violations_after": int,
            "ranks": [{"rank": int, "moved": int, "max_s": float, "mean_s": float}],
        },
    },
}
# a value row: [call path, rank, value]
VALUE_SCHEMA = {"callpath": int, "rank": int, "value": float}


def saved_waitstates(exp):
    """The saved wait-state analysis of experiment exp, None when there is none
    (readers/datasets.py: ExperimentDir.waitstates); FormatError when it is damaged."""
    try:
        return read_waitstates(exp)
    except FileNotFoundError:
        return None


def read_waitstates(exp):
    """The saved wait-state analysis of experiment exp (a WaitStatesResult);
    FileNotFoundError when there is none, FormatError when it is damaged."""
    path = Path(exp) / WAITSTATES_FILE
    what = "wait-state analysis"
    doc = read_result(path, what, FORMAT, VERSION)
    res = check(doc, WAITSTATES_SCHEMA, path, what)
    for m in res.get("metrics", []):
        if not {"id", "name", "total", "pct", "values"} <= m.keys():
            raise FormatError(f"{path}: corrupt {what} (metric {m.get('id')})")
        for v in m["values"]:
            if len(v) != len(VALUE_SCHEMA):
                raise FormatError(
                    f"{path}: corrupt {what} (metric {m['id']}: a value of {short(v)})"
                )
            check(dict(zip(VALUE_SCHEMA, v)), VALUE_SCHEMA, path, f"{what} (metric {m['id']})")
    if not all("id" in cp for cp in res.get("callpaths", [])):
        raise FormatError(f"{path}: corrupt {what} (call path without id)")
    if not all("rank" in r for r in res.get("ranks", [])):
        raise FormatError(f"{path}: corrupt {what} (rank without its number)")
    return WaitStatesResult.from_json(res)

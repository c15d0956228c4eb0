"""Reader of the result `perfweave boundness` saves beside its runs, BOUNDNESS/boundness.json
(docs/boundness.md, docs/format.md "The boundness directory"), checked so that the report
and the Python API can trust its structure, as the model of model/boundness.py. Every
run of that directory (BOUNDNESS/baseline-1, ...) is an experiment whose dataset
`boundness` is that result."""

from pathlib import Path

from perfweave.errors import FormatError
from perfweave.model.boundness import FORMAT, ROUTINE_COLUMNS, VERSION, BoundnessResult
from perfweave.readers.files import check, read_result

BOUNDNESS_FILE = "boundness.json"
_NUMBERS = {c: float for c in ROUTINE_COLUMNS if c not in ("routine", "verdict", "reason")}
SCHEMA = {
    "format": str,
    "version": int,
    "command": [str],
    "rounds": int,
    "setup": dict,
    "not_available": [str],
    "runs": [{"experiment": str, "variant": str, "round": int}],
    "routines": [
        {
            **_NUMBERS,
            "baseline_samples": int,
            "stressor_samples": int,
            "routine": str,
            "verdict": str,
            "reason": str,
            "live_sites": [dict],
        }
    ],
    "notes": [str],
    "control": {
        "rounds": int,
        "bytes": int,
        "triads": [{"bytes": int, "slowdown": float, "lo": float, "hi": float, "verdict": str}],
        "bites": bool,
        "reason": str,
        **{f"{k}_{f}": float for k in ("triad", "fma") for f in ("slowdown", "lo", "hi")},
    },
}


def read_boundness(path):
    """The result saved at path (a boundness directory, or its boundness.json): a
    BoundnessResult; FileNotFoundError when there is none, FormatError when damaged."""
    path = Path(path)
    if path.is_dir():
        path = path / BOUNDNESS_FILE
    what = "boundness result"
    doc = read_result(path, what, FORMAT, VERSION)
    check(doc, SCHEMA, path, what)
    if not all("routine" in r and "verdict" in r for r in doc.get("routines", [])):
        raise FormatError(f"{path}: corrupt {what} (a routine without its name or verdict)")
    return BoundnessResult.from_json(doc)


def boundness_of(exp):
    """The boundness result of which experiment exp is a run, None when it is none's
    (readers/datasets.py: ExperimentDir.boundness); FormatError when it is damaged."""
    exp = Path(exp)
    try:
        result = read_boundness(exp.parent / BOUNDNESS_FILE)
    except FileNotFoundError:
        return None
    return result if any(r.get("experiment") == exp.name for r in result.runs) else None


def reference_run(path):
    """The experiment a boundness directory opens as (perfweave report DIR, perfweave.open):
    its first baseline run; None when path is not a boundness directory."""
    path = Path(path)
    if not (path / BOUNDNESS_FILE).is_file() or (path / "experiment.json").exists():
        return None
    result = read_boundness(path)
    first = next((r["experiment"] for r in result.runs if r.get("variant") == "baseline"), None)
    if first is None or not (path / first).is_dir():
        raise FormatError(f"{path}: a boundness result without its baseline run")
    return path / first

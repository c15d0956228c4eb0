"""The hang reports of `perfweave run --hang S` (docs/format.md "Hung ranks"): each
hangs/rank-R-K.json (a rank that stayed S seconds in one MPI call) and each rank's
answer, hangs/state/rank-R.json (what its threads were doing when asked)."""

from pathlib import Path

from perfweave.errors import FormatError
from perfweave.readers.files import check, read_json

HANG_FORMAT, STATE_FORMAT = "perfweave-hang", "perfweave-hang-state"
CALL = {
    "function": str,
    "seconds": float,
    "object": str,
    "buildid": str,
    "offset": int,
    "peer_role": str,
    "peer": int,
    "comm": {"world": bool, "size": int, "ranks": [int]},
}
HANG_SCHEMA = {
    "rank": int,
    "pid": int,
    "host": str,
    "thread": int,
    "hang_s": int,
    "asked": int,
    "world_size": int,
    **CALL,
}
STATE_SCHEMA = {
    "rank": int,
    "asked": int,
    "finalizing": bool,
    "threads": [{"thread": int, "function": str, "seconds": float}],
}


def read_hangs(path):
    """(hang reports, rank states, warnings) of experiment path: lists of the files'
    documents, checked; a damaged file is a warning, not an error."""
    folder = Path(path) / "hangs"
    hangs, states, warnings = [], [], []
    for pattern, fmt, schema, out in (
        ("rank-*.json", HANG_FORMAT, HANG_SCHEMA, hangs),
        ("state/rank-*.json", STATE_FORMAT, STATE_SCHEMA, states),
    ):
        for f in sorted(folder.glob(pattern)) if folder.is_dir() else []:
            try:
                doc = read_json(f, "hang report")
                if doc.get("format") != fmt:
                    raise FormatError(f"{f}: not a {fmt} file")
                out.append(check(doc, schema, f, "hang report"))
            except FormatError as e:
                warnings.append(f"skipped {e}")
    return hangs, states, warnings

"""The description of a process's call-site tables (tables/NAME.json, docs/format.md
"Call-site tables"): who the process was and what its tables' ids and addresses name.
Read without numpy, by perfweave run's verdict (readers/recorded.py: a rank killed before
it saved counts as recorded) as by readers/tables.py, which reads the tables themselves."""

import os
import re

from perfweave._format import FILES, HIST_BUCKETS
from perfweave.errors import FormatError
from perfweave.readers.files import PROCESS_HEAD, check, read_json, short

KIND = FILES["tables"]
# 1: the rank record before the profile's version 5 (readers/tables.py reads both)
VERSIONS = (1, KIND.version)
SCHEMA = {
    **PROCESS_HEAD,
    "world_size": int,
    "hist_buckets": int,
    "max_callsites": int,
    "modules": [dict],
    "functions": [str],
    "families": [str],
    "counters": [str],
    "objects": [{"path": str, "buildid": str, "start": int, "end": int, "base": int}],
}
_NAME = re.compile(r"[^/]+\.\d+(\.\d+)?\.json")


def table_descriptions(exp):
    """The description files (tables/NAME.json) of experiment exp, sorted (paths as
    strings)."""
    d = os.path.join(exp, KIND.directory)
    try:
        names = os.listdir(d)
    except OSError:  # no tables/, or not a directory
        return []
    return sorted(os.path.join(d, n) for n in names if _NAME.fullmatch(n))


def read_description(path):
    """tables/NAME.json, checked: who the process was (rank, pid, host) and what its
    tables' ids and addresses name."""
    doc = check(read_json(path, "call-site tables description"), SCHEMA, path, "description")
    if doc.get("format") != KIND.magic:
        raise FormatError(f"{path}: not a perfweave call-site tables description")
    if doc.get("version") not in VERSIONS:
        raise FormatError(
            f"{path}: tables format version {short(doc.get('version'))} not supported"
        )
    for k in ("rank", "pid", "host", "functions", "families", "modules", "objects", "counters"):
        if k not in doc:
            raise FormatError(f"{path}: corrupt description (no {k})")
    if doc.get("hist_buckets", HIST_BUCKETS) != HIST_BUCKETS or doc["rank"] < -1:
        raise FormatError(f"{path}: corrupt description (hist_buckets or rank)")
    return doc


def unsaved(exp, saved_ranks=(), saved_processes=()):
    """[(description path, its document)] of the processes of experiment exp whose tables
    are their only data: ranks not in saved_ranks (they saved no partial profile),
    processes without a rank whose HOST.PID is not in saved_processes (no procs/ file);
    one per rank. Descriptions that cannot be read: FormatError in the list's place."""
    out, ranks = [], set(saved_ranks)
    for p in table_descriptions(exp):
        try:
            doc = read_description(p)
        except FormatError as e:
            out.append(e)
            continue
        r = doc["rank"]
        if (r >= 0 and r in ranks) or (r < 0 and f"{doc['host']}.{doc['pid']}" in saved_processes):
            continue
        if r >= 0:
            ranks.add(r)
        out.append((p, doc))
    return out

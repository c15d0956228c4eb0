"""Everything `perfweave report` shows, as one JSON-ready dict (docs/mpi-profile.md)."""
import re

from perfweave.analysis.mpi import analyze
from perfweave.model.profile import STATES

REPORT_FORMAT = "perfweave-report"
REPORT_VERSION = 1


def mpi_library_line(version):
    """The MPI library's name and version on one line, from the full string the library
    gives (MPI_Get_library_version; the runtime records its line breaks as spaces):
    Open MPI's "Open MPI v4.1.4, package: ..., repo rev: ..." gives "Open MPI v4.1.4",
    MPICH's "MPICH Version: 4.0.2 MPICH Release date: ... MPICH configure: ..." gives
    "MPICH 4.0.2". The JSON report keeps the full string."""
    text = " ".join((version or "").split())
    labelled = re.match(r"(.+?) Version: ?(\S+)", text)
    if labelled:
        return f"{labelled.group(1)} {labelled.group(2)}"
    return text.split(",")[0].strip() or "?"


def collect(experiment, top=20):
    meta = experiment.meta
    mpi = analyze(experiment.profile, top=top)
    status = meta.get("exit_status") or {}
    data = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "experiment": str(experiment.path),
        "command": meta.get("command", []),
        "start_time": meta.get("start_time"),
        "end_time": meta.get("end_time"),
        "wall_s": meta.get("wall_seconds"),
        "exit_status": status,
        "state": experiment.state,
        "unwritten": experiment.unwritten,
        "notes": list(experiment.profile.notes),
        "options": meta.get("options", {}),
        "counters_not_counted": meta.get("counters_not_counted", []),
        "mpi_profile": mpi,
    }
    ws = wait_states(experiment.path)
    if ws is not None:
        data["wait_states"] = ws
    if meta.get("imported_from"):
        imported(data, meta)
    if experiment.processes is not None:
        data["other_processes"] = int(len(experiment.processes.ranks))
    data["node_timeline"] = node_timeline(experiment)
    from perfweave.analysis import phases, sampling
    from perfweave.errors import FormatError
    from perfweave.readers.samples import read_sample_metas
    try:
        data["sampling"] = sampling.analyze(experiment.path, top=top,
                                            windows=phases.windows(experiment.profile))
        metas = [m for _, m in read_sample_metas(experiment.path)]
    except FormatError as e:
        data["sampling"] = {"error": str(e)}
        metas = []
    data["startup"] = phases.summarize(experiment.profile, metas,
                                       (data["sampling"] or {}).get("phase_pct"))
    if mpi["per_rank"]:
        for p in mpi["per_rank"]:
            p["state"] = STATES[p["state"]] if 0 <= p["state"] < len(STATES) else str(p["state"])
    from perfweave.analysis.advice import advise
    data["advice"] = advise(data)
    return data


def imported(data, meta):
    """An experiment of perfweave import: where its trace came from; its profile was
    computed from the trace (interop/profile.py), without call sites."""
    imp = meta.get("import") or {}
    data["imported"] = {"from": meta["imported_from"], "format": imp.get("format", "OTF2"),
                        "creator": imp.get("creator", ""),
                        "skipped_locations": len(imp.get("skipped_locations") or []),
                        "notes": list(meta.get("import_notes") or [])}
    for site in data["mpi_profile"].get("callsites", []):
        site["where"] = "(imported trace: no call sites)"


def node_timeline(experiment):
    """Summary of the node timeline (timeline/ in the experiment), or None."""
    from perfweave.report import timeline

    pids = {}
    for prof in (experiment.processes, experiment.profile):
        if prof is not None and "pid" in prof.ranks.dtype.names:
            pids.update({int(p): int(r) for p, r in zip(prof.ranks["pid"], prof.ranks["rank"])})
    from perfweave.errors import FormatError
    try:
        return timeline.summarize(experiment.path, pids)
    except FormatError as e:           # the rest of the report stands without it
        return {"nodes": [], "error": str(e)}


def wait_states(path, top=8):
    """Summary of analysis/waitstates.json (perfweave analyze), or None: the wait-state
    patterns with time, largest first, each with its worst call path."""
    from perfweave.errors import FormatError
    from perfweave.readers.results import WAITSTATES_FILE, read_waitstates

    try:
        res = read_waitstates(path)
    except FileNotFoundError:
        return None
    except FormatError as e:           # the rest of the report stands without it
        return {"file": str(WAITSTATES_FILE), "error": str(e), "complete": False,
                "patterns": [], "notes": []}
    f = path / WAITSTATES_FILE
    from perfweave.analysis.metrics import PATTERNS
    names = {cp["id"]: cp.get("name", "") for cp in res.get("callpaths", [])}
    rows = []
    for m in res.get("metrics", []):
        if m["id"] not in PATTERNS or not m["total"]:
            continue
        per_path = {}
        for p, r, v in m["values"]:
            per_path[p] = per_path.get(p, 0) + v
        if not per_path:
            continue
        worst = max(per_path, key=per_path.get)
        per_rank = {}
        for p, r, v in m["values"]:
            per_rank[r] = per_rank.get(r, 0) + v
        rows.append({"id": m["id"], "name": m["name"], "time_s": m["total"],
                     "pct": m["pct"], "callpath": names.get(worst, ""),
                     "callpath_s": per_path[worst],
                     "ranks": sorted(([r, v] for r, v in per_rank.items() if v),
                                     key=lambda x: -x[1])[:top]})
    rows.sort(key=lambda r: -r["time_s"])
    return {"file": str(f), "complete": res.get("complete", False),
            "patterns": rows[:top], "notes": res.get("notes", [])}


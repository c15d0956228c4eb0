"""Everything `perfweave report` shows, as one JSON-ready dict (docs/mpi-profile.md)."""
from perfweave.analysis.mpi import analyze
from perfweave.model.profile import STATES

REPORT_FORMAT = "perfweave-report"
REPORT_VERSION = 1


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
        "notes": list(experiment.profile.notes),
        "options": meta.get("options", {}),
        "mpi_profile": mpi,
    }
    if experiment.processes is not None:
        data["other_processes"] = int(len(experiment.processes.ranks))
    if mpi["per_rank"]:
        for p in mpi["per_rank"]:
            p["state"] = STATES[p["state"]] if 0 <= p["state"] < len(STATES) else str(p["state"])
    return data

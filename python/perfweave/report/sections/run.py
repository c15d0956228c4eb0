"""The run: what was run, for how long, how it ended, on how many ranks and hosts with
which MPI, and the notes on the experiment (what is partial, missing or was skipped)."""

import re

from perfweave.report import summary
from perfweave.report.widgets import escape, fit_line, html_table, wrap_line
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t

# the JSON report (perfweave report --json): the run section's data holds its format
REPORT_FORMAT = "perfweave-report"
REPORT_VERSION = 2


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


class Run(Section):
    name = "run"

    def collect(self, experiment, report, top):
        meta = experiment.meta
        out = {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "experiment": str(experiment.path),
            "command": meta.get("command", []),
            "start_time": meta.get("start_time"),
            "end_time": meta.get("end_time"),
            "wall_s": meta.get("wall_seconds"),
            "exit_status": meta.get("exit_status") or {},
            "state": experiment.state,
            "unwritten": experiment.unwritten,
            "notes": list(experiment.profile.notes),
            "options": meta.get("options", {}),
        }
        if meta.get("imported_from"):
            # perfweave import: where its trace came from (its profile was computed from
            # the trace at import, interop/profile.py)
            imp = meta.get("import") or {}
            out["imported"] = {
                "from": meta["imported_from"],
                "format": imp.get("format", "OTF2"),
                "creator": imp.get("creator", ""),
                "skipped_locations": len(imp.get("skipped_locations") or []),
                "notes": list(meta.get("import_notes") or []),
            }
        if experiment.processes is not None:
            out["other_processes"] = int(len(experiment.processes.ranks))
        return out

    def text(self, data, view):
        width = view.width
        m = data["mpi_profile"]
        out = [fit_line(f"perfweave report: {data['experiment']}", width, head=18)]
        if data.get("imported"):
            out += wrap_line("imported", _imported(data["imported"]), width)
        else:
            out.append(fit_line(f"  command    {' '.join(data['command'])}", width, head=13))
        if data.get("wall_s") is not None:
            out.append(f"  wall time  {_wall(data)}")
        if m["mpi"]:
            out.append(fit_line(f"  ranks      {_ranks(m)}", width, head=13))
            lib = mpi_library_line(m["mpi_library"])
            if not data.get("imported"):
                runtime = f" (perfweave runtime: {m['mpi_flavor']})"
                out.append(
                    fit_line(f"  MPI        {lib}{runtime}", width, keep=len(runtime), head=13)
                )
            out.append(f"  app time   {summary.app_time(m)}")
            if roi := summary.region(m):
                out += wrap_line("region", f"of interest: {roi}", width)
            if startup := summary.startup(data):
                out += wrap_line("start-up", startup, width)
        elif data.get("compact"):
            out.append(
                f"  ranks      {data['compact']['ranks']} (compact profile: see its section)"
            )
        else:
            out.append("  MPI        not used (one process without MPI)")
        out.append(f"  state      {_state(data)}")
        if split := summary.time_split(data):
            out += wrap_line("time", split, width)
        for note in data["notes"]:
            out += wrap_line("note", note, width)
        return out

    def html(self, data, page):
        m = data["mpi_profile"]
        parts = [f"<h1>perfweave report</h1><p class=sub>{escape(data['experiment'])}</p>"]
        facts = [
            ("imported", _imported(data["imported"]))
            if data.get("imported")
            else ("command", " ".join(data.get("command") or [])),
            ("wall time", _wall(data) if data.get("wall_s") is not None else "?"),
            ("state", _state(data)),
        ]
        if m["mpi"]:
            lib = mpi_library_line(m["mpi_library"])
            facts += [
                ("ranks", _ranks(m, hosts=8)),
                (
                    "MPI library",
                    lib
                    if data.get("imported")
                    else f"{lib} (perfweave runtime: {m['mpi_flavor']})",
                ),
                ("app time", summary.app_time(m)),
                ("time in MPI", summary.mpi_share(m)),
            ]
            if roi := summary.region(m):
                facts.append(("region of interest", roi))
        elif data.get("compact"):
            facts.append(("ranks", f"{data['compact']['ranks']} (compact profile)"))
        for label, text in (
            ("start-up", summary.startup(data) if m["mpi"] else None),
            ("time split", summary.time_split(data)),
        ):
            if text:
                facts.append((label, text))
        parts.append(html_table(facts, ["", ""], "facts"))
        parts += [f"<p class=note>{escape(note)}</p>" for note in data.get("notes", [])]
        return parts


def _imported(imp):
    by = f", written by {imp['creator']}" if imp.get("creator") else ""
    skipped = (
        f"; {imp['skipped_locations']} locations not imported"
        if imp.get("skipped_locations")
        else ""
    )
    return f"{imp['from']} ({imp['format']} trace{by}); profile computed from the trace{skipped}"


def _wall(data):
    status = data.get("exit_status") or {}
    exit_text = (
        f"killed by signal {status['signal']}"
        if "signal" in status
        else f"exit code {status.get('code', '?')}"
    )
    return f"{_t(data['wall_s'])} (launch to exit, {exit_text})"


def _ranks(m, hosts=4):
    """How many ranks of the world on how many hosts, the first hosts named."""
    names = m["hosts"]
    return (
        f"{m['ranks']}"
        + (f" of {m['world_size']}" if m["world_size"] != m["ranks"] else "")
        + f" on {len(names)} host{'s' if len(names) != 1 else ''}"
        + f" ({', '.join(names[:hosts])}{', ...' if len(names) > hosts else ''})"
    )


def _state(data):
    return data["state"] + (
        " (incomplete experiment: see the first note)" if data.get("unwritten") else ""
    )


SECTION = Run()

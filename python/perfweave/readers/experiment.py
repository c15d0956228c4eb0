"""Open an experiment directory (docs/format.md) as an ExperimentDir.

The reduced `profile.pwprof` holds every rank of a run that reached
MPI_Finalize. When a run ended otherwise, each rank saved its own
`partial/rank-R.pwprof`; processes that never initialised MPI saved
`procs/HOST.PID.pwprof`; a process that ended without saving (SIGKILL) left its
call-site tables, `tables/HOST.PID.pwtab` (readers/tables.py). All of them are merged
here into one Profile. An experiment of `perfweave import` holds the profile of its
traces as profile.pwprof, partial when a rank did not finalize, with the notes reading
the traces made (interop/profile.py writes it).
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfweave.errors import FormatError, PerfweaveError
from perfweave.model.profile import STATES, Profile, state_name
from perfweave.dtypes import HIST_BUCKETS, MODULE_ARRAY_DTYPES, PROFILE_ARRAY_DTYPES
from perfweave.readers.files import short, check, read_json
from perfweave.readers.compact import NAME as COMPACT_NAME
from perfweave.readers.profile import read_profile
from perfweave.readers.recorded import rank_ranges
from perfweave.readers.table_description import unsaved
from perfweave.readers.tables import read_tables
from perfweave.writing import describe, read_unwritten

KILLED = STATES.index("killed")
EXPERIMENT_FORMAT = "perfweave-experiment"
EXPERIMENT_VERSIONS = (1,)


@dataclass
class ExperimentDir:
    """An experiment directory read: its description, its merged Profile, and the other
    datasets (readers/datasets.py) read on first use. What the layers pass around;
    api.Experiment is the public face over it."""

    path: Path
    meta: dict
    profile: Profile
    processes: Profile = None  # processes without MPI (launch helpers, serial programs)
    warnings: list = field(default_factory=list)
    unwritten: list = field(default_factory=list)  # files perfweave could not write
    # the live snapshot read (snapshots/N/, docs/snapshots.md): number, taken, answered,
    # world_size, count; None: the run's own files
    snapshot: dict = None

    def __getattr__(self, name):
        """The experiment's dataset name (readers/datasets.py: samples, timelines,
        traces, ...), read on first use and kept."""
        if name.startswith("_") or name in ("path", "meta", "profile"):
            raise AttributeError(name)
        from perfweave.readers.datasets import DATASETS

        dataset = DATASETS.get(name)
        if dataset is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = dataset.read(self.path)
        setattr(self, name, value)
        return value

    @property
    def partial(self):
        return self.profile.partial

    @property
    def state(self):
        return "partial" if self.partial else "complete"


# the keys readers use, with their types (docs/format.md "experiment.json")
META_SCHEMA = {
    "command": [str],
    "launched": [str],
    "cwd": str,
    "host": str,
    "program": str,
    "launcher": str,
    "mpi_flavor": str,
    "runtime_library": str,
    "options": dict,
    "start_time": str,
    "end_time": str,
    "start_epoch": float,
    "end_epoch": float,
    "wall_seconds": float,
    "state": str,
    "error": str,
    "perfweave_version": str,
    "exit_status": {"code": int, "signal": int},
    "reason": str,
    "ranks": {"expected": int, "recorded": int, "missing": str},
    "all": dict,
}
# experiment.json states of a run that ended with fewer ranks' data than it started
NO_DATA_STATES = ("empty", "partial")


def read_meta(path):
    f = Path(path) / "experiment.json"
    try:
        meta = read_json(f, "experiment description")
    except FileNotFoundError:
        if any(u["file"] == "experiment.json" for u in read_unwritten(path)):
            # perfweave run could not write it (full disk): read what the runtime wrote
            return {"format": EXPERIMENT_FORMAT, "version": 1, "state": "unknown"}
        raise PerfweaveError(f"{path}: not a perfweave experiment (no experiment.json)") from None
    if meta.get("format") != EXPERIMENT_FORMAT:
        raise FormatError(f"{f}: not a perfweave experiment description")
    if meta.get("version") not in EXPERIMENT_VERSIONS:
        raise FormatError(
            f"{f}: experiment format version {short(meta.get('version'))} not supported"
        )
    return check(meta, META_SCHEMA, f, "experiment description")


SNAPSHOT_FORMAT = "perfweave-snapshot"


def snapshot_numbers(path):
    """The numbers of the live snapshots in experiment path (snapshots/N/), ascending."""
    d = Path(path) / "snapshots"
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit() and p.is_dir())


def _chosen_snapshot(path, meta, snapshot):
    """The snapshot number open_experiment reads: snapshot itself when a number, the
    newest of a run still running (or whose perfweave run was killed) when None, none
    (None) when False."""
    numbers = snapshot_numbers(path)
    if snapshot is False:
        return None
    if snapshot is None:
        return numbers[-1] if numbers and meta.get("state") == "running" else None
    if isinstance(snapshot, bool) or not isinstance(snapshot, int) or snapshot not in numbers:
        have = ", ".join(map(str, numbers)) if numbers else "none"
        raise PerfweaveError(f"{path}: no snapshot {snapshot} (snapshots taken: {have})")
    return snapshot


def _snapshot_description(path, number):
    """snapshots/N/snapshot.json (perfweave snapshot's request), checked."""
    f = Path(path) / "snapshots" / str(number) / "snapshot.json"
    try:
        doc = read_json(f, "snapshot description")
    except FileNotFoundError:
        return {}
    if doc.get("format") != SNAPSHOT_FORMAT:
        raise FormatError(f"{f}: not a perfweave snapshot description")
    return check(
        doc,
        {"snapshot": int, "requested_time": str, "requested_epoch": float},
        f,
        "snapshot description",
    )


def _module_functions(header):
    """(module, function id, function name, family) of every function of a file's
    header, module by module."""
    for m in header["modules"]:
        for i in range(m["first"], m["first"] + m["count"]):
            yield m["name"], i, header["functions"][i], header["families"][i]


def _function_table(files):
    """The experiment's functions: every file's, keyed by (module, name), in the order
    the files list them, module by module; and for each file the map of its function
    ids into that table. Files of one run list the same modules' functions, but a
    process that never loaded a module (a non-MPI helper) lists fewer."""
    modules = {}  # name -> its entry: version and strings from the first file that has them
    for pf in files:
        for m in pf.header["modules"]:
            entry = modules.setdefault(m["name"], {"name": m["name"], "version": m.get("version")})
            for k, v in m.items():
                if k not in ("first", "count") and v not in ("", None):
                    entry.setdefault(k, v)
    family = {}  # (module, function) -> its family, in the table's order
    for name, entry in modules.items():
        entry["first"] = len(family)
        for pf in files:
            for module, _, fn, fam in _module_functions(pf.header):
                if module == name:
                    family.setdefault((module, fn), fam)
        entry["count"] = len(family) - entry["first"]
    index = {key: i for i, key in enumerate(family)}
    maps = []
    for pf in files:
        fmap = np.full(len(pf.header["functions"]) + 1, -1, np.int32)
        for module, i, fn, _ in _module_functions(pf.header):
            fmap[i] = index[(module, fn)]
        maps.append(fmap)
    return [fn for _, fn in family], list(family.values()), list(modules.values()), maps


def merge(files):
    """Merge profile files into one Profile with global function, object and host
    indices."""
    first = files[0].header
    functions, families, modules, fmaps = _function_table(files)
    objects, buildids, hosts = [], [], []
    obj_index, host_index = {}, {}
    parts = {k: [] for k in PROFILE_ARRAY_DTYPES}
    counters = next((pf.header["counters"] for pf in files if pf.header.get("counters")), [])
    for pf, fmap in zip(files, fmaps):
        h = pf.header
        omap = np.array(
            [
                obj_index.setdefault((p, b), len(obj_index))
                for p, b in zip(h["objects"], h["buildids"])
            ]
            + [-1],
            dtype=np.int32,
        )
        for (p, b), i in obj_index.items():
            if i == len(objects):
                objects.append(p)
                buildids.append(b)
        hmap = np.array(
            [host_index.setdefault(x, len(host_index)) for x in h["hosts"]] + [-1], dtype=np.int32
        )
        for x, i in host_index.items():
            if i == len(hosts):
                hosts.append(x)
        a = {k: v.copy() for k, v in pf.arrays.items()}
        for name, dtype in PROFILE_ARRAY_DTYPES.items():  # counts, a module's: older files
            a.setdefault(name, np.zeros(0, dtype))  # have none (comms before version 6)
        if a["counts"].size and pf.header.get("counters") != counters:
            raise FormatError(
                f"{pf.path}: counts other events than the other files of this experiment"
            )
        a["counts"]["site"] += sum(len(x) for x in parts["sites"])
        a["ranks"]["host"] = hmap[a["ranks"]["host"]]
        for name in ("sites", "frames"):
            a[name]["object"] = omap[a[name]["object"]]  # -1 maps to the last entry: -1
        for name in parts:  # every array of function ids: sites, hist, a module's
            if "fn" in (a[name].dtype.names or ()):
                a[name]["fn"] = fmap[a[name]["fn"]]
        frame_base = sum(len(x) for x in parts["frames"])
        has = a["sites"]["first_frame"] >= 0
        a["sites"]["first_frame"][has] += frame_base
        for k in parts:
            parts[k].append(a[k])
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    return Profile(
        ranks=cat["ranks"],
        sites=cat["sites"],
        frames=cat["frames"],
        hist=cat["hist"],
        counts=cat["counts"],
        arrays={name: cat[name] for name in MODULE_ARRAY_DTYPES},
        counters=list(counters),
        functions=functions,
        families=families,
        objects=objects,
        buildids=buildids,
        hosts=hosts,
        modules=modules,
        world_size=max(pf.header.get("world_size", 0) for pf in files),
        hist_buckets=first.get("hist_buckets", HIST_BUCKETS),
    )


class NoImportedProfile(PerfweaveError):
    """An experiment imported by an older perfweave: its traces and no profile.pwprof,
    which perfweave import writes since. The readers derive nothing (computing it here
    would make them depend on the analyses); interop/profile.py open_upgraded, which
    perfweave report and the Darshan export read through, computes it
    (analysis/imported_profile.py), saves it and reads again; perfweave.open computes it
    and reads it from memory (reduced_content)."""


def open_experiment(path, reduced_content=None, snapshot=None):
    """The experiment directory path as an ExperimentDir. reduced_content: the content of the
    profile.pwprof it lacks, read in its place (an older perfweave's import read by
    perfweave.open, or in a directory that cannot be written: interop/profile.py
    open_upgraded). snapshot: the live snapshot N to read (snapshots/N/); None: the
    newest while the run has not finished, else the run's own files; False: those."""
    path = Path(path)
    if not path.is_dir():
        raise PerfweaveError(f"{path}: no such experiment directory")
    from perfweave.readers.boundness import reference_run

    # a boundness directory (perfweave boundness) opens as its first baseline run
    path = reference_run(path) or path
    meta = read_meta(path)
    unwritten = read_unwritten(path, meta)
    warnings = []
    number = _chosen_snapshot(path, meta, snapshot)
    # a snapshot's folder holds the files of the run's end, as each process wrote them
    # then: its profile is read as theirs, no tables and no reduced profile
    src = path if number is None else path / "snapshots" / str(number)
    reduced = src / "profile.pwprof"
    partial_files = sorted((src / "partial").glob("rank-*.pwprof"))
    proc_files = sorted((src / "procs").glob("*.pwprof"))
    if number is not None and not partial_files and not proc_files:
        raise PerfweaveError(
            f"{path}: snapshot {number} has no data yet: no process has answered "
            "(perfweave snapshot waits for them; was the run started with --snapshot-poll 0?)"
        )

    def read_all(paths):
        out = []
        for p in paths:
            try:
                out.append(read_profile(p))
            except FormatError as e:
                warnings.append(f"skipped {e}")
        return out

    reduced_header = None
    # a damaged one (a dangling link...) is an error
    if reduced_content is not None or os.path.lexists(reduced):
        files = [read_profile(reduced, reduced_content)]
        reduced_header = files[0].header
        partial = False
        if partial_files:
            warnings.append(
                f"{len(partial_files)} rank files in partial/ ignored: the reduced "
                "profile is complete"
            )
    else:
        files = read_all(partial_files)
        partial = True
    # processes that ended without saving: their tables, up to that moment (a rank's
    # only without the reduced profile, which has every rank's data)
    saved = {int(p.name[5:-7]) for p in partial_files if p.name[5:-7].isdigit()}
    killed, killed_procs = [], []
    for found in [] if number is not None else unsaved(path, saved, {p.stem for p in proc_files}):
        if isinstance(found, FormatError):
            warnings.append(f"skipped {found}")
            continue
        description, doc = found
        if doc["rank"] >= 0 and not partial:
            continue
        try:
            pf = read_tables(description, doc)
        except FormatError as e:
            warnings.append(f"skipped {e}")
            continue
        warnings.extend(pf.notes)
        (killed if doc["rank"] >= 0 else killed_procs).append(pf)
    files += killed
    if (killed or killed_procs) and meta.get("state") == "running":
        warnings.append(
            "the run has not finished (or perfweave run was killed): its processes' "
            "call-site tables are read as they are now, their ranks marked killed"
        )
    processes = None
    procs = read_all(proc_files) + killed_procs
    if procs:
        processes = merge(procs)
    if files:
        profile = merge(files)
        if reduced_header is not None:
            # perfweave import's profile of a trace: partial when a rank did not
            # finalize, with what reading the trace noted (the runtime's: false, none)
            partial = reduced_header.get("partial", False)
            profile.notes.extend(reduced_header.get("notes", []))
    elif os.path.lexists(path / COMPACT_NAME) and not partial_files:
        # above --full-profile-ranks the runtime writes the compact profile alone: no
        # per-rank rows (the report's compact section shows its rank statistics)
        profile, partial = Profile.from_literal([], [], [], objects=(), hosts=()), False
        why = (
            "profile.pwprof could not be written"
            if any(u["file"] == "profile.pwprof" for u in unwritten)
            else "the job had more ranks than --full-profile-ranks"
        )
        profile.notes.append(
            f"compact profile only ({why}): MPI call sites with rank statistics; per-rank "
            "tables are not available"
        )
    elif processes is not None and not partial_files and meta.get("state") != "empty":
        # a program without MPI: its process rows are the profile (in an MPI run that
        # perfweave run found empty, they are the launch's helpers: no profile)
        profile, processes, partial = processes, None, False
        bad = profile.ranks["state"] != 0
        partial = bool(bad.any())
    elif meta.get("imported_from"):
        # perfweave import wrote traces only before it wrote their profile, and an empty
        # report would say MPI was not used; the readers' callers compute the profile
        # (perfweave report and perfweave.open: analysis/imported_profile.py)
        raise NoImportedProfile(
            f"{path}: no profile.pwprof (imported by an older perfweave, or removed): "
            f"perfweave report {path} computes it from its traces and saves it"
        )
    else:
        state = meta.get("state")
        lost = [u for u in unwritten if u["file"].endswith(".pwprof")]
        if lost:
            raise PerfweaveError(
                f"{path}: no profile data: perfweave could not write {describe(lost)}"
            )
        if state == "running" and not any(u["file"] == "experiment.json" for u in unwritten):
            raise PerfweaveError(
                f"{path}: the run has not finished (or perfweave was killed); "
                "no rank has written data yet"
            )
        if warnings:
            raise PerfweaveError(f"{path}: no readable profile data ({'; '.join(warnings)})")
        kept = (
            f"; its event trace was kept, up to the kill: perfweave analyze {path}"
            if (Path(path) / "traces").is_dir()
            else ""
        )
        why = state_reason(meta) or (
            "the program wrote none: was it killed with SIGKILL, or did it exit before "
            "perfweave started?"
        )
        # as perfweave run's verdict found them (experiment.json's kept); a run without it
        # (an earlier perfweave, or perfweave killed): every process that counted
        modules = meta["kept"] if "kept" in meta else kept_by_modules(path, mpi=False)
        if not modules:
            # perfweave run's verdict when the run ended, else a guess
            raise PerfweaveError(f"{path}: no profile data: {why}{kept}")
        # a module whose records live in file-backed memory kept what it counted up to
        # the kill: shown, with an empty profile
        profile, partial = Profile.from_literal([], [], [], objects=(), hosts=()), True
        profile.notes.append(
            f"no profile data: {why}; shown: what the {' and '.join(modules)} "
            f"module{'s' if len(modules) > 1 else ''} kept up to the end"
        )
    profile.partial = partial
    notes = profile.notes
    if unwritten:
        notes.insert(
            0,
            f"incomplete: perfweave could not write {describe(unwritten)}; this "
            "report shows the files that were written",
        )
    taken = None
    if number is not None:
        doc = _snapshot_description(path, number)
        answered = len(profile.ranks) if profile.mpi else 0
        world = profile.world_size if profile.mpi else 0
        at = doc.get("requested_time", "at an unknown time")
        count = len(snapshot_numbers(path))
        notes.insert(
            0,
            f"snapshot {number} of {count} of a running job, taken at {at}: "
            + (f"{answered} of {world} ranks answered" if profile.mpi else "no MPI rank answered")
            + " (counts up to that moment; perfweave report --snapshot K chooses one)",
        )
        taken = {
            "number": number,
            "count": count,
            "taken": doc.get("requested_time"),
            "answered": answered,
            "world_size": world,
        }
        missing = profile.missing_ranks() if profile.mpi else []
        if len(missing):
            notes.insert(1, f"no answer from ranks {rank_ranges(missing)}")
    elif partial and profile.mpi:
        states = sorted({state_name(s) for s in profile.ranks["state"]})
        gone = sorted(int(r) for r in profile.ranks["rank"][profile.ranks["state"] == KILLED])
        notes.append(
            "partial: the run did not complete MPI_Finalize; each rank"
            + ("'s data is its own" if gone else " saved its own data")
            + f" (rank states: {', '.join(states)})"
        )
        if gone:
            one = len(gone) == 1
            notes.append(
                f"rank{'' if one else 's'} {rank_ranges(gone)} ended without saving "
                "(SIGKILL, or an exit that skips the program's exit handlers): "
                f"{'its' if one else 'their'} counts are those of {'its' if one else 'their'} "
                "call-site tables (tables/) at that moment, time up to "
                f"{'its' if one else 'their'} last recorded call"
            )
        missing = profile.missing_ranks()
        if state_reason(meta):
            notes.append(state_reason(meta))
        elif missing:
            notes.append(
                f"no data from {len(missing)} of {profile.world_size} ranks: {rank_ranges(missing)}"
            )
    dropped = int(profile.ranks["sites_dropped"].sum()) if len(profile.ranks) else 0
    if dropped:
        cap = int(profile.ranks["table_capacity"].max())
        notes.append(
            f"{dropped} calls exceeded the call-site bound ({cap} sites per thread) and "
            "were folded into one overflow site per function; raise --max-callsites"
        )
    notes.extend(warnings)
    return ExperimentDir(
        path=path,
        meta=meta,
        profile=profile,
        processes=processes,
        warnings=warnings,
        unwritten=unwritten,
        snapshot=taken,
    )


def kept_by_modules(path, mpi):
    """The datasets (readers/datasets.py) kept when a process is killed of which
    experiment path holds the program's data, by name. The program's processes: those
    with a rank when it is an MPI program (mpi true), else every process that counted
    something; a process without a rank in an MPI program's run is a launcher's helper or
    a wrapper (env, a shell script) that loaded the runtime, not the program."""
    from perfweave.readers.datasets import DATASETS

    return [
        d.name
        for d in DATASETS.values()
        if d.kept_ranks and any(r >= 0 or not mpi for r in d.kept_ranks(path))
    ]


def state_reason(meta):
    """perfweave run's verdict on a run that recorded fewer ranks than it started, as
    recorded in experiment.json (None for any other run)."""
    if meta.get("state") in NO_DATA_STATES and meta.get("reason"):
        return meta["reason"]
    return None

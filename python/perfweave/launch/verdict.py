"""How a run ended: the Verdict on a run that recorded fewer ranks than it started
(perfweave run's last line, experiment.json's state, reason and ranks), from what the
experiment holds (readers/recorded.py), the command and its exit status. Not on the launch
path: imported at the run's end."""

import os

from perfweave.launch.command import FROM_COMMAND, _static_program, rank_count


def _links_mpi(path):
    """Whether the program links an MPI library (ldd): a hint for the verdict on a run
    that recorded no rank, never the choice of wrappers (made in each process)."""
    import subprocess

    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(part in out for part in ("libmpi.so", "libmpich.so", "/openmpi/"))


# A run that recorded fewer ranks than it started (perfweave run's last line and
# experiment.json's state, reason and ranks; docs/format.md). state: "empty" (no data at
# all) or "partial" (some ranks' data missing); reason: one line, the count and the likely
# causes; ranks: {"expected": N (absent when unknown), "recorded": k, "missing": "1,3-5"}.
# kept: of a run found empty, the modules (readers/experiment.py kept_by_modules) that
# kept what the program's processes counted up to their end (experiment.json's kept).
class Verdict:
    def __init__(self, state, reason, ranks, kept=()):
        self.state, self.reason, self.ranks, self.kept = state, reason, ranks, list(kept)

    def __repr__(self):
        return f"Verdict({self.state!r}, {self.reason!r}, {self.ranks!r}, {self.kept!r})"


# likely causes a Verdict names
_KILLED = "killed before saving (SIGKILL, as launchers send when a rank fails)"
_NO_ENV = (
    "its environment (LD_PRELOAD, PERFWEAVE_EXPERIMENT) did not reach the tasks "
    "(a launcher's or batch system's policy such as srun --export=NONE)"
)
_DROPPED = (
    "the runtime was taken out before the MPI program started (a wrapper or "
    "launcher option resetting LD_PRELOAD)"
)
_STATIC = "the program is statically linked"
_INIT_FAILED = (
    "the MPI start-up failed (the launcher's PMI or PMIx wire-up, e.g. srun "
    "--mpi=pmi2 for an MPI not built for it; see the launcher's messages above)"
)


def verdict(exp, command, status, values, program, ranks=FROM_COMMAND):
    """The Verdict on experiment exp once the launched command ended with status (as
    subprocess gives it), or None when every rank it started recorded data, or the
    program runs without MPI and its processes did. ranks: the command's rank_count."""
    from perfweave.readers.recorded import rank_ranges, recorded

    rec = recorded(exp)
    if rec.complete:
        return None
    if ranks is FROM_COMMAND:
        ranks = rank_count(command)
    expected = max(ranks or 0, rec.world_size)
    name = os.path.basename(command[0])
    ended = (
        f"{name} was killed by signal {-status}"
        if status < 0
        else f"{name} exited with code {status}"
        if status
        else ""
    )
    if rec.ranks:
        if len(rec.ranks) >= expected:
            return None
        missing = rank_ranges([r for r in range(expected) if r not in rec.ranks])
        one = expected - len(rec.ranks) == 1
        causes = [
            f"{'it was' if one else 'they were'} {_KILLED}",
            f"perfweave's runtime did not reach {'its task' if one else 'their tasks'} "
            f"(environment not passed to {'it' if one else 'them'})",
        ]
        if rec.starting:
            # the others waited for them where every rank with the runtime comes
            waited = rec.starting
            causes = [
                f"perfweave's runtime did not reach {'its task' if one else 'their tasks'}"
                f", for which {waited} rank{'' if waited == 1 else 's'} waited in "
                "perfweave's start-up (statically linked, or LD_PRELOAD reset by a "
                "wrapper)"
            ]
        return Verdict(
            "partial",
            f"only {len(rec.ranks)} of {expected} ranks recorded data "
            f"(none from rank{'' if one else 's'} {missing}): "
            + ", or ".join(causes)
            + (f"; {ended}" if ended else ""),
            {"expected": expected, "recorded": len(rec.ranks), "missing": missing},
        )
    mpi_program = values.get("mpi", "auto") != "none" and program and _links_mpi(program)
    if rec.processes and not mpi_program:
        return None  # a program without MPI: its processes' profiles are its data
    if rec.processes >= max(expected, 1) and not (rec.in_init or rec.starting):
        # a program linked with MPI whose every process saved a profile without calling
        # MPI_Init (its --help, a serial mode, a preprocessing step): the same
        return None
    from pathlib import Path

    from perfweave.readers.experiment import kept_by_modules

    # only the program's processes': those with a rank in a run of ranks (the program
    # links MPI, or the launcher started a count of them); a process without one there
    # is a wrapper or a helper that loaded the runtime
    kept = kept_by_modules(Path(exp), bool(mpi_program or expected))
    if rec.in_init and status:
        # processes called MPI (the core loaded the MPI module in them) and none got
        # through MPI_Init: the MPI start-up failed, nothing was killed or left out
        n = rec.in_init
        return Verdict(
            "empty",
            (f"0 of {expected} ranks recorded data" if expected else "no rank recorded data")
            + f": {n} process{'es' if n > 1 else ''} of the program called MPI_Init "
            f"and none got through it: {_INIT_FAILED} ({ended})",
            _none_recorded(expected),
            kept,
        )
    count = f"0 of {expected} ranks recorded data" if expected else "no process recorded data"
    if rec.starting:
        n = rec.starting
        return Verdict(
            "empty",
            count + f": {n} process{'es' if n > 1 else ''} got through "
            "MPI_Init and waited in perfweave's start-up for ranks without its "
            "runtime (statically linked, or LD_PRELOAD reset by a wrapper)"
            + (f" ({ended})" if ended else ""),
            _none_recorded(expected),
            kept,
        )
    # processes that loaded the runtime: HOST.pids, kept by the node timeline only
    started = rec.started if values.get("node_interval", 1) > 0 else None
    # a dynamic program that links MPI is not static; another may be a wrapper of one
    static = [] if mpi_program else [_STATIC]
    if program and _static_program(program):
        count += (
            f": {program} is statically linked, so perfweave's runtime (loaded "
            "through LD_PRELOAD) cannot enter it"
        )
        causes = []
    elif started:
        count += (
            f" though {started} process{'es' if started > 1 else ''} loaded perfweave's runtime"
        )
        causes = (
            ([f"{'it was' if started == 1 else 'they were'} {_KILLED}"] if status else [])
            + [_DROPPED]
            + static
        )
    elif status:
        if started == 0:
            count += " and no process loaded perfweave's runtime"
        causes = ["the launch failed before the program started"] + (
            [f"the ranks were {_KILLED}"] if started is None else []
        )
    else:
        if started == 0:
            count += " and no process loaded perfweave's runtime"
        causes = [_NO_ENV] + static
    reason = (
        count + (": " + ", or ".join(causes) if causes else "") + (f" ({ended})" if ended else "")
    )
    return Verdict("empty", reason, _none_recorded(expected), kept)


def _none_recorded(expected):
    """Verdict.ranks of a run whose ranks recorded nothing (expected: 0 when unknown)."""
    from perfweave.readers.recorded import rank_ranges

    if not expected:
        return {"recorded": 0}
    return {"recorded": 0, "expected": expected, "missing": rank_ranges(range(expected))}

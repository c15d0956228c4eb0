"""The runs of `perfweave placement sweep` (cli/placement.py; the figures:
analysis/sweep.py). Each target of the sweep is a launch/overhead.py Variant of
`perfweave run --heap` with its `--place` rules; launch/overhead.py's Runner runs them
interleaved and repeated and keeps each round's experiment in the sweep directory
(runs/NAME-R, R = round + 1), where analysis/sweep.py `placed` reads the bytes each put in the fast
tier.
"""

import glob
import os

from perfweave.errors import PerfweaveError
from perfweave.launch.command import find_program, program_index
from perfweave.launch.overhead import MODES, Variant, split_words
from perfweave.launch.placement import line_ranges

# what every run records besides the heap profile: the MPI profile alone (no node
# timeline, call-stack samples, math-library or I/O profile), so that a variant's time is
# its placement's and the heap module's
BASE = MODES["profile"][0] + ["--heap"]
EMULATIONS = ("auto", "hugepage", "none")


def numa_nodes():
    """The machine's NUMA nodes (1 where sysfs says nothing)."""
    return max(len(glob.glob("/sys/devices/system/node/node[0-9]*")), 1)


def emulation(choice):
    """The tier emulation --tier-emulate asks for: 'hugepage' or '' (real tiers). auto:
    huge pages on a machine of one NUMA node where no fast tier is declared
    (MEMKIND_HBW_NODES), real tiers elsewhere."""
    if choice not in EMULATIONS:
        raise PerfweaveError(f"--tier-emulate: {choice!r} is not one of {', '.join(EMULATIONS)}")
    if choice == "auto":
        one = numa_nodes() == 1 and not os.environ.get("MEMKIND_HBW_NODES")
        return "hugepage" if one else ""
    return "" if choice == "none" else choice


# --place's size=LO:HI takes bytes (HI included), no 'inf': all sizes are those up to this
ALL_SIZES = 1 << 62


def site_rule(file, line):
    """A site's --place site= value: FILE:LINE, the file by its name."""
    return f"{os.path.basename(file)}:{line}"


def placeable(command):
    """placeable(file, line): whether `--place site=FILE:LINE` finds code at that line in
    command's program (perfweave run resolves such a rule in the program's own line
    table, launch/placement.py), as analysis/sweep.py `targets` asks."""
    _, program = find_program(command, program_index(command))

    def check(file, line):
        return bool(program) and bool(line_ranges(program, site_rule(file, line)))

    return check


def place_rules(target):
    """The --place rules that put target (analysis/sweep.py Target) in the fast tier
    (none for all-slow). A range's hi is excluded, --place's is not."""
    if target.kind == "all":
        return [f"size=0:{ALL_SIZES},tier=fast"]
    if target.kind == "range":
        hi = target.hi - 1 if target.hi > 0 else ALL_SIZES
        return [f"size={target.lo}:{hi},tier=fast"]
    if target.kind == "site":
        return [f"site={site_rule(target.file, target.line)},tier=fast"]
    return []


def profile_variant(run_options=""):
    """The --heap run that picks the sweep's targets."""
    return Variant("profile", "mode", BASE + split_words(run_options, "--run-options"))


def variants(targets, cap=0, emulate="", run_options=""):
    """One Variant per target: perfweave run --heap with its --place rules, the cap
    (bytes, 0: none) and the emulation ('hugepage' or '') on every variant that places."""
    extra = split_words(run_options, "--run-options")
    out = []
    for t in targets:
        words = list(BASE)
        rules = place_rules(t)
        for rule in rules:
            words += ["--place", rule]
        if rules and cap:
            words += ["--place", f"cap={cap}"]
        if rules and emulate:
            words += ["--tier-emulate", emulate]
        out.append(Variant(t.name, "mode", words + extra))
    return out

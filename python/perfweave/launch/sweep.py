"""The runs of `perfweave placement sweep` (cli/placement.py; the figures:
analysis/sweep.py). Each target of the sweep is a launch/overhead.py Variant of
`perfweave run --heap` with its `--place` rules; launch/overhead.py's Runner runs them
interleaved and repeated and keeps each round's experiment in the sweep directory
(runs/NAME-R, R = round + 1), where analysis/sweep.py `placed` reads the bytes each put in the fast
tier. Under huge-page emulation, `huge_pages` reserves hugetlb pages for the sweep's
duration (as root, where none are reserved) so that the runs' arenas are on huge pages
taken before the runs, not compacted for inside their measured time.
"""

import glob
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass

from perfweave._format import HEAP_ARENA_PAGE, HEAP_ARENA_SHARE, HEAP_ARENA_SLACK
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
    (bytes, 0: none; under emulation on hugetlb pages, the arena_cap that sizes the
    arenas to them) and the emulation ('hugepage' or '') on every variant that places."""
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


HUGE_PAGE = HEAP_ARENA_PAGE  # the arenas' huge page (heap_place.c aligns them to it only)
MEMINFO, NR_HUGEPAGES = "/proc/meminfo", "/proc/sys/vm/nr_hugepages"


def arena_bytes(cap):
    """Bytes of one --place arena under a cap of cap bytes (format/heap.h: what
    heap_place.c maps), what MAP_HUGETLB must find free."""
    n = cap + cap // HEAP_ARENA_SHARE + HEAP_ARENA_SLACK
    return math.ceil(n / HEAP_ARENA_PAGE) * HEAP_ARENA_PAGE


def arena_cap(peak):
    """The --place cap that sizes the arenas to a process's peak live bytes (the profile's,
    plus an eighth for a run that allocates a little more), in whole MiB."""
    return math.ceil(peak * 9 / 8 / (1 << 20)) << 20


def meminfo():
    """/proc/meminfo's figures: {key: number} (kB, or pages for HugePages_*)."""
    out = {}
    try:
        with open(MEMINFO) as f:
            for line in f:
                key, _, rest = line.partition(":")
                out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


@dataclass
class HugePages:
    """How the sweep's emulated fast tier gets its huge pages: hugetlb (pages reserved
    before the runs: `reserved` of them by the sweep itself, given back after) or, when
    False, the arenas' madvise (transparent huge pages, which the kernel may compact
    memory for inside a run); note: why not hugetlb, or ''."""

    hugetlb: bool = False
    reserved: int = 0
    note: str = ""


def _set_nr_hugepages(n):
    with open(NR_HUGEPAGES, "w") as f:
        f.write(f"{n}\n")


@contextmanager
def huge_pages(need):
    """Yields a HugePages for runs whose arenas need `need` bytes of huge pages in all.
    Enough free reserved pages: they serve. None reserved and this process may write
    /proc/sys/vm/nr_hugepages (root): it reserves them for the duration of the block and
    gives them back at its end, an error or a signal's exit included (the reservation's
    compaction, if any, is the sweep's own time, not a run's). Otherwise, or when the
    reservation would take more than half the memory available or the kernel gives
    fewer pages: transparent huge pages, and a note says why."""
    info = meminfo()
    size = info.get("Hugepagesize", 0) << 10
    total, free = info.get("HugePages_Total", 0), info.get("HugePages_Free", 0)
    pages = math.ceil(need / HUGE_PAGE)
    madvise = (
        "huge pages by madvise (transparent: the kernel may compact memory for them in a "
        "run's time)"
    )
    if size != HUGE_PAGE:
        yield HugePages(note=f"{madvise}: the kernel's huge page is not 2 MiB")
        return
    if free - info.get("HugePages_Rsvd", 0) >= pages:
        yield HugePages(True)
        return
    if total:
        yield HugePages(note=f"{madvise}: {free} reserved huge pages free, {pages} needed")
        return
    if need > info.get("MemAvailable", 0) << 9:  # kB, half of it
        yield HugePages(
            note=f"{madvise}: {pages} huge pages would take over half the memory available"
        )
        return
    try:
        _set_nr_hugepages(pages)
    except OSError as e:
        yield HugePages(note=f"{madvise}: reserving hugetlb pages ({NR_HUGEPAGES}): {e.strerror}")
        return
    try:
        got = meminfo().get("HugePages_Total", 0)
        if got < pages:
            yield HugePages(note=f"{madvise}: the kernel reserved {got} of {pages} huge pages")
        else:
            yield HugePages(True, got)
    finally:
        _set_nr_hugepages(total)

"""perfweave placement sweep: which heap allocations, in the fast tier, speed a program up
(docs/placement.md "Sweep")."""

import json
import os
import signal
import sys
from contextlib import nullcontext

from perfweave.cli.args import positive, runner_options

DEFAULT_SITES = 3


def setup_parser(sub):
    p = sub.add_parser(
        "placement",
        help="heap placement experiments: sweep places each size range and top site in "
        "the fast tier in turn and times it",
        description="Heap placement experiments (docs/placement.md): perfweave placement "
        "sweep [options] -- COMMAND.",
    )
    # an action per sub-parser: argparse cannot take a positional word before the options
    # and the command's words after them in one parser
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    actions.required = True
    s = actions.add_parser(
        "sweep",
        help="place each size range and top site in the fast tier in turn and time it",
        description="One `perfweave run --heap` picks the log2 size groups that hold >= 95 "
        "% of the byte-seconds live (plus --ranges) and the top --sites sites; then "
        "all-slow (nothing placed), all-fast (every size) and one run per range and "
        "site, interleaved, -r times each, under `perfweave run --heap --place`. Prints "
        "one table: bytes, peak, count, placed bytes verified, whether the peak fits "
        "--cap, median time, spread, speedup against all-slow with its 95 % interval, "
        "share of the all-fast speedup and a verdict. Writes the sweep directory (-o): "
        "sweep.json and every run's experiment (docs/format.md 'Placement sweep').",
        usage="perfweave placement sweep [--ranges auto|LIST] [--sites N] [-r N] "
        "[--cap SIZE] [--tier-emulate auto|hugepage|none] [--time wall|cpu] [-o DIR] [--json] "
        "-- COMMAND...",
    )
    s.add_argument("command", nargs="*", metavar="COMMAND", help="the program, after --")
    s.add_argument(
        "--ranges",
        default="auto",
        metavar="auto|LIST",
        help="size ranges to place: auto (the log2 groups holding >= 95 %% of the "
        "byte-seconds), or LO:HI,... (HI excluded; K, M, G: powers of 1024; inf), "
        "with auto among them to add the automatic ones (default: auto)",
    )
    s.add_argument(
        "--sites",
        type=int,
        default=DEFAULT_SITES,
        metavar="N",
        help=f"top sites by byte-seconds placed one at a time (default {DEFAULT_SITES}; 0: none)",
    )
    s.add_argument("-r", type=positive, default=3, metavar="N", help="rounds (default 3)")
    s.add_argument(
        "--cap",
        default="0",
        metavar="SIZE",
        help="bytes of the fast tier (e.g. 16G): passed to --place, and the table says "
        "whether each range's or site's peak fits (default: no cap)",
    )
    s.add_argument(
        "--tier-emulate",
        default="auto",
        metavar="auto|hugepage|none",
        help="emulate the fast tier with huge-page arenas (hugepage: on hugetlb pages the "
        "sweep reserves for its runs as root where none are, else transparent ones), use "
        "real tiers (none), or hugepage on a machine of one NUMA node (auto, the default)",
    )
    s.add_argument(
        "--time",
        choices=["wall", "cpu"],
        default="wall",
        help="a run's time: the command's wall seconds (default), or the CPU seconds of "
        "its processes (user + system), less sensitive to other programs on a busy machine",
    )
    runner_options(s, "the sweep directory", "print sweep.json's document")
    s.set_defaults(func=main)


def main(args):
    from perfweave import progress, writing
    from perfweave.analysis import sweep as an
    from perfweave.analysis.heap import analyze
    from perfweave.errors import PerfweaveError
    from perfweave.launch import sweep as lp
    from perfweave.launch.overhead import Runner
    from perfweave.readers.experiment import open_experiment
    from perfweave.report.sweep import text

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise PerfweaveError("no command to sweep (perfweave placement sweep ... -- COMMAND)")
    auto, given = an.parse_ranges(args.ranges)
    if args.sites < 0:
        raise PerfweaveError(f"--sites: expected 0 or more, got {args.sites}")
    cap = an.parse_size(args.cap)
    if cap == an.INF:
        cap = 0
    emulate = lp.emulation(args.tier_emulate)
    out = args.output or writing.experiment_name("sweep", os.path.basename(command[0]))
    runs_dir = os.path.join(out, "runs")
    try:
        os.makedirs(runs_dir, exist_ok=True)
    except OSError as e:
        raise PerfweaveError(f"-o {out}: {e.strerror}") from None
    # SIGTERM ends the run in progress (Runner.run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with Runner(command, an.run_facts, timeout=args.timeout, keep=runs_dir) as runner:
        progress.say("perfweave: the --heap run that picks the ranges and sites")
        first = runner.run(lp.profile_variant(args.run_options))
        heap = open_experiment(first.experiment).heap
        if not heap:
            raise PerfweaveError(f"{first.experiment}: the --heap run recorded no allocations")
        notes = []
        profile = analyze(heap)
        targets = an.targets(
            profile, auto, given, args.sites, placeable=lp.placeable(command), notes=notes
        )
        # under emulation, arenas sized to the largest process's peak (or the cap), on
        # hugetlb pages reserved for the runs where that can be done
        arena_cap = cap or lp.arena_cap(profile.peak_bytes)
        need = len(profile.per_process) * lp.arena_bytes(arena_cap) if emulate else 0
        with lp.huge_pages(need) if emulate else nullcontext(lp.HugePages()) as huge:
            notes += [huge.note] if huge.note else []
            vs = lp.variants(targets, arena_cap if huge.hugetlb else cap, emulate, args.run_options)
            runs = runner.rounds(vs, args.r, what="placement sweep")
    result = an.summarize(
        command,
        targets,
        runs,
        cap,
        emulate,
        os.path.relpath(first.experiment, out),
        clock=args.time,
        notes=notes,
        huge_pages=("hugetlb" if huge.hugetlb else "madvise") if emulate else "",
        hugetlb_reserved=huge.reserved,
    )
    for r in result.runs:
        r["experiment"] = os.path.relpath(r["experiment"], out)
    doc = result.to_json()
    writing.write_atomic(os.path.join(out, "sweep.json"), json.dumps(doc, indent=1) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(text(doc)) + "\n")
        progress.say(f"perfweave: wrote {out}")
    return 0

"""perfweave boundness: which routines are bound by memory bandwidth (docs/boundness.md)."""

import argparse
import json
import os
import shlex
import shutil
import signal
import sys

from perfweave.cli.args import positive, runner_options
from perfweave.errors import PerfweaveError


def setup_parser(sub):
    p = sub.add_parser(
        "boundness",
        help="tell bandwidth-bound from compute-bound routines (a memory-bandwidth co-runner)",
        description="Run COMMAND under perfweave run (sampling on) alone and beside "
        "perfweave's memory-bandwidth stressor (a STREAM triad on the cores the program "
        "leaves free, arrays 4x the last-level cache), interleaved, -r times each, and "
        "report per sampled routine its CPU time in each, its slowdown beside the stressor "
        "with a 95 % interval and a verdict: bandwidth-bound, compute-bound, mixed or "
        "undetermined. A control in every round (reference triads and an FMA chain, timed "
        "alone and beside the stressor) shows whether the stressor loaded the memory "
        "system; where it did not, no routine is called compute-bound. The runs and "
        "boundness.json are kept in a directory "
        "(docs/boundness.md).",
        usage="perfweave boundness [-r N] [--stressor-cores N] [--stressor-bytes SIZE] [--heap] "
        "[-o DIR] [--json] "
        "[--run-options OPTS] -- COMMAND...",
    )
    p.add_argument("command", nargs="*", metavar="COMMAND", help="the program, after --")
    p.add_argument(
        "-r", "--rounds", type=positive, default=3, help="rounds, at least 2 (default 3)"
    )
    p.add_argument(
        "--stressor-cores",
        type=positive,
        metavar="N",
        help="cores the stressor runs on (default: those the program's threads leave free, "
        "at least one)",
    )
    p.add_argument(
        "--stressor-bytes",
        type=_size,
        metavar="SIZE",
        help="the stressor's three arrays in all, e.g. 64M (default: 4x the last-level cache)",
    )
    p.add_argument(
        "--heap",
        action="store_true",
        help="record the heap (perfweave run --heap) in every run, and name the allocation "
        "sites live while each routine ran",
    )
    runner_options(
        p,
        "the directory of the runs and result",
        "print the JSON document",
        "perfweave run options added to every run's, e.g. '--sample-interval-ms 2'",
    )
    p.set_defaults(func=main)


def _size(text):
    """--stressor-bytes: a size (analysis/sweep.py's units), three pages at least."""
    from perfweave.analysis.sweep import parse_size

    try:
        size = parse_size(text)
    except PerfweaveError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not 3 * 4096 <= size < 1 << 50:
        raise argparse.ArgumentTypeError(f"{text}: a size of 12K (three pages) to 1P")
    return size


def main(args):
    from perfweave.launch import boundness as launch
    from perfweave.report.sections.boundness import lines
    from perfweave.writing import experiment_name, write_atomic

    # SIGTERM ends the run in progress (Runner.run) and the stressor
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise PerfweaveError("no command to measure (perfweave boundness ... -- COMMAND)")
    if args.rounds < 2:
        raise PerfweaveError("-r 1: the intervals need at least 2 rounds (their spread)")
    options = shlex.split(args.run_options) + (["--heap"] if args.heap else [])
    found = launch.machine()
    launch.check_cores(found, args.stressor_cores)
    out = args.output or experiment_name("boundness", os.path.basename(command[0]))
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise PerfweaveError(f"{out}: already exists; choose another -o")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise PerfweaveError(f"{out}: cannot create: {e.strerror}") from None
    try:
        result = _measure(command, options, args, found, out)
    except BaseException:  # a failed or interrupted measurement leaves no directory
        shutil.rmtree(out, ignore_errors=True)
        raise
    doc = result.to_json()
    write_atomic(os.path.join(out, "boundness.json"), json.dumps(doc, indent=1) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(lines(doc, 100, None) + ["", f"kept in {out}"]) + "\n")
    return 0


def _measure(command, options, args, found, out):
    """The runs, kept in out, and their BoundnessResult."""
    from perfweave.analysis.boundness import measurer, summarize
    from perfweave.launch import boundness as launch
    from perfweave.launch.overhead import Runner

    with Runner(command, measurer(), timeout=args.timeout, keep=out) as runner:
        # a first, discarded run warms the file cache and says how many threads the
        # program samples: the stressor takes the cores they leave
        threads = runner.run(launch.baseline(options), -1).facts["threads"]
        if not threads:
            raise PerfweaveError(
                "the program left no samples (did it run under perfweave's sampler?)"
            )
        stress = launch.stressor(found, threads, args.stressor_cores, args.stressor_bytes)
        runs = runner.rounds(
            launch.variants(stress, options), args.rounds, warmup=False, what="boundness"
        )
    setup = {"machine": found, "program_threads": threads, "stressor": stress}
    return summarize(command, runs, setup, launch.not_available(found, threads))

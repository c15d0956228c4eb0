"""perfweave overhead: what perfweave's modes (and other tools) cost a program."""

import json
import signal
import sys

from perfweave.cli.args import positive

DEFAULT_MODES = "profile,samples,trace"


def setup_parser(sub):
    from perfweave.launch.overhead import CALIBRATIONS, MODES

    p = sub.add_parser(
        "overhead",
        help="measure what perfweave (and other tools) cost a program",
        description="Run COMMAND bare, under perfweave run in each mode and after each "
        "--compare prefix, interleaved, -n times each, and report per variant: the wall "
        "time ratio to bare with a 95 % bootstrap interval, the time added, the peak "
        "resident set added per process and the node's lowest MemAvailable, the "
        "experiment's bytes (raw, compressed, per rank, per trace event), ns added per "
        "wrapped call (a calibration loop per module) and how much the per-routine time "
        "shares moved against the cheapest mode (docs/overhead.md).",
        usage="perfweave overhead [--modes LIST] [--compare CMD]... [-n N] [--json] "
        "[--plot FILE] [--calibrate LIST] [--run-options OPTS] -- COMMAND...",
    )
    p.add_argument("command", nargs="*", metavar="COMMAND", help="the program, after --")
    p.add_argument(
        "--modes",
        default=DEFAULT_MODES,
        metavar="LIST",
        help=f"perfweave modes to measure, comma-separated, of: {', '.join(MODES)} "
        f"(default: {DEFAULT_MODES}; '' for none)",
    )
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="CMD",
        help="another tool: a command put before COMMAND, e.g. 'env LD_PRELOAD=libmpiP.so' "
        "(repeatable)",
    )
    p.add_argument(
        "--run-options",
        default="",
        metavar="OPTS",
        help="perfweave run options added to every mode's, e.g. '--trace-buffer 65536'",
    )
    p.add_argument("-n", type=positive, default=5, help="rounds (default 5)")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="write the figure to FILE (matplotlib's formats where it is installed, else SVG)",
    )
    p.add_argument(
        "--calibrate",
        default="auto",
        metavar="LIST",
        help=f"modules whose calibration loop runs: {', '.join(CALIBRATIONS)}, none, or "
        "auto (each mode's own; tools: all of those) (default: auto)",
    )
    p.add_argument(
        "--calls",
        type=positive,
        default=210000,
        metavar="N",
        help="wrapped calls per calibration run (default 210000)",
    )
    p.add_argument(
        "--interval-ms",
        type=positive,
        default=20,
        metavar="MS",
        help="memory sampling interval (default 20)",
    )
    p.add_argument("--timeout", type=positive, metavar="S", help="give up on a run after S seconds")
    p.set_defaults(func=main)


def main(args):
    from perfweave.analysis.overhead import experiment_facts, summarize
    from perfweave.launch.overhead import Runner, variants
    from perfweave.report.overhead import plot, text

    # SIGTERM ends the run in progress (Runner.run) and removes the experiments
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    vs = variants(modes, args.compare, args.calibrate, args.run_options)
    with Runner(command, experiment_facts, args.interval_ms, args.timeout) as runner:
        runs = runner.rounds(vs, args.n)
        calibration = runner.calibrate(vs, args.n, args.calls)
    doc = summarize(command, vs, runs, calibration).to_json()
    if args.plot:
        plot(doc, args.plot)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(text(doc)) + "\n")
    return 0

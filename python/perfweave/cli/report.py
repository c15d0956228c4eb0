"""perfweave report: print what an experiment measured."""

import json
import sys

from perfweave import progress
from perfweave.cli.args import positive, seconds_window


def setup_parser(sub):
    p = sub.add_parser(
        "report",
        help="print the report of an experiment",
        description="Print the MPI profile of an experiment: time in MPI per "
        "rank and its balance, MPI functions and call sites, message "
        "sizes.",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment directory")
    p.add_argument(
        "--json", action="store_true", help="print the report as JSON (docs/mpi-profile.md)"
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the report as one self-contained HTML file that works offline "
        "(docs/html-report.md) and print one line saying so; with --json the JSON "
        "still goes to stdout",
    )
    p.add_argument(
        "--top",
        type=positive,
        default=None,
        metavar="N",
        help="functions and call sites to collect and show (default: 20 in "
        "--json, --max-rows in the text)",
    )
    p.add_argument(
        "--max-rows",
        type=positive,
        default=None,
        metavar="N",
        help="rows per table of the text report; the others are counted in an "
        "'N more' line (default 4, and long names are shortened in the "
        "middle to fit 100 columns)",
    )
    p.add_argument(
        "--mkl-verbose",
        metavar="LOG",
        help="also read the MKL_VERBOSE lines of the program's output (or "
        "MKL_VERBOSE_OUTPUT_FILE) in LOG: calls and time per MKL routine in the "
        "math-library section (docs/mathlib.md)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="text report with every row and every name whole (lines as wide as they need)",
    )
    p.add_argument(
        "--interval",
        type=seconds_window,
        default=None,
        metavar="START:END",
        help="the trace timeline over this interval of a traced run (seconds since the "
        "first rank's MPI_Init; END may be left out: to the end), instead of the "
        "window with the most time in MPI calls; shown in the text report too",
    )
    p.add_argument(
        "--snapshot",
        type=positive,
        default=None,
        metavar="K",
        help="read live snapshot K (perfweave snapshot, docs/snapshots.md); by default the "
        "newest while the run has not finished",
    )
    p.set_defaults(func=main)


def main(args):
    # numpy and the analysis load here, not when `perfweave run` starts
    from perfweave.interop.profile import open_upgraded
    from perfweave.report import data as report_data
    from perfweave.report import text

    from perfweave.readers.sweep import is_sweep

    if is_sweep(args.experiment):  # a placement sweep's directory: its table
        return _sweep(args)
    mkl = None
    if args.mkl_verbose:  # the log first: its error is the user's option's
        from perfweave.readers import mkl_verbose

        mkl = mkl_verbose.read(args.mkl_verbose)
    exp = open_upgraded(args.experiment, note, snapshot=args.snapshot)
    if mkl is not None:
        exp.mkl_verbose = mkl  # for the math-library section (report/sections/mathlib.py)
    exp.trace_window = args.interval  # report/sections/trace_interval.py
    top = args.top or 20
    if args.max_rows and args.top:
        top = max(args.top, args.max_rows)
    data = report_data.collect(exp, top=top)
    if args.html:
        from perfweave.report import html

        _write_html(args.html, html.render(data, exp))
        if not args.json:  # the page is the report: its one line, not the text as well
            return 0
    if args.json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")  # one write, not many
    else:
        if args.full:
            sys.stdout.write(text.render(data, max_rows=None, width=None, rows=args.top))
        else:
            sys.stdout.write(
                text.render(data, max_rows=args.max_rows or text.MAX_ROWS, rows=args.top)
            )
    return 0


def _sweep(args):
    from perfweave.analysis.sweep import SweepResult
    from perfweave.readers.sweep import read_sweep
    from perfweave.report.sweep import html, text

    doc = SweepResult.from_json(read_sweep(args.experiment)).to_json()
    if args.html:
        _write_html(args.html, html(doc))
        if not args.json:
            return 0
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(text(doc)) + "\n")
    return 0


def _write_html(path, page):
    """--html: the page written, one line saying so."""
    from perfweave import writing
    from perfweave.errors import PerfweaveError

    try:
        writing.write_atomic(path, page)
    except OSError as e:
        raise PerfweaveError(f"--html {path}: {e.strerror}") from None
    progress.then(f"wrote {path}", progress.html_next_step(path))


def note(line):
    """A note beside the report (stderr: --json's output is the report alone)."""
    progress.say(f"perfweave: note: {line}")

"""perfweave report: print what an experiment measured."""
import json
import sys

from perfweave.cli.args import positive


def setup_parser(sub):
    p = sub.add_parser("report", help="print the report of an experiment",
                       description="Print the MPI profile of an experiment: time in MPI per "
                                   "rank and its balance, MPI functions and call sites, message "
                                   "sizes.")
    p.add_argument("experiment", metavar="EXP", help="experiment directory")
    p.add_argument("--json", action="store_true", help="print the report as JSON "
                   "(docs/mpi-profile.md)")
    p.add_argument("--html", metavar="FILE",
                   help="also write the report as one self-contained HTML file (charts of "
                        "the node timeline; works offline)")
    p.add_argument("--top", type=positive, default=20, metavar="N",
                   help="functions and call sites to show (default 20)")
    p.set_defaults(func=main)


def main(args):
    # numpy and the analysis load here, not when `perfweave run` starts
    from perfweave.readers.experiment import open_experiment
    from perfweave.report import data as report_data
    from perfweave.report import text

    exp = open_experiment(args.experiment)
    data = report_data.collect(exp, top=args.top)
    if args.html:
        from perfweave.errors import PerfweaveError
        from perfweave.report import html

        from perfweave import writing

        try:
            writing.write_atomic(args.html, html.render(data, exp))
        except OSError as e:
            raise PerfweaveError(f"--html {args.html}: {e.strerror}") from None
        print(f"perfweave: wrote {args.html}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(data, indent=1) + "\n")   # one write, not many
    else:
        sys.stdout.write(text.render(data))
    return 0

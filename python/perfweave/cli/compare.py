"""perfweave compare: experiments side by side, per routine, call path, MPI call site, MPI
function or I/O file (docs/compare.md)."""

import json
import string
import sys

from perfweave import progress
from perfweave.cli.args import positive


def _top(text):
    """--top: a positive count, or 0 for every row."""
    return 0 if text.strip() == "0" else positive(text)


def setup_parser(sub):
    p = sub.add_parser(
        "compare",
        help="compare experiments: per routine, call path, call site, MPI call or file",
        description="Compare experiment B (and C, ...) against the baseline A, per key: "
        "each side's value (summed over ranks), the difference, the ratio, Welch's t-test "
        "(across repeated experiments when both sides have several, else across ranks) "
        "and a regression flag when the ratio exceeds 1 + max(5 %, 3 sigma), sigma the "
        "baseline's relative standard deviation; keys of one side are 'only in' it. A "
        "side of repeated experiments is written A1,A2,A3. Also the split of the app time "
        "and, when every side has a trace, the POP factors, side by side.",
        usage="perfweave compare [--by KEY] [--metric M] [--inclusive] [--json] "
        "[--html FILE] [--top N] A B [C ...]",
    )
    p.add_argument(
        "sides",
        metavar="A",
        nargs="+",
        help="experiment directories; a side of repetitions is comma-separated",
    )
    p.add_argument(
        "--by",
        metavar="KEY",
        default="callpath",
        help="the key: routine (sampled self time per function), callpath (per node of "
        "the call tree, MPI calls included), callsite (MPI call sites: function, file, "
        "line), mpi-call (MPI functions), file (I/O files, --io); default callpath",
    )
    p.add_argument(
        "--metric",
        default=None,
        help="time, mpi_time, visits, bytes_sent, bytes_recv (routine, callpath); "
        "mpi_time, visits, bytes_sent, bytes_recv (callsite, mpi-call); io_time, "
        "bytes_read, bytes_written (file). Default: the first",
    )
    p.add_argument(
        "--inclusive",
        action="store_true",
        help="routine, callpath: a function's or node's value with its callees' (default: "
        "its own, exclusive)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON (docs/compare.md)")
    p.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page")
    p.add_argument(
        "--top",
        type=_top,
        default=20,
        metavar="N",
        help="keys shown in the text per comparison (default 20; 0: all); --json has all",
    )
    p.set_defaults(func=main)


def sides_of(args_sides):
    """[(label, [paths])]: A, B, C, ... each of its comma-separated experiments."""
    from perfweave.errors import PerfweaveError

    if len(args_sides) < 2:
        raise PerfweaveError("compare needs two experiments or more (perfweave compare A B)")
    labels = string.ascii_uppercase
    out = []
    for i, s in enumerate(args_sides):
        paths = [x for x in s.split(",") if x]
        if not paths:
            raise PerfweaveError(f"{s!r}: no experiment")
        out.append((labels[i] if i < len(labels) else f"S{i + 1}", paths))
    return out


def main(args):
    from perfweave.analysis.compare import compare
    from perfweave.interop.profile import open_upgraded
    from perfweave.report import compare as render

    def note(line):
        progress.say(f"perfweave: note: {line}")

    result = compare(
        sides_of(args.sides),
        by=args.by,
        metric=args.metric,
        inclusive=args.inclusive,
        open_experiment=lambda p: open_upgraded(p, note),
    )
    doc = result.to_json()
    if args.html:
        from perfweave import writing
        from perfweave.errors import PerfweaveError

        try:
            writing.write_atomic(args.html, render.html(doc))
        except OSError as e:
            raise PerfweaveError(f"--html {args.html}: {e.strerror}") from None
        progress.then(f"wrote {args.html}", progress.html_next_step(args.html))
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(render.render(doc, top=args.top or None)) + "\n")
    return 0

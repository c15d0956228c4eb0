"""perfweave import: an OTF2 trace (Score-P's, or perfweave export's) as an experiment."""

import sys
from pathlib import Path

from perfweave import progress, writing


def setup_parser(sub):
    p = sub.add_parser(
        "import",
        help="turn an OTF2 trace into an experiment for perfweave analyze",
        description="Convert an OTF2 archive (Score-P, or perfweave export) into an "
        "experiment directory whose event traces perfweave analyze reads. "
        "Events perfweave has no record for are counted and reported, never "
        "dropped silently. Needs the otf2 package. See docs/interop.md.",
        usage="perfweave import ARCHIVE [-o EXP]",
    )
    p.add_argument(
        "archive", metavar="ARCHIVE", help="the archive's anchor file (NAME.otf2) or its directory"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="EXP",
        help="experiment directory to create (default perfweave-import-NAME-DATE)",
    )
    p.set_defaults(func=main)


def default_name(archive):
    """perfweave-import-<archive's name>-<date>-<time>[-N]."""
    p = Path(archive).resolve()
    return writing.experiment_name(
        "import", (p.parent.name if p.suffix == ".otf2" else p.name) or "otf2"
    )


def main(args):
    from perfweave.cli.analyze import keep_freed_memory
    from perfweave.interop.otf2 import import_archive

    # a batch job of large numpy temporaries, as the analysis: a third of its time went
    # to page faults of memory freed and asked for again
    keep_freed_memory()
    out = args.output or default_name(args.archive)
    s = import_archive(args.archive, out)
    for note in s["notes"]:
        progress.say(f"perfweave: note: {note}", sys.stdout)
    rate = s["events"] / s["read_seconds"] if s["read_seconds"] > 0 else 0
    locs = s["skipped_locations"]
    lost = sum(x["events"] for x in locs) + sum(s["skipped_events"].values())
    skipped = (
        f"; skipped {len(locs)} locations and {lost} events (notes above)" if locs or lost else ""
    )
    analysed = analyse(out)
    progress.say(
        f"perfweave: imported {s['events'] - lost} of {s['events']} events of "
        f"{s['ranks']} ranks into {s['experiment']} ({s['records']} records) in "
        f"{s['seconds']:.2f} s ({rate:,.0f} events/s read){skipped}; "
        f"{analysed} {s['experiment']}",
        sys.stdout,
    )
    exp = s["experiment"]
    if analysed.startswith("wait states analysed"):
        progress.next_step(
            f"imported {s['ranks']} ranks, {progress.count(s['events'] - lost)} events",
            f"report {exp}",
            f"pop {exp}",
        )
    else:
        progress.next_step(f"imported {s['ranks']} ranks", f"analyze {exp}")
    return 0


def analyse(exp):
    """Find the wait states of the imported trace and save them as perfweave analyze
    does, so that perfweave report shows them like a traced run's. Returns what to run
    next."""
    from perfweave.analysis import waitstates
    from perfweave.analysis.exchange import Local
    from perfweave.cli.analyze import save
    from perfweave.errors import PerfweaveError
    from perfweave.report import waitstates as render

    try:
        result = waitstates.analyze(exp, Local(0))
    except PerfweaveError as e:
        progress.say(f"perfweave: note: wait states not analysed ({e})", sys.stdout)
        return "perfweave analyze"
    render.name_paths(result)
    save(exp, result)
    return "wait states analysed; perfweave report (or analyze)"

"""perfweave export: an experiment's event traces, its I/O profile or its call-path
profile in another tool's format."""

import sys

from perfweave import progress

FORMATS = ("otf2", "chrome", "darshan", "caliper", "cube")

# What opens each format's file (docs/interop.md), after the export: the next step.
OPEN_WITH = {
    "otf2": "open {path} in Vampir, read it with otf2-print, or `perfweave import {path}`",
    "chrome": "open {path} in https://ui.perfetto.dev or chrome://tracing",
    "darshan": "read {path} as darshan-parser output (darshan-parser's text tools, diff)",
    "caliper": "load {path} with hatchet.GraphFrame.from_caliper or Thicket.from_caliper",
    "cube": "open {path} in the CUBE GUI (`cube {path}`) or with pycubexr",
}


def opened(fmt, path):
    progress.then(f"wrote {path}", OPEN_WITH[fmt].format(path=path))


def setup_parser(sub):
    p = sub.add_parser(
        "export",
        help="write an experiment's event traces as OTF2 or Chrome trace JSON, its "
        "I/O profile as darshan-parser text, or its call-path profile for Hatchet/Thicket "
        "(Caliper json-split) or CUBE",
        description="Write the event traces of an experiment (perfweave run --trace) as an "
        "OTF2 archive (Vampir, Scalasca, otf2 readers; needs the otf2 package) "
        "or as Chrome trace JSON (chrome://tracing, ui.perfetto.dev); or the I/O profile "
        "(perfweave run --io) as darshan-parser's text (--format darshan); or the "
        "metric x call path x rank profile (sampled time, MPI time, calls, bytes) as "
        "Caliper's json-split (--format caliper: hatchet's GraphFrame.from_caliper, "
        "Thicket.from_caliper) or as a CUBE 4 file (--format cube: the CUBE GUI, "
        "pycubexr; with the wait states of perfweave analyze and the POP useful time). "
        "See docs/interop.md and docs/io.md for what maps to what.",
        usage="perfweave export EXP --format otf2|chrome|darshan|caliper|cube [-o OUT] [--force]",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment directory")
    p.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="otf2: an archive (OUT is its anchor file NAME.otf2, or a "
        "directory for DIR/traces.otf2); chrome: one JSON file; darshan: one text "
        "file per Darshan log (the MPI job's; each process without an MPI rank: "
        "OUT's NAME.HOST.PID.txt beside it); caliper: one JSON file; cube: one .cubex "
        "file",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="where to write (default EXP/export/traces.otf2, EXP/export/trace.json, "
        "EXP/export/darshan.txt, EXP/export/caliper.json or EXP/export/profile.cubex)",
    )
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.set_defaults(func=main)


def main(args):
    if args.format in ("caliper", "cube"):
        if args.format == "caliper":
            from perfweave.interop.caliper import export

            what = "Caliper json-split"
        else:
            from perfweave.interop.cube import export

            what = "CUBE 4 file"
        s = export(args.experiment, args.output, force=args.force)
        for note in s["notes"]:
            progress.say(f"perfweave: note: {note}", sys.stdout)
        progress.say(
            f"perfweave: wrote {what} {s['path']}: {s['nodes']} call paths x {s['ranks']} "
            f"rank{'s' if s['ranks'] != 1 else ''} in {s['seconds']:.2f} s",
            sys.stdout,
        )
        opened(args.format, s["path"])
        return 0
    if args.format == "darshan":
        from perfweave.interop.darshan import export

        s = export(args.experiment, args.output, force=args.force)
        for note in s["notes"]:
            progress.say(f"perfweave: note: {note}", sys.stdout)
        progress.say(
            f"perfweave: wrote darshan-parser text {s['path']}: {s['rows']} counters of "
            f"{s['records']} records of {s['ranks']} ranks in {s['seconds']:.2f} s",
            sys.stdout,
        )
        for p in s["paths"][1:]:  # Darshan's log of a process without MPI: one each
            progress.say(
                f"perfweave: wrote the log of a process without an MPI rank: {p}", sys.stdout
            )
        opened("darshan", s["path"])
        return 0
    if args.format == "otf2":
        from perfweave.interop.otf2 import export

        s = export(args.experiment, args.output, force=args.force)
        what, path = f"OTF2 archive {s['anchor']}", s["anchor"]
    else:
        from perfweave.interop.chrome import export

        s = export(args.experiment, args.output, force=args.force)
        what, path = f"Chrome trace {s['path']}", s["path"]
    for note in s["notes"]:
        progress.say(f"perfweave: note: {note}", sys.stdout)
    rate = s["records"] / s["seconds"] if s["seconds"] > 0 else 0
    progress.say(
        f"perfweave: wrote {what}: {s['events']} events from {s['records']} records of "
        f"{s['ranks']} ranks in {s['seconds']:.2f} s ({rate:,.0f} records/s)",
        sys.stdout,
    )
    opened(args.format, path)
    return 0

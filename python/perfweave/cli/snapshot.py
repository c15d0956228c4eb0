"""perfweave snapshot: make every process of a running job write its data so far."""

import json
import sys

from perfweave import progress
from perfweave.cli.args import positive


def setup_parser(sub):
    p = sub.add_parser(
        "snapshot",
        help="make every process of a running job write its data so far",
        description="Ask every process of the run writing experiment EXP for its profile so "
        "far: each writes it into EXP/snapshots/N/ within --snapshot-poll milliseconds and "
        "runs on. perfweave report EXP then reads the newest snapshot while the run goes "
        "on (--snapshot K a chosen one). Works across nodes: the request is a file in the "
        "experiment (docs/snapshots.md).",
        usage="perfweave snapshot [--wait S] [--json] EXP",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment directory of a running job")
    p.add_argument(
        "--wait",
        type=positive,
        default=30,
        metavar="S",
        help="seconds to wait for every rank's answer (default 30)",
    )
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.set_defaults(func=main)


def main(args):
    from perfweave.launch import snapshot

    number = snapshot.request(args.experiment)
    ranks, world, procs = snapshot.wait(args.experiment, number, args.wait)
    if args.json:
        doc = {"snapshot": number, "answered": ranks, "world_size": world, "processes": procs}
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        who = f"{ranks} of {world} ranks answered" if world else f"{procs} processes answered"
        print(f"snapshot {number}: {who}")
    if not ranks and not procs:
        print(
            f"perfweave: no process answered snapshot {number} within {args.wait} s (has the "
            "job ended, or not started yet?)",
            file=sys.stderr,
        )
        return 1
    progress.next_step(f"snapshot {number} taken", f"report {args.experiment}")
    return 0

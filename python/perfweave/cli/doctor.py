"""perfweave doctor: what this machine supports and what to install for the rest."""

import json
import sys


def setup_parser(sub):
    p = sub.add_parser(
        "doctor",
        help="check what this machine supports and say what to install for the rest",
        description="Check the MPI builds of the runtime and the launchers on PATH, the "
        "measurement sources of perfweave components (PAPI and its components, PCP and "
        "pmcd, NVML), CUPTI, libunwind, the kernel's ptrace scope and perf_event_paranoid, "
        "NUMA nodes, huge pages, DAMON, and the otf2 and mpi4py packages: one line each, "
        "found or missing, with the command or package that adds what is missing. The exit "
        "status is 0 whatever is missing.",
        usage="perfweave doctor [--json]",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=main)


def main(args):
    from perfweave.doctor import SCHEMA, diagnose

    items = diagnose()
    if args.json:
        sys.stdout.write(json.dumps({"schema": SCHEMA, "items": items}, indent=1) + "\n")
        return 0
    width = max(len(i["item"]) for i in items)
    for i in items:
        print(f"{i['item']:<{width}}  {'found  ' if i['found'] else 'missing'}  {i['detail']}")
        if i["install"]:
            print(f"{'':<{width}}           install: {i['install']}")
        for part in i["parts"]:
            print(f"{'':<{width}}           {part}")
    return 0

"""perfweave components: which measurement sources this machine has, and why not."""

import json
import sys


def setup_parser(sub):
    p = sub.add_parser(
        "components",
        help="list the measurement sources available on this machine",
        description="List each source perfweave can read on this machine (PAPI components, "
        "PCP through pmcd, GPUs through NVML, InfiniBand ports, RAPL energy, "
        "network interfaces, per-process /proc) with what it offers, and for "
        "each missing one why (library absent, daemon not running, no device, "
        "no permission).",
        usage="perfweave components [--json]",
    )
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=main)


def main(args):
    from perfweave.sources import probe_all

    found = probe_all()
    if args.json:
        sys.stdout.write(json.dumps({"sources": found}, indent=1) + "\n")
        return 0
    width = max(len(s["source"]) for s in found)
    for s in found:
        state = "yes" if s["available"] else "no "
        text = s["detail"] if s["available"] else s["why"]
        print(f"{s['source']:<{width}}  {state}  {s['what']}: {text}")
        for item in s["items"][:12] if s["available"] else []:
            print(f"{'':<{width}}       {item}")
        if s["available"] and len(s["items"]) > 12:
            print(f"{'':<{width}}       ... {len(s['items']) - 12} more")
    return 0

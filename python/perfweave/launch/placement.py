"""`perfweave run --place` before the program starts (docs/placement.md): the rules
checked, a `site=FILE:LINE` rule given the line's code addresses in the program (its DWARF
line table, read with objdump), and the fast tier chosen: --tier-nodes, else memkind's
MEMKIND_HBW_NODES, else the nodes this machine declares high-bandwidth, else
--tier-emulate; with none, one line and no run. The runtime (runtime/modules/heap_place.c)
reads the rules and the tier as this leaves them."""

import glob
import os
import re
import subprocess

from perfweave import units
from perfweave._format import HEAP_MAX_RULES as MAX_RULES
from perfweave.errors import PerfweaveError
from perfweave.options import REPEAT_SEPARATOR

MAX_NODE = 63  # the runtime's node mask
MAX_RANGES = 8  # heap_place.c's code ranges of a rule
EMULATIONS = ("hugepage",)
NODE_DIR = "/sys/devices/system/node"
TIER_DIR = "/sys/devices/virtual/memory_tiering"


def parse_size(text, what):
    """Bytes of '1M', '512K', '16G', '4096' (units.parse_size)."""
    n = units.parse_size(text)
    if n is None:
        raise PerfweaveError(f"--place: '{what}': '{text}' is not a size ({units.EXAMPLES})")
    return n


def parse_nodes(text, what):
    """Node numbers of '0', '1,3', '4-7'."""
    nodes = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise PerfweaveError(f"{what}: '{text}' is not a list of NUMA nodes (1,3 or 4-7)")
        nodes.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    if max(nodes) > MAX_NODE:
        raise PerfweaveError(f"{what}: node {max(nodes)}: nodes past {MAX_NODE} are not supported")
    return sorted(nodes)


def parse_rule(text):
    """One --place rule as a dict: kind ('size', 'site' or 'cap'), lo/hi, site, policy."""
    rule = {"policy": "bind"}
    for part in text.split(","):
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not value:
            raise PerfweaveError(f"--place: '{text}': '{part}' is not KEY=VALUE")
        if key == "size":
            lo, colon, hi = value.partition(":")
            if not colon:
                raise PerfweaveError(f"--place: '{text}': size=LO:HI (1M:5M)")
            rule.update(kind="size", lo=parse_size(lo, text), hi=parse_size(hi, text))
            if rule["hi"] < rule["lo"]:
                raise PerfweaveError(f"--place: '{text}': the range's end is below its start")
        elif key == "site":
            rule.update(kind="site", site=value)
        elif key == "tier":
            if value != "fast":
                raise PerfweaveError(f"--place: '{text}': the only tier is 'fast'")
        elif key == "policy":
            if value not in ("bind", "preferred"):
                raise PerfweaveError(f"--place: '{text}': policy is bind or preferred")
            rule["policy"] = value
        elif key == "cap":
            rule["cap"] = parse_size(value, text)
        else:
            raise PerfweaveError(
                f"--place: '{text}': unknown '{key}' (size=LO:HI, site=FUNCTION or FILE:LINE, "
                "tier=fast, policy=bind|preferred, cap=BYTES)"
            )
    if "kind" not in rule and "cap" not in rule:
        raise PerfweaveError(f"--place: '{text}': a rule needs size=LO:HI or site=...")
    rule.setdefault("kind", "cap")
    return rule


def _is_line(site):
    file, colon, line = site.rpartition(":")
    return bool(colon and file and line.isdigit())


def line_ranges(program, site):
    """[(lo, hi)] offsets of the code of FILE:LINE in program, from its DWARF line table
    (objdump --dwarf=decodedline): each row's address up to the next row's."""
    file, _, line = site.rpartition(":")
    try:
        out = subprocess.run(
            ["objdump", "--dwarf=decodedline", program],
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
        ).stdout
    except OSError as e:
        raise PerfweaveError(f"--place site={site}: cannot run objdump: {e.strerror}") from None
    rows = []
    for text in out.splitlines():
        f = text.split()
        if len(f) >= 3 and f[1].isdigit() and f[2].startswith("0x"):
            rows.append((f[0], int(f[1]), int(f[2], 16)))
    want = os.path.basename(file)
    ranges = []
    for i, (name, n, addr) in enumerate(rows):
        if n == int(line) and os.path.basename(name) == want and i + 1 < len(rows):
            end = rows[i + 1][2]
            if ranges and ranges[-1][1] == addr:  # one range of consecutive rows
                ranges[-1] = (ranges[-1][0], max(end, addr))
            elif end > addr:
                ranges.append((addr, end))
    return ranges


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def detected_nodes(node_dir=NODE_DIR, tier_dir=TIER_DIR):
    """(nodes, how) of the machine's high-bandwidth nodes: by HMAT (a node whose read
    bandwidth from its initiators is above every node with CPUs'), else by memory tiers
    (the lowest tier, when it holds no node with CPUs), else none: ([], reason)."""
    nodes = sorted(
        int(os.path.basename(d)[4:]) for d in glob.glob(os.path.join(node_dir, "node[0-9]*"))
    )
    with_cpus = {n for n in nodes if _read(os.path.join(node_dir, f"node{n}", "cpulist"))}
    bw = {}
    for n in nodes:
        v = _read(os.path.join(node_dir, f"node{n}", "access0", "initiators", "read_bandwidth"))
        if v and v.isdigit():
            bw[n] = int(v)
    cpu_bw = max((bw[n] for n in with_cpus if n in bw), default=None)
    if cpu_bw is not None:
        fast = [n for n in sorted(bw) if bw[n] > cpu_bw]
        if fast:
            return fast, "HMAT read bandwidth"
    tiers = []
    for d in glob.glob(os.path.join(tier_dir, "memory_tier[0-9]*")):
        text = _read(os.path.join(d, "nodelist"))
        if text:
            try:
                tiers.append((int(os.path.basename(d)[11:]), parse_nodes(text, d)))
            except PerfweaveError:
                continue
    tiers.sort()
    if len(tiers) > 1 and not set(tiers[0][1]) & with_cpus:
        return tiers[0][1], f"memory tier {tiers[0][0]}"
    return (
        [],
        f"{len(nodes)} NUMA node(s), {len(tiers)} memory tier(s), "
        "no HMAT bandwidth above the CPUs' nodes",
    )


def tier(values, environ, node_dir=NODE_DIR, tier_dir=TIER_DIR):
    """(nodes, source) of the fast tier; ([], reason) when there is none."""
    given = values.get("tier_nodes") or ""
    if given:
        name, eq, text = given.partition("=")
        if name.strip() != "fast" or not eq:
            raise PerfweaveError(f"--tier-nodes '{given}': fast=LIST (fast=1 or fast=4-7)")
        nodes, source = parse_nodes(text, "--tier-nodes"), "--tier-nodes"
    elif environ.get("MEMKIND_HBW_NODES"):
        nodes, source = (
            parse_nodes(environ["MEMKIND_HBW_NODES"], "MEMKIND_HBW_NODES"),
            "MEMKIND_HBW_NODES",
        )
    else:
        return detected_nodes(node_dir, tier_dir)
    missing = [n for n in nodes if not os.path.isdir(os.path.join(node_dir, f"node{n}"))]
    if missing:
        raise PerfweaveError(f"{source}: no NUMA node {missing[0]} on this machine")
    return nodes, source


def prepare(values, program, environ=None):
    """values with --place's rules as the runtime reads them (site=FILE:LINE with its
    at=OBJECT@LO-HI+...), --heap on and the tier's nodes; (values, tier source) or
    raises PerfweaveError (one line)."""
    rules = [r.strip() for r in values["place"].split(REPEAT_SEPARATOR) if r.strip()]
    parsed = [parse_rule(r) for r in rules]
    if sum(p["kind"] != "cap" for p in parsed) > MAX_RULES:
        raise PerfweaveError(f"--place: more than {MAX_RULES} rules")
    emulate = values.get("tier_emulate") or ""
    if emulate and emulate not in EMULATIONS:
        raise PerfweaveError(
            f"--tier-emulate '{emulate}': the emulation is {', '.join(EMULATIONS)}"
        )
    nodes, source = tier(values, os.environ if environ is None else environ)
    if not nodes and not emulate:
        raise PerfweaveError(
            f"--place: no fast memory tier here ({source}); give --tier-nodes fast=LIST, "
            "set MEMKIND_HBW_NODES, or emulate one with --tier-emulate hugepage"
        )
    out = []
    for text, p in zip(rules, parsed, strict=True):
        if p["kind"] == "site" and _is_line(p["site"]):
            if not program:
                raise PerfweaveError(f"--place site={p['site']}: the program was not found")
            ranges = line_ranges(program, p["site"])
            if not ranges:
                raise PerfweaveError(
                    f"--place site={p['site']}: no code at that line in {program} "
                    "(built without -g, or another file?)"
                )
            if len(ranges) > MAX_RANGES:
                raise PerfweaveError(
                    f"--place site={p['site']}: its code lies in {len(ranges)} pieces; "
                    f"at most {MAX_RANGES} are supported (name the function instead)"
                )
            at = "+".join(f"{lo:x}-{hi:x}" for lo, hi in ranges)
            text = f"{text},at={os.path.basename(os.path.realpath(program))}@{at}"
        out.append(text)
    resolved = {
        **values,
        "heap": True,
        "place": REPEAT_SEPARATOR.join(out),
        "tier_nodes": "fast=" + ",".join(map(str, nodes)) if nodes else "",
    }
    return resolved, source if nodes else "emulated"

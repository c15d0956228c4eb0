"""--place before the run (launch/placement.py): the rules checked, the fast tier chosen
(--tier-nodes, MEMKIND_HBW_NODES, HMAT bandwidth, memory tiers) on sysfs trees built here,
the line a user gets for each mistake; the repeatable option on the line (options.py); the
placement's analysis and report section on a model built in memory."""

import subprocess

import pytest

from perfweave import options
from perfweave.analysis.heap import analyze
from perfweave.errors import PerfweaveError
from perfweave.launch import placement
from perfweave.model.heap import HeapProfile
from perfweave.report.sections.heap import SECTION

MIB = 1 << 20


def sysfs(tmp_path, cpus, bandwidth=None, tiers=None):
    """A /sys/devices/system/node tree: cpus[n] the cpulist of node n ("" none),
    bandwidth[n] its HMAT read bandwidth; tiers {tier: "nodelist"}."""
    nodes = tmp_path / "node"
    for n, cpulist in enumerate(cpus):
        d = nodes / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
        if bandwidth and n in bandwidth:
            (d / "access0" / "initiators").mkdir(parents=True)
            (d / "access0" / "initiators" / "read_bandwidth").write_text(f"{bandwidth[n]}\n")
    tier_dir = tmp_path / "tiering"
    for t, nodelist in (tiers or {}).items():
        (tier_dir / f"memory_tier{t}").mkdir(parents=True)
        (tier_dir / f"memory_tier{t}" / "nodelist").write_text(nodelist + "\n")
    return str(nodes), str(tier_dir)


def test_detected_nodes(tmp_path):
    # Knights Landing in flat mode: MCDRAM nodes 2-3 without CPUs, above DDR's bandwidth
    nodes, tiers = sysfs(tmp_path / "a", ["0-63", "64-127", "", ""], {0: 90, 1: 90, 2: 400, 3: 400})
    assert placement.detected_nodes(nodes, tiers) == ([2, 3], "HMAT read bandwidth")
    # a CXL expander: no CPUs, slower, in a higher tier: not fast
    nodes, tiers = sysfs(tmp_path / "b", ["0-7", ""], {0: 100, 1: 30}, {4: "0", 5: "1"})
    found, why = placement.detected_nodes(nodes, tiers)
    assert found == [] and "2 NUMA node(s), 2 memory tier(s)" in why
    # memory tiers alone: the lowest tier, holding no node with CPUs
    nodes, tiers = sysfs(tmp_path / "c", ["0-7", ""], None, {1: "1", 4: "0"})
    assert placement.detected_nodes(nodes, tiers) == ([1], "memory tier 1")
    # this kind of machine: one node
    nodes, tiers = sysfs(tmp_path / "d", ["0-1"], None, {4: "0"})
    assert placement.detected_nodes(nodes, tiers)[0] == []


def test_tier_sources(tmp_path):
    nodes, tiers = sysfs(tmp_path, ["0-7", "", ""])
    t = placement.tier
    assert t({"tier_nodes": "fast=1-2"}, {}, nodes, tiers) == ([1, 2], "--tier-nodes")
    assert t({}, {"MEMKIND_HBW_NODES": "2"}, nodes, tiers) == ([2], "MEMKIND_HBW_NODES")
    assert t({"tier_nodes": "fast=1"}, {"MEMKIND_HBW_NODES": "2"}, nodes, tiers)[0] == [1]
    with pytest.raises(PerfweaveError, match="no NUMA node 5 on this machine"):
        t({"tier_nodes": "fast=5"}, {}, nodes, tiers)
    with pytest.raises(PerfweaveError, match=r"fast=LIST"):
        t({"tier_nodes": "slow=1"}, {}, nodes, tiers)
    with pytest.raises(PerfweaveError, match="nodes past 63"):
        t({"tier_nodes": "fast=64"}, {}, nodes, tiers)


def test_rules_checked():
    r = placement.parse_rule("size=1M:5M,tier=fast")
    assert (r["kind"], r["lo"], r["hi"], r["policy"]) == ("size", MIB, 5 * MIB, "bind")
    r = placement.parse_rule("site=solver.f90:123,tier=fast,policy=preferred,cap=16G")
    assert (r["kind"], r["site"], r["policy"], r["cap"]) == (
        "site",
        "solver.f90:123",
        "preferred",
        16 << 30,
    )
    assert placement.parse_rule("cap=512K")["kind"] == "cap"
    for bad, line in [
        ("size=1M", "size=LO:HI"),
        ("size=5M:1M", "below its start"),
        ("size=1Q:5M", "is not a size"),
        ("size=1M:5M,tier=slow", "the only tier is 'fast'"),
        ("size=1M:5M,policy=interleave", "policy is bind or preferred"),
        ("tier=fast", "a rule needs size=LO:HI or site="),
        ("size=1M:5M,color=red", "unknown 'color'"),
    ]:
        with pytest.raises(PerfweaveError, match=line):
            placement.parse_rule(bad)


def test_prepare_needs_a_tier_and_implies_heap(monkeypatch):
    monkeypatch.setattr(placement, "detected_nodes", lambda *a: ([], "1 NUMA node(s)"))
    values = {"place": "size=1M:5M", "heap": False, "tier_nodes": "", "tier_emulate": ""}
    with pytest.raises(PerfweaveError, match=r"^--place: no fast memory tier here \(1 NUMA"):
        placement.prepare(values, None, environ={})
    out, source = placement.prepare({**values, "tier_emulate": "hugepage"}, None, environ={})
    assert out["heap"] and out["tier_nodes"] == "" and source == "emulated"
    out, source = placement.prepare(values, None, environ={"MEMKIND_HBW_NODES": "0"})
    assert out["tier_nodes"] == "fast=0" and source == "MEMKIND_HBW_NODES"
    with pytest.raises(PerfweaveError, match="the emulation is hugepage"):
        placement.prepare({**values, "tier_emulate": "thp"}, None, environ={})


def test_line_rule_resolved_from_dwarf(tmp_path, monkeypatch):
    src = tmp_path / "prog.c"
    src.write_text(
        "#include <stdlib.h>\n"
        "int main(void)\n{\n    void *p = malloc(5 << 20);\n    free(p);\n    return 0;\n}\n"
    )
    prog = tmp_path / "prog"
    subprocess.run(["cc", "-g", "-O0", "-o", str(prog), str(src)], check=True)
    ranges = placement.line_ranges(str(prog), "prog.c:4")
    assert len(ranges) == 1 and ranges[0][0] < ranges[0][1]
    monkeypatch.setattr(placement, "detected_nodes", lambda *a: ([], "none"))
    values = {"place": "site=prog.c:4,tier=fast", "tier_emulate": "hugepage"}
    out, _ = placement.prepare(values, str(prog), environ={})
    lo, hi = ranges[0]
    assert out["place"] == f"site=prog.c:4,tier=fast,at=prog@{lo:x}-{hi:x}"
    with pytest.raises(PerfweaveError, match="no code at that line"):
        placement.prepare({**values, "place": "site=prog.c:99"}, str(prog), environ={})


def test_place_repeats_on_the_line():
    words = ["--place", "size=1M:5M", "--heap", "--place=site=f:1", "--", "prog"]
    values, command = options.run_line(words)
    assert values["place"] == "size=1M:5M;site=f:1" and command == ["prog"]
    import argparse

    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    args = parser.parse_args(words[:-2])
    assert args.place == values["place"]


def placed_profile():
    processes = [
        {"rank": r, "pid": 10 + r, "tier_nodes": "0", "emulate": "hugepage", "place_cap": 0}
        for r in (0, 1)
    ] + [{"rank": 2, "pid": 12, "state": "killed", "tier_nodes": "0", "emulate": "hugepage"}]
    sites = [
        {"process": p, "frames": [(0, 0x10)], "sizes": [(2 * MIB, 100)], "placed_count": 100}
        | {"placed_bytes": 200 * MIB, "rule": 0}
        for p in (0, 1, 2)
    ] + [{"process": 0, "frames": [(0, 0x20)], "sizes": [(8 * MIB, 7)], "rule": -1}]
    rule = {"rule": 0, "kind": "size", "lo": MIB, "hi": 5 * MIB, "count": 100}
    rule |= {"bytes": 200 * MIB, "peak": 200 * MIB, "read_nodes": "0", "numa_policy": "bind:0"}
    rule |= {"resident": 250 * MIB, "on_tier": 250 * MIB, "huge_bytes": 252 * MIB}
    placement_rows = [{**rule, "process": p} for p in (0, 1)]
    placement_rows.append({**rule, "process": 2, "verified": False, "read_policy": ""})
    return HeapProfile.from_literal(processes, sites, ["app"], placement=placement_rows)


class NoSymbols:
    def resolve(self, obj, offsets):
        return [None] * len(offsets)


def test_placement_analysis_and_section():
    r = analyze(placed_profile(), NoSymbols())
    (row,) = r.placement
    assert (row["rule"], row["processes"], row["verified_processes"]) == ("size=1M:5M", 3, 2)
    assert (row["count"], row["bytes"], row["peak_bytes"]) == (300, 600 * MIB, 200 * MIB)
    # the killed process's arena was not read back: its pages are not counted
    assert (row["resident"], row["on_tier"], row["huge_bytes"]) == (500 * MIB,) * 2 + (504 * MIB,)
    assert row["verified_bytes"] == 500 * MIB and row["read_nodes"] == "0"
    by_rule = {s["rule"]: s for s in r.sites}
    assert by_rule["size=1M:5M"]["placed_bytes"] == 600 * MIB and by_rule[""]["placed_count"] == 0
    assert r.tier == {"nodes": "0", "emulated": "hugepage", "cap": 0}
    view = type("View", (), {"width": 120, "max_rows": 10})()
    data = {"heap": r.to_json()}
    text = "\n".join(SECTION.text(data, view))
    assert "Placement (--place): fast tier emulated by hugepage arenas on nodes 0" in text
    assert "size=1M:5M: 1 process(es) not read back (killed)" in text
    html = "\n".join(SECTION.html(data, None))
    assert "Read back at the end" in html and "bind:0" in html
    # a run without --place has no placement in its data, nor in its report
    one_site = [{"frames": [(0, 1)], "sizes": [(8, 1)]}]
    plain = analyze(HeapProfile.from_literal([{}], one_site, ["a"]), NoSymbols())
    assert "placement" not in plain.to_json()

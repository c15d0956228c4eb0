"""The heap module's analysis and report section (analysis/heap.py, report/sections/heap.py)
on models built in memory (model/heap.py HeapProfile.from_literal): numbers known by
construction."""

import numpy as np
import pytest

from perfweave.analysis.heap import analyze, size_label
from perfweave.model.heap import HeapProfile
from perfweave.report.sections.heap import SECTION


class NoSymbols:
    """A symbolizer that knows no object: frames are shown as object+offset."""

    def resolve(self, obj, offsets):
        from perfweave.symbols import Location

        return [Location(obj, int(o)) for o in offsets]


MIB = 1 << 20


def profile(sample_bytes=0):
    procs = [
        {"rank": 0, "pid": 10, "sample_bytes": sample_bytes, "peak_live_bytes": 60 * MIB},
        {"rank": 1, "pid": 11, "sample_bytes": sample_bytes, "peak_live_bytes": 50 * MIB},
    ]
    sites = [
        # the same path in both ranks: one row; operator new's frame skipped for `where`
        {"process": 0, "frames": [(1, 0x100), (0, 0x20)], "sizes": [(2 * MIB, 10)],
         "frees": 10, "peak": 20 * MIB, "byte_s": 3.0},
        {"process": 1, "frames": [(1, 0x100), (0, 0x20)], "sizes": [(2 * MIB, 10)],
         "frees": 10, "peak": 10 * MIB, "byte_s": 1.0},
        {"process": 0, "frames": [(0, 0x40)], "sizes": [(64, 1000), (100, 1)],
         "frees": 1001, "peak": 6400, "byte_s": 0.5},
        {"process": 1, "sizes": [(8, 5)], "byte_s": 0.0},  # past --heap-max-sites
    ]  # fmt: skip
    ranges = [
        {"process": 0, "range": 22, "peak": 20 * MIB, "byte_s": 3.0},
        {"process": 1, "range": 22, "peak": 10 * MIB, "byte_s": 1.0},
        {"process": 0, "range": 7, "peak": 6400, "byte_s": 0.5},
    ]
    return HeapProfile.from_literal(procs, sites, ["/bin/app", "/usr/lib/libstdc++.so.6"], ranges)


def test_sites_merge_by_path_and_rank_by_byte_seconds():
    r = analyze(profile(), NoSymbols())
    s = r.sites
    assert list(s["byte_s"]) == [4.0, 0.5, 0.0]
    top = s[0]
    assert top["where"] == "app+0x20"  # the first frame outside libstdc++
    assert top["path"] == "libstdc++.so.6+0x100 < app+0x20"
    assert (top["processes"], top["count"], top["bytes"], top["frees"]) == (2, 20, 40 * MIB, 20)
    assert (top["min_bytes"], top["max_bytes"], top["peak_bytes"]) == (2 * MIB, 2 * MIB, 20 * MIB)
    assert top["byte_s_pct"] == pytest.approx(100 * 4 / 4.5)
    assert (s[1]["count"], s[1]["bytes"], s[1]["min_bytes"], s[1]["max_bytes"]) == (
        1001, 64100, 64, 100
    )  # fmt: skip
    assert s[2]["where"] == "(other sites)" and s[2]["count"] == 5
    assert (r.count, r.bytes, r.byte_s, r.peak_bytes) == (1026, 40 * MIB + 64140, 4.5, 60 * MIB)
    assert not r.estimated


def test_size_ranges():
    t = analyze(profile(), NoSymbols()).ranges
    assert list(t["range"]) == ["8 B-16 B", "64 B-128 B", "2 MiB-4 MiB"]
    assert list(t["lo"]) == [8, 64, 2 * MIB] and list(t["hi"]) == [16, 128, 4 * MIB]
    assert list(t["count"]) == [5, 1001, 20]
    assert list(t["peak_bytes"]) == [0, 6400, 20 * MIB]  # the most in one process
    assert list(t["byte_s"]) == [0.0, 0.5, 4.0]
    assert [size_label(n) for n in (0, 512, 65536, 3 * MIB)] == ["0 B", "512 B", "64 KiB", "3 MiB"]


def test_section_text_and_estimates():
    view = type("View", (), {"width": 120, "max_rows": 10})()
    data = {"heap": analyze(profile(), NoSymbols()).to_json()}
    text = "\n".join(SECTION.text(data, view))
    assert "Heap allocations (--heap)\n" in text and "estimates" not in text
    assert "app+0x20" in text and "2 MiB-4 MiB" in text
    data = {"heap": analyze(profile(524288), NoSymbols()).to_json()}
    assert data["heap"]["estimated"] and data["heap"]["sample_bytes"] == 524288
    text = "\n".join(SECTION.text(data, view))
    assert "(estimates: one allocation per 512.0KiB sampled)" in text
    assert SECTION.text({}, view) == [] and SECTION.html({}, None) == []


def test_empty_profile():
    r = analyze(HeapProfile(), NoSymbols())
    assert (r.processes, r.count, len(r.sites), len(r.ranges)) == (0, 0, 0, 0)
    assert not HeapProfile() and np.isclose(r.byte_s, 0)

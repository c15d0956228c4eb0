"""The placement sweep's figures and runs (analysis/sweep.py, launch/sweep.py) from
literal profiles and runs whose answers are worked out by hand: which size groups cover
95 % of the byte-seconds, the --place rules of each target, the speedups, shares and
verdicts, and sweep.json read back (docs/placement.md "Sweep")."""

import math

import numpy as np
import pytest

from perfweave.analysis import sweep as an
from perfweave.analysis.heap import HeapResult
from perfweave.errors import PerfweaveError
from perfweave.launch import sweep as lp
from perfweave.launch.overhead import Run
from perfweave.model.table import table

MIB = 1 << 20


def heap_result():
    """Four size groups holding 70, 20, 6 and 4 % of the byte-seconds; two sites, one
    without a file:line (its row cannot be placed by site)."""
    lo = np.array([1, 2, 4, 64]) * MIB  # [lo, 2 lo)
    ranges = table(
        {
            "range": ["1 MiB-2 MiB", "2 MiB-4 MiB", "4 MiB-8 MiB", "64 MiB-128 MiB"],
            "lo": lo,
            "hi": 2 * lo,
            "count": np.array([10, 20, 3, 1]),
            "bytes": np.array([10, 40, 12, 64]) * MIB,
            "peak_bytes": np.array([5, 8, 12, 64]) * MIB,
            "byte_s": np.array([6.0, 20.0, 70.0, 4.0]),
            "byte_s_pct": np.array([6.0, 20.0, 70.0, 4.0]),
        }
    )
    sites = table(
        {
            "where": ["grid (a.f90:12)", "libfoo.so+0x10"],
            "file": ["/src/a.f90", ""],
            "line": np.array([12, 0]),
            "count": np.array([3, 30]),
            "bytes": np.array([12 * MIB, 50 * MIB]),
            "peak_bytes": np.array([12 * MIB, 13 * MIB]),
            "byte_s_pct": np.array([70.0, 26.0]),
        }
    )
    return HeapResult(1, False, 0, 34, 126 * MIB, 100.0, 64 * MIB, sites, ranges, None, [])


def test_sizes_and_ranges_parse_or_fail_in_one_line():
    assert an.parse_size("16G") == 16 << 30
    assert an.parse_size("2.5M") == int(2.5 * MIB)
    assert an.parse_size("64KiB") == 64 << 10
    assert an.parse_size("inf") == an.INF
    assert an.parse_ranges("auto") == (True, [])
    assert an.parse_ranges("1M:5M, auto") == (True, [(MIB, 5 * MIB)])
    assert an.parse_ranges("64K:inf") == (False, [(64 << 10, an.INF)])
    for bad in ("", "5M:1M", "1M", "x:2M", "1M:1M", "inf:2M"):
        with pytest.raises(PerfweaveError) as e:
            an.parse_ranges(bad)
        assert "\n" not in str(e.value)


def test_targets_cover_95_percent_of_byte_seconds_plus_given_ranges_and_top_sites():
    ts = an.targets(heap_result(), True, [(MIB, 5 * MIB), (2 * MIB, 4 * MIB)], sites=3)
    assert [t.name for t in ts] == ["slow", "fast", "range1", "range2", "range3", "range4"] + [
        "site1"
    ]
    # 70 + 20 + 6 = 96 % >= 95 %: the three largest groups, most byte-seconds first; the
    # given 2M:4M is one of them, 1M:5M is added
    r = {t.name: t for t in ts}
    assert [(r[f"range{k}"].lo, r[f"range{k}"].hi) for k in (1, 2, 3, 4)] == [
        (4 * MIB, 8 * MIB),
        (2 * MIB, 4 * MIB),
        (MIB, 2 * MIB),
        (MIB, 5 * MIB),
    ]
    assert not any(r[f"range{k}"].given for k in (1, 2, 3)) and r["range4"].given
    # 1M:5M covers the 1 MiB and 2 MiB groups whole, the 4 MiB one in part
    assert (r["range4"].count, r["range4"].bytes, r["range4"].exact) == (30, 50 * MIB, False)
    assert (r["range1"].count, r["range1"].bytes, r["range1"].exact) == (3, 12 * MIB, True)
    assert (r["site1"].file, r["site1"].line, r["site1"].bytes) == ("/src/a.f90", 12, 12 * MIB)
    assert (r["fast"].count, r["fast"].bytes, r["fast"].peak_bytes) == (34, 126 * MIB, 64 * MIB)
    # a site --place cannot name (no code at its line in the program) is passed over
    notes = []
    ts = an.targets(heap_result(), False, [], 3, placeable=lambda f, n: n != 12, notes=notes)
    assert [t.kind for t in ts] == ["none", "all"] and "grid (a.f90:12)" in notes[0]
    assert an.targets(heap_result(), False, [(MIB, 2 * MIB)], sites=0)[2:] == [
        an.Target("range1", "range", "1 MiB-2 MiB", MIB, 2 * MIB, given=True, count=10,
                  bytes=10 * MIB, peak_bytes=5 * MIB, byte_s_pct=6.0)
    ]  # fmt: skip


def test_each_target_is_a_perfweave_run_with_its_place_rules():
    ts = an.targets(heap_result(), True, [(MIB, an.INF)], sites=1)
    vs = {v.name: v.words for v in lp.variants(ts, cap=16 << 30, emulate="hugepage")}
    assert "--place" not in vs["slow"] and "--tier-emulate" not in vs["slow"]
    assert all("--heap" in w for w in vs.values())

    def places(words):
        return [words[i + 1] for i, w in enumerate(words) if w == "--place"]

    assert places(vs["fast"]) == [f"size=0:{lp.ALL_SIZES},tier=fast", f"cap={16 << 30}"]
    # a range's hi is excluded, --place's included
    assert places(vs["range1"])[0] == f"size={4 * MIB}:{8 * MIB - 1},tier=fast"
    assert places(vs["range4"])[0] == f"size={MIB}:{lp.ALL_SIZES},tier=fast"
    assert places(vs["site1"])[0] == "site=a.f90:12,tier=fast"
    assert vs["site1"][vs["site1"].index("--tier-emulate") + 1] == "hugepage"
    assert "--tier-emulate" not in lp.variants(ts[:2])[1].words
    with pytest.raises(PerfweaveError):
        lp.emulation("fast")


def runs_of(times, placed=None):
    """Runs of {variant: [wall_s per round]}, interleaved."""
    out = []
    for k in range(len(times["slow"])):
        for name, ts in times.items():
            facts = {"placed_bytes": (placed or {}).get(name, 0), "verified_bytes": 0}
            # the CPU seconds: the wall's, halved (--time cpu reads them)
            out.append(Run(name, k, ts[k], 0, 0, facts, f"runs/{name}.{k}", ts[k] / 2))
    return out


def test_speedups_shares_verdicts_and_the_document_read_back():
    ts = an.targets(heap_result(), True, [], sites=0)  # slow, fast, range1..3
    times = {
        "slow": [1.00, 1.04, 0.96, 1.00, 1.00],
        "fast": [0.50, 0.52, 0.48, 0.50, 0.50],
        "range1": [0.60, 0.62, 0.58, 0.61, 0.59],  # helps: 60 % of time saved is 80 %
        "range2": [1.00, 1.04, 0.96, 0.98, 1.02],  # no effect
        "range3": [1.30, 1.35, 1.25, 1.30, 1.30],  # hurts
    }
    res = an.summarize(["./app"], ts, runs_of(times, {"range1": 12 * MIB}), cap=10 * MIB)
    rows = {r["name"]: r for r in res.to_json()["rows"]}
    assert [r["name"] for r in res.to_json()["rows"]] == [
        "slow", "fast", "range1", "range2", "range3",
    ]  # fmt: skip
    assert [rows[n]["rank"] for n in ("range1", "range2", "range3")] == [1, 2, 3]
    assert rows["fast"]["speedup"] == pytest.approx(2.0)
    assert rows["range1"]["speedup"] == pytest.approx(5.0 / 3.0)
    assert rows["range1"]["share"] == pytest.approx(0.8)  # (1 - 0.6) / (1 - 0.5)
    assert rows["range3"]["share"] == pytest.approx(-0.6)
    assert [rows[n]["verdict"] for n in ("slow", "range1", "range2", "range3")] == [
        "baseline", "helps", "no effect", "hurts",
    ]  # fmt: skip
    lo, hi = rows["range2"]["speedup_lo"], rows["range2"]["speedup_hi"]
    assert lo < 1 < hi
    assert rows["range1"]["speedup_lo"] > 1 and rows["range3"]["speedup_hi"] < 1
    assert rows["range1"]["median_s"] == 0.60 and rows["range1"]["placed_bytes"] == 12 * MIB
    # the cap: range1's peak 12 MiB does not fit 10 MiB, range2's 8 MiB does
    assert (rows["range1"]["fits_cap"], rows["range2"]["fits_cap"]) == (False, True)
    assert rows["range2"]["spread"] == pytest.approx(np.std(times["range2"], ddof=1))
    doc = res.to_json()
    back = an.SweepResult.from_json(doc)
    assert back.to_json() == doc
    assert len(back.runs) == 25 and set(back.runs["experiment"]) >= {"runs/fast.4"}
    with pytest.raises(PerfweaveError):
        an.SweepResult.from_json({"format": "perfweave-overhead"})


def test_the_cpu_clock_reads_the_runs_cpu_seconds():
    ts = an.targets(heap_result(), True, [], sites=0)[:3]
    times = {"slow": [1.0, 1.2, 0.8], "fast": [0.5, 0.6, 0.4], "range1": [0.8, 0.96, 0.64]}
    res = an.summarize(["./app"], ts, runs_of(times), clock="cpu").to_json()
    assert res["time"] == "cpu" and "CPU seconds" in res["time_is"]
    row = res["rows"][2]
    assert row["median_s"] == pytest.approx(0.4) and row["speedup"] == pytest.approx(1.25)
    assert [r["cpu_s"] for r in res["runs"][:3]] == [0.5, 0.25, 0.4]


def test_no_share_when_all_fast_is_not_faster():
    ts = an.targets(heap_result(), True, [], sites=0)[:3]
    times = {"slow": [1.0, 1.0, 1.0], "fast": [1.1, 1.1, 1.1], "range1": [0.9, 0.9, 0.9]}
    res = an.summarize(["./app"], ts, runs_of(times))
    row = {r["name"]: r for r in res.to_json()["rows"]}["range1"]
    assert row["share"] is None and math.isnan(res.rows["share"][2])
    assert any("all-fast was not faster" in n for n in res.notes)


def test_sweep_directory_read_by_open_and_report(tmp_path):
    """sweep.json in a directory: perfweave.open() gives a Sweep whose tables are the
    document's, perfweave report prints its table (text, JSON, HTML); a sweep.json of
    another document is one line and exit status 2."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import perfweave
    from perfweave.api import Sweep
    from perfweave.report.sweep import text

    ts = an.targets(heap_result(), True, [], sites=0)[:3]
    times = {"slow": [1.0, 1.1, 0.9], "fast": [0.5, 0.55, 0.45], "range1": [0.8, 0.88, 0.72]}
    doc = an.summarize(["./app", "x"], ts, runs_of(times), emulation="hugepage").to_json()
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    s = perfweave.open(tmp_path)
    assert isinstance(s, Sweep)
    rows = s.table("rows")
    assert list(rows["name"]) == ["slow", "fast", "range1"]
    assert rows["speedup"].tolist() == [r["speedup"] for r in doc["rows"]]
    assert len(s.table("runs")) == 9
    with pytest.raises(PerfweaveError):
        s.table("sites")
    lines = text(doc)
    assert "tiers emulated" in lines[1]
    assert any(ln.lstrip().startswith("#1 4 MiB-8 MiB") for ln in lines)
    exe = str(Path(sys.executable).parent / "perfweave")
    out = subprocess.run([exe, "report", tmp_path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "\n".join(lines) + "\n"
    out = subprocess.run(
        [exe, "report", "--json", tmp_path], capture_output=True, text=True, timeout=60
    )
    assert json.loads(out.stdout) == doc
    page = tmp_path / "sweep.html"
    subprocess.run([exe, "-q", "report", "--html", page, tmp_path], check=True, timeout=60)
    assert "<table" in page.read_text() and "4 MiB-8 MiB" in page.read_text()
    (tmp_path / "sweep.json").write_text('{"format": "other"}')
    out = subprocess.run([exe, "report", tmp_path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_the_sweep_options_are_completed_and_in_the_man_page():
    """`placement` is a verb of actions (argparse sub-parsers): cli/shell.py walks them."""
    from perfweave.cli.shell import bash, manpage

    script = bash()
    case = script[script.index("        placement)") :].split(";;")[0]
    for flag in ("--ranges", "--sites", "-r", "--cap", "--tier-emulate", "--json"):
        assert f" {flag} " in case.split("opts=")[1].split("\n")[0] + " ", flag
    assert 'given="sweep"' in case
    page = manpage()
    section = page[page.index('.SH "PERFWEAVE PLACEMENT"') :].split(".SH ")[1]
    assert "perfweave placement sweep [" in section and "\\fB\\-\\-ranges\\fR" in section


def _proc(tmp_path, monkeypatch, total, free, rsvd=0, available_kb=8 << 20, writable=True):
    """A /proc/meminfo and /proc/sys/vm/nr_hugepages of our own for lp.huge_pages (in a new
    directory under tmp_path); writing the latter sets the former's HugePages_Total and
    _Free, as the kernel does. writable=False: the latter cannot be written."""
    tmp_path = tmp_path / f"proc{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    info, nr = tmp_path / "meminfo", tmp_path / "nr_hugepages"

    def write_info(total, free):
        info.write_text(
            f"MemAvailable: {available_kb} kB\nHugePages_Total: {total}\n"
            f"HugePages_Free: {free}\nHugePages_Rsvd: {rsvd}\nHugepagesize: 2048 kB\n"
        )

    write_info(total, free)
    nr.write_text(f"{total}\n")
    real = lp._set_nr_hugepages
    monkeypatch.setattr(lp, "MEMINFO", str(info))
    # a directory cannot be written as a file, by root either
    monkeypatch.setattr(lp, "NR_HUGEPAGES", str(nr if writable else tmp_path))

    def set_pages(n):
        real(n)
        write_info(n, n)

    monkeypatch.setattr(lp, "_set_nr_hugepages", set_pages)
    return nr


def test_huge_pages_are_reserved_for_the_sweep_and_given_back(tmp_path, monkeypatch):
    need = 3 * lp.arena_bytes(lp.arena_cap(88 << 20))  # three processes of peak 88 MiB
    assert lp.arena_bytes(lp.arena_cap(88 << 20)) == 132 << 20  # 99 MiB + 1/4 + 8 MiB
    nr = _proc(tmp_path, monkeypatch, 0, 0)
    with lp.huge_pages(need) as h:
        assert (h.hugetlb, h.reserved, h.note) == (True, 198, "")
        assert nr.read_text() == "198\n"
    assert nr.read_text() == "0\n"
    with pytest.raises(KeyboardInterrupt):  # given back on Ctrl-C (and any exception)
        with lp.huge_pages(need):
            assert nr.read_text() == "198\n"
            raise KeyboardInterrupt
    assert nr.read_text() == "0\n"


def test_reserved_pages_serve_or_transparent_ones_and_why(tmp_path, monkeypatch):
    need = 100 << 20  # 50 pages
    nr = _proc(tmp_path, monkeypatch, 64, 60, rsvd=5)
    with lp.huge_pages(need) as h:  # an administrator's pages: used, left as they are
        assert (h.hugetlb, h.reserved, h.note) == (True, 0, "")
    assert nr.read_text() == "64\n"
    _proc(tmp_path, monkeypatch, 8, 8)
    with lp.huge_pages(need) as h:
        assert not h.hugetlb and h.note.endswith("8 reserved huge pages free, 50 needed")
    _proc(tmp_path, monkeypatch, 0, 0, available_kb=150 << 10)
    with lp.huge_pages(need) as h:
        assert not h.hugetlb and "over half the memory available" in h.note
    _proc(tmp_path, monkeypatch, 0, 0, writable=False)
    with lp.huge_pages(need) as h:
        assert not h.hugetlb and h.note.startswith("huge pages by madvise (transparent")
        assert "reserving hugetlb pages" in h.note

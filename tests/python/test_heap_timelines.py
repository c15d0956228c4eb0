"""The heap sites' live timelines read from records built here (readers/heap.py,
analysis/heap.py): the buckets put on CLOCK_MONOTONIC's axis, for the coarse clock (its ns,
bucket 0 at tick_start) and for the time-stamp counter (ticks from t_start at ns_per_tick),
after a fold (live_log2 above its first value); samples counted at the buckets' edges;
records of version 3 (no timelines: the time's share, labelled) and one killed while
folding (left out with a note)."""

import numpy as np
import pytest

from perfweave._format import HEAP_LIVE_BUCKETS, HEAP_MAGIC_NUMBER, RECORDS
from perfweave.analysis.heap import analyze
from perfweave.readers.heap import read_heap
from perfweave.report.sections.heap import SECTION

HEADER, OBJECT, SITE, LIVE = (
    RECORDS[k] for k in ("heap_header", "heap_object", "heap_site", "heap_live")
)
PAGE = 4096


def page(n):
    return (n + PAGE - 1) // PAGE * PAGE


class NoSymbols:
    def resolve(self, obj, offsets):
        from perfweave.symbols import Location

        return [Location(obj, int(o)) for o in offsets]


def write_record(exp, version=4, coarse=True, log2=23, marked=range(3, 6), folding=0):
    """heap/h.10.pwheap of one process (pid 10) with one site (a frame at 0x1234) whose
    buckets `marked` are set; the run from t_start 1.0025 s to 2 s."""
    max_sites, max_objects = 4, 1
    h = np.zeros(1, HEADER)
    h["magic"], h["version"], h["pid"], h["rank"], h["state"] = HEAP_MAGIC_NUMBER, version, 10, 0, 0
    h["max_sites"], h["nsites"], h["max_objects"] = max_sites, 2, max_objects
    h["t_start"], h["t_end"] = 1_002_500_000, 2_000_000_000
    if coarse:  # CLOCK_MONOTONIC_COARSE: ns, its last tick before t_start
        h["tick_res_ns"], h["ns_per_tick"], h["tick_start"] = 4_000_000, 1.0, 1_000_000_000
    else:  # the time-stamp counter at 2 GHz
        h["tick_res_ns"], h["ns_per_tick"], h["tick_start"] = 0, 0.5, 123_456_789
    sites = np.zeros(max_sites, SITE)
    sites["path_hash"][:2] = (1, 5)
    sites["depth"][1], sites["object"][1], sites["offset"][1, 0] = 1, -1, 0x1234
    sites["hist_count"][:2, 7] = (1, 1)
    sites["live_ticks"][1] = 1000
    live = np.zeros(max_sites, LIVE)
    for j in marked:
        live["bits"][1, j // 64] |= np.uint64(1) << np.uint64(j % 64)
    at = page(HEADER.itemsize) + page(OBJECT.itemsize * max_objects)
    live_at = at + page(SITE.itemsize * max_sites)
    h["live_at"], h["live_buckets"], h["live_log2"] = live_at, HEAP_LIVE_BUCKETS, log2
    h["live_slack"], h["live_folding"] = (4_000_000 if coarse else 0), folding
    raw = np.zeros(live_at + LIVE.itemsize * max_sites, np.uint8)
    raw[: HEADER.itemsize] = h.view(np.uint8)
    raw[at : at + SITE.itemsize * max_sites] = sites.view(np.uint8)
    raw[live_at:] = live.view(np.uint8)
    (exp / "heap").mkdir(parents=True, exist_ok=True)
    raw.tofile(exp / "heap" / "h.10.pwheap")


@pytest.mark.parametrize("coarse", [True, False])
def test_axis_and_buckets_after_a_fold(tmp_path, coarse):
    write_record(tmp_path, coarse=coarse, log2=23 if coarse else 22)
    heap = read_heap(tmp_path)
    p = heap.processes[0]
    if coarse:  # bucket 0 at the coarse clock's tick_start, 2^23 ns wide
        origin, width, slack = 1_000_000_000, 2.0**23, 4e6
    else:  # at t_start, 2^22 ticks of 0.5 ns
        origin, width, slack = 1_002_500_000, 2.0**21, 0.0
    assert (p["live_origin_ns"], p["live_bucket_ns"], p["live_slack_ns"]) == (origin, width, slack)
    # samples in the middle of buckets 0..9, and at the edges of the marked run 3..5
    mid = [int(origin + (j + 0.5) * width) for j in range(10)]
    edges = [int(origin + 3 * width), int(np.ceil(origin + 6 * width)) - 1]
    outside = [int(np.ceil(origin + 6 * width)), int(origin + 3 * width) - 1, origin - 5]
    heap.sample_t = {0: np.array(mid + edges + outside, np.int64)}
    r = analyze(heap, NoSymbols())
    (site,) = r.sites[r.sites["where"] != "(other sites)"]
    assert site["live_pct_of"] == "samples" and site["live_samples"] == 15
    assert site["live_pct"] == pytest.approx(100 * (3 + 2) / 15)
    assert r.live["timelines"] and r.live["samples"] == 15
    assert r.live["resolution_ms"] == pytest.approx((width + slack) / 1e6)
    # the report's column and what it says it is
    view = type("View", (), {"width": 100, "max_rows": 10})()
    text = "\n".join(SECTION.text({"heap": r.to_json()}, view))
    assert "live %" in text and f"{100 * 5 / 15:.1f}" in text
    assert "the share of its processes' samples (15 in all)" in text


def test_older_and_half_folded_records(tmp_path):
    write_record(tmp_path, version=3)  # the live fields past a version-3 header: not read
    heap = read_heap(tmp_path)
    assert heap.processes["live_bucket_ns"][0] == 0 and not heap.sample_t
    heap.sample_t = {0: np.arange(10, dtype=np.int64)}  # not counted without timelines
    r = analyze(heap, NoSymbols())
    (site,) = r.sites[r.sites["where"] != "(other sites)"]
    # of the time: 1000 ticks (ns) of the process's 0.9975 s
    assert site["live_pct_of"] == "time" and site["live_samples"] == 0
    assert site["live_pct"] == pytest.approx(100 * 1e-6 / 0.9975)
    assert not r.live["timelines"]
    view = type("View", (), {"width": 100, "max_rows": 10})()
    text = "\n".join(SECTION.text({"heap": r.to_json()}, view))
    assert f"{site['live_pct']:.1f} t" in text and "(no live timelines)" in text
    write_record(tmp_path, folding=1)
    heap = read_heap(tmp_path)
    assert heap.processes["live_bucket_ns"][0] == 0
    assert any("widening its live timelines" in n for n in heap.notes)

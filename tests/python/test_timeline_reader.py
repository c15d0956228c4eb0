"""The node-timeline reader (readers/timeline.py) on hand-written files: values per tick
and series, rates of counters and gauges, totals and windows, damaged files."""

import json

import numpy as np
import pytest

from perfweave.errors import FormatError
from perfweave.dtypes import TIMELINE_DTYPE, TIMELINE_VERSION
from perfweave.readers.timeline import read_timelines
from perfweave.analysis.timeline import summarize

SERIES = [
    {"source": "net", "name": "lo.rx_bytes", "unit": "bytes", "kind": "counter"},
    {"source": "nvml", "name": "gpu0.power_w", "unit": "W", "kind": "gauge"},
    {"source": "proc", "name": "42.cpu_ns", "unit": "ns", "kind": "counter"},
]


def write(tmp_path, rows, series=SERIES, complete=True, tail=b""):
    d = tmp_path / "timeline"
    d.mkdir(exist_ok=True)
    meta = {
        "format": "perfweave-timeline",
        "version": TIMELINE_VERSION,
        "host": "n1",
        "interval_ms": 100,
        "complete": complete,
        "sampler_cpu_ns": 5_000_000,
        "series": series,
        "absent": {"rapl": "no RAPL zone"},
    }
    (d / "n1.json").write_text(json.dumps(meta))
    rec = np.zeros(len(rows), TIMELINE_DTYPE)
    for i, (t, s, v) in enumerate(rows):
        rec[i]["t"], rec[i]["series"], rec[i]["value"] = t, s, v
    (d / "n1.values").write_bytes(rec.tobytes() + tail)
    return tmp_path


S = 1_000_000_000


def test_values_rates_totals(tmp_path):
    rows = [
        (0, 0, 0),
        (0, 1, 100),
        (0, 2, 0),
        (S // 2, 0, 1000),
        (S // 2, 1, 200),  # no proc reading at this tick
        (S, 0, 3000),
        (S, 1, 100),
        (S, 2, 5e8),
    ]
    [tl] = read_timelines(write(tmp_path, rows))
    assert tl.host == "n1" and tl.t.tolist() == [0, S // 2, S]
    assert np.isnan(tl.values[1, 2])
    r = tl.rates()
    assert r[:, 0].tolist() == [2000, 4000]  # bytes per second
    assert r[:, 1].tolist() == [150, 150]  # gauge: mean of the two ends
    assert tl.total(0) == 3000 and tl.total(2) == 5e8
    assert tl.window(0, S // 4, S // 2) == (1000, S // 2)  # ticks enclosing the window
    assert tl.absent == {"rapl": "no RAPL zone"} and tl.notes == []
    s = summarize(read_timelines(tmp_path), {42: 3}).to_json()["nodes"][0]
    by = {x["name"]: x for x in s["series"]}
    assert by["lo.rx_bytes"]["mean_rate"] == 3000 and by["lo.rx_bytes"]["peak_rate"] == 4000
    assert by["gpu0.power_w"]["max"] == 200 and by["42.cpu_ns"]["label"] == "rank 3.cpu_ns"
    assert s["sampler_cpu_pct"] == pytest.approx(0.5)


def test_damage_is_noted_not_raised(tmp_path):
    rows = [(0, 0, 0), (S, 0, 10), (S, 7, 1.0)]  # series 7 is not in the JSON
    [tl] = read_timelines(write(tmp_path, rows, complete=False, tail=b"\x01\x02\x03"))
    assert tl.total(0) == 10
    text = " ".join(tl.notes)
    assert "partial record" in text and "unknown series" in text and "did not stop" in text


def test_wrong_version_or_format_is_an_error(tmp_path):
    write(tmp_path, [])
    p = tmp_path / "timeline" / "n1.json"
    meta = json.loads(p.read_text())
    p.write_text(json.dumps(dict(meta, version=99)))
    with pytest.raises(FormatError, match="version 99"):
        read_timelines(tmp_path)
    p.write_text("{not json")
    with pytest.raises(FormatError, match="corrupt node timeline"):
        read_timelines(tmp_path)


def test_version_1_names_the_mpi_io_series_mpi_io(tmp_path):
    """Before version 2 a process's MPI-IO time was the series PID.mpi_io_ns: read as
    PID.mpi_file_ns (other series keep their names)."""
    io = {"source": "proc", "name": "42.mpi_io_ns", "unit": "ns", "kind": "counter"}
    write(tmp_path, [(0, 3, 0.0), (S, 3, 5e8)], series=SERIES + [io])
    p = tmp_path / "timeline" / "n1.json"
    p.write_text(json.dumps(dict(json.loads(p.read_text()), version=1)))
    [tl] = read_timelines(tmp_path)
    assert [s["name"] for s in tl.series] == [
        "lo.rx_bytes",
        "gpu0.power_w",
        "42.cpu_ns",
        "42.mpi_file_ns",
    ]
    assert tl.activity_columns()["file"] == [3]


def test_no_timeline(tmp_path):
    assert read_timelines(tmp_path) == [] and summarize([]) is None


def test_report_survives_a_corrupt_timeline(tmp_path):
    from perfweave.report.section import View
    from perfweave.report.sections.node_timeline import SECTION

    class Exp:
        path, processes, profile = write(tmp_path, []), None, None
        timelines = property(lambda self: read_timelines(self.path))

    (tmp_path / "timeline" / "n1.json").write_text("{not json")
    tl = SECTION.collect(Exp(), {}, 20)["node_timeline"]
    assert tl["nodes"] == [] and "corrupt node timeline" in tl["error"]
    assert any(
        "Node timeline: not shown" in line for line in SECTION.text({"node_timeline": tl}, View())
    )


def test_a_long_mpi_call_is_spread_back_over_the_ticks_it_lasted():
    """A call's MPI time reaches the activity page when the call ends: 0.3 s of
    MPI_Init seen in one 0.1 s tick is 100 % of that tick and the two before it, never
    300 % of one; the families keep their proportions; other series are untouched."""
    from perfweave.model.timeline import NodeTimeline

    series = [
        {"source": "proc", "name": "rank 0.mpi_other_ns", "unit": "ns", "kind": "counter"},
        {"source": "proc", "name": "rank 0.mpi_coll_ns", "unit": "ns", "kind": "counter"},
        {"source": "net", "name": "lo.rx_bytes", "unit": "bytes", "kind": "counter"},
    ]
    t = np.arange(6) * 100_000_000  # ticks every 0.1 s
    other = [0, 0, 0, 0, 0.24e9, 0.24e9]  # 0.24 s + 0.06 s at tick 4
    coll = [0, 0, 0, 0, 0.06e9, 0.11e9]  # then 0.05 s in the last tick
    rx = [0, 10, 20, 30, 40, 50]
    tl = NodeTimeline("h", {}, series, t, np.array([other, coll, rx], float).T)
    r = tl.rates()
    busy = (r[:, 0] + r[:, 1]) / 1e9  # share of wall time in MPI
    assert busy == pytest.approx([0, 1, 1, 1, 0.5])
    assert r[1:4, 0] / (r[1:4, 0] + r[1:4, 1]) == pytest.approx([0.8] * 3)  # 0.24 : 0.06
    assert r[:, 0].sum() * 0.1 == pytest.approx(0.24e9)  # nothing lost
    assert r[:, 1].sum() * 0.1 == pytest.approx(0.11e9)
    assert r[:, 2] == pytest.approx([100] * 5)

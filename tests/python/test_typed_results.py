"""The models built from plain values (`from_literal`) and the analyses' typed results
on them, with numbers known by construction; each result's tables and its to_json (the
report's JSON) agree."""

import json

import numpy as np
import pytest

from perfweave.analysis import mpi, samples
from perfweave.analysis.timeline import summarize
from perfweave.model.profile import Profile
from perfweave.model.samples import ProcessSamples
from perfweave.model.table import records
from perfweave.model.timeline import NodeTimeline
from perfweave.model.waitstates import WaitStatesResult
from perfweave.dtypes import COUNT_DTYPE, SAMPLE_DTYPE, TIMELINE_DTYPE
from perfweave.readers.files import check
from perfweave.readers.samples import META_SCHEMA as SAMPLES_SCHEMA
from perfweave.readers.timeline import META_SCHEMA as TIMELINE_SCHEMA
from perfweave.symbols import Location
from perfweave._format import JSON

APP = "/nonexistent/app"
MAIN, SOLVE, HALO = 0x10, 0x20, 0x30
NAMES = {MAIN: "main", SOLVE: "solve", HALO: "halo"}
MS = 1_000_000
EVENT = "perf::PAGE-FAULTS"


class Sym:
    """Offsets of APP name functions (NAMES); no source lines."""

    def resolve(self, module, offsets):
        return [Location(module, o, NAMES.get(o, "")) for o in offsets]


def rank_samples(rank, solve, halo, counters=False):
    """`solve` samples in main -> solve computing, then `halo` in main -> halo in a
    point-to-point MPI call, one every ms; with counters 10 page faults per solve sample
    and 1 per halo sample (cumulative)."""
    plan = [(SOLVE, "compute", 10)] * solve + [(HALO, "mpi_p2p", 1)] * halo
    total, samples = 0, []
    for leaf, activity, faults in plan:
        total += faults
        s = {"frames": [(APP, leaf), (APP, MAIN)], "activity": activity}
        if counters:
            s["counters"] = [total]
        samples.append(s)
    return ProcessSamples.from_literal(
        samples, objects=[APP], rank=rank, interval_ns=MS, counters=[EVENT] if counters else []
    )


def test_samples_from_literal_are_records_of_the_file_layout():
    p = rank_samples(1, 2, 1)
    assert p.records.dtype == SAMPLE_DTYPE and p.rank == 1 and p.name == "rank-1"
    assert p.records["t"].tolist() == [MS, 2 * MS, 3 * MS]
    assert p.records["depth"].tolist() == [2, 2, 2]
    assert p.records["object"][:, :3].tolist() == [[0, 0, -1]] * 3
    assert p.records["offset"][:, :2].tolist() == [[SOLVE, MAIN]] * 2 + [[HALO, MAIN]]
    assert p.records["activity"].tolist() == [0, 0, p.meta["activities"].index("mpi_p2p")]
    # the description is one the reader accepts
    check(p.meta, {**JSON["samples"], **SAMPLES_SCHEMA}, "rank-1.json", "samples description")
    assert p.meta["threads"][0]["tid"] == p.meta["pid"] and p.meta["t_end"] == 3 * MS


def test_sampling_shares_by_construction():
    # rank 0: 6 samples in solve, 2 in halo; rank 1: 4 and 4; every sample 1 ms
    res = samples.analyze([rank_samples(0, 6, 2), rank_samples(1, 4, 4)], symbolizer=Sym())
    assert res.sample_count == 16 and res.ranks == [0, 1]
    assert res.activity_pct["compute"] == pytest.approx(62.5)
    assert res.activity_pct["mpi_p2p"] == pytest.approx(37.5)
    assert res.time_split == pytest.approx({"compute": 62.5, "MPI": 37.5, "I/O": 0, "threads": 0})
    f = {r["name"]: r for r in records(res.functions)}
    solve, halo = f["solve"], f["halo"]
    assert solve["pct"] == pytest.approx(62.5) and solve["compute_pct"] == pytest.approx(62.5)
    # per rank 75 % and 50 %: min 50, mean 62.5, max 75, imbalance (75 - 62.5) / 75
    assert (solve["rank_min_pct"], solve["rank_mean_pct"], solve["rank_max_pct"]) == (
        pytest.approx((50, 62.5, 75))
    )
    assert solve["imbalance"] == pytest.approx(1 / 6) and solve["worst_rank"] == 0
    assert halo["mpi_p2p_pct"] == pytest.approx(37.5) and halo["compute_pct"] == 0
    assert halo["worst_rank"] == 1
    assert res.functions["name"].tolist() == ["solve", "halo"]  # by share
    inc = dict(zip(res.inclusive["name"].tolist(), res.inclusive["pct"].tolist()))
    assert inc["main"] == pytest.approx(100)
    # the call tree, depth first, children by share
    t = res.call_tree
    assert t["path"].tolist() == ["main", "main/solve", "main/halo"]
    assert t["parent"].tolist() == [-1, 0, 0] and t["depth"].tolist() == [0, 1, 1]
    assert t["inclusive_pct"].tolist() == pytest.approx([100, 62.5, 37.5])
    assert t["exclusive_pct"].tolist() == pytest.approx([0, 62.5, 37.5])
    # per rank: samples, shares of the rank's samples, seconds (1 ms each)
    pr = {(r["node"], r["rank"], r["activity"]): r for r in records(res.call_tree_per_rank)}
    assert pr[(1, 0, "compute")]["samples"] == 6 and pr[(1, 0, "compute")]["pct"] == 75
    assert pr[(1, 0, "compute")]["seconds"] == pytest.approx(0.006)
    assert pr[(2, 1, "mpi_p2p")]["exclusive_samples"] == 4
    assert (2, 0, "compute") not in pr  # no samples: no row
    # every sample, by rank and time
    s = res.samples
    assert len(s) == 16 and s["rank"].tolist() == [0] * 8 + [1] * 8
    assert s["stack"].tolist()[:8] == ["main;solve"] * 6 + ["main;halo"] * 2
    assert s["leaf"].tolist()[6] == "halo" and s["activity"].tolist()[6] == "mpi_p2p"
    assert s["seconds"].tolist() == pytest.approx([0.001] * 16)
    assert s["time_s"].tolist()[:2] == pytest.approx([0.001, 0.002])


def test_sampling_json_is_drawn_from_the_tables():
    res = samples.analyze([rank_samples(0, 6, 2), rank_samples(1, 4, 4)], symbolizer=Sym())
    js = res.to_json()
    assert js["samples"] == 16 and js["activities"] == res.activities
    assert [r["pct"] for r in js["functions"]] == res.functions["pct"].tolist()
    [halo] = [r for r in js["functions"] if r["name"] == "halo"]
    # activities without samples are left out of the JSON's split (0 in the table)
    assert halo["by_activity_pct"] == {"mpi_p2p": res.functions["mpi_p2p_pct"][1]}
    assert halo["per_rank_pct"] == {
        "min": pytest.approx(25),
        "mean": pytest.approx(37.5),
        "max": pytest.approx(50),
    }
    assert [n["parent"] for n in js["call_tree"]] == [None, 0, 0]
    assert "path" not in js["call_tree"][0] and "counters" not in js["functions"][0]
    assert len(res.to_json(top=1)["functions"]) == 1 and js["time_split"] == res.time_split


def test_sampling_counters_by_construction():
    res = samples.analyze(
        [rank_samples(0, 6, 2, counters=True), rank_samples(1, 4, 4, counters=True)],
        symbolizer=Sym(),
    )
    # each sample's increase since its thread's previous one: 10 per solve sample, 1 per
    # halo sample
    f = dict(zip(res.functions["name"].tolist(), res.functions[EVENT].tolist()))
    assert f == {"solve": 100, "halo": 6}
    t = res.call_tree
    assert t[f"{EVENT}_inclusive"].tolist() == [106, 100, 6]
    assert t[f"{EVENT}_exclusive"].tolist() == [0, 100, 6]
    assert res.samples[EVENT].sum() == 106 and res.counters_total == {EVENT: 106}
    js = res.to_json()
    assert js["call_tree"][0]["counters_inclusive"] == {EVENT: 106}
    assert {r["name"]: r["counters"] for r in js["functions"]}["halo"] == {EVENT: 6}


SERIES = [
    {"source": "net", "name": "eth0.rx_bytes", "unit": "bytes", "kind": "counter"},
    {"source": "nvml", "name": "gpu0.power_w", "unit": "W", "kind": "gauge"},
    {"source": "proc", "name": "42.mpi_coll_ns", "unit": "ticks", "kind": "counter"},
    {"source": "net", "name": "eth1.rx_bytes", "unit": "bytes", "kind": "counter"},
]
S = 1_000_000_000


def timeline():
    """Ticks at 0, 0.5 and 1 s: eth0 receives 1000 then 2000 bytes; the GPU draws 100,
    200, 100 W; process 42 is in collectives half of the time (ticks of 2 ns); eth1 is
    never read."""
    return NodeTimeline.from_literal(
        SERIES,
        [
            (0, [0, 100, 0, None]),
            (S // 2, [1000, 200, S // 8, None]),
            (S, [3000, 100, S // 4, None]),
        ],
        host="n1",
        ns_per_tick=2.0,
        interval_ms=500.0,
        sampler_cpu_ns=5_000_000,
        absent={"rapl": "no RAPL zone"},
    )


def test_timeline_from_literal_and_its_rates():
    tl = timeline()
    assert tl.host == "n1" and tl.t.tolist() == [0, S // 2, S]
    assert tl.series[2]["unit"] == "ns" and tl.values[:, 2].tolist() == [0, S / 4, S / 2]
    assert np.isnan(tl.values[:, 3]).all()
    check(tl.meta, {**JSON["timeline"], **TIMELINE_SCHEMA}, "n1.json", "node timeline")
    r = tl.rates()
    assert r[:, 0].tolist() == [2000, 4000]  # bytes per second
    assert r[:, 1].tolist() == [150, 150]  # a gauge: the mean of the interval's ends
    assert r[:, 2].tolist() == [S / 2, S / 2]  # ns in collectives per second
    assert tl.total(0) == 3000 and tl.absent == {"rapl": "no RAPL zone"}
    # the same records through the reader's path
    rec = np.zeros(2, TIMELINE_DTYPE)
    rec["t"], rec["series"], rec["value"] = (5, 5), (0, 1), (7.0, 8.0)
    one = NodeTimeline.from_records("h", {}, SERIES[:2], rec)
    assert one.values.tolist() == [[7.0, 8.0]]


def test_timeline_summary_by_construction():
    res = summarize([timeline()], {42: 3})
    [node] = res.nodes
    assert node.duration_s == 1 and node.sampler_cpu_pct == pytest.approx(0.5)
    s = {r: i for i, r in enumerate(node.series["name"].tolist())}
    series = node.series
    eth0, gpu, coll, eth1 = (s[x["name"]] for x in SERIES)
    assert series["total"][eth0] == 3000 and series["mean_rate"][eth0] == 3000
    assert series["peak_rate"][eth0] == 4000 and series["active"][eth0]
    assert series["mean"][gpu] == pytest.approx(400 / 3) and series["max"][gpu] == 200
    assert np.isnan(series["total"][gpu])  # not a counter
    assert series["label"][coll] == "rank 3.mpi_coll_ns"
    assert np.isnan(series["total"][eth1]) and not series["active"][eth1]
    ot = node.over_time
    assert ot["series"] == ["eth0.rx_bytes"] and ot["activity"] == ["coll"]
    assert [x["rates"] for x in ot["slices"]] == [[2000], [4000]]
    assert ot["slices"][0]["activity_pct"]["coll"] == pytest.approx(50)
    assert ot["slices"][0]["activity_pct"]["outside_mpi"] == pytest.approx(50)
    # the JSON: a counter's total and rates, a gauge's mean and max, None where unread
    js = {x["name"]: x for x in res.to_json()["nodes"][0]["series"]}
    assert js["eth0.rx_bytes"]["mean_rate"] == 3000 and "mean" not in js["eth0.rx_bytes"]
    assert js["gpu0.power_w"]["max"] == 200 and "total" not in js["gpu0.power_w"]
    assert js["eth1.rx_bytes"]["total"] is None and js["eth1.rx_bytes"]["active"] is False
    assert summarize([]) is None


def profile(counters=False):
    """Two ranks of 10 s; MPI_Send from one site (1 s on rank 0, 3 s on rank 1, 4 calls
    each, 1 kB per call in bucket 11), MPI_Barrier from another (2 s on rank 1)."""
    sites = [
        dict(rank=0, fn="MPI_Send", object=0, offset=0x100, count=4, total_ns=S),
        dict(rank=1, fn="MPI_Send", object=0, offset=0x100, count=4, total_ns=3 * S),
        dict(rank=1, fn="MPI_Barrier", object=0, offset=0x200, count=1, total_ns=2 * S),
    ]
    for s in sites[:2]:
        s["bytes_sent"] = 4 * 1024
    kw = {}
    if counters:
        counts = np.zeros(3, COUNT_DTYPE)
        counts["site"], counts["inside"], counts["before"] = [0, 1, 2], [5, 7, 11], [1, 2, 3]
        counts["inside_ns"] = [S, 3 * S, 0]
        kw = dict(counts=counts, counters=[EVENT])
    return Profile.from_literal(
        ["MPI_Send", "MPI_Barrier", "MPI_Init"],
        ["p2p", "coll", "other"],
        [dict(rank=r, pid=100 + r, app_ns=10 * S, mpi_ns=m) for r, m in ((0, S), (1, 5 * S))],
        sites=sites,
        hist=[dict(rank=r, fn="MPI_Send", bucket=11, count=4, bytes=4096) for r in (0, 1)]
        + [dict(rank=1, fn="MPI_Barrier", bucket=33, count=1, bytes=2**40)],
        **kw,
    )


@pytest.mark.parametrize("counters", [False, True])
def test_mpi_profile_tables_by_construction(counters):
    res = mpi.analyze(profile(counters), symbolizer=Sym())
    assert res.mpi and res.ranks == 2 and res.total_app_s == 20 and res.total_mpi_s == 6
    r = records(res.per_rank)
    assert [x["mpi_pct"] for x in r] == pytest.approx([10, 50])
    f = {x["name"]: x for x in records(res.functions)}
    assert f["MPI_Send"]["time_s"] == 4 and f["MPI_Send"]["app_pct"] == pytest.approx(20)
    # of each rank's app time: 10 % and 30 %
    assert (f["MPI_Send"]["rank_min_pct"], f["MPI_Send"]["rank_max_pct"]) == pytest.approx((10, 30))
    assert f["MPI_Send"]["rank_avg_over_max"] == pytest.approx(20 / 30)
    c = res.callsites
    assert c["id"].tolist() == [1, 2] and c["function"].tolist() == ["MPI_Send", "MPI_Barrier"]
    assert c["time_s"].tolist() == [4, 2] and c["file"].tolist() == ["", ""]
    # the per-rank long table sums to the call sites
    pr = res.callsite_ranks
    assert list(zip(pr["id"].tolist(), pr["rank"].tolist(), pr["time_s"].tolist())) == [
        (1, 0, 1.0),
        (1, 1, 3.0),
        (2, 1, 2.0),
    ]
    m = res.message_sizes
    assert m["max_bytes"].tolist() == [2047, -1]  # bucket 11; the last, open-ended
    js = res.to_json()
    assert js["message_sizes"][1]["max_bytes"] is None
    assert js["callsites"][0]["per_rank_time_s"] == {0: 1.0, 1: 3.0}
    assert js["functions"][0]["pct_of_app_per_rank"]["max"] == pytest.approx(30)
    assert mpi.MpiProfileResult.from_json(js).to_json() == js
    if counters:
        assert c[f"{EVENT}_inside"].tolist() == [12, 11]
        assert c[f"{EVENT}_inside_per_s"][0] == 3 and np.isnan(c[f"{EVENT}_inside_per_s"][1])
        assert js["callsites"][1]["counters"][EVENT] == {
            "inside": 11,
            "before": 3,
            "inside_per_s": None,
            "before_per_s": None,
        }
        assert [x[EVENT] for x in r] == [6, 23] and js["per_rank"][1]["counters"] == {EVENT: 23}


def test_saved_wait_states_as_tables():
    doc = {
        "complete": True,
        "metrics": [
            {"id": "time", "name": "Time", "unit": "s", "total": 2.0, "pct": 100.0,
             "values": [[1, 0, 1.0], [1, 1, 1.0]]},
            {"id": "mpi_latesender", "name": "Late Sender", "parent": "time", "unit": "s",
             "total": 0.5, "pct": 25.0, "values": [[1, 1, 0.5]]},
        ],
        "callpaths": [{"id": 1, "name": "main > MPI_Recv @ a.c:3", "function": "MPI_Recv"}],
    }  # fmt: skip
    res = WaitStatesResult.from_json(doc)
    assert res.complete and res.metrics["parent"].tolist() == [None, "time"]
    assert res.values["metric"].tolist() == ["time", "time", "mpi_latesender"]
    assert res.values["value"].tolist() == [1.0, 1.0, 0.5]
    assert res.callpaths["where"].tolist() == [""]


def test_wait_states_result_literal_and_json_round_trip():
    """WaitStatesResult.from_literal builds the tables from plain rows; to_json gives the
    saved document (counts as integers, call paths named only once named) and from_json
    reads it back to the same tables."""
    from perfweave.model.waitstates import WaitStatesResult

    res = WaitStatesResult.from_literal(
        [
            {"id": "time", "name": "Time", "total": 3.0, "pct": 100.0},
            {
                "id": "mpi_latesender",
                "name": "Late Sender",
                "parent": "time",
                "depth": 1,
                "total": 0.75,
                "pct": 25.0,
            },
            {
                "id": "mpi_latesender_count",
                "name": "Late Senders",
                "unit": "count",
                "total": 3,
                "pct": 100.0,
            },
        ],
        [
            {"id": 0, "labels": ["program"]},
            {
                "id": 1,
                "labels": ["program", "M:MPI_Recv@"],
                "parent": 0,
                "name": "MPI_Recv",
                "function": "MPI_Recv",
            },
        ],
        [
            ("time", 0, 0, 1.5),
            ("time", 0, 1, 1.5),
            ("mpi_latesender", 1, 1, 0.5),
            ("mpi_latesender", 1, 0, 0.25),
            ("mpi_latesender_count", 1, 1, 3),
        ],
        ranks=[{"rank": 0, "time_s": 1.5}, {"rank": 1, "time_s": 1.5, "complete": True}],
        complete=True,
        world_size=2,
    )
    assert res.per_rank("mpi_latesender") == {0: 0.25, 1: 0.5}
    assert res.metric("mpi_latesender")["parent"] == "time"
    assert res.values_of("mpi_latesender_count")["value"].tolist() == [3.0]
    doc = res.to_json()
    assert doc["format"] == "perfweave-waitstates" and doc["version"] == 1
    assert [m["id"] for m in doc["metrics"]] == ["time", "mpi_latesender", "mpi_latesender_count"]
    assert doc["metrics"][2]["values"] == [[1, 1, 3]] and doc["metrics"][2]["total"] == 3
    assert doc["metrics"][1]["values"] == [[1, 1, 0.5], [1, 0, 0.25]]
    assert "name" not in doc["callpaths"][0] and doc["callpaths"][1]["name"] == "MPI_Recv"
    assert doc["ranks"][1] == {"rank": 1, "host": "", "state": "", "complete": True, "time_s": 1.5}
    assert doc["counts"]["messages"] == 0
    back = WaitStatesResult.from_json(json.loads(json.dumps(doc)))
    assert back.to_json() == doc
    for name in ("metrics", "callpaths", "values", "ranks"):
        assert getattr(back, name).tolist() == getattr(res, name).tolist(), name

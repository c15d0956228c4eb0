"""The models built from plain values (`from_literal`): records in the files' layouts,
descriptions the readers accept, and a timeline's rates known by construction."""

import numpy as np

from perfweave.model.samples import ProcessSamples
from perfweave.model.timeline import NodeTimeline
from perfweave.readers.dtypes import SAMPLE_DTYPE, TIMELINE_DTYPE
from perfweave.readers.files import check
from perfweave.readers.samples import META_SCHEMA as SAMPLES_SCHEMA
from perfweave.readers.timeline import META_SCHEMA as TIMELINE_SCHEMA

APP = "/nonexistent/app"
MAIN, SOLVE, HALO = 0x10, 0x20, 0x30
NAMES = {MAIN: "main", SOLVE: "solve", HALO: "halo"}
MS = 1_000_000
EVENT = "perf::PAGE-FAULTS"


def rank_samples(rank, solve, halo, counters=False):
    """`solve` samples in main -> solve computing, then `halo` in main -> halo in a
    point-to-point MPI call, one every ms; with counters 10 page faults per solve sample
    and 1 per halo sample (cumulative)."""
    plan = [(SOLVE, "compute", 10)] * solve + [(HALO, "mpi_p2p", 1)] * halo
    total, samples = 0, []
    for leaf, state, faults in plan:
        total += faults
        s = {"frames": [(APP, leaf), (APP, MAIN)], "state": state}
        if counters:
            s["counters"] = [total]
        samples.append(s)
    return ProcessSamples.from_literal(
        samples, modules=[APP], rank=rank, interval_ns=MS, counters=[EVENT] if counters else []
    )


def test_samples_from_literal_are_records_of_the_file_layout():
    p = rank_samples(1, 2, 1)
    assert p.records.dtype == SAMPLE_DTYPE and p.rank == 1 and p.name == "rank-1"
    assert p.records["t"].tolist() == [MS, 2 * MS, 3 * MS]
    assert p.records["depth"].tolist() == [2, 2, 2]
    assert p.records["module"][:, :3].tolist() == [[0, 0, -1]] * 3
    assert p.records["offset"][:, :2].tolist() == [[SOLVE, MAIN]] * 2 + [[HALO, MAIN]]
    assert p.records["state"].tolist() == [0, 0, p.meta["states"].index("mpi_p2p")]
    # the description is one the reader accepts
    check(p.meta, SAMPLES_SCHEMA, "rank-1.json", "samples description")
    assert p.meta["threads"][0]["tid"] == p.meta["pid"] and p.meta["t_end"] == 3 * MS


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
    check(tl.meta, TIMELINE_SCHEMA, "n1.json", "node timeline")
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

"""perfweave.analysis.mpi.analyze on profiles built with Profile.from_literal,
whose answers are worked out by hand below. Symbolisation uses a fake symbolizer
(no addr2line, no binaries)."""

import math

import numpy as np
import pytest

from perfweave.analysis.mpi import BRACKET, analyze, bucket_range
from perfweave.model.profile import Profile
from perfweave.dtypes import FRAME_DTYPE
from perfweave.symbols import Location

S = 1_000_000_000  # ns per second

FUNCTIONS = ["MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Finalize"]
FAMILIES = ["other", "p2p", "p2p", "coll", "other"]
MODULES = ["/opt/app/bin/solver", "/opt/app/lib/libhalo.so"]


class FakeSymbolizer:
    """Location function f<offset hex>, file /src/<module basename>.c, line = offset."""

    def __init__(self):
        self.calls = []

    def resolve(self, module, offsets):
        offsets = list(offsets)
        self.calls.append((module, offsets))
        base = module.rsplit("/", 1)[-1]
        return [Location(module, o, f"f{o:x}", f"/src/{base}.c", o) for o in offsets]


def site(rank, fn, offset, count, total_ns, obj=0, **kw):
    return dict(rank=rank, fn=fn, object=obj, offset=offset, count=count, total_ns=total_ns, **kw)


# Four ranks, 10 s of app time each.
#   MPI time per rank: 2, 2, 2, 4 s -> MPI% 20, 20, 20, 40; outside MPI 8, 8, 8, 6 s.
#   Allreduce @solver+0x100: 1, 1, 1, 3 s (10 calls per rank, 8 bytes each)
#   Send      @solver+0x200: rank 0 1 s, rank 2 0.5 s (5 calls each, 1000 bytes per call)
#   Recv      @solver+0x300: rank 1 1 s, rank 3 1 s (5 calls each, 1000 bytes per call)
#   Send      @libhalo+0x200 (same offset, other module): rank 2 0.5 s (2 calls, 50 bytes)
#   MPI_Init / MPI_Finalize on every rank: bracket calls, not MPI time of the app.
RANKS = [
    dict(
        rank=r,
        host=r // 2,
        pid=100 + r,
        app_ns=10 * S,
        mpi_ns=m,
        mpi_calls=c,
        t_init_enter=1000,
        t_init_leave=1000 + (r + 1) * S // 4,
        nthreads=1,
        offset_init_ns=r * 1000,
        offset_init_err_ns=10 * r,
        offset_fini_err_ns=20,
        sites_dropped=r,
    )
    for r, m, c in ((0, 2 * S, 15), (1, 2 * S, 15), (2, 2 * S, 17), (3, 4 * S, 15))
]
SITES = (
    [
        site(r, "MPI_Allreduce", 0x100, 10, t, bytes_sent=80, bytes_recv=80)
        for r, t in ((0, S), (1, S), (2, S), (3, 3 * S))
    ]
    + [
        site(0, "MPI_Send", 0x200, 5, S, bytes_sent=5000),
        site(2, "MPI_Send", 0x200, 5, S // 2, bytes_sent=5000),
        site(1, "MPI_Recv", 0x300, 5, S, bytes_recv=5000),
        site(3, "MPI_Recv", 0x300, 5, S, bytes_recv=5000),
        site(2, "MPI_Send", 0x200, 2, S // 2, obj=1, bytes_sent=100),
    ]
    + [site(r, "MPI_Init", 0x50, 1, S // 4) for r in range(4)]
    + [site(r, "MPI_Finalize", 0x60, 1, S // 10) for r in range(4)]
)
HIST = (
    # 8-byte Allreduces: floor(log2 8) = 3 -> bucket 4 = [8, 15]
    [
        dict(rank=r, fn="MPI_Allreduce", bucket=4, count=10, bytes=80, total_ns=t)
        for r, t in ((0, S), (1, S), (2, S), (3, 3 * S))
    ]
    # 1000-byte Sends: floor(log2 1000) = 9 -> bucket 10 = [512, 1023]
    + [
        dict(rank=0, fn="MPI_Send", bucket=10, count=5, bytes=5000, total_ns=S),
        dict(rank=2, fn="MPI_Send", bucket=10, count=5, bytes=5000, total_ns=S // 2),
        # 50-byte Sends: floor(log2 50) = 5 -> bucket 6 = [32, 63]
        dict(rank=2, fn="MPI_Send", bucket=6, count=2, bytes=100, total_ns=S // 2),
    ]
)


def profile(**kw):
    return Profile.from_literal(
        FUNCTIONS,
        FAMILIES,
        RANKS,
        SITES,
        objects=MODULES,
        hist=HIST,
        hosts=("node01", "node02"),
        mpi_library="Open MPI v4.1",
        mpi_flavor="openmpi",
        **kw,
    )


@pytest.fixture(scope="module")
def result():
    sym = FakeSymbolizer()
    out = analyze(profile(), symbolizer=sym).to_json()
    out["_sym"] = sym
    return out


def by_name(items, key="name"):
    return {d[key]: d for d in items}


# ---- ranks ----


def test_header_values(result):
    assert result["ranks"] == 4
    assert result["world_size"] == 4
    assert result["mpi"] is True
    assert result["mpi_flavor"] == "openmpi"
    assert result["hosts"] == ["node01", "node02"]
    assert result["total_app_s"] == pytest.approx(40.0)
    assert result["total_mpi_s"] == pytest.approx(10.0)
    assert result["sites_dropped"] == 0 + 1 + 2 + 3
    assert result["top"] == 20


def test_per_rank(result):
    pr = result["per_rank"]
    assert [p["rank"] for p in pr] == [0, 1, 2, 3]
    assert [p["host"] for p in pr] == ["node01", "node01", "node02", "node02"]
    assert [p["pid"] for p in pr] == [100, 101, 102, 103]
    assert [p["app_s"] for p in pr] == pytest.approx([10, 10, 10, 10])
    assert [p["mpi_s"] for p in pr] == pytest.approx([2, 2, 2, 4])
    assert [p["mpi_pct"] for p in pr] == pytest.approx([20, 20, 20, 40])
    assert [p["outside_pct"] for p in pr] == pytest.approx([80, 80, 80, 60])
    assert [p["calls"] for p in pr] == [15, 15, 17, 15]
    assert [p["init_s"] for p in pr] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert [p["clock_offset_init_s"] for p in pr] == pytest.approx([0, 1e-6, 2e-6, 3e-6])
    # the larger of the two half round trips
    assert [p["clock_offset_error_s"] for p in pr] == pytest.approx([2e-8, 2e-8, 2e-8, 3e-8])


def test_rank_order_does_not_depend_on_row_order():
    p = Profile.from_literal(
        FUNCTIONS, FAMILIES, RANKS[::-1], SITES, objects=MODULES, hosts=("node01", "node02")
    )
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    assert [x["rank"] for x in r["per_rank"]] == [0, 1, 2, 3]
    assert [x["mpi_pct"] for x in r["per_rank"]] == pytest.approx([20, 20, 20, 40])


def test_mpi_pct_and_balance(result):
    mp = result["mpi_pct"]
    # 20, 20, 20, 40: mean 25, population stdev sqrt((3*25 + 225)/4) = sqrt(75)
    assert mp["min"] == pytest.approx(20)
    assert mp["max"] == pytest.approx(40)
    assert mp["mean"] == pytest.approx(25)
    assert mp["stdev"] == pytest.approx(math.sqrt(75))
    assert mp["avg_over_max"] == pytest.approx(25 / 40)
    # outside MPI: 8, 8, 8, 6 s -> Avg/Max 7.5 / 8
    out = result["outside_mpi_s"]
    assert (out["min"], out["mean"], out["max"]) == pytest.approx((6, 7.5, 8))
    assert out["avg_over_max"] == pytest.approx(0.9375)
    assert result["outside_mpi_pct"]["avg_over_max"] == pytest.approx(0.9375)
    assert result["outside_mpi_pct"]["mean"] == pytest.approx(75)
    assert result["app_time_s"]["avg_over_max"] == pytest.approx(1.0)
    assert result["mpi_time_s"]["mean"] == pytest.approx(2.5)
    assert result["init_s"]["mean"] == pytest.approx(0.625)


# ---- functions ----


def test_function_aggregates(result):
    fns = by_name(result["functions"])
    assert set(fns) == {"MPI_Allreduce", "MPI_Send", "MPI_Recv"}
    ar, send, recv = fns["MPI_Allreduce"], fns["MPI_Send"], fns["MPI_Recv"]
    assert (ar["calls"], send["calls"], recv["calls"]) == (40, 12, 10)
    assert (ar["time_s"], send["time_s"], recv["time_s"]) == pytest.approx((6.0, 2.0, 2.0))
    assert ar["family"] == "coll" and send["family"] == "p2p"
    # App% of 40 s, MPI% of 10 s
    assert (ar["app_pct"], ar["mpi_pct"]) == pytest.approx((15.0, 60.0))
    assert (send["app_pct"], send["mpi_pct"]) == pytest.approx((5.0, 20.0))
    assert (ar["bytes_sent"], ar["bytes_recv"]) == (320, 320)
    assert (send["bytes_sent"], send["bytes_recv"]) == (10100, 0)
    assert (recv["bytes_sent"], recv["bytes_recv"]) == (0, 10000)
    # mean bytes per call from the histograms; Recv has none: max(sent, recv) / calls
    assert ar["mean_bytes"] == pytest.approx(8.0)
    assert send["mean_bytes"] == pytest.approx(10100 / 12)
    assert recv["mean_bytes"] == pytest.approx(1000.0)
    assert (ar["sites"], send["sites"], recv["sites"]) == (1, 2, 1)
    assert (ar["ranks"], send["ranks"], recv["ranks"]) == (4, 2, 2)


def test_function_order_and_per_rank_share(result):
    names = [f["name"] for f in result["functions"]]
    assert names[0] == "MPI_Allreduce"
    assert sorted(names[1:]) == ["MPI_Recv", "MPI_Send"]
    ar = by_name(result["functions"])["MPI_Allreduce"]["pct_of_app_per_rank"]
    # 10, 10, 10, 30 % of each rank's 10 s
    assert (ar["min"], ar["mean"], ar["max"]) == pytest.approx((10, 15, 30))
    assert ar["stdev"] == pytest.approx(math.sqrt(75))
    assert ar["avg_over_max"] == pytest.approx(0.5)
    send = by_name(result["functions"])["MPI_Send"]["pct_of_app_per_rank"]
    # rank 0 1 s, rank 2 0.5 + 0.5 s, ranks 1 and 3 none: 10, 0, 10, 0 %
    assert (send["min"], send["mean"], send["max"]) == pytest.approx((0, 5, 10))


def test_bracket_calls_excluded(result):
    assert set(BRACKET) == {"MPI_Init", "MPI_Init_thread", "MPI_Finalize"}
    names = {f["name"] for f in result["functions"]}
    assert "MPI_Init" not in names and "MPI_Finalize" not in names
    assert {c["function"] for c in result["callsites"]} == {"MPI_Allreduce", "MPI_Send", "MPI_Recv"}
    # and their time is no part of App% / MPI% denominators (those come from the ranks)
    assert sum(f["mpi_pct"] for f in result["functions"]) == pytest.approx(100.0)


# ---- call sites ----


def test_callsites_grouped_across_ranks(result):
    cs = result["callsites"]
    assert result["callsites_total"] == 4
    assert [c["id"] for c in cs] == [1, 2, 3, 4]
    assert [c["time_s"] for c in cs] == pytest.approx([6.0, 2.0, 1.5, 0.5])
    assert [(c["function"], c["location"]["object"], c["location"]["offset"]) for c in cs] == [
        ("MPI_Allreduce", MODULES[0], 0x100),
        ("MPI_Recv", MODULES[0], 0x300),
        ("MPI_Send", MODULES[0], 0x200),
        ("MPI_Send", MODULES[1], 0x200),
    ]
    assert [c["ranks"] for c in cs] == [4, 2, 2, 1]
    assert [c["calls"] for c in cs] == [40, 10, 10, 2]


def test_callsite_values(result):
    ar = result["callsites"][0]
    assert ar["function"] == "MPI_Allreduce" and ar["family"] == "coll"
    assert ar["per_rank_time_s"] == pytest.approx({0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0})
    # per-rank times 1, 1, 1, 3: mean 1.5, population stdev 0.866, COV 0.577
    assert ar["cov"] == pytest.approx(math.sqrt(0.75) / 1.5)
    assert ar["cov"] == pytest.approx(0.57735, abs=1e-5)
    assert ar["mean_s"] == pytest.approx(6.0 / 40)
    # min/max per call: 1 s / 10 calls on ranks 0-2, 3 s / 10 calls on rank 3
    assert (ar["min_s"], ar["max_s"]) == pytest.approx((0.1, 0.3))
    assert (ar["app_pct"], ar["mpi_pct"]) == pytest.approx((15.0, 60.0))
    assert (ar["bytes_sent"], ar["bytes_recv"]) == (320, 320)
    assert ar["where"] == "f100 (solver.c:256)"
    assert ar["location"] == {
        "object": MODULES[0],
        "offset": 0x100,
        "function": "f100",
        "file": "/src/solver.c",
        "line": 256,
        "inlined_into": [],
    }
    assert ar["stack"] == [] and ar["stack_where"] == []


def test_callsite_cov_of_ranks_having_the_site(result):
    recv, send0, send1 = result["callsites"][1:]
    assert recv["cov"] == pytest.approx(0.0)  # 1 s and 1 s
    # Send @solver: 1 s and 0.5 s on ranks 0 and 2 (ranks 1 and 3 do not count):
    # mean 0.75, stdev 0.25
    assert send0["cov"] == pytest.approx(1 / 3)
    assert send0["per_rank_time_s"] == pytest.approx({0: 1.0, 2: 0.5})
    assert (send0["app_pct"], send0["mpi_pct"]) == pytest.approx((3.75, 15.0))
    assert send1["cov"] == pytest.approx(0.0)
    assert send1["per_rank_time_s"] == pytest.approx({2: 0.5})
    assert (send1["app_pct"], send1["mpi_pct"]) == pytest.approx((1.25, 5.0))
    assert (send1["bytes_sent"], send1["calls"]) == (100, 2)


def test_same_offset_other_module_is_another_site(result):
    sends = [c for c in result["callsites"] if c["function"] == "MPI_Send"]
    assert [c["where"] for c in sends] == ["f200 (solver.c:512)", "f200 (libhalo.so.c:512)"]
    assert len({(c["location"]["object"], c["location"]["offset"]) for c in sends}) == 2


def test_symbolizer_called_per_module_with_sorted_offsets(result):
    calls = sorted(result["_sym"].calls)
    assert calls == [(MODULES[0], [0x100, 0x200, 0x300]), (MODULES[1], [0x200])]


def test_top_is_passed_through():
    r = analyze(profile(), top=2, symbolizer=FakeSymbolizer()).to_json()
    assert r["top"] == 2
    assert len(r["callsites"]) == 4  # the analysis keeps all; reports cut at top


def test_overflow_and_unknown_module_sites():
    sites = [
        site(0, "MPI_Send", 0, 7, 7 * S, obj=-1),  # overflow site
        site(0, "MPI_Recv", 0x4000, 1, S, obj=-1),
    ]  # outside any module
    p = Profile.from_literal(
        FUNCTIONS, FAMILIES, [dict(rank=0, app_ns=20 * S, mpi_ns=8 * S)], sites, objects=MODULES
    )
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    ov, unk = r["callsites"]
    assert ov["where"] == "(overflow: sites beyond --max-callsites)"
    assert ov["location"] is None
    assert (ov["calls"], ov["time_s"]) == (7, pytest.approx(7.0))
    assert unk["where"] == "f4000 (.c:16384)"  # the fake symbolizer gets module path ""
    assert unk["location"]["object"] == ""


def test_deeper_stacks_make_distinct_sites():
    """Same caller (fn, module, offset) reached through two different stacks: two sites
    (the per-rank rows with equal stacks still group)."""
    sites = [
        site(0, "MPI_Send", 0x200, 1, S, nframes=1, first_frame=0),
        site(1, "MPI_Send", 0x200, 1, 2 * S, nframes=1, first_frame=1),
        site(1, "MPI_Send", 0x200, 1, 3 * S, nframes=1, first_frame=2),
    ]
    p = Profile.from_literal(
        FUNCTIONS,
        FAMILIES,
        [dict(rank=0, app_ns=10 * S, mpi_ns=S), dict(rank=1, app_ns=10 * S, mpi_ns=5 * S)],
        sites,
        objects=MODULES,
    )
    p.frames = np.zeros(3, FRAME_DTYPE)
    p.frames["object"] = [0, 0, 1]
    p.frames["offset"] = [0x700, 0x700, 0x800]
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    cs = r["callsites"]
    assert len(cs) == 2
    assert [c["time_s"] for c in cs] == pytest.approx([3.0, 3.0])
    by_stack = {tuple(c["stack_where"]): c for c in cs}
    assert set(by_stack) == {("f700 (solver.c:1792)",), ("f800 (libhalo.so.c:2048)",)}
    assert by_stack[("f700 (solver.c:1792)",)]["per_rank_time_s"] == pytest.approx({0: 1.0, 1: 2.0})
    assert by_stack[("f700 (solver.c:1792)",)]["stack"][0]["offset"] == 0x700
    fn = by_name(r["functions"])["MPI_Send"]
    assert (fn["sites"], fn["calls"]) == (2, 3)


# ---- message sizes ----


@pytest.mark.parametrize(
    "bucket,lo,hi",
    [
        (0, 0, 0),
        (1, 1, 1),
        (2, 2, 3),
        (3, 4, 7),
        (4, 8, 15),
        (10, 512, 1023),
        (11, 1024, 2047),
        (32, 2**31, 2**32 - 1),
    ],
)
def test_bucket_range(bucket, lo, hi):
    assert bucket_range(bucket) == (lo, hi)


@pytest.mark.parametrize("size", [1, 2, 3, 8, 50, 1000, 1024, 65535, 2**31])
def test_bucket_holds_its_sizes(size):
    # format.h: bucket b holds sizes s with floor(log2(s)) == b - 1
    lo, hi = bucket_range(size.bit_length())
    assert lo <= size <= hi


def test_message_sizes(result):
    sizes = {(s["function"], s["bucket"]): s for s in result["message_sizes"]}
    assert set(sizes) == {("MPI_Allreduce", 4), ("MPI_Send", 10), ("MPI_Send", 6)}
    ar = sizes[("MPI_Allreduce", 4)]
    assert (ar["min_bytes"], ar["max_bytes"], ar["calls"], ar["bytes"]) == (8, 15, 40, 320)
    assert ar["time_s"] == pytest.approx(6.0)
    s10 = sizes[("MPI_Send", 10)]
    assert (s10["min_bytes"], s10["max_bytes"], s10["calls"], s10["bytes"]) == (
        512,
        1023,
        10,
        10000,
    )
    assert s10["time_s"] == pytest.approx(1.5)
    s6 = sizes[("MPI_Send", 6)]
    assert (s6["min_bytes"], s6["max_bytes"], s6["calls"], s6["bytes"]) == (32, 63, 2, 100)


def test_zero_byte_bucket():
    p = Profile.from_literal(
        ["MPI_Send"],
        ["p2p"],
        [dict(rank=0, app_ns=S, mpi_ns=S // 2)],
        [site(0, "MPI_Send", 0x10, 3, S // 2)],
        hist=[dict(rank=0, fn="MPI_Send", bucket=0, count=3, bytes=0, total_ns=S // 2)],
    )
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    assert r["message_sizes"] == [
        {
            "function": "MPI_Send",
            "bucket": 0,
            "min_bytes": 0,
            "max_bytes": 0,
            "calls": 3,
            "bytes": 0,
            "time_s": 0.5,
        }
    ]
    assert r["functions"][0]["mean_bytes"] == 0.0


# ---- edge cases ----


def test_rank_without_app_time():
    p = Profile.from_literal(
        ["MPI_Send"],
        ["p2p"],
        [dict(rank=0, app_ns=0, mpi_ns=0), dict(rank=1, app_ns=4 * S, mpi_ns=S)],
    )
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    assert [x["mpi_pct"] for x in r["per_rank"]] == pytest.approx([0.0, 25.0])
    assert [x["outside_pct"] for x in r["per_rank"]] == pytest.approx([0.0, 75.0])
    assert r["functions"] == [] and r["callsites"] == [] and r["message_sizes"] == []


def test_program_without_mpi():
    p = Profile.from_literal([], [], [dict(rank=-1, pid=77, app_ns=0)], world_size=1)
    assert p.mpi is False
    r = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    assert r["mpi"] is False
    assert r["ranks"] == 1
    assert r["per_rank"][0]["pid"] == 77
    assert r["init_s"]["mean"] == 0.0
    assert r["callsites"] == []

"""perfweave.readers.profile.read_profile on profile files written by hand
(conftest.write_pwprof follows runtime/core/writer.c byte for byte)."""

import json

import numpy as np
import pytest

from perfweave.errors import FormatError, PerfweaveError
from perfweave.dtypes import FRAME_DTYPE, HIST_DTYPE, PROFILE_VERSION, RANK_DTYPE, SITE_DTYPE
from perfweave.readers.profile import read_profile

HEADER = {
    "functions": ["MPI_Send", "MPI_Recv", "MPI_Allreduce"],
    "families": ["p2p", "p2p", "coll"],
    "objects": ["/opt/app/bin/solver", "/usr/lib/libmpi.so.40"],
    "buildids": ["0123abcd", "feedbeef"],
    "hosts": ["node01", "node02"],
    "world_size": 2,
    "mpi_library": "Open MPI v4.1.4",
    "mpi_flavor": "openmpi",
}
RANKS = [
    {
        "rank": 0,
        "host": 0,
        "pid": 4100,
        "state": 0,
        "nthreads": 1,
        "thread_level": -1,
        "t_start": 10,
        "t_init_enter": 20,
        "t_init_leave": 30,
        "t_fini_enter": 1030,
        "t_end": 1040,
        "app_ns": 1000,
        "mpi_ns": 250,
        "mpi_calls": 7,
        "offset_init_ns": 0,
        "offset_fini_ns": 0,
        "table_bytes": 65536,
        "table_capacity": 4096,
    },
    {
        "rank": 1,
        "host": 1,
        "pid": 4200,
        "state": 3,
        "nthreads": 2,
        "thread_level": 3,
        "t_start": 11,
        "t_init_enter": 21,
        "t_init_leave": 31,
        "t_fini_enter": 1531,
        "t_end": 1541,
        "app_ns": 1500,
        "mpi_ns": 400,
        "mpi_calls": 9,
        "offset_init_ns": -123456789,
        "offset_init_err_ns": 17,
        "offset_fini_ns": -123456700,
        "offset_fini_err_ns": 19,
        "sites_dropped": 3,
        "table_bytes": 131072,
        "table_capacity": 4096,
    },
]
SITES = [
    {
        "rank": 0,
        "fn": 0,
        "object": 0,
        "nframes": 0,
        "offset": 0x1234,
        "first_frame": -1,
        "count": 5,
        "total_ns": 200,
        "min_ns": 10,
        "max_ns": 90,
        "bytes_sent": 320,
    },
    {
        "rank": 1,
        "fn": 1,
        "object": 0,
        "nframes": 0,
        "offset": 0x1240,
        "first_frame": -1,
        "count": 4,
        "total_ns": 300,
        "min_ns": 50,
        "max_ns": 100,
        "bytes_recv": 256,
    },
    {
        "rank": 1,
        "fn": 2,
        "object": 1,
        "nframes": 2,
        "offset": 0x7FFF_FFFF_FFF0,
        "first_frame": 0,
        "count": 5,
        "total_ns": 100,
        "min_ns": 20,
        "max_ns": 20,
        "bytes_sent": 40,
        "bytes_recv": 40,
    },
]
FRAMES = [{"object": 0, "offset": 0x500}, {"object": -1, "offset": 0x600}]
HIST = [
    {"rank": 0, "fn": 0, "bucket": 7, "count": 5, "bytes": 320, "total_ns": 200},
    {"rank": 1, "fn": 2, "bucket": 4, "count": 5, "bytes": 40, "total_ns": 100},
]
# 2 ranks * 176 + 3 sites * 80 + 2 frames * 16 + 2 hist * 40
DATA_BYTES = 2 * 176 + 3 * 80 + 2 * 16 + 2 * 40


@pytest.fixture
def good(tmp_path, pwprof):
    return pwprof(tmp_path / "profile.pwprof", HEADER, RANKS, SITES, FRAMES, HIST)


def header_len(path):
    return path.read_bytes().index(b"\n") + 1


def rewrite_header(path, change):
    """Apply change(header dict) and write the header back at the same length, so the
    arrays stay where they were."""
    raw = path.read_bytes()
    n = raw.index(b"\n")
    header = json.loads(raw[:n])
    change(header)
    line = json.dumps(header, separators=(",", ":")).encode()
    assert len(line) <= n
    path.write_bytes(line.ljust(n) + raw[n:])


def test_record_sizes_match_format_h():
    assert (
        RANK_DTYPE.itemsize,
        SITE_DTYPE.itemsize,
        FRAME_DTYPE.itemsize,
        HIST_DTYPE.itemsize,
    ) == (176, 80, 16, 40)
    assert SITE_DTYPE.names[:4] == ("rank", "fn", "object", "nframes")


def test_layout_of_the_written_file(good):
    raw = good.read_bytes()
    n = header_len(good)
    assert n % 64 == 0
    assert raw[n - 1 : n] == b"\n"
    assert len(raw) == n + DATA_BYTES + 8
    assert raw.endswith(b"PWEND\n\n\n")


def test_header_values(good):
    pf = read_profile(good)
    h = pf.header
    assert pf.path == str(good)
    assert h["format"] == "perfweave-profile" and h["version"] == PROFILE_VERSION
    assert h["functions"] == ["MPI_Send", "MPI_Recv", "MPI_Allreduce"]
    assert h["families"] == ["p2p", "p2p", "coll"]
    assert h["objects"] == ["/opt/app/bin/solver", "/usr/lib/libmpi.so.40"]
    assert h["buildids"] == ["0123abcd", "feedbeef"]
    assert h["hosts"] == ["node01", "node02"]
    assert h["world_size"] == 2
    assert h["modules"] == [
        {
            "name": "mpi",
            "version": PROFILE_VERSION,
            "first": 0,
            "count": 3,
            "library": "Open MPI v4.1.4",
            "flavor": "openmpi",
        }
    ]
    assert h["data_bytes"] == DATA_BYTES
    assert sorted(pf.arrays) == ["counts", "frames", "hist", "ranks", "sites"]


def test_rank_rows(good):
    r = read_profile(good).arrays["ranks"]
    assert r.dtype == RANK_DTYPE
    assert r["rank"].tolist() == [0, 1]
    assert r["host"].tolist() == [0, 1]
    assert r["pid"].tolist() == [4100, 4200]
    assert r["state"].tolist() == [0, 3]
    assert r["nthreads"].tolist() == [1, 2]
    assert r["thread_level"].tolist() == [-1, 3]
    assert r["app_ns"].tolist() == [1000, 1500]
    assert r["mpi_ns"].tolist() == [250, 400]
    assert r["mpi_calls"].tolist() == [7, 9]
    assert r["t_fini_enter"].tolist() == [1030, 1531]
    assert r["offset_init_ns"].tolist() == [0, -123456789]
    assert r["offset_fini_err_ns"].tolist() == [0, 19]
    assert r["sites_dropped"].tolist() == [0, 3]
    assert r["table_bytes"].tolist() == [65536, 131072]


def test_site_frame_hist_rows(good):
    a = read_profile(good).arrays
    s = a["sites"]
    assert s.dtype == SITE_DTYPE
    assert len(s) == 3
    assert s["rank"].tolist() == [0, 1, 1]
    assert s["fn"].tolist() == [0, 1, 2]
    assert s["object"].tolist() == [0, 0, 1]
    assert s["offset"].tolist() == [0x1234, 0x1240, 0x7FFF_FFFF_FFF0]
    assert s["nframes"].tolist() == [0, 0, 2]
    assert s["first_frame"].tolist() == [-1, -1, 0]
    assert s["count"].tolist() == [5, 4, 5]
    assert s["total_ns"].tolist() == [200, 300, 100]
    assert s["min_ns"].tolist() == [10, 50, 20]
    assert s["max_ns"].tolist() == [90, 100, 20]
    assert s["bytes_sent"].tolist() == [320, 0, 40]
    assert s["bytes_recv"].tolist() == [0, 256, 40]
    f = a["frames"]
    assert f["object"].tolist() == [0, -1]
    assert f["offset"].tolist() == [0x500, 0x600]
    h = a["hist"]
    assert h["rank"].tolist() == [0, 1]
    assert h["fn"].tolist() == [0, 2]
    assert h["bucket"].tolist() == [7, 4]
    assert h["count"].tolist() == [5, 5]
    assert h["bytes"].tolist() == [320, 40]
    assert h["total_ns"].tolist() == [200, 100]


def test_arrays_are_writable_copies(good):
    s = read_profile(good).arrays["sites"]
    s["object"][0] = 9  # the experiment reader remaps object indices in place
    assert s["object"][0] == 9


@pytest.mark.parametrize("version", [1, 2])
def test_versions_1_and_2_read_as_version_3(good, version):
    """A file of version 1 or 2 names the loaded objects "modules" (and the sites' and
    frames' field "module") and holds the MPI library in mpi_library and mpi_flavor:
    the reader gives it as version 3 says the same."""

    def to_old(h):
        h["version"] = version
        h["modules"] = h.pop("objects")
        h["mpi_library"], h["mpi_flavor"] = "Open MPI v4.1.4", "openmpi"
        for name in ("sites", "frames"):
            for field in h["arrays"][name]["dtype"]:
                field[0] = "module" if field[0] == "object" else field[0]

    rewrite_header(good, to_old)
    pf = read_profile(good)
    assert pf.header["objects"] == HEADER["objects"]
    assert pf.header["modules"] == [
        {
            "name": "mpi",
            "version": version,
            "first": 0,
            "count": 3,
            "library": "Open MPI v4.1.4",
            "flavor": "openmpi",
        }
    ]
    assert pf.arrays["sites"]["object"].tolist() == [0, 0, 1]
    assert pf.arrays["frames"]["object"].tolist() == [0, -1]


def test_version_4_ranks_read_without_a_region(tmp_path, monkeypatch, pwprof):
    """Before version 5 a rank record ended at table_resident (152 bytes): read with the
    MPI_Pcontrol region's fields zero (no region), the others as written."""
    v4 = np.dtype([(n, RANK_DTYPE[n]) for n in RANK_DTYPE.names if not n.startswith("region_")])
    assert v4.itemsize == 152
    # the writer's layouts, in the helpers' own module (tests/python/conftest.py: not
    # imported by name, which the whole suite resolves to tests/runtime's conftest)
    helpers = pwprof.__globals__
    monkeypatch.setitem(helpers, "RANK_DTYPE", v4)
    monkeypatch.setitem(helpers, "ARRAYS", (("ranks", v4),) + helpers["ARRAYS"][1:])
    old = dict(HEADER, version=4)
    path = pwprof(tmp_path / "p.pwprof", old, RANKS, SITES, FRAMES)
    r = read_profile(path).arrays["ranks"]
    assert set(r.dtype.names) == set(RANK_DTYPE.names)
    assert r["mpi_ns"].tolist() == [250, 400] and r["app_ns"].tolist() == [1000, 1500]
    assert r["offset_init_ns"].tolist() == [0, -123456789]
    for f in ("region_intervals", "region_ns", "region_mpi_ns"):
        assert r[f].tolist() == [0, 0]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_versions_1_to_3_name_the_mpi_io_family_io(good, version):
    """Before version 4 the MPI family of MPI_File_* calls was "io": read as "file"."""

    def to_old(h):
        h["version"] = version
        h["functions"].append("MPI_File_write")
        h["families"].append("io")
        if version < 3:
            h["modules"] = h.pop("objects")
            for name in ("sites", "frames"):
                for field in h["arrays"][name]["dtype"]:
                    field[0] = "module" if field[0] == "object" else field[0]
        else:
            h["modules"][0]["count"] += 1

    rewrite_header(good, to_old)
    h = read_profile(good).header
    assert h["families"] == ["p2p", "p2p", "coll", "file"]


@pytest.mark.parametrize(
    "change, what",
    [
        (lambda h: h["modules"][0].update(count=2), "do not own every function"),
        (lambda h: h["modules"][0].update(first=1), "do not follow"),
        (lambda h: h["modules"][0].pop("name"), "without name"),
        (lambda h: h.update(modules={}), "modules is not a list"),
    ],
)
def test_modules_are_checked(good, change, what):
    rewrite_header(good, change)
    with pytest.raises(FormatError, match=what):
        read_profile(good)


def test_empty_arrays(tmp_path, pwprof):
    p = pwprof(tmp_path / "p.pwprof", {}, ranks=[{"rank": -1, "pid": 7}])
    a = read_profile(p).arrays
    assert a["ranks"]["pid"].tolist() == [7]
    assert (len(a["sites"]), len(a["frames"]), len(a["hist"])) == (0, 0, 0)
    assert a["sites"].dtype == SITE_DTYPE


@pytest.mark.parametrize("keep", [100, 288 + 50, -9, -1])
def test_truncated(good, keep):
    raw = good.read_bytes()
    n = header_len(good)
    cut = n + keep if keep > 0 else len(raw) + keep
    good.write_bytes(raw[:cut])
    with pytest.raises(FormatError, match="truncated"):
        read_profile(good)


def test_truncated_inside_the_arrays_names_the_sizes(good):
    raw = good.read_bytes()
    n = header_len(good)
    good.write_bytes(raw[: n + 300])
    with pytest.raises(FormatError) as e:
        read_profile(good)
    assert f"({n + 300} bytes, header announces {n + DATA_BYTES + 8})" in str(e.value)
    assert str(good) in str(e.value)


def test_missing_end_marker(good):
    raw = good.read_bytes()
    good.write_bytes(raw[:-8] + b"XXXXXXXX")
    with pytest.raises(FormatError, match="corrupt"):
        read_profile(good)


def test_end_marker_not_where_announced(good):
    # data_bytes one record short: the marker is not right after the arrays
    rewrite_header(good, lambda h: h.update(data_bytes=h["data_bytes"] - 40))
    with pytest.raises(FormatError, match="corrupt .no end marker"):
        read_profile(good)


@pytest.mark.parametrize(
    "content",
    [
        b"{this is not json\n" + b"\0" * 64 + b"PWEND\n\n\n",
        b'{"format": "perfweave-profile", "version": 1\n' + b"PWEND\n\n\n",
    ],
)
def test_garbage_header(tmp_path, content):
    p = tmp_path / "g.pwprof"
    p.write_bytes(content)
    with pytest.raises(FormatError, match="corrupt header"):
        read_profile(p)


@pytest.mark.parametrize(
    "content", [b"", b"hello world\n", b"{no newline at all", b"\x7fELF\x02\x01\x01\n\0\0\0"]
)
def test_not_a_profile_file(tmp_path, content):
    p = tmp_path / "g.pwprof"
    p.write_bytes(content)
    with pytest.raises(FormatError, match="not a perfweave profile file"):
        read_profile(p)


def test_wrong_format_value(tmp_path, pwprof):
    p = pwprof(tmp_path / "p.pwprof", {"format": "perfweave-trace"}, RANKS)
    with pytest.raises(FormatError, match="not a perfweave profile file"):
        read_profile(p)


@pytest.mark.parametrize("version", [PROFILE_VERSION + 1, 0, "1", None])
def test_unsupported_version(tmp_path, pwprof, version):
    p = pwprof(tmp_path / "p.pwprof", {"version": version}, RANKS)
    with pytest.raises(FormatError, match=r"profile format version .* is not supported"):
        read_profile(p)


def test_unsupported_version_names_it(tmp_path, pwprof):
    p = pwprof(tmp_path / "p.pwprof", {"version": 7}, RANKS)
    with pytest.raises(
        FormatError,
        match=r"version 7 is not supported \(this perfweave "
        r"reads \(1, 2, 3, 4, 5, 6\)\)",
    ):
        read_profile(p)


def test_itemsize_mismatch(good):
    rewrite_header(good, lambda h: h["arrays"]["sites"].update(itemsize=72))
    with pytest.raises(FormatError, match="array sites: itemsize mismatch"):
        read_profile(good)


def test_array_running_past_the_data(good):
    rewrite_header(good, lambda h: h["arrays"]["hist"].update(count=3))
    with pytest.raises(FormatError, match="array hist runs past the data"):
        read_profile(good)


def test_header_without_arrays(good):
    rewrite_header(good, lambda h: h.pop("arrays"))
    with pytest.raises(FormatError, match="corrupt header"):
        read_profile(good)


def test_missing_file(tmp_path):
    with pytest.raises(FormatError, match="cannot read"):
        read_profile(tmp_path / "absent.pwprof")


def test_format_error_is_a_user_error():
    # the CLI prints PerfweaveError as one line; FormatError must be one
    assert issubclass(FormatError, PerfweaveError)


def test_dtype_in_header_drives_reading(tmp_path, pwprof):
    """A file's own dtype is used: a file whose ranks array has an extra trailing
    column (a hypothetical later layout of the same version) still reads."""
    wide = np.dtype(RANK_DTYPE.descr + [("future", "<i8")])
    ranks = np.zeros(1, wide)
    ranks["rank"], ranks["future"] = 5, 99
    p = tmp_path / "w.pwprof"
    raw = bytearray()
    arrays = {
        "ranks": {
            "offset": 0,
            "count": 1,
            "itemsize": wide.itemsize,
            "dtype": [list(f) for f in wide.descr],
        }
    }
    for name, dt in (("sites", SITE_DTYPE), ("frames", FRAME_DTYPE), ("hist", HIST_DTYPE)):
        arrays[name] = {
            "offset": wide.itemsize,
            "count": 0,
            "itemsize": dt.itemsize,
            "dtype": [list(f) for f in dt.descr],
        }
    header = {
        "format": "perfweave-profile",
        "version": 1,
        "world_size": 8,
        "functions": [],
        "families": [],
        "modules": [],
        "buildids": [],
        "hosts": ["h"],
        "arrays": arrays,
        "data_bytes": wide.itemsize,
    }
    line = json.dumps(header).encode()
    line += b" " * (-(len(line) + 1) % 64)
    raw += line + b"\n" + ranks.tobytes() + b"PWEND\n\n\n"
    p.write_bytes(bytes(raw))
    r = read_profile(p).arrays["ranks"]
    assert r["rank"].tolist() == [5]
    assert r["future"].tolist() == [99]


def test_counts_are_checked_and_merged_per_site(tmp_path, pwprof):
    """--counters: counts rows name their site by index; merging files shifts them."""
    from perfweave.analysis.mpi import analyze
    from perfweave.readers.experiment import merge

    hdr = dict(HEADER, counters=["perf::PAGE-FAULTS"])
    a = pwprof(
        tmp_path / "a.pwprof",
        hdr,
        RANKS[:1],
        SITES[:1],
        hist=HIST[:1],
        counts=[
            {
                "site": 0,
                "event": 0,
                "inside": 3,
                "before": 1000,
                "inside_ns": 2_000_000_000,
                "before_ns": 500_000_000,
            }
        ],
    )
    b = pwprof(
        tmp_path / "b.pwprof",
        hdr,
        RANKS[1:],
        SITES[1:],
        FRAMES,
        HIST[1:],
        counts=[
            {"site": 0, "event": 0, "inside": 5, "before": 7},
            {"site": 1, "event": 0, "inside": 11, "before": 13},
        ],
    )
    prof = merge([read_profile(a), read_profile(b)])
    assert prof.counters == ["perf::PAGE-FAULTS"]
    assert prof.counts["site"].tolist() == [0, 1, 2]  # b's shifted past a's site
    res = analyze(prof).to_json()
    by_fn = {c["function"]: c["counters"]["perf::PAGE-FAULTS"] for c in res["callsites"]}
    assert by_fn["MPI_Send"] == {
        "inside": 3,
        "before": 1000,  # rates: per second of
        "inside_per_s": 1.5,
        "before_per_s": 2000.0,
    }  # the time covered
    assert by_fn["MPI_Recv"] == {
        "inside": 5,
        "before": 7,  # no time: no rate
        "inside_per_s": None,
        "before_per_s": None,
    }
    assert {p["rank"]: p["counters"]["perf::PAGE-FAULTS"] for p in res["per_rank"]} == {
        0: 1003,
        1: 36,
    }
    bad = pwprof(
        tmp_path / "bad.pwprof",
        hdr,
        RANKS[:1],
        SITES[:1],
        counts=[{"site": 5, "event": 0, "inside": 1}],
    )
    with pytest.raises(FormatError, match="counts.site out of range"):
        read_profile(bad)
    bad = pwprof(
        tmp_path / "bad2.pwprof",
        HEADER,
        RANKS[:1],
        SITES[:1],
        counts=[{"site": 0, "event": 0, "inside": 1}],
    )  # no event names
    with pytest.raises(FormatError, match="counts.event out of range"):
        read_profile(bad)

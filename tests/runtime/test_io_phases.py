"""The I/O profile's bytes over time (analysis/io.py over_time; the report's io section):
a program writes in a first phase and then sleeps as long again with no I/O call (its
own byte count and clock are the ground truth): the bins hold exactly the bytes it
wrote, and the report's slices of the run's first half hold them."""

import perfweave
from perfweave._format import IO_LAYERS


def values(stdout):
    return {k: int(v) for k, v in (line.split() for line in stdout.splitlines())}


def test_io_bytes_over_time_in_the_first_phase(build, run_pw, tmp_path):
    prog = build(None, "io_phases.c")
    n, ms = 100, 600
    for opts in (["--io", "--node-interval", "0"], ["--io", "--node-interval", "20"]):
        r = run_pw([prog, tmp_path, n, ms], opts)
        got = values(r.proc.stdout)
        assert got["written"] == n * 4096
        assert got["second_us"] >= got["first_us"]
        io = perfweave.open(r.exp).io
        f = io.files.index(f"{tmp_path}/phases.dat")
        rec = io.records[
            (io.records["file"] == f) & (io.records["layer"] == IO_LAYERS.index("posix"))
        ]
        assert rec["bytes_written"].sum() == got["written"]
        ((bin_s, rbins, wbins),) = io.bins
        assert int(wbins.sum()) == got["written"] and int(rbins.sum()) == 0
        rep = r.report()
        (g,) = rep["io"]["over_time"]
        sl = g["slices"]
        total = sum(x["write_bytes"] for x in sl)
        assert abs(total - got["written"]) < 1e-6 * got["written"]
        first = sum(x["write_bytes"] for x in sl[: len(sl) // 2])
        assert first >= 0.95 * got["written"], sl
        # the rates are the bytes over the slices' widths
        for x in sl:
            w = x["t1_s"] - x["t0_s"]
            assert abs(x["write_mbs"] - x["write_bytes"] / w / 1e6) <= 1e-9 * (1 + x["write_mbs"])
        if opts[-1] != "0":
            assert g["clock"] == "node timeline"
            (node,) = rep["node_timeline"]["nodes"]
            if node["over_time"]:  # the node timeline's own slices: the same
                assert [x["t0_s"] for x in node["over_time"]["slices"]] == [x["t0_s"] for x in sl]
        else:
            assert g["clock"] == "process start" and len(sl) == 8
            # 8 slices over the process's life (its wall time)
            assert abs(sl[-1]["t1_s"] - float(io.processes["wall_s"][0])) < 1e-9
        assert any("read and write over time" in line for line in r.text_report().splitlines())

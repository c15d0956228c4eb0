"""The I/O profile (runtime/modules/io.c, --io): programs that know their own I/O (bytes,
calls, stats and size bins by construction) against the io/*.pwio stores read through
perfweave.open(...).io and the report. Each C program is built plain and with
-O2 -D_FORTIFY_SOURCE=2, which turns read, fread and fprintf into their __*_chk forms."""

import subprocess
import tempfile

import numpy as np
import pytest

import perfweave
from perfweave import writing
from perfweave._format import IO_LAYERS, IO_OPS
from perfweave.analysis.io import OPEN_CLOSE_SHARE
from perfweave.interop.darshan import COUNTERS
from perfweave.readers.io import read_io
from harness import PERFWEAVE

FORTIFY = [(), ("-O2", "-D_FORTIFY_SOURCE=2")]


def values(stdout):
    return {k: int(v) for k, v in (line.split() for line in stdout.splitlines())}


def record(io, name, layer):
    f = io.files.index(name)
    (r,) = io.records[(io.records["file"] == f) & (io.records["layer"] == IO_LAYERS.index(layer))]
    return r


@pytest.mark.parametrize("flags", FORTIFY, ids=["plain", "fortify"])
def test_io_counts_bytes_calls_stats_and_bins(build, run_pw, tmp_path, flags):
    prog = build(None, "io_mix.c", flags)
    n = 12
    r = run_pw([prog, tmp_path, n], ["--io"])
    got = values(r.proc.stdout)
    io = perfweave.open(r.exp).io
    p = record(io, f"{tmp_path}/mix.dat", "posix")
    assert (
        (p["bytes_written"], p["bytes_read"])
        == (got["written"], got["read"])
        == (n * 2750, n * 4120)
    )
    assert (p["writes"], p["reads"], p["stats"]) == (3 * n, 2 * n, 2 * n)
    assert (p["opens"], p["closes"]) == (1, 1)
    # 50 bytes: bin 0 (0-100); 700 (writev) and 120 (preadv): bin 1; 2000 and 4000: bin 2
    assert p["size_write"].tolist() == [n, n, n] + [0] * 7
    assert p["size_read"].tolist() == [0, n, n] + [0] * 7
    assert p["max_byte_written"] == 100000 + (n - 1) * 2000 + 1999
    s = record(io, f"{tmp_path}/mix.txt", "stdio")
    assert s["bytes_written"] == got["stdio_written"] == n * 74
    assert s["writes"] == 2 * n and s["bytes_read"] == got["stdio_read"] == 64
    assert (s["opens"], s["closes"]) == (2, 2)
    assert io.processes["state"].tolist() == ["complete"]
    # the call sites hold every call, and the report shows the file
    sites = io.sites[io.sites["file"] == io.files.index(f"{tmp_path}/mix.dat")]
    assert sites["count"].sum() == 1 + 1 + 3 * n + 2 * n + 2 * n
    rep = r.report()["io"]
    assert any(f["pattern"] == f"{tmp_path}/mix.dat" for f in rep["files"])
    assert "I/O profile (--io)" in r.text_report()
    # the Python API's tables of the I/O analysis are the report's rows
    exp = r.open()
    assert exp.tables("io") == ["per_rank", "files", "callsites"]
    for name in ("per_rank", "files", "callsites"):
        df = exp.table("io", name)
        assert df.to_dict("records") == rep[name], name
    f = exp.table("io", "files").set_index("pattern").loc[f"{tmp_path}/mix.dat"]
    assert (f["bytes_written"], f["bytes_read"]) == (n * 2750, n * 4120)


def test_io_open_close_loop_disk_and_shm(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c")
    n = 3000

    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        advice = {}
        for where, directory in (("disk", tmp_path), ("shm", d)):
            r = run_pw([prog, "loop", directory, n], ["--io"])
            io = perfweave.open(r.exp).io
            p = record(io, f"{directory}/loop.dat", "posix")
            assert (p["opens"], p["closes"], p["writes"], p["bytes_written"]) == (n, n, n, n)
            f = io.files.index(f"{directory}/loop.dat")
            assert io.memory[f] == (where == "shm")
            rep = r.report()
            row = next(x for x in rep["io"]["files"] if x["pattern"] == f"{directory}/loop.dat")
            assert row["memory"] == (where == "shm") and row["opens"] == n
            share = (row["open_s"] + row["close_s"]) / row["time_s"]
            advice[where] = ([a for a in rep["advice"] if a["rule"] == "io_open_close"], share)
        # the rule fires on the disk file exactly when its documented threshold is met (a
        # 1-byte write costs less than an open and a close: measured 0.73-0.9 of the time),
        # never on the memory-backed one
        fired, share = advice["disk"]
        assert share > 0.3 and bool(fired) == (share >= OPEN_CLOSE_SHARE)
        assert not advice["shm"][0]
        if fired:
            assert "/dev/shm" in fired[0]["text"] and "opens" in fired[0]["text"]


def test_io_fork_child_has_its_own_store(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c")
    r = run_pw([prog, "fork", tmp_path, 100], ["--io"])
    got = values(r.proc.stdout)
    io = perfweave.open(r.exp).io
    assert sorted(io.processes["pid"].tolist()) == sorted([got["pid"], got["child"]])
    child = int(np.flatnonzero(io.processes["pid"] == got["child"])[0])
    parent = int(np.flatnonzero(io.processes["pid"] == got["pid"])[0])
    assert io.processes["parent_pid"][child] == got["pid"]
    recs = io.records
    cw = recs[(recs["process"] == child) & (recs["bytes_written"] > 0)]
    pw = recs[(recs["process"] == parent) & (recs["bytes_written"] > 0)]
    names = lambda rr: {io.files[f]: int(b) for f, b in zip(rr["file"], rr["bytes_written"])}  # noqa: E731
    assert names(cw) == {f"{tmp_path}/child.dat": 200}
    assert names(pw).get(f"{tmp_path}/parent.dat") == 100
    assert f"{tmp_path}/child.dat" not in names(pw)
    # the Darshan export: a log per process, as Darshan's non-MPI mode writes them (each
    # nprocs 1, records of rank 0; the child's says whose fork it is), the first-started
    # process's at OUT, the child's beside it as NAME.HOST.PID.txt
    out = tmp_path / "export" / "io.txt"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "darshan", "-o", str(out)]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    [child_log] = (tmp_path / "export").glob(f"io.*.{got['child']}.txt")
    assert str(child_log) in res.stdout
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == sorted(
        ["io.txt", child_log.name]
    )
    for log, mine, parent in ((out, "parent", None), (child_log, "child", got["pid"])):
        lines = log.read_text().splitlines()
        assert "# nprocs: 1" in lines
        assert (f"# metadata: fork_parent = {parent}" in lines) == (parent is not None)
        rows = [x.split("\t") for x in lines if x and not x.startswith("#")]
        assert {x[1] for x in rows} == {"0"}
        written = {x[5]: int(x[4]) for x in rows if x[3] == "POSIX_BYTES_WRITTEN"}
        assert written.get(f"{tmp_path}/{mine}.dat") == (100 if mine == "parent" else 200)
        other = "child" if mine == "parent" else "parent"
        assert f"{tmp_path}/{other}.dat" not in written


def test_io_killed_process_keeps_its_counts(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c")
    r = run_pw([prog, "kill", tmp_path, 777], ["--io"], check=False)
    assert r.proc.returncode != 0
    # the module's reader itself: perfweave.open refuses a run whose only process was
    # killed before any profile was saved, but the I/O store holds the counts
    io = read_io(r.exp)
    assert io.processes["state"].tolist() == ["killed"]
    p = record(io, f"{tmp_path}/kill.dat", "posix")
    assert (p["writes"], p["bytes_written"]) == (777, 7770)


def test_io_two_threads_own_descriptors_one_file(build, run_pw, tmp_path):
    prog = build(None, "io_cases.c", ("-pthread",))
    n = 500
    r = run_pw([prog, "threads", tmp_path, n], ["--io"])
    io = perfweave.open(r.exp).io
    p = record(io, f"{tmp_path}/shared.dat", "posix")
    assert (p["writes"], p["bytes_written"], p["opens"]) == (2 * n, 200 * n, 3)
    assert p["max_byte_written"] == 200 * n - 1
    assert io.processes["threads"][0] == 3  # main (create) and the two writers
    # the process's I/O time (overlapping calls once) lies within its wall time
    assert 0 < io.processes["busy_s"][0] <= io.processes["wall_s"][0]


def test_io_overlapping_calls_of_threads_counted_once(build, run_pw, tmp_path):
    # the main thread's read (its first call, counted alone, with no atomics) is still in
    # flight when a second thread's first call begins and overlaps it until both end: the
    # process's I/O time is the union (about the first read), never the sum
    prog = build(None, "io_cases.c", ("-pthread",))
    ms = 150
    r = run_pw([prog, "overlap", tmp_path, ms], ["--io"])
    got = values(r.proc.stdout)
    first, second = got["first_us"] / 1e6, got["second_us"] / 1e6
    assert second > 0.5 * first  # they overlapped for most of the first
    io = perfweave.open(r.exp).io
    (busy,) = io.processes["busy_s"]
    assert first * 0.98 <= busy <= first + 0.3 * second


@pytest.mark.parametrize("kib", [256, 512, 1024])
def test_io_store_on_a_full_disk_never_kills_the_program(build, tmp_path, kib):
    # the experiment on a small tmpfs that fills up: the store's pages are taken on disk
    # before they are first touched (a page of a shared mapping that tmpfs cannot back
    # faults with SIGBUS, on reading it too), so the program runs to its own end, its
    # output and exit status its own; what found no room is counted as dropped.
    # 256 KiB: no room for the store at all (marked unwritten, as any file); 512 KiB:
    # the store's tables, not every thread's records; 1 MiB: more of them
    prog = build(None, "io_cases.c", ("-pthread",))
    small = tmp_path / "small"
    small.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(small)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, f"cannot mount a tmpfs (the tests run as root): {res.stderr}"
    try:
        work = tmp_path / "work"
        work.mkdir()
        n = 3000
        res = subprocess.run(
            [PERFWEAVE, "run", "--io", "--no-sample", "--node-interval", "0", "-o"]
            + [str(small / "exp"), "--", prog, "many", str(work), str(n)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 7 and res.stdout.splitlines()[0] == f"files {n}", res
        assert "Traceback" not in res.stderr
        stores = list((small / "exp" / "io").glob("*.pwio"))
        if kib == 256:
            # marked unwritten as any file of the experiment, and named in the last line
            marks = writing.read_unwritten(small / "exp")
            assert not stores and [u["error"] for u in marks if u["file"].startswith("io/")] == [
                "ENOSPC"
            ], marks
            assert "could not write io/" in res.stderr and "No space left" in res.stderr
            return
        io = read_io(small / "exp")
        (p,) = io.processes
        names = {io.files[f] for f in io.records["file"]}
        # what was counted is exact; the rest is counted as dropped
        rec = io.records[io.records["layer"] == IO_LAYERS.index("posix")]
        rec = rec[[io.files[f].startswith(f"{work}/many.") for f in rec["file"]]]
        assert (rec["opens"] == 1).all() and (rec["bytes_written"] == 3).all()
        assert p["dropped"] > 0 and len(names) < n
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_io_sockets_pipes_and_anonymous_memory_are_not_file_io(build, run_pw, tmp_path):
    # a pipe read by a second thread and a socket pair, a byte a call, anonymous
    # mappings and malloc's: none is a file, none is recorded or timed (an MPI library's
    # progress threads poll their wake-up pipes: they made every rank's I/O calls take
    # the two-thread path, and their time was I/O time); the file's one write is all
    # the process's I/O time besides its open; a dup2 of the pipe onto the file's
    # descriptor takes the descriptor from the file
    prog = build(None, "io_cases.c", ("-pthread",))
    n = 20000
    r = run_pw([prog, "notfiles", tmp_path, n], ["--io"])
    got = values(r.proc.stdout)
    io = perfweave.open(r.exp).io
    names = [io.files[f] for f in io.records["file"]]
    assert sorted(set(names) - {"<stdout>"}) == [f"{tmp_path}/file.dat"]
    p = record(io, f"{tmp_path}/file.dat", "posix")
    assert (p["opens"], p["writes"], p["bytes_written"], p["mmaps"]) == (1, 1, n, 0)
    assert io.processes["threads"][0] == 1  # the pipe reader made no call of a file
    # 3n + n calls on the pipe and socket and 2n mappings, each a system call of at least
    # ~0.2 us: timed, they were >= 10 ms; the file's open and write are well under that
    busy = float(io.processes["busy_s"][0])
    assert got["write_us"] * 1e-6 * 0.9 <= busy < got["write_us"] * 1e-6 + 0.005


def old_store(raw, version):
    """A version 3 store's bytes rewritten in the layout of version 1 or 2: io_rec without
    its version 3 fields (the MPI-IO forms, views), and for version 1 no solo_ticks."""
    from perfweave.readers.io import BINS, FILE, HEADER, OBJECT, REC, REC_V2, SITE, _page

    h = np.frombuffer(raw, HEADER, count=1).copy()
    nf, nt, ns = int(h["max_files"][0]), int(h["max_threads"][0]), int(h["max_sites"][0])
    blocks_at = _page(HEADER.itemsize) + _page(FILE.itemsize * nf) + _page(OBJECT.itemsize * 256)
    recs_off = _page(3 * 8 + 2 * BINS * 8)
    out = bytearray(raw[:blocks_at])
    block = recs_off + _page(REC.itemsize * nf * 3) + _page(SITE.itemsize * ns)
    for t in range(nt):
        b = blocks_at + t * block
        recs = np.frombuffer(raw, REC, count=nf * 3, offset=b + recs_off)
        old = np.zeros(len(recs), REC_V2)
        for k in REC_V2.names:
            old[k] = recs[k]
        sites_at = b + recs_off + _page(REC.itemsize * nf * 3)
        out += raw[b : b + recs_off]
        out += old.tobytes().ljust(_page(REC_V2.itemsize * nf * 3), b"\0")
        out += raw[sites_at : sites_at + _page(SITE.itemsize * ns)]
    h["version"] = version
    if version == 1:
        h["solo_ticks"] = 0
    out[: HEADER.itemsize] = h.tobytes()
    return bytes(out), h


@pytest.mark.parametrize("version", [1, 2])
def test_io_older_store_versions_read(build, run_pw, tmp_path, version):
    """A version 2 store (io_rec without the MPI-IO forms and views, its last fields) reads
    with the counts it holds, those fields 0; a version 1 store (no solo_ticks either, the
    header's last field: zero padding there) too, its I/O time busy_ticks alone."""
    prog = build(None, "io_cases.c")
    r = run_pw([prog, "loop", tmp_path, 10], ["--io"])
    now = read_io(r.exp)
    [store] = (r.exp / "io").glob("*.pwio")
    raw, h = old_store(store.read_bytes(), version)
    store.write_bytes(raw)
    old = read_io(r.exp)
    assert not old.notes and old.files == now.files
    assert all(np.array_equal(old.records[k], now.records[k]) for k in now.records.dtype.names)
    busy = float(h["busy_ticks"][0] + h["solo_ticks"][0]) * float(h["ns_per_tick"][0]) / 1e9
    assert old.processes["busy_s"][0] == pytest.approx(busy)


def test_io_on_by_default_and_off_with_no_io(build, run_pw, tmp_path):
    """The I/O profile is on by default (docs/io.md; its cost: docs/performance.md, "The
    I/O profile's default"): the program's 10 opens, 1-byte writes and closes counted
    exactly; --no-io leaves no trace of it (no store, no section)."""
    prog = build(None, "io_cases.c")
    r = run_pw([prog, "loop", tmp_path, 10])
    assert r.open().meta["options"]["io"] is True
    p = record(perfweave.open(r.exp).io, f"{tmp_path}/loop.dat", "posix")
    assert (p["opens"], p["closes"], p["writes"], p["bytes_written"]) == (10, 10, 10, 10)
    assert r.report()["io"]["files"]
    r = run_pw([prog, "loop", tmp_path, 10], ["--no-io"])
    assert not (r.exp / "io").exists()
    assert "io" not in r.report()


def test_io_darshan_export_carries_the_programs_counts(build, run_pw, tmp_path):
    # N x (open, write 1 byte at offset 0, close): Darshan's counters of the file are the
    # program's own numbers
    prog = build(None, "io_cases.c")
    n = 137
    r = run_pw([prog, "loop", tmp_path, n], ["--io"])
    out = tmp_path / "darshan.txt"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "darshan", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    lines = out.read_text().splitlines()
    assert (
        "#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>"
        in lines
    )
    name = f"{tmp_path}/loop.dat"
    rows = [ln.split("\t") for ln in lines if ln and not ln.startswith("#")]
    assert all(len(x) == 8 for x in rows)
    got = {x[3]: x[4] for x in rows if x[5] == name and x[0] == "POSIX"}
    # no MPI rank: a log of its own, rank 0, as Darshan's non-MPI mode writes it
    assert {x[1] for x in rows if x[5] == name} == {"0"}
    assert "# nprocs: 1" in lines
    want = {
        "POSIX_OPENS": n,
        "POSIX_WRITES": n,
        "POSIX_READS": 0,
        "POSIX_BYTES_WRITTEN": n,
        "POSIX_BYTES_READ": 0,
        "POSIX_MAX_BYTE_WRITTEN": 0,
        "POSIX_SEQ_WRITES": 0,  # every write at offset 0, after the previous one's end
        "POSIX_CONSEC_WRITES": 0,
        "POSIX_RW_SWITCHES": 0,
        "POSIX_SIZE_WRITE_0_100": n,
        "POSIX_SIZE_WRITE_100_1K": 0,
        "POSIX_ACCESS1_ACCESS": 1,
        "POSIX_ACCESS1_COUNT": n,
        "POSIX_ACCESS2_COUNT": 0,
    }
    assert {k: int(got[k]) for k in want} == want
    assert float(got["POSIX_F_WRITE_TIME"]) > 0 and float(got["POSIX_F_META_TIME"]) > 0
    # every counter of Darshan's POSIX module, in its order; -1 where we keep none
    ints, floats = COUNTERS["posix"]
    assert [x[3] for x in rows if x[5] == name and x[0] == "POSIX"] == ints + floats
    assert (len(ints), len(floats)) == (69, 17)
    assert (got["POSIX_FDSYNCS"], got["POSIX_F_READ_START_TIMESTAMP"]) == ("-1", "-1.000000")
    fs = {x[7] for x in rows if x[5] == name}
    assert len(fs) == 1 and fs != {""}


def test_io_site_bound_keeps_the_first_sites(build, run_pw, tmp_path):
    """--io-max-sites 2 (the core's keyed call-site tables over the store's io_site
    records, runtime/core/keyed.c): the loop's open, write and close of loop.dat are three
    sites; the first two made are kept with every call, the close's n calls find no slot
    and are counted as dropped (its file record still counts them), as is the program's
    line on stdout (a third file's site, after them)."""
    prog = build(None, "io_cases.c")
    n = 50
    r = run_pw([prog, "loop", tmp_path, n], ["--io", "--io-max-sites", "2"])
    io = perfweave.open(r.exp).io
    p = record(io, f"{tmp_path}/loop.dat", "posix")
    assert (p["opens"], p["writes"], p["closes"]) == (n, n, n)
    s = io.sites[io.sites["file"] == io.files.index(f"{tmp_path}/loop.dat")]
    ops = [IO_OPS[o] for o in s["op"]]
    assert sorted(zip(ops, s["count"].tolist())) == [("open", n), ("write", n)]
    assert len(io.sites) == 2 and (s["offset"] != 0).all()
    out = record(io, "<stdout>", "stdio")
    assert io.processes["dropped"].tolist() == [n + out["writes"]] and out["writes"] == 1

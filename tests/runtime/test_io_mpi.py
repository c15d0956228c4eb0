"""The I/O profile under MPI, with Open MPI and with MPICH: the MPI-IO layer that the MPI
module's MPI_File_* wrappers report to the io module (its hook pw_io_file_call), beside the
POSIX layer beneath it, never subtracted from it. The programs know their own I/O by
construction (bytes, calls per rank); the stores are read through perfweave.open(...).io."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import perfweave
from perfweave._format import IO_LAYERS
from perfweave.analysis.io import IO_SHARE_PCT, OPEN_CLOSE_SHARE
from harness import rank_counts, site_lines

FORTIFY = [(), ("-O2", "-D_FORTIFY_SOURCE=2")]


def layer_records(io, name, layer):
    f = io.files.index(name)
    recs = io.records
    return recs[(recs["file"] == f) & (recs["layer"] == IO_LAYERS.index(layer))]


@pytest.mark.parametrize("flags", FORTIFY, ids=["plain", "fortify"])
def test_io_mpiio_collective_writes_exact_rank_counts(mpi, build, run_pw, tmp_path, flags):
    prog = build(mpi, "io_mpiio.c", flags)
    n, nranks = 20, 3
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, n], ["--io"])
    got = rank_counts(r.proc.stdout)
    assert sorted(got) == list(range(nranks))
    # the _c large-count forms: MPICH 4's mpi.h has them, Open MPI 4.1's does not
    assert {g["has_c"] for g in got.values()} == {1 if mpi.name == "mpich" else 0}
    io = perfweave.open(r.exp).io
    name = f"{tmp_path}/mpiio.dat"
    m = layer_records(io, name, "mpiio")
    assert sorted(m["rank"].tolist()) == list(range(nranks))
    for rec in m:
        g = got[int(rec["rank"])]
        ints = (int(rec["rank"]) + 1) * 16
        assert (rec["bytes_written"], rec["writes"]) == (g["written"], g["writes"])
        assert (rec["bytes_read"], rec["reads"]) == (g["read"], g["reads"]) == (n * ints * 4, n)
        assert (rec["opens"], rec["closes"], rec["seeks"]) == (1, 1, 1)
        # the _at offsets reach the record as bytes of the file (the default view)
        assert rec["max_byte_written"] == g["last_byte"]
        # write_at_all: n calls of ints * 4 bytes, in the size bins (0-100, 100-1K)
        assert rec["size_write"][0 if ints * 4 <= 100 else 1] >= n
        # forms (indep, coll, split, nb): the _all writes (and _c ones) and reads
        # collective, the split collective once, the iwrite_at once
        coll = g["writes"] - 2
        assert rec["form_writes"].tolist() == [0, coll, 1, 1]
        assert rec["form_reads"].tolist() == [0, n, 0, 0]
    # the POSIX layer beneath is shown too: the MPI library's own writes of the same file
    # (by the aggregators of collective buffering, so per rank they differ), at least
    # every byte the MPI-IO layer wrote, summed over the ranks
    p = layer_records(io, name, "posix")
    assert len(p) >= 1
    assert p["bytes_written"].sum() >= m["bytes_written"].sum() > 0
    # the call sites of the MPI-IO layer are the program's own lines
    sites = io.sites[
        (io.sites["file"] == io.files.index(name)) & (io.sites["layer"] == IO_LAYERS.index("mpiio"))
    ]
    assert int(sites["count"].sum()) == int(
        (m["opens"] + m["closes"] + m["seeks"] + m["writes"] + m["reads"]).sum()
    )
    assert {io.objects[o] for o in sites["object"] if o >= 0} == {str(prog)}
    assert np.all(sites["object"] >= 0)
    # every record holds calls; none is of a shared object the MPI library loads inside
    # MPI_File_open (Open MPI stats each mca_*.so component before it dlopens it), while
    # the program's own stat of one is its I/O, one per rank
    ops = ("opens", "closes", "reads", "writes", "seeks", "stats", "syncs", "metas", "mmaps")
    recs = io.records
    assert np.all(sum(recs[k] for k in ops) + recs["views"] > 0)
    libs = {io.files[f] for f in recs["file"] if re.search(r"\.so(\.\d+)*$", io.files[f])}
    assert libs == {f"{tmp_path}/own.{r}.so.1" for r in range(nranks)}
    for r in range(nranks):
        (own,) = layer_records(io, f"{tmp_path}/own.{r}.so.1", "posix")
        assert (own["opens"], own["closes"], own["stats"], own["rank"]) == (1, 1, 1, r)


def test_io_fortran_records_and_mpiio_bytes_exact(mpi, build, run_pw, tmp_path):
    """gfortran buffers formatted records: the POSIX writes beneath hold every byte of the N
    records of 15 characters and a newline, whatever their number. The MPI-IO calls of the
    Fortran binding (Open MPI's calls PMPI_* directly) are counted with their own bytes and
    forms (N independent MPI_File_write_at, one collective MPI_File_write_at_all)."""
    prog = build(mpi, "io_records.f90")
    n, nranks = 400, 2
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, n], ["--io"])
    got = rank_counts(r.proc.stdout)
    io = perfweave.open(r.exp).io
    for rank in range(nranks):
        (p,) = layer_records(io, f"{tmp_path}/records.{rank}.txt", "posix")
        assert p["bytes_written"] == got[rank]["record_bytes"] == n * 16
        assert (p["opens"], p["closes"], p["rank"]) == (1, 1, rank)
    m = layer_records(io, f"{tmp_path}/fmpiio.dat", "mpiio")
    assert sorted(m["rank"].tolist()) == list(range(nranks))
    for rec in m:
        g = got[int(rec["rank"])]
        assert (rec["bytes_written"], rec["writes"]) == (g["mpiio_bytes"], n + 1)
        assert (rec["opens"], rec["closes"]) == (1, 1)
        # the forms of the Fortran binding's calls: N independent, 1 collective write
        assert rec["form_writes"].tolist() == [n, 1, 0, 0]
        assert rec["form_opens"].tolist() == [0, 1, 0, 0]
        assert rec["max_byte_written"] == g["last_byte"]
    # call sites are the program's lines, not libgfortran's: the OPEN statement; the
    # buffered records reach write() from a WRITE or at the CLOSE that flushes them
    lines = site_lines("io_records.f90")
    sites = r.report()["io"]["callsites"]
    where = {
        (s["layer"], s["op"]): s["where"]
        for s in sites
        if s["pattern"].startswith(f"{tmp_path}/records.")
    }
    assert where[("posix", "open")].endswith(f"(io_records.f90:{lines['open']})")
    assert re.search(
        rf"\(io_records\.f90:({lines['record']}|{lines['close']})\)$", where[("posix", "write")]
    )
    fw = [s for s in sites if s["pattern"] == f"{tmp_path}/fmpiio.dat" and s["op"] == "write"]
    assert {s["where"] for s in fw if s["layer"] == "mpiio"} == {
        f"program io_records (io_records.f90:{lines[k]})" for k in ("fwrite", "fall")
    }
    # MPI_File_close, whose line gfortran's line table gives as the program statement's,
    # and the POSIX close the MPI library makes in it (ROMIO closes once in
    # MPI_File_open too), and its site in the MPI profile
    closes = [
        (s["layer"], s["where"])
        for s in sites
        if s["pattern"] == f"{tmp_path}/fmpiio.dat" and s["op"] == "close"
    ]
    at = f"program io_records (io_records.f90:{lines['fclose']})"
    assert [w for layer, w in closes if layer == "mpiio"] == [at]
    assert at in [w for layer, w in closes if layer == "posix"]
    # every call the MPI library makes for the program's MPI-IO is at one of its lines,
    # also from the components Open MPI loads at the first MPI_File_open (after the
    # runtime's snapshot of the loaded objects)
    lib = [s["where"] for s in sites if s["pattern"].startswith(f"{tmp_path}/fmpiio.dat")]
    lib += [s["where"] for s in sites if "fmpiio.dat_cid" in s["pattern"]]
    assert lib and all(re.search(r"\(io_records\.f90:\d+\)$", w) for w in lib), lib
    mpi = {s["function"]: s["location"] for s in r.report()["mpi_profile"]["callsites"]}
    assert mpi["MPI_File_close"]["line"] == lines["fclose"]


MEMORY_FS = {"tmpfs", "ramfs"}


def disk_dir(tmp_path):
    """A directory on a disk file system: tmp_path, else one in /var/tmp or beside the
    tests (CI may give /tmp as tmpfs); None when every candidate is memory-backed."""
    for base in (tmp_path, Path("/var/tmp"), Path(__file__).resolve().parent):
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(base)], capture_output=True, text=True)
        if fs.returncode == 0 and fs.stdout.strip() not in MEMORY_FS:
            return base if base == tmp_path else Path(tempfile.mkdtemp(dir=base, prefix="pw-io-"))
    return None


@pytest.mark.parametrize("flags", FORTIFY, ids=["plain", "fortify"])
def test_io_open_close_loop_ranks_disk_and_shm(mpi, build, run_pw, tmp_path, flags):
    """Each rank opens (O_CREAT | O_TRUNC), writes 1 byte and closes its own file for a
    second. Truncating a file just written on a disk file system flushes it, so there the
    opens and closes dominate the file's I/O time by construction; on /dev/shm they are cheap
    and the file is memory-backed. The rule's inputs are checked exactly (counts per rank,
    the memory flag) and its decision against them; it fires on disk, never on /dev/shm."""
    prog = build(mpi, "io_ranks.c", flags)
    nranks = 3
    disk = disk_dir(tmp_path)
    if disk is None:
        pytest.skip(f"{tmp_path}, /var/tmp and the tests' directory are memory-backed: no disk")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        try:
            for where, directory in (("disk", str(disk)), ("shm", shm)):
                check_loop(mpi, prog, run_pw, nranks, where, directory)
        finally:
            if disk != tmp_path:
                shutil.rmtree(disk, ignore_errors=True)


def check_loop(mpi, prog, run_pw, nranks, where, directory):
    """One run of the open/close loop in directory and the checks of its counts, memory
    flag and advice (test_io_open_close_loop_ranks_disk_and_shm)."""
    r = run_pw(mpi.launch(nranks) + [prog, "loop", directory, 1.0], ["--io"])
    got = rank_counts(r.proc.stdout)
    io = perfweave.open(r.exp).io
    for rank in range(nranks):
        name = f"{directory}/loop.{rank}.dat"
        (p,) = layer_records(io, name, "posix")
        n = got[rank]["opens"]
        assert (p["opens"], p["closes"], p["writes"], p["bytes_written"]) == (n,) * 4
        assert p["rank"] == rank
        memory = io.memory[io.files.index(name)]
        assert memory == (where == "shm")
    rep = r.report()
    row = next(x for x in rep["io"]["files"] if x["pattern"].startswith(directory))
    assert row["memory"] == (where == "shm")
    assert row["opens"] == sum(g["opens"] for g in got.values())
    share = (row["open_s"] + row["close_s"]) / row["time_s"]
    pct = 100 * row["time_s"] / rep["io"]["wall_s"]
    fired = [a for a in rep["advice"] if a["rule"] == "io_open_close"]
    rule = not row["memory"] and share >= OPEN_CLOSE_SHARE and pct >= IO_SHARE_PCT
    assert bool(fired) == rule
    if where == "disk":
        assert share >= OPEN_CLOSE_SHARE and fired
        assert "/dev/shm" in fired[0]["text"] and f"{row['opens']:,} opens" in fired[0]["text"]
    else:
        assert not fired


@pytest.mark.parametrize("where", ["shm", "disk"])
def test_io_mmap_bytes_estimated(mpi, build, run_pw, tmp_path, where):
    """A file of 4 P pages mapped and P of them touched: the estimate (resident pages at
    munmap) counts at least the pages touched and at most the mapping; on tmpfs, with no
    readahead, no more than the pages touched and a fault-around window."""
    prog = build(mpi, "io_ranks.c")
    pages, nranks = 100, 2
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        directory = shm if where == "shm" else str(tmp_path)
        r = run_pw(mpi.launch(nranks) + [prog, "mmap", directory, pages], ["--io"])
        got = rank_counts(r.proc.stdout)
        io = perfweave.open(r.exp).io
        if mpi.name == "mpich" and not io.processes["mmap_estimated"].any():
            # MPICH over UCX: UCX's memory hooks (ucm) patch mmap/munmap for its
            # registration cache, and the program's calls no longer reach our wrappers
            pytest.xfail("mmap under MPICH/UCX: ucm's hooks bypass the io module's wrappers")
        assert io.processes["mmap_estimated"].all()
        for rank in range(nranks):
            (p,) = layer_records(io, f"{directory}/mmap.{rank}.dat", "posix")
            touched, mapped = got[rank]["touched"], got[rank]["mapped"]
            assert p["mmaps"] == 2  # mmap and munmap
            assert touched <= p["mmap_bytes"] <= mapped
            if where == "shm":
                assert p["mmap_bytes"] <= touched + 16 * 4096
        # the report labels it as an estimate
        rep = r.report()["io"]
        row = next(f for f in rep["files"] if f["pattern"].startswith(f"{directory}/mmap."))
        est = layer_records(io, f"{directory}/mmap.0.dat", "posix")["mmap_bytes"].sum()
        assert (
            row["mmap_bytes_est"]
            == est + layer_records(io, f"{directory}/mmap.1.dat", "posix")["mmap_bytes"].sum()
        )
        assert any("an estimate" in n for n in rep["notes"])


def test_a_process_keeps_its_mpi_time_whenever_the_sampler_last_saw_it(
    mpi, build, run_pw, tmp_path
):
    """The node timeline's per-process MPI time (the activity pages) holds every call of a
    process up to its end, however the sampler's ticks fall: with --node-interval 10000
    there are two ticks, the first and the node sampler's last (at its process's end), and
    a rank may end before that last tick (its page, a file, is read once more then) or be
    seen first at it (its page counts from its start, not from that reading). Before, 5 of
    12 such runs lost rank 1's 300 ms wait (io_nb_wait.c: its own clock says how long)."""
    prog = build(mpi, "io_nb_wait.c")
    r = run_pw(mpi.launch(2) + [prog, tmp_path, 8], ["--node-interval", "10000"])
    got = rank_counts(r.proc.stdout)
    [tl] = r.open().timelines

    def total(pid, name):
        col = tl.values[:, tl.index("proc", f"{pid}.{name}")]
        return col[~np.isnan(col)][-1]

    for rank in range(2):
        g = got[rank]
        # the wrapper times a call inside the program's clock readings around it (see the
        # test below): at most 10 us a call more by the program's clock, and 1 ms of the
        # clock's conversion
        assert total(g["pid"], "mpi_sync_ns") >= g["p2p_wait"] - 1e6 - 1e4 * g["p2p_calls"]
        assert total(g["pid"], "mpi_file_ns") >= g["file_wait"] - 1e6 - 1e4 * g["file_calls"]
        assert total(g["pid"], "mpi_calls") >= g["file_calls"] + g["p2p_calls"]
    assert got[1]["p2p_wait"] > 0.25e9


def test_io_completions_of_mpiio_requests_are_file_time(mpi, build, run_pw, tmp_path):
    """MPI_Wait, MPI_Test, MPI_Waitall and MPI_Waitany of the requests of MPI_File_iwrite_at
    and MPI_File_iread_at are MPI-IO time (family file), as the calls that posted them, in
    each rank's activity page (the node timeline's PID.mpi_FAMILY_ns, the time of every
    call by family, added when it ends); those of point-to-point requests stay sync, also
    after the file phase, whose request handles MPI reuses. The program's own clock says
    when each phase was and how long its completion calls took."""
    prog = build(mpi, "io_nb_wait.c")
    nranks = 2
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, 8], ["--node-interval", "20"])
    got = rank_counts(r.proc.stdout)
    [tl] = r.open().timelines

    def spent(pid, family, a, b):
        # the calls that ended between the node sampler's ticks around [a, b]
        return tl.window(tl.index("proc", f"{pid}.mpi_{family}_ns"), a, b)[0]

    for rank in range(nranks):
        g = got[rank]
        # the wrapper times a call inside the program's clock readings around it: the
        # program's sum is larger by the work between them, at most 10 us a call (one
        # MPI_Test loop makes thousands), and 1 ms for the clock's conversion to ns
        f = (g["file_t0"], g["file_t1"])
        assert spent(g["pid"], "file", *f) >= g["file_wait"] - 1e6 - 1e4 * g["file_calls"]
        # nothing of the file phase is sync time: its only completions are of files
        assert spent(g["pid"], "sync", *f) < 1e6
        # the point-to-point completions: sync, and none of it file time; rank 1 waits
        # 300 ms for rank 0's late send
        p = (g["p2p_t0"], g["p2p_t1"])
        assert spent(g["pid"], "sync", *p) >= g["p2p_wait"] - 1e6 - 1e4 * g["p2p_calls"]
        assert spent(g["pid"], "file", *p) < 1e6
    assert got[1]["p2p_wait"] > 0.25e9

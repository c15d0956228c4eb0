"""The Darshan-comparable export's tables against Darshan's own (darshan-posix-, -stdio-,
-mpiio-log-format.h of Darshan 3.4/3.5, log format 3.41, checked against its source), and
the order of its common access sizes."""

from perfweave.interop.darshan import COUNTERS, common_accesses, darshan_logs, darshan_text
from perfweave.model.io import IoProfile


def test_every_counter_of_darshans_modules_in_its_headers_order():
    sizes = {k: (len(i), len(f)) for k, (i, f) in COUNTERS.items()}
    assert sizes == {"posix": (69, 17), "stdio": (14, 15), "mpiio": (51, 17)}
    posix, posix_f = COUNTERS["posix"]
    assert posix[:10] == [
        "POSIX_OPENS", "POSIX_FILENOS", "POSIX_DUPS", "POSIX_READS", "POSIX_WRITES",
        "POSIX_SEEKS", "POSIX_STATS", "POSIX_MMAPS", "POSIX_FSYNCS", "POSIX_FDSYNCS",
    ]  # fmt: skip
    assert posix[49:53] == [f"POSIX_STRIDE{i}_STRIDE" for i in range(1, 5)]
    assert posix[-4:] == [
        "POSIX_FASTEST_RANK", "POSIX_FASTEST_RANK_BYTES", "POSIX_SLOWEST_RANK",
        "POSIX_SLOWEST_RANK_BYTES",
    ]  # fmt: skip
    # the timestamps: first open, read, write, close, then the last ones
    assert posix_f[:8] == [
        f"POSIX_F_{op}_{when}_TIMESTAMP"
        for when in ("START", "END")
        for op in ("OPEN", "READ", "WRITE", "CLOSE")
    ]
    stdio, stdio_f = COUNTERS["stdio"]
    assert stdio[5:8] == ["STDIO_FLUSHES", "STDIO_BYTES_WRITTEN", "STDIO_BYTES_READ"]
    # STDIO's times come first, then its timestamps, first open, close, write, read
    assert stdio_f[:5] == [
        "STDIO_F_META_TIME", "STDIO_F_WRITE_TIME", "STDIO_F_READ_TIME",
        "STDIO_F_OPEN_START_TIMESTAMP", "STDIO_F_CLOSE_START_TIMESTAMP",
    ]  # fmt: skip
    mpiio, _ = COUNTERS["mpiio"]
    assert mpiio[10:14] == ["MPIIO_SYNCS", "MPIIO_HINTS", "MPIIO_VIEWS", "MPIIO_MODE"]
    assert mpiio[19] == "MPIIO_SIZE_READ_AGG_0_100"


def test_common_accesses_most_frequent_first_a_tie_the_larger_size_first():
    # Darshan's DARSHAN_UPDATE_COMMON_VAL_COUNTERS order; a 0-byte access is none
    assert common_accesses([1024, 4096, 512, 0], [1, 1, 1, 9]) == [
        (4096, 1), (1024, 1), (512, 1), (0, 0),
    ]  # fmt: skip
    assert common_accesses([100, 1000, 0, 0], [6, 1, 0, 0]) == [
        (100, 6), (1000, 1), (0, 0), (0, 0),
    ]  # fmt: skip
    assert common_accesses([8, 16, 32, 64], [2, 5, 2, 1]) == [(16, 5), (32, 2), (8, 2), (64, 1)]


def _rows(text):
    return [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_processes_without_an_mpi_rank_are_logs_of_their_own_as_darshans_non_mpi_mode():
    """Darshan (darshan-core.c) gives a process without MPI (DARSHAN_ENABLE_NONMPI) a log of
    its own, nprocs 1, its records rank 0 (never -1, which darshan-parser reads as a record
    shared by all ranks), a forked child's with fork_parent=PID in its metadata. Here: two
    ranks of an MPI job, a child one rank forked, and a process without MPI started first."""
    io = IoProfile.from_literal(
        processes=[
            {"rank": 1, "pid": 11, "t_start_ns": 20},
            {"rank": -1, "pid": 30, "parent_pid": 10, "t_start_ns": 50, "host": "n1"},
            {"rank": 0, "pid": 10, "t_start_ns": 20},
            {"rank": -1, "pid": 5, "t_start_ns": 1, "host": "n0"},
        ],
        files=[("/d/a", 0, False), ("/d/b", 0, False)],
        records=[{"process": p, "file": p % 2, "layer": "posix", "opens": 1 + p} for p in range(4)],
    )
    logs = darshan_logs(io)
    assert [(sorted(p.tolist()), f) for p, f in logs] == [([0, 2], 0), ([3], 0), ([1], 10)]
    job = darshan_text(io, processes=logs[0][0])
    assert "# nprocs: 2" in job.splitlines()
    opens = {(x[1], x[5]): x[4] for x in _rows(job) if x[3] == "POSIX_OPENS"}
    assert opens == {("0", "/d/a"): "3", ("1", "/d/a"): "1"}
    for procs, parent, name, n in ((logs[1][0], 0, "/d/b", "4"), (logs[2][0], 10, "/d/b", "2")):
        text = darshan_text(io, processes=procs, forked_from=parent)
        lines = text.splitlines()
        assert "# nprocs: 1" in lines
        assert ("# metadata: fork_parent = 10" in lines) == bool(parent)
        rows = _rows(text)
        assert {x[1] for x in rows} == {"0"} and {x[5] for x in rows} == {name}
        assert [x[4] for x in rows if x[3] == "POSIX_OPENS"] == [n]

"""The Darshan-comparable export's tables against Darshan's own (darshan-posix-, -stdio-,
-mpiio-log-format.h of Darshan 3.4/3.5, log format 3.41, checked against its source), and
the order of its common access sizes."""

from perfweave.interop.darshan import COUNTERS, common_accesses


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

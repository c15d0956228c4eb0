"""The sampler depends on no descriptor the program can close. fd_reuse.c closes every
descriptor from 3 up (close_range, as daemons and process managers do), opens a pipe, a
socket pair and a file, which take those numbers, and moves data through them for 1 s in
a thread running code without call-frame information (libunwind follows its frame chain,
where libunwind's local address space validates memory through a pipe of its own: its
read() then blocked on the program's empty pipe, for ever, and its write() put bytes into
the program's data). Under 1 ms sampling: no hang, every byte read back as written, the
same descriptor numbers as without perfweave, and samples with whole stacks."""

import perfweave
from harness import bare, inclusive_pct
from perfweave.readers.samples import read_samples

NO_CFI = ("-pthread", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
FAST = ["--sample-interval-ms", "1"]


def counts(stdout):
    """{"first": n, "fds": [...], "bytes": n, "bad": n} per process (its one line "first N
    fds ... bytes N bad M"), rank order unknown"""
    out = []
    for line in stdout.splitlines():
        w = line.split()
        if w and w[0] == "first":
            fds = w.index("fds")
            out.append(
                {
                    "first": int(w[1]),
                    "fds": [int(x) for x in w[fds + 1 : fds + 6]],
                    "bytes": int(w[fds + 7]),
                    "bad": int(w[fds + 9]),
                }
            )
    return out


def check_worker_stacks(exp, nprocs):
    procs = read_samples(exp)
    assert len(procs) == nprocs
    inc = inclusive_pct(perfweave.open(exp))
    for p in procs:
        assert p.meta["unwinder"] == "libunwind"
        worker = p.records[p.records["thread"] == 1]
        # ~1 s at ~1 ms in the worker thread: ~1000 on an idle core; the timer is armed
        # again only when the handler ran, so a loaded machine (2 cores, 3 processes
        # and more) gives fewer, >= 100 seen at load 11
        assert len(worker) > 50, len(worker)
    # the worker's share of the sampled time (shares are of the time each sample stands
    # for, docs/samples.md)
    s = perfweave.open(exp).samples()
    share = 100 * s.loc[s["thread"] == 1, "seconds"].sum() / s["seconds"].sum()
    # the worker's every sample holds the chain worker -> io_loop (-> io_round -> ...):
    # a broken stack would lose io_loop below the function the sample landed in
    for fn in ("worker", "io_loop"):
        assert inc.get(fn, 0) > 0.9 * share, (fn, inc.get(fn), share)
    assert inc.get("io_round", 0) > 0.6 * share, (inc.get("io_round"), share)


def test_program_reusing_low_descriptors(build, run_pw):
    prog = build(None, "fd_reuse.c", NO_CFI)
    [want] = counts(bare([prog, "0.2"]).stdout)
    assert want["first"] == 3 and want["fds"] == [3, 4, 5, 6, 7] and want["bad"] == 0
    r = run_pw([prog, "1"], FAST, timeout=60)
    [got] = counts(r.proc.stdout)
    assert got["first"] == 3 and got["fds"] == want["fds"], got
    # every byte through the pipe, the socket pair and the file came back as written
    # (1 s of 512-byte blocks: megabytes)
    assert got["bad"] == 0 and got["bytes"] > 100_000, got
    check_worker_stacks(r.exp, 1)


def test_mpi_program_reusing_low_descriptors(mpi, build, run_pw):
    prog = build(mpi, "fd_reuse.c", NO_CFI + ("-DWITH_MPI",))
    r = run_pw(mpi.launch(2) + [prog, "1"], FAST, timeout=90)
    procs = counts(r.proc.stdout)
    assert len(procs) == 2, r.proc.stdout
    for got in procs:
        assert got["first"] == 3 and got["fds"][:3] == [3, 4, 5], got
        assert got["bad"] == 0 and got["bytes"] > 100_000, got
    check_worker_stacks(r.exp, 2)

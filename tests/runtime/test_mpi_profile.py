"""The MPI call-site profile against programs whose numbers are known by construction,
read through the Python API (perfweave.open: its MPI tables and the profile model); the
text report's sections are test_text_report_sections'."""

import re
import subprocess

import numpy as np
import pytest

from harness import by_name, callsites, place, site_lines, site_objects


def test_exact_counts_bytes_and_sites(mpi, build, run_pw):
    prog = build(mpi, "counts.c")
    r = run_pw(mpi.launch(4) + [prog])
    exp = r.open()
    assert not exp.profile.partial  # the experiment's state: complete
    per_rank = exp.mpi_ranks().to_dict("records")
    assert len(per_rank) == 4 and exp.profile.world_size == 4
    assert exp.profile.module("mpi")["flavor"] == mpi.name
    f = by_name(exp.mpi_functions())
    assert f["MPI_Send"]["calls"] == 5 and f["MPI_Send"]["bytes_sent"] == 5 * 8000
    assert f["MPI_Recv"]["calls"] == 5 and f["MPI_Recv"]["bytes_recv"] == 5 * 8000
    # Bcast: the root sends 3 x 64 bytes, the 3 others receive 3 x 64 bytes each
    assert f["MPI_Bcast"]["calls"] == 12
    assert f["MPI_Bcast"]["bytes_sent"] == 3 * 64 and f["MPI_Bcast"]["bytes_recv"] == 9 * 64
    assert f["MPI_Allreduce"]["calls"] == 8
    assert f["MPI_Allreduce"]["bytes_sent"] == 8 * 32 == f["MPI_Allreduce"]["bytes_recv"]
    assert f["MPI_Barrier"]["calls"] == 16
    assert f["MPI_Barrier"]["bytes_sent"] == 0
    # Gather: every rank sends 40 bytes, the root receives 4 x 40
    assert f["MPI_Gather"]["calls"] == 4
    assert f["MPI_Gather"]["bytes_sent"] == 4 * 40 and f["MPI_Gather"]["bytes_recv"] == 160
    # Alltoall: every rank sends and receives 3 ints to/from each of 4 ranks
    assert f["MPI_Alltoall"]["bytes_sent"] == 4 * 4 * 12 == f["MPI_Alltoall"]["bytes_recv"]
    assert f["MPI_Comm_rank"]["calls"] == 4 and f["MPI_Comm_size"]["calls"] == 4
    assert "MPI_Init" not in f
    # per-rank rows
    assert [p["rank"] for p in per_rank] == [0, 1, 2, 3]
    calls = {p["rank"]: p["calls"] for p in per_rank}
    # Comm_rank, Comm_size, 3 Bcast, 2 Allreduce, 4 Barrier, Gather, Alltoall = 13
    assert calls == {0: 13 + 5, 1: 13 + 5, 2: 13, 3: 13}
    for p in per_rank:
        assert 0 < p["mpi_s"] <= p["app_s"]
        assert abs(p["mpi_pct"] + p["outside_pct"] - 100) < 1e-6

    # one call site per marked line, same (module, offset) on every rank (ASLR)
    lines = site_lines("counts.c")
    for fn, mark, nranks in (
        ("MPI_Send", "send", 1),
        ("MPI_Recv", "recv", 1),
        ("MPI_Bcast", "bcast", 4),
        ("MPI_Allreduce", "allreduce", 4),
        ("MPI_Barrier", "barrier", 4),
        ("MPI_Gather", "gather", 4),
        ("MPI_Alltoall", "alltoall", 4),
    ):
        s = callsites(exp, fn)
        assert len(s) == 1, (fn, s)
        assert s[0]["file"].endswith("counts.c") and s[0]["line"] == lines[mark], (fn, s)
        assert place(s[0]["where"])[0] == "main"
        assert s[0]["ranks"] == nranks
        assert site_objects(exp, fn) == {str(prog)}

    # message-size histograms: 8000-byte sends are in bucket 13 (4096..8191)
    sizes = {(s["function"], s["bucket"]): s for s in exp.message_sizes().to_dict("records")}
    assert sizes[("MPI_Send", 13)]["calls"] == 5
    assert sizes[("MPI_Send", 13)]["min_bytes"] == 4096
    assert sizes[("MPI_Bcast", 7)]["calls"] == 12  # 64 bytes
    assert sizes[("MPI_Barrier", 0)]["calls"] == 16  # 0 bytes
    assert f["MPI_Send"]["mean_bytes"] == 8000

    # the program's own output is untouched
    assert sorted(l for l in r.proc.stdout.splitlines() if l.startswith("counts")) == [
        f"counts rank {i} done" for i in range(4)
    ]


def test_callsites_agree_across_ranks_under_aslr(mpi, build, run_pw):
    with open("/proc/sys/kernel/randomize_va_space") as fh:
        assert fh.read().strip() != "0", "ASLR is off on this machine; the test needs it"
    prog = build(mpi, "counts.c")
    r = run_pw(mpi.launch(4) + [prog])
    # raw file: every rank's Bcast row has the same (object, offset), whatever the load
    # addresses were; the MPI module owns the ids of the MPI functions
    from perfweave.readers.profile import read_profile

    pf = read_profile(r.exp / "profile.pwprof")
    fns = pf.header["functions"]
    s = pf.arrays["sites"]
    bc = s[s["fn"] == fns.index("MPI_Bcast")]
    assert len(bc) == 4 and len(set(bc["rank"])) == 4
    assert len(set(zip(bc["object"], bc["offset"]))) == 1
    assert pf.header["objects"][bc["object"][0]] == str(prog)
    (mod,) = [m for m in pf.header["modules"] if m["name"] == "mpi"]
    assert mod["flavor"] == mpi.name and mod["library"]
    assert fns.index("MPI_Bcast") in range(mod["first"], mod["first"] + mod["count"])


def test_late_barrier(mpi, build, run_pw):
    """Rank 3 sleeps 0.3 s before the second barrier. The ranks leave the first barrier
    at times tens of ms apart under load, so each rank's time in the barriers is taken
    from its own clock readings around them (the program prints them); the profile's
    times lie inside those brackets: 5 % or 2 ms a rank for the instructions between."""
    prog = build(mpi, "barrier_late.c")
    run = run_pw(mpi.launch(4) + [prog])
    exp = run.open()
    t = {
        int(m[0]): [float(x) for x in m[1:]]
        for m in re.findall(r"^barrier (\d) (\S+) (\S+) (\S+) (\S+)$", run.proc.stdout, re.M)
    }
    assert set(t) == {0, 1, 2, 3}, run.proc.stdout
    first_in = {k: v[1] - v[0] for k, v in t.items()}
    late_in = {k: v[3] - v[2] for k, v in t.items()}
    lines = site_lines("barrier_late.c")
    late = [s for s in callsites(exp, "MPI_Barrier") if s["line"] == lines["late"]]
    assert len(late) == 1
    late = late[0]
    by_rank = exp.mpi_callsites(per_rank=True)
    mine = by_rank[by_rank["id"] == late["id"]]
    per_rank = dict(zip(mine["rank"].tolist(), mine["time_s"].tolist()))
    for rank in range(4):
        assert per_rank[rank] == pytest.approx(late_in[rank], rel=0.05, abs=0.002), (
            rank,
            per_rank,
            late_in,
        )
    # as planned: ranks 0-2 waited for the sleeper (at least until it entered), which
    # itself did not wait
    for rank in (0, 1, 2):
        assert late_in[rank] >= t[3][2] - t[rank][2] - 1e-6 and late_in[rank] > 0.2, late_in
    assert late_in[3] < 0.1, late_in
    # COV of the ranks' times (0.3, 0.3, 0.3, ~0: sqrt(3)/3 = 0.577 planned)
    times = np.array([per_rank[k] for k in range(4)])
    assert late["cov"] == pytest.approx(times.std() / times.mean(), rel=1e-6), (late, times)
    planned = np.array([late_in[k] for k in range(4)])
    assert 0.45 < planned.std() / planned.mean() < 0.65, planned
    first = [s for s in callsites(exp, "MPI_Barrier") if s["line"] == lines["first"]]
    assert first[0]["time_s"] == pytest.approx(sum(first_in.values()), rel=0.05, abs=0.008)
    assert late["max_s"] == pytest.approx(max(late_in.values()), rel=0.05, abs=0.002)


def test_any_source_receives(mpi, build, run_pw):
    prog = build(mpi, "anysource.c")
    r = run_pw(mpi.launch(4) + [prog])
    assert "anysource: 3 of 3 matched" in r.proc.stdout
    f = by_name(r.open().mpi_functions())
    assert f["MPI_Recv"]["calls"] == 3 and f["MPI_Recv"]["bytes_recv"] == 3 * 256
    assert f["MPI_Send"]["calls"] == 3 and f["MPI_Send"]["bytes_sent"] == 3 * 256


def test_isend_irecv_waitall(mpi, build, run_pw):
    prog = build(mpi, "nonblocking.c")
    exp = run_pw(mpi.launch(4) + [prog]).open()
    f = by_name(exp.mpi_functions())
    assert f["MPI_Isend"]["calls"] == 40 and f["MPI_Isend"]["bytes_sent"] == 40 * 400
    assert f["MPI_Irecv"]["calls"] == 40 and f["MPI_Irecv"]["bytes_recv"] == 40 * 400
    assert f["MPI_Waitall"]["calls"] == 40
    assert f["MPI_Waitall"]["family"] == "sync"
    lines = site_lines("nonblocking.c")
    assert callsites(exp, "MPI_Waitall")[0]["line"] == lines["waitall"]


def test_comm_split(mpi, build, run_pw):
    prog = build(mpi, "commsplit.c")
    f = by_name(run_pw(mpi.launch(4) + [prog]).open().mpi_functions())
    assert f["MPI_Comm_split"]["calls"] == 4
    assert f["MPI_Comm_free"]["calls"] == 4
    assert f["MPI_Allreduce"]["calls"] == 4
    assert f["MPI_Allreduce"]["bytes_sent"] == 4 * 32


def test_persistent_requests(mpi, build, run_pw):
    prog = build(mpi, "persistent.c")
    f = by_name(run_pw(mpi.launch(3) + [prog]).open().mpi_functions())
    assert f["MPI_Send_init"]["calls"] == 3 and f["MPI_Recv_init"]["calls"] == 3
    # bytes move at each start, not at init
    assert f["MPI_Send_init"]["bytes_sent"] == 0
    assert f["MPI_Startall"]["calls"] == 3 * 20
    assert f["MPI_Startall"]["bytes_sent"] == 3 * 20 * 128
    assert f["MPI_Startall"]["bytes_recv"] == 3 * 20 * 128
    assert f["MPI_Start"]["calls"] == 3 * 2
    assert f["MPI_Start"]["bytes_sent"] == 3 * 128 and f["MPI_Start"]["bytes_recv"] == 3 * 128
    assert f["MPI_Request_free"]["calls"] == 6


@pytest.mark.parametrize("source", ["fortran_mpif.f90", "fortran_usempi.f90", "fortran_f08.f90"])
def test_fortran(mpi, build, run_pw, source):
    prog = build(mpi, source)
    exp = run_pw(mpi.launch(2) + [prog]).open()
    assert not exp.profile.partial and len(exp.mpi_ranks()) == 2  # complete, 2 ranks
    f = by_name(exp.mpi_functions())
    assert f["MPI_Send"]["calls"] == 3 and f["MPI_Send"]["bytes_sent"] == 3 * 200
    assert f["MPI_Recv"]["calls"] == 3 and f["MPI_Recv"]["bytes_recv"] == 3 * 200
    assert f["MPI_Allreduce"]["calls"] == 4 and f["MPI_Allreduce"]["bytes_sent"] == 4 * 32
    assert f["MPI_Barrier"]["calls"] == 2
    assert f["MPI_Comm_rank"]["calls"] == 2 and f["MPI_Comm_size"]["calls"] == 2
    lines = site_lines(source)
    for fn, mark in (
        ("MPI_Send", "send"),
        ("MPI_Recv", "recv"),
        ("MPI_Allreduce", "allreduce"),
        ("MPI_Barrier", "barrier"),
    ):
        s = callsites(exp, fn)
        assert len(s) == 1, (fn, s)
        assert s[0]["file"].endswith(source), s[0]
        assert s[0]["line"] == lines[mark], (fn, s[0])


def test_text_report_sections(mpi, build, run_pw):
    prog = build(mpi, "counts.c")
    text = run_pw(mpi.launch(4) + [prog]).text_report()
    for needle in (
        "MPI time per rank",
        "Balance: % of each rank's app time",
        "Avg/Max",
        "MPI functions by time",
        "MPI call sites by time",
        "Message sizes",
        "counts.c:",
    ):
        assert needle in text, needle


def test_threads_calling_mpi(mpi, build, run_pw):
    prog = build(mpi, "threads.c", extra=("-pthread",))
    exp = run_pw(mpi.launch(2) + [prog]).open()
    f = by_name(exp.mpi_functions())
    assert f["MPI_Comm_rank"]["calls"] == 2 * 2 * 50
    assert f["MPI_Allreduce"]["calls"] == 2 * 2 * 10
    assert f["MPI_Allreduce"]["bytes_sent"] == 2 * 2 * 10 * 8
    lines = site_lines("threads.c")
    s = callsites(exp, "MPI_Allreduce")
    assert len(s) == 1 and s[0]["line"] == lines["allreduce"]
    for p in exp.mpi_ranks().to_dict("records"):
        assert p["threads"] == 2  # one call-site table per thread
        assert p["calls"] == 2 * 60 + 4  # + Comm_dup x2, Comm_free x2


def test_clock_offsets_on_one_host(mpi, build, run_pw):
    """All ranks share one clock here: the measured offsets must be ~0, within the
    error bound each measurement reports (half its best round trip) plus 50 us."""
    prog = build(mpi, "counts.c")
    exp = run_pw(mpi.launch(4) + [prog]).open()
    for p in exp.mpi_ranks().to_dict("records"):
        bound = p["clock_offset_error_s"] + 50e-6
        assert abs(p["clock_offset_init_s"]) <= bound, p
        assert abs(p["clock_offset_fini_s"]) <= bound, p
        if p["rank"] > 0:
            assert 0 < p["clock_offset_error_s"] < 0.01, p


def test_cxx_call_site_is_demangled(mpi, build, run_pw):
    prog = build(mpi, "cxx_solver.cpp")
    s = callsites(run_pw(mpi.launch(2) + [prog]).open(), "MPI_Allreduce")
    assert len(s) == 1 and s[0]["calls"] == 14
    assert place(s[0]["where"])[0] == "physics::Solver::step(int)"
    assert s[0]["file"].endswith("cxx_solver.cpp")
    assert s[0]["line"] == site_lines("cxx_solver.cpp")["allreduce"]


def test_mpi_loaded_with_rtld_local(mpi, build_dir, run_pw):
    """MPI outside the global symbol scope (a plug-in or Python extension that links
    it, loaded with RTLD_LOCAL): the program still runs, and is measured."""
    from harness import PROGRAMS

    lib = build_dir / f"librtld-{mpi.name}.so"
    main = build_dir / f"rtld_local_main-{mpi.name}"
    for cmd in (
        [
            mpi.cc,
            "-g",
            "-O0",
            "-shared",
            "-fPIC",
            "-o",
            str(lib),
            str(PROGRAMS / "rtld_local_lib.c"),
        ],
        ["gcc", "-g", "-O0", "-o", str(main), str(PROGRAMS / "rtld_local_main.c"), "-ldl"],
    ):
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    r = run_pw(mpi.launch(2) + [main, lib], options=["--mpi", mpi.name])
    exp = r.open()
    f = by_name(exp.mpi_functions())
    assert f["MPI_Allreduce"]["calls"] == 8 and f["MPI_Allreduce"]["bytes_sent"] == 8 * 16
    s = callsites(exp, "MPI_Allreduce")
    assert s[0]["line"] == site_lines("rtld_local_lib.c")["allreduce"]
    assert site_objects(exp, "MPI_Allreduce") == {str(lib)}


def test_bytes_of_v_w_nonblocking_collectives_rma_and_io(mpi, build, run_pw):
    prog = build(mpi, "coverage.c")
    f = by_name(run_pw(mpi.launch(4) + [prog]).open().mpi_functions())

    def sent_recv(name):
        return f[name]["bytes_sent"], f[name]["bytes_recv"]

    I, D = 4, 8
    assert sent_recv("MPI_Gatherv") == (10 * I, 10 * I)  # ranks send r+1; root gets 10
    assert sent_recv("MPI_Scatterv") == (10 * I, 10 * I)
    assert sent_recv("MPI_Allgatherv") == (10 * I, 4 * 10 * I)
    assert sent_recv("MPI_Alltoallv") == (4 * 8 * I, 4 * 8 * I)
    assert sent_recv("MPI_Alltoallw") == (4 * 4 * D, 4 * 4 * D)
    assert sent_recv("MPI_Reduce_scatter") == (4 * 10 * I, 10 * I)
    assert sent_recv("MPI_Reduce_scatter_block") == (4 * 12 * I, 4 * 3 * I)
    assert sent_recv("MPI_Ibcast") == (5 * D, 3 * 5 * D)  # root 1 sends, 3 receive
    assert sent_recv("MPI_Iallreduce") == (4 * 6 * I, 4 * 6 * I)
    assert f["MPI_Wait"]["calls"] == 8 and f["MPI_Wait"]["family"] == "sync"
    assert sent_recv("MPI_Exscan") == sent_recv("MPI_Scan") == (4 * 2 * I, 4 * 2 * I)
    # one-sided
    assert sent_recv("MPI_Put") == (4 * 10 * I, 0)
    assert sent_recv("MPI_Get") == (0, 4 * 20 * I)
    assert sent_recv("MPI_Accumulate") == (4 * 4 * I, 0)
    assert sent_recv("MPI_Fetch_and_op") == sent_recv("MPI_Compare_and_swap") == (4 * I, 4 * I)
    assert f["MPI_Win_fence"]["calls"] == 8 and f["MPI_Win_fence"]["family"] == "sync"
    assert f["MPI_Win_allocate"]["calls"] == 4 and f["MPI_Win_free"]["calls"] == 4
    assert f["MPI_Put"]["family"] == "rma"
    # MPI-IO: written counts as sent, read as received
    assert sent_recv("MPI_File_write_at") == (4 * 1000, 0)
    assert sent_recv("MPI_File_read_at") == (0, 4 * 1000)
    assert sent_recv("MPI_File_write_at_all") == (4 * 64 * I, 0)
    assert f["MPI_File_open"]["calls"] == 4 and f["MPI_File_close"]["calls"] == 4
    assert f["MPI_File_write_at"]["family"] == "file"

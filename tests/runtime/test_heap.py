"""The heap module (runtime/modules/heap.c, --heap; docs/heap.md): three allocation sites of
known sizes and lifetimes (programs/heap_sites.c, heap_sites_cxx.cpp,
heap_sites_fortran.f90: A 100 x 2 MiB held about 0.2 s, B 10 000 x 64 KiB with 100 live at a
time, C 7 x 8 MiB held 0.1 s), in C, C++ (new[]/delete[]) and Fortran (ALLOCATE), under each
MPI. Each program measures its own byte-seconds (its clock read after each allocation and
before each free): the profile's counts and bytes must be exact, its byte-seconds within 5
%, its peaks exact. A fork's child keeps its own record, a SIGKILLed process what it
counted; the sampling mode's estimates lie within their statistical tolerance; threads
allocating at once (the module's switch from one recording thread's plain updates to
atomics) lose no count (programs/heap_threads.c)."""

import time

import numpy as np
import pandas as pd
import pytest

from harness import share_bound, site_lines
from perfweave._format import RECORDS
from perfweave.analysis.heap import analyze
from perfweave.readers.heap import read_heap

MIB = 1 << 20
SITES = {"A": (100, 2 * MIB, 100), "B": (10000, 65536, 100), "C": (7, 8 * MIB, 7)}


def program_values(stdout):
    """The program's own lines: site -> (count, bytes, byte_s), summed over ranks."""
    out = {}
    for line in stdout.splitlines():
        f = line.split()
        if len(f) in (4, 5) and f[0] in SITES:
            c, b, bs = out.get(f[0], (0, 0, 0.0))
            out[f[0]] = (c + int(f[1]), b + int(f[2]), bs + float(f[3]))
    return out


def program_live(stdout):
    """heap_sites.c's lines: site -> seconds its objects were live, summed over ranks."""
    out = {}
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 5 and f[0] in SITES:
            out[f[0]] = out.get(f[0], 0.0) + float(f[4])
    return out


def site_rows(sites, source):
    """The sites table's row of each marked line of source (its where's file:line)."""
    lines = site_lines(source)
    rows = {}
    for name, line in lines.items():
        m = np.array([str(f).endswith(source) for f in sites["file"]]) & (sites["line"] == line)
        assert m.sum() == 1, f"site {name} ({source}:{line}): {m.sum()} rows"
        rows[name] = sites[np.asarray(m)].iloc[0]
    return rows


def check_sites(rows, truth, ranks):
    for name, (count, size, live) in SITES.items():
        r, (c, b, bs) = rows[name], truth[name]
        assert (c, b) == (count * ranks, count * size * ranks)
        assert (r["count"], r["bytes"], r["frees"]) == (c, b, c)
        assert r["min_bytes"] == r["max_bytes"] == size
        assert r["peak_bytes"] == live * size  # in one process
        assert r["processes"] == ranks
        assert r["byte_s"] == pytest.approx(bs, rel=0.05), name


@pytest.mark.parametrize("source", ["heap_sites.c", "heap_sites_cxx.cpp", "heap_sites_fortran.f90"])
def test_heap_sites_exact_counts_and_lifetimes(mpi, build, run_pw, source):
    prog = build(mpi, source)
    r = run_pw([*mpi.launch(2), prog, "mpi"], ["--heap"])
    truth = program_values(r.proc.stdout)
    exp = r.open()
    sites = exp.table("heap", "sites")
    check_sites(site_rows(sites, source), truth, 2)
    assert list(sites["byte_s"]) == sorted(sites["byte_s"], reverse=True)
    # the size ranges: the three sites' groups hold their allocations (and nothing else
    # of 2 MiB and 8 MiB here: MPI's own blocks are of other sizes)
    ranges = exp.table("heap", "ranges").set_index("range")
    a, c = ranges.loc["2 MiB-4 MiB"], ranges.loc["8 MiB-16 MiB"]
    assert (a["count"], a["bytes"], a["peak_bytes"]) == (200, 400 * MIB, 200 * MIB)
    assert (c["count"], c["bytes"], c["peak_bytes"]) == (14, 112 * MIB, 56 * MIB)
    assert a["byte_s"] == pytest.approx(truth["A"][2], rel=0.05)
    assert ranges.loc["64 KiB-128 KiB"]["count"] >= 20000
    procs = exp.table("heap", "per_process")
    assert sorted(procs["rank"]) == [0, 1] and set(procs["state"]) == {"complete"}
    assert (procs["untracked"] == 0).all() and (procs["sample_bytes"] == 0).all()
    assert not exp.heap.estimated
    if source.endswith(".c"):  # its program measures each site's live span too
        live, rows = program_live(r.proc.stdout), site_rows(sites, source)
        for name in SITES:
            assert rows[name]["live_s"] == pytest.approx(live[name], rel=0.05), name
        # the share of the processes' samples taken while A was live (its timeline:
        # test_heap_live.py), about the share of their measured time (ranks' spans from
        # the header) that the program's own clock gives
        span = exp.heap.processes["duration_s"].sum()
        a = rows["A"]
        assert a["live_pct_of"] == "samples"
        expected = 100 * live["A"] / span
        assert abs(a["live_pct"] - expected) <= share_bound(expected, a["live_samples"])
    if source.endswith(".c"):  # the report's section draws from the same result
        text = r.text_report()
        assert "Heap allocations (--heap)" in text and "alloc_a (heap_sites.c:" in text


def test_heap_fork_and_sigkill_keep_counts(mpi, build, run_pw):
    """A forked child's allocations are in its own record (its parent's are not), and a
    process killed by SIGKILL leaves its counts, bytes and freed objects' lifetimes."""
    prog = build(mpi, "heap_sites.c")
    r = run_pw([prog, "serial", "fork"], ["--heap"], check=False)
    assert "child" in r.proc.stdout, (r.proc.stdout, r.proc.stderr)
    truth = program_values(r.proc.stdout)
    heap = read_heap(r.exp)
    child = int(next(ln.split()[1] for ln in r.proc.stdout.splitlines() if ln.startswith("child")))
    p = heap.processes
    assert len(p) == 2 and set(p["state"]) == {"complete"}
    (ci,) = np.nonzero(p["pid"] == child)[0]
    (pi,) = np.nonzero(p["pid"] != child)[0]
    assert p["parent_pid"][ci] == p["pid"][pi]
    cs = heap.sites[heap.sites["process"] == ci]
    big = cs[cs["max"] == 8 * MIB]
    assert int(big["count"].sum()) == 3 and int(big["frees"].sum()) == 3
    whole = analyze(heap)
    parent_only = type(heap)(p[[pi]], heap.sites[heap.sites["process"] == pi], heap.ranges)
    parent_only.objects = heap.objects
    parent_only.sites["process"] = 0
    check_sites(site_rows_from(analyze(parent_only).sites), truth, 1)
    assert whole.count > analyze(parent_only).count

    r = run_pw([prog, "serial", "kill"], ["--heap"], check=False)
    assert r.proc.returncode != 0
    truth = program_values(r.proc.stdout)
    heap = read_heap(r.exp)
    assert heap.processes["state"].tolist() == ["killed"]
    check_sites(site_rows_from(analyze(heap).sites), truth, 1)


def site_rows_from(table):
    return site_rows(pd.DataFrame(table), "heap_sites.c")


def test_heap_sampling_estimates(mpi, build, run_pw):
    """--heap-sample-bytes 512 KiB: each allocation of s bytes is recorded with chance
    p = 1 - exp(-s / 512 KiB) and weighted 1/p. Site B's 10 000 blocks of 64 KiB (p =
    0.118, about 1 175 recorded): the count's relative standard error is
    sqrt((1 - p) / (n p)) = 2.7 %, allowed 5 of them (14 %); site A's (p = 0.98) 1.4 %,
    allowed 10 %; site C (p = 1 - 3e-7) is exact but for a one-in-a-million draw."""
    prog = build(mpi, "heap_sites.c")
    r = run_pw([*mpi.launch(1), prog, "mpi"], ["--heap", "--heap-sample-bytes", "524288"])
    truth = program_values(r.proc.stdout)
    exp = r.open()
    assert exp.heap.estimated
    rows = site_rows(exp.table("heap", "sites"), "heap_sites.c")
    for name, rel in (("A", 0.10), ("B", 0.14), ("C", 0.02)):
        c, b, bs = truth[name]
        assert rows[name]["count"] == pytest.approx(c, rel=rel), name
        assert rows[name]["bytes"] == pytest.approx(b, rel=rel), name
        assert rows[name]["byte_s"] == pytest.approx(bs, rel=rel + 0.05), name
    assert "estimates: one allocation per 512.0KiB sampled" in r.text_report()


@pytest.mark.parametrize("end", ["exit", "kill"])
def test_heap_threads_exact_counts(mpi, build, run_pw, end):
    """Threads allocating at once (heap_threads.c: the main thread records alone first,
    then four workers join it): every site's counts, bytes, frees and sizes are the
    program's own, and its peak lies between one thread's and all threads' live bytes.
    The threads' sums are in records of their own (the reader sums them with their
    site's), in the mapped file: a process killed by SIGKILL leaves them too."""
    prog = build(mpi, "heap_threads.c")
    r = run_pw([prog, "20000", end], ["--heap"], check=end == "exit")
    (path,) = (r.exp / "heap").glob("*.pwheap")
    head = np.fromfile(path, np.uint8)[: RECORDS["heap_header"].itemsize]
    heap = read_heap(r.exp)
    assert heap.processes["state"].tolist() == ["complete" if end == "exit" else "killed"]
    assert int(head.view(RECORDS["heap_header"])[0]["nsites"]) > len(heap.sites)
    truth = {}
    for line in r.proc.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] in ("M", "W", "C"):
            truth[f[0]] = (int(f[1]), int(f[2]))
    assert truth["M"] == (21000, 21000 * 40) and truth["W"] == (80000, 80000 * 96)
    result = analyze(heap)
    sites, procs = pd.DataFrame(result.sites), pd.DataFrame(result.per_process)
    mine = np.array([str(f).endswith("heap_threads.c") for f in sites["file"]])
    for name, line in site_lines("heap_threads.c").items():
        size, (c, b) = {"M": 40, "W": 96, "C": 300}[name], truth[name]
        rows = sites[mine & (sites["line"] == line).to_numpy()]
        assert len(rows) == (2 if name == "M" else 1), name  # M: main_pairs' two callers
        got = (rows["count"].sum(), rows["bytes"].sum(), rows["frees"].sum())
        assert got == (c, b, c), name
        assert (rows["min_bytes"] == size).all() and (rows["max_bytes"] == size).all(), name
        # the peaks: exact while one thread records; with several, within the bound of
        # what the threads keep unpublished (docs/heap.md "Threads": these sites' few
        # hundred bytes a thread never reach a publication, so their peak may be 0)
        bound = int(procs["peak_bound_bytes"][0])
        assert 0 < bound <= 5 * (64 << 10)
        if name == "M":  # one live at a time: exact at the caller it used alone (the first)
            assert rows["peak_bytes"].max() == 40 and (rows["peak_bytes"] >= 40 - bound).all()
        else:  # between one thread's and all four threads' live objects
            live = 16 * 96 if name == "W" else 300
            assert live - bound <= rows["peak_bytes"].iloc[0] <= 4 * live + bound, name


def test_heap_coarse_clock_lifetimes_and_unwound_paths(build, run_pw):
    """programs/heap_lifetimes.c, built with -O2 (no frame pointers): lifetimes timed by
    the coarse clock (CLOCK_MONOTONIC_COARSE, lifetimes quantised to the kernel's tick)
    against the program's own CLOCK_MONOTONIC: site S's objects live about 0.1-0.3 ms (a
    tick is 4 ms: nearly all of them begin and end within one tick, and the estimate is
    the live bytes sampled at each tick), site L's 30-480 ms; both within 5 %. Counts and
    bytes are exact. Site P's call path (outer -> middle -> inner -> malloc) comes out frame
    by frame from the .eh_frame rules, none of the program's paths needing backtrace()."""
    prog = build(None, "heap_lifetimes.c", ("-O2",))
    r = run_pw([prog], ["--heap"])
    truth = {}
    for line in r.proc.stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] in ("S", "L"):
            truth[f[0]] = (int(f[1]), int(f[2]), float(f[3]))
    exp = r.open()
    sites = exp.table("heap", "sites")
    lines = site_lines("heap_lifetimes.c")
    mine = np.array([str(f).endswith("heap_lifetimes.c") for f in sites["file"]])
    for name in ("S", "L"):  # -O2 may copy the calling loop: a site of one or two paths
        c, b, bs = truth[name]
        rows = sites[mine & (sites["line"] == lines[name]).to_numpy()]
        assert (rows["count"].sum(), rows["bytes"].sum(), rows["frees"].sum()) == (c, b, c)
        assert rows["byte_s"].sum() == pytest.approx(bs, rel=0.05), name
    assert truth["S"][0] > 10000  # short-lived: many objects, each far under a tick
    assert truth["S"][2] / truth["S"][1] < 1e-3  # their mean life (s): under a quarter tick
    want = " < ".join(
        f"{fn} (heap_lifetimes.c:{lines[m]})"
        for fn, m in (("inner", "P0"), ("middle", "P1"), ("outer", "P2"), ("main", "P3"))
    )
    assert list(sites["path"][mine & (sites["line"] == lines["P0"]).to_numpy()]) == [want]
    procs = exp.table("heap", "per_process")
    res = time.clock_getres(6)  # CLOCK_MONOTONIC_COARSE (<linux/time.h>; not in time)
    assert procs["tick_res_ns"][0] == (round(res * 1e9) if res <= 0.004 else 0)
    assert procs["unwinds"][0] >= 3 and procs["backtraces"][0] == 0


def test_heap_threads_at_once_peaks(build, run_pw):
    """programs/heap_threads_peak.c: four threads started together by a barrier churn
    malloc(64)/free pairs (site P), renew rings of 1000 blocks of 200 bytes (site R) and,
    between two barriers, each hold an array of 4 MiB for 0.2 s (site L). Threads recording
    at once keep their live-bytes changes in their own memory and publish them when one
    reaches header.publish_bytes, or at once for an allocation of at least that much
    (docs/heap.md): counts and bytes stay exact, the arrays' site and size range have their
    exact peak (all four live at once), and site R's and the process's peaks lie within
    recorders x publish_bytes of the program's own count of live bytes (atomics, updated
    right after each allocation and before each free), plus, for the process, 64 KiB for
    the C library's own blocks the program does not count (stdout's buffer)."""
    prog = build(None, "heap_threads_peak.c")
    r = run_pw([prog], ["--heap"])
    truth = {ln.split()[0]: ln.split()[1:] for ln in r.proc.stdout.splitlines()}
    exp = r.open()
    procs = exp.table("heap", "per_process")
    bound = int(procs["peak_bound_bytes"][0])
    assert procs["recorders"][0] >= 4 and bound == procs["recorders"][0] * (64 << 10)
    sites = exp.table("heap", "sites")
    rows = site_rows(sites, "heap_threads_peak.c")
    for name, size in (("P", 64), ("R", 200), ("L", 4 * MIB)):
        c, b = int(truth[name][0]), int(truth[name][1])
        assert (rows[name]["count"], rows[name]["bytes"], rows[name]["frees"]) == (c, b, c)
        assert rows[name]["min_bytes"] == rows[name]["max_bytes"] == size, name
    assert rows["L"]["peak_bytes"] == int(truth["L"][2]) == 16 * MIB
    assert rows["L"]["byte_s"] == pytest.approx(float(truth["L"][3]), rel=0.05)
    big = exp.table("heap", "ranges").set_index("range").loc["4 MiB-8 MiB"]
    assert (big["count"], big["bytes"], big["peak_bytes"]) == (4, 16 * MIB, 16 * MIB)
    assert big["byte_s"] == pytest.approx(float(truth["L"][3]), rel=0.05)
    assert abs(rows["R"]["peak_bytes"] - int(truth["R"][2])) <= bound
    assert abs(int(procs["peak_bytes"][0]) - int(truth["T"][0])) <= bound + (64 << 10)
    assert "peaks within" in r.text_report()

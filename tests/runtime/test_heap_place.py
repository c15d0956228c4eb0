"""Heap placement (--place; runtime/modules/heap_place.c, docs/placement.md), under each
MPI. programs/heap_place.c: site A 100 x 2 MiB (all live at once), B 10 000 x 64 KiB, C 7 x
8 MiB (all live at once), D a calloc of 1000 x 2 KiB, R a block of 2 MiB moved by realloc
to 8 MiB (R8) and back to 3 MiB (R3); the program writes and checks every byte (its "check
ok") and reads its own huge pages (/proc/self/smaps_rollup). programs/heap_sites_fortran.f90:
the same A, B, C by ALLOCATE. This machine has one NUMA node and no high-bandwidth tier: the
fast tier is node 0 (--tier-nodes fast=0, an mbind read back as bound there) and/or the
huge-page emulation (verified in smaps)."""

import numpy as np
import pandas as pd

from harness import bare, site_lines
from perfweave.analysis.heap import analyze
from perfweave.readers import heap as heap_reader
from perfweave.readers.heap import read_heap
from perfweave.report.sections.heap import SECTION

MIB = 1 << 20
FAST = ["--tier-nodes", "fast=0"]
EMULATE = ["--tier-emulate", "hugepage"]


def rows(sites, source):
    """The sites table's row (a Series) of each marked line of source."""
    out = {}
    for name, line in site_lines(source).items():
        m = np.array([str(f).endswith(source) for f in sites["file"]]) & (sites["line"] == line)
        assert m.sum() <= 1, (name, m.sum())
        out[name] = sites[np.asarray(m)].iloc[0] if m.any() else None
    return out


def placed(row):
    return (int(row["placed_count"]), int(row["placed_bytes"]))


def fallback(row):
    return (int(row["fallback_count"]), int(row["fallback_bytes"]))


def program_lines(stdout, word):
    return [ln.split() for ln in stdout.splitlines() if ln.startswith(word + " ")]


def test_place_size_range_c(mpi, build, run_pw):
    """size=1M:5M puts exactly site A's 100 x 2 MiB per rank in the arena (and D's calloc,
    judged by its 2 048 000 bytes in all, and R's 2 MiB and 3 MiB blocks), B and C stay
    default; the arena reads back as bound to node 0 (get_mempolicy, every present page on
    node 0 by move_pages, numa_maps "bind:0"), its huge pages are the process's own (the
    program's smaps_rollup), every byte the program wrote is intact across the tiers, and
    its output and exit status are those of a run without perfweave."""
    prog = build(mpi, "heap_place.c")
    command = [*mpi.launch(2), prog, "mpi"]
    r = run_pw(command, ["--place", "size=1M:5M,tier=fast", *FAST, *EMULATE])
    plain = bare(command)
    assert plain.returncode == r.proc.returncode == 0, plain.stderr
    checks = sorted(ln for ln in r.proc.stdout.splitlines() if ln.startswith("check"))
    assert (
        checks
        == ["check ok"] * 2
        == sorted(ln for ln in plain.stdout.splitlines() if ln.startswith("check"))
    )
    exp = r.open()
    sites = exp.table("heap", "sites")
    s = rows(sites, "heap_place.c")
    assert placed(s["A"]) == (200, 400 * MIB) and fallback(s["A"]) == (0, 0)
    assert s["A"]["rule"] == "size=1M:5M"
    for name in ("B", "C", "R8"):
        assert placed(s[name]) == (0, 0) and fallback(s[name]) == (0, 0), name
        assert s[name]["rule"] == ""
    assert placed(s["D"]) == (2, 2 * 2048000)  # calloc by its total size, not 2 KiB
    assert placed(s["R"]) == (2, 4 * MIB) and placed(s["R3"]) == (2, 6 * MIB)
    (rule,) = exp.table("heap", "placement").to_dict("records")
    assert rule["rule"] == "size=1M:5M" and rule["processes"] == rule["verified_processes"] == 2
    assert (rule["count"], rule["bytes"]) == (
        int(sites["placed_count"].sum()),
        int(sites["placed_bytes"].sum()),
    )
    assert rule["fallback_count"] == 0
    assert (rule["policy"], rule["read_policy"], rule["read_nodes"]) == ("bind", "bind", "0")
    assert rule["numa_policy"] == "bind:0"
    written = 2 * (200 * MIB + 2048000 + 3 * MIB)  # live at the program's check, all written
    assert rule["on_tier"] == rule["resident"] >= written
    assert rule["verified_bytes"] == rule["on_tier"]
    assert rule["sampled_pages"] == rule["sampled_on_tier"] > 0
    # madvise mode: the arenas are the only huge-page memory; the program read its own
    # after its last placed allocation (the MPI library may place a block of 1 MiB later)
    own = sum(int(f[2]) * 1024 for f in program_lines(r.proc.stdout, "huge"))
    # (how many the kernel gave depends on its free memory's fragmentation: 244 of 400 MiB
    # once after the rest of the suite; what is checked is that the read-back is the
    # program's own)
    assert own > 0 and own <= rule["huge_bytes"] <= own + 2 * 4 * MIB
    tier = exp.heap.processes
    assert set(tier["tier_nodes"]) == {"0"} and set(tier["emulate"]) == {"hugepage"}
    text = r.text_report()
    assert "Placement (--place): fast tier emulated by hugepage arenas on nodes 0" in text


def test_place_fortran_line_and_size(mpi, build, run_pw):
    """Fortran ALLOCATE: a per-site rule by FILE:LINE (site C's line, 8 MiB blocks, outside
    the size range) and size=1M:5M (site A): exactly A's 100 x 2 MiB and C's 7 x 8 MiB per
    rank are placed, B's are not."""
    source = "heap_sites_fortran.f90"
    prog = build(mpi, source)
    line_c = site_lines(source)["C"]
    rule_c = f"site={source}:{line_c},tier=fast"
    r = run_pw(
        [*mpi.launch(2), prog, "mpi"], ["--place", rule_c, "--place", "size=1M:5M,tier=fast", *FAST]
    )
    exp = r.open()
    s = rows(exp.table("heap", "sites"), source)
    assert placed(s["A"]) == (200, 400 * MIB) and s["A"]["rule"] == "size=1M:5M"
    assert placed(s["C"]) == (14, 14 * 8 * MIB) and s["C"]["rule"] == f"site={source}:{line_c}"
    assert placed(s["B"]) == (0, 0) and s["B"]["rule"] == ""
    rules = exp.table("heap", "placement").set_index("rule")
    c = rules.loc[f"site={source}:{line_c}"]
    assert (c["count"], c["bytes"], c["fallback_count"]) == (14, 14 * 8 * MIB, 0)
    assert (c["read_policy"], c["read_nodes"]) == ("bind", "0")
    assert rules.loc["size=1M:5M"]["read_policy"] == "bind"


def test_place_function_rule_cap_preferred(mpi, build, run_pw):
    """site=alloc_c with cap=20M and policy=preferred: site C's 7 blocks of 8 MiB are live
    at once, so exactly 2 fit under the cap and 5 fall back, counted; nothing else matches;
    the arena reads back as preferring node 0; the data stays intact."""
    prog = build(mpi, "heap_place.c")
    r = run_pw(
        [*mpi.launch(1), prog, "mpi"],
        ["--place", "site=alloc_c,tier=fast,policy=preferred,cap=20M", *FAST],
    )
    assert "check ok" in r.proc.stdout
    exp = r.open()
    s = rows(exp.table("heap", "sites"), "heap_place.c")
    assert placed(s["C"]) == (2, 16 * MIB) and fallback(s["C"]) == (5, 40 * MIB)
    for name in ("A", "B", "D", "R"):
        assert placed(s[name]) == fallback(s[name]) == (0, 0), name
    (rule,) = exp.table("heap", "placement").to_dict("records")
    assert (rule["rule"], rule["count"], rule["bytes"]) == ("site=alloc_c", 2, 16 * MIB)
    assert (rule["fallback_count"], rule["fallback_bytes"]) == (5, 40 * MIB)
    assert rule["peak_bytes"] == 16 * MIB
    assert (rule["policy"], rule["read_policy"], rule["read_nodes"]) == (
        "preferred",
        "preferred",
        "0",
    )
    assert rule["numa_policy"] == "prefer:0" and rule["on_tier"] >= 16 * MIB
    assert exp.heap.processes["place_cap"].tolist() == [20 * MIB]


def test_place_fork_and_sigkill(mpi, build, run_pw):
    """A forked child places into its copy of the arenas and counts in its own record (its
    3 blocks, freed; not its parent's); a process killed by SIGKILL leaves what it placed
    (its arenas not read back: the report says so). Serial runs of the MPI program, read as
    tests/runtime/test_heap.py reads its own (the heap reader and analysis)."""
    prog = build(mpi, "heap_place.c")
    opts = ["--place", "size=1M:5M,tier=fast", *EMULATE]
    r = run_pw([prog, "serial", "fork"], opts)
    (child,) = program_lines(r.proc.stdout, "child")
    assert child[2] == "0"  # the child's bytes were intact
    heap = read_heap(r.exp)
    p = heap.processes
    (ci,) = np.nonzero(p["pid"] == int(child[1]))[0]
    (pi,) = np.nonzero(p["pid"] != int(child[1]))[0]
    pl = pd.DataFrame(heap.placement).set_index("process")
    assert (pl.loc[ci, "count"], pl.loc[ci, "bytes"], pl.loc[ci, "frees"]) == (3, 6 * MIB, 3)
    assert pl.loc[pi, "count"] >= 100 + 1 + 2  # A, D, R, R3
    assert pl.loc[ci, "verified"] and pl.loc[ci, "huge_bytes"] > 0

    r = run_pw([prog, "serial", "kill"], opts, check=False)
    assert r.proc.returncode != 0 and "check ok" in r.proc.stdout
    heap = read_heap(r.exp)
    assert heap.processes["state"].tolist() == ["killed"]
    result = analyze(heap)
    s = rows(pd.DataFrame(result.sites), "heap_place.c")
    assert placed(s["A"]) == (100, 200 * MIB) and placed(s["D"]) == (1, 2048000)
    (rule,) = pd.DataFrame(result.placement).to_dict("records")
    assert rule["verified_processes"] == 0 and rule["count"] >= 100 + 1 + 2
    view = type("View", (), {"width": 120, "max_rows": 10})()
    text = "\n".join(SECTION.text({"heap": result.to_json()}, view))
    assert "size=1M:5M: 1 process(es) not read back (killed)" in text


def in_range(size):
    return MIB <= size <= 5 * MIB


def program_allocs(stdout):
    """The program's "alloc NAME COUNT SIZE" lines: NAME -> (count, size), counts summed
    over the ranks."""
    out = {}
    for _, name, count, size in program_lines(stdout, "alloc"):
        c, _ = out.get(name, (0, 0))
        out[name] = (c + int(count), int(size))
    return out


def own_lines(stdout):
    return sorted(
        ln
        for ln in stdout.splitlines()
        if ln.split()[:1] in (["alloc"], ["align"], ["err"], ["check"])
    )


def test_place_aligned_allocators_c(mpi, build, run_pw, tmp_path):
    """posix_memalign (64 B and 2 MiB alignments), aligned_alloc, memalign, valloc and
    pvalloc under size=1M:5M and a function rule (site=alloc_big, 8 MiB blocks 2 MiB
    aligned): exactly the program's blocks of 1 to 5 MiB asked are placed (pvalloc judged by
    the size asked), the function's by its rule, the 64 KiB ones not; every pointer aligned
    as asked (the program checks), every byte intact across a realloc out of the arena and
    back, malloc_usable_size covering the block (pvalloc's to the page); a 2 GiB alignment
    (past the arenas' 1 GiB) and alignments that are not powers of two go to the C library,
    counted as fallbacks for their alignment; the refused and failing calls return what they
    return without perfweave (the program prints return codes and errno: the same lines as
    a bare run); both arenas read back as bound to node 0. The records, rewritten as
    version 2, read as they were."""
    source = "heap_aligned.c"
    prog = build(mpi, source)
    command = [*mpi.launch(2), prog, "mpi"]
    rules = ["--place", "size=1M:5M,tier=fast", "--place", "site=alloc_big,tier=fast"]
    r = run_pw(command, [*rules, *FAST])
    plain = bare(command)
    assert plain.returncode == r.proc.returncode == 0, plain.stderr
    assert own_lines(r.proc.stdout) == own_lines(plain.stdout)
    assert own_lines(r.proc.stdout).count("check ok") == 2
    assert all(f[3] == "ok" for f in program_lines(r.proc.stdout, "align"))
    errs = {f[1]: f[2:] for f in program_lines(r.proc.stdout, "err")}
    assert errs["posix_memalign_24"] == errs["posix_memalign_4"] == ["22", "0", "1"]
    assert errs["posix_memalign_kept"] == ["0", "1234", "0"]  # placed, errno kept
    truth = program_allocs(r.proc.stdout)
    assert truth["P2M"] == (6, 2 * MIB) and truth["PV"] == (4, MIB + 100)
    exp = r.open()
    sites = exp.table("heap", "sites")
    s = rows(sites, source)
    align_fallback = ("G2", "OM", "OA")  # 2 GiB; 48 and 24, not powers of two
    for name, (count, size) in truth.items():
        row = s[name]
        if count == 0:
            assert row is None or placed(row) == fallback(row) == (0, 0), name
        elif name == "BIG":
            assert placed(row) == (count, count * size) and row["rule"] == "site=alloc_big"
        elif name in align_fallback:
            assert placed(row) == (0, 0) and fallback(row) == (count, count * size), name
            assert row["rule"] == "size=1M:5M", name
        elif in_range(size):
            assert placed(row) == (count, count * size), name
            assert fallback(row) == (0, 0) and row["rule"] == "size=1M:5M", name
        else:  # S (64 KiB), R16 (16 MiB)
            assert placed(row) == fallback(row) == (0, 0) and row["rule"] == "", name
    assert s["P2M"]["allocator"] == "posix_memalign" and s["PV"]["allocator"] == "pvalloc"
    # the program's own placed blocks, exactly (the MPI library may place blocks of its own)
    mine = np.array([str(f).endswith(source) for f in sites["file"]])
    want = [(c, c * n) for k, (c, n) in truth.items() if in_range(n) and k not in align_fallback]
    size_rule = sites["rule"] == "size=1M:5M"
    assert int(sites["placed_bytes"][mine & size_rule].sum()) == sum(b for _, b in want)
    assert int(sites["placed_count"][mine & size_rule].sum()) == sum(c for c, _ in want)
    table = exp.table("heap", "placement").set_index("rule")
    size, big = table.loc["size=1M:5M"], table.loc["site=alloc_big"]
    assert (size["count"], size["bytes"]) == (
        int(sites["placed_count"][size_rule].sum()),
        int(sites["placed_bytes"][size_rule].sum()),
    )
    fell = [truth[k] for k in align_fallback if truth[k][0]]
    assert size["fallback_count"] == size["align_fallback_count"] == sum(c for c, _ in fell)
    assert size["align_fallback_bytes"] == sum(c * n for c, n in fell)
    assert (big["count"], big["bytes"], big["fallback_count"]) == (4, 32 * MIB, 0)
    for rule in (size, big):
        assert (rule["read_policy"], rule["read_nodes"], rule["numa_policy"]) == (
            "bind",
            "0",
            "bind:0",
        )
        assert rule["verified_processes"] == 2
    assert size["on_tier"] == size["resident"] >= 2 * 4 * 3 * MIB  # P64's, all written
    assert big["on_tier"] == big["resident"] >= 2 * 2 * 8 * MIB
    assert f"size=1M:5M: {size['align_fallback_count']} fallbacks (" in r.text_report()
    check_version_2(r.exp, tmp_path)


def check_version_2(exp, tmp_path):
    """The experiment's heap records rewritten as version 2 (no threads' records, heap_rule
    without its last two fields) read as they were, their alignment fallbacks zero."""
    hr = heap_reader
    old = tmp_path / "v2"
    (old / "heap").mkdir(parents=True)
    for f in (exp / "heap").glob("*.pwheap"):
        raw = np.fromfile(f, np.uint8)
        h = raw[: hr.HEADER.itemsize].view(hr.HEADER)[0]
        at = hr._page(hr.HEADER.itemsize) + hr._page(hr.OBJECT.itemsize * int(h["max_objects"]))
        at += hr._page(hr.SITE.itemsize * int(h["max_sites"]))
        threads = hr._page(hr.THREAD.itemsize * int(h["max_threads"]))  # not in version 2
        raw = np.concatenate([raw[:at], raw[at + threads :]])
        part = hr._page(hr.RULE.itemsize * hr.HEAP_MAX_RULES)
        assert part == hr._page(hr.RULE_V2.itemsize * hr.HEAP_MAX_RULES)
        rules = (
            raw[at : at + hr.RULE.itemsize * int(h["nrules"])].reshape(int(h["nrules"]), -1).copy()
        )
        raw[at : at + part] = 0
        v2 = rules[:, : hr.RULE_V2.itemsize].ravel()
        raw[at : at + len(v2)] = v2
        raw[: hr.HEADER.itemsize].view(hr.HEADER)["version"] = 2
        raw.tofile(old / "heap" / f.name)
    new, was = read_heap(exp).placement, read_heap(old).placement
    assert len(new) == len(was) > 0 and (was["align_fallback_count"] == 0).all()
    for k in hr.RULE_V2.names:
        if k in was.dtype.names:
            assert (was[k] == new[k]).all(), k


def test_place_aligned_new_cxx(mpi, build, run_pw):
    """C++17 aligned new (libstdc++'s operator new(size_t, std::align_val_t), through
    aligned_alloc): new of a struct alignas(64) of 3 MiB, new[] of 2 MiB of alignas(64)
    cells and operator new[](4 MiB, std::align_val_t{2 << 20}) are placed by size=1M:5M,
    exactly the program's blocks, each aligned as asked (the program checks), the 64 KiB
    new[] not; delete and delete[] free them from the arena; the arena reads back as bound
    to node 0; the program's output is that of a bare run."""
    source = "heap_aligned_cxx.cpp"
    prog = build(mpi, source)
    command = [*mpi.launch(2), prog, "mpi"]
    r = run_pw(command, ["--place", "size=1M:5M,tier=fast", *FAST])
    plain = bare(command)
    assert plain.returncode == r.proc.returncode == 0, plain.stderr
    assert own_lines(r.proc.stdout) == own_lines(plain.stdout)
    assert own_lines(r.proc.stdout).count("check ok") == 2
    assert all(f[3] == "ok" for f in program_lines(r.proc.stdout, "align"))
    truth = program_allocs(r.proc.stdout)
    assert truth == {"NB": (4, 3 * MIB), "NC": (4, 2 * MIB), "N2M": (4, 4 * MIB), "NS": (6, 65536)}
    exp = r.open()
    sites = exp.table("heap", "sites")
    s = rows(sites, source)
    for name in ("NB", "NC", "N2M"):
        count, size = truth[name]
        assert placed(s[name]) == (count, count * size) and fallback(s[name]) == (0, 0), name
        assert s[name]["rule"] == "size=1M:5M" and s[name]["allocator"] == "aligned_alloc", name
        assert s[name]["frees"] == count, name
    assert placed(s["NS"]) == (0, 0) and s["NS"]["rule"] == ""
    (rule,) = exp.table("heap", "placement").to_dict("records")
    assert rule["fallback_count"] == rule["align_fallback_count"] == 0
    assert rule["count"] >= 12 and rule["bytes"] >= 2 * (6 + 4 + 8) * MIB
    assert (rule["read_policy"], rule["read_nodes"], rule["numa_policy"]) == ("bind", "0", "bind:0")
    assert rule["on_tier"] == rule["resident"] >= 2 * (6 + 4 + 8) * MIB  # all live at once, written

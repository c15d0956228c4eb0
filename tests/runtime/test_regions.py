"""The regions module (runtime/modules/regions.c; docs/regions.md): the program's regions,
phases, measurement off and MPI_Pcontrol, declared through include/perfweave/perfweave.h
(C, C++) and `use perfweave` (Fortran), found through pkg-config.

Ground truth is the program's own: it reads CLOCK_MONOTONIC (the runtime's clock) just
before and just after each begin and end, so a recorded interval's begin lies between its
two reads and its end between the other two: summed over a name, the recorded inclusive
time lies in [sum(before end - after begin), sum(after end - before begin)] exactly (no
tolerance; 1 us of slack per interval for the conversions). The Fortran program reads
MPI_Wtime, another clock: 2 % plus 20 us of slack. Counts (intervals, MPI calls inside,
MPI calls of the off windows) are exact. Sampled shares are bounds (see each)."""

import json
import os
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

import perfweave
from harness import (
    PERFWEAVE,
    bare,
    by_name,
    rank_counts,
    reported,
    sampled_life,
    share_bound,
    tree_nodes,
)
from perfweave.readers.experiment import open_experiment

PKG = Path(perfweave.__file__).parent


def pkg_config(*args):
    env = dict(os.environ, PKG_CONFIG_PATH=str(PKG / "lib" / "pkgconfig"))
    res = subprocess.run(
        ["pkg-config", *args, "perfweave"], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0, res.stderr
    return shlex.split(res.stdout)


def program_lines(stdout):
    """{(rank, name): {count, outer_ns, inner_ns, mpi_calls, ...}} of the program's lines."""
    out = {}
    for line in stdout.splitlines():
        f = line.split()
        if f[0] != "rank" or len(f) < 5 or f[3] != "count":
            continue
        name_end = f.index("count")
        key = (int(f[1]), " ".join(f[2:name_end]))
        out[key] = {f[i]: int(f[i + 1]) for i in range(name_end, len(f) - 1, 2)}
    return out


def check_times(iv, truth, slack_ns):
    """Recorded intervals of one (rank, name) against the program's bounds."""
    assert len(iv) == truth["count"]
    total = int((iv["t_end"] - iv["t_begin"]).sum())
    slack = slack_ns(truth)
    assert truth["inner_ns"] - slack <= total <= truth["outer_ns"] + slack


def exact_slack(truth):
    return 1000 * truth["count"]


def test_regions_c_mpi(mpi, build, run_pw, tmp_path):
    """Phases (one begun before MPI_Init), nested regions with MPI inside, a thread's own
    regions, an end naming no open region, MPI_Pcontrol(0) and (3), perfweave_measure_off:
    the intervals, their MPI time and calls, the profile without the off windows' calls,
    no samples while off, and the trace's regions (Chrome export)."""
    steps = 10
    prog = build(mpi, "regions_mpi.c", tuple(pkg_config("--cflags")) + ("-pthread",))
    r = run_pw(mpi.launch(2) + [prog, steps], ["--sample", "--trace"])
    truth = program_lines(r.proc.stdout)
    exp = perfweave.open(r.exp)
    reg = exp.regions
    iv = reg.intervals
    assert sorted({p.rank for p in reg.processes}) == [0, 1]
    for p in reg.processes:
        assert p.unmatched_ends == steps  # perfweave_region_end("not-open") in each step
        assert p.dropped == 0 and p.state == "complete"
    for (rank, name), t in truth.items():
        mine = iv[(iv["rank"] == rank) & (iv["name"] == name)]
        check_times(mine, t, exact_slack)
        assert not mine["open"].any()
        if name in ("halo", "pcontrol 3"):
            assert int(mine["mpi_calls"].sum()) == t["mpi_calls"]
        if name == "halo":  # inside the program's own timing of its calls
            assert 0 < int(mine["mpi_ns"].sum()) <= t["mpi_ns"]
    for rank in (0, 1):
        mine = iv[iv["rank"] == rank]
        kinds = {n: set(mine["kind"][mine["name"] == n]) for n in set(mine["name"])}
        assert kinds == {
            "setup": {"phase"}, "solve": {"phase"}, "pcontrol 3": {"phase"},
            "step": {"region"}, "halo": {"region"}, "work": {"region"},
            "spinning": {"region"}, "worker": {"region"}, "off": {"off"},
        }  # fmt: skip
        depth = {n: set(mine["depth"][mine["name"] == n].tolist()) for n in ("step", "halo")}
        assert depth == {"step": {0}, "halo": {1}}
        # the thread's regions are in its own thread, not the main one's
        main = set(mine["thread"][mine["name"] == "step"].tolist())
        assert len(main) == 1 and set(mine["thread"][mine["name"] == "worker"]) - main
        step = mine[mine["name"] == "step"]
        halo = mine[mine["name"] == "halo"]
        assert int(step["mpi_calls"].sum()) == int(halo["mpi_calls"].sum()) == 2 * steps
        # measurement off: two windows (MPI_Pcontrol(0) and perfweave_measure_off)
        assert (mine["kind"] == "off").sum() == 2
    # the profile: 3 barriers recorded per rank, the 5 + 1 of the off windows not
    prof = exp.profile
    (bar,) = [i for i in prof.function_ids("mpi") if prof.functions[i] == "MPI_Barrier"]
    s = prof.sites[prof.sites["fn"] == bar]
    assert {k: int(s["count"][s["rank"] == k].sum()) for k in (0, 1)} == {0: 3, 1: 3}
    (allr,) = [i for i in prof.function_ids("mpi") if prof.functions[i] == "MPI_Allreduce"]
    s = prof.sites[prof.sites["fn"] == allr]
    assert int(s["count"][s["rank"] == 0].sum()) == steps + 4
    # samples: none while measurement was off; the spin of the same length beside it has
    # some (150 ms at the default interval), nearly all computing
    for p in open_experiment(r.exp).samples:
        tids = np.array([th["tid"] for th in p.meta["threads"]])
        t = p.records["t"]
        tid = tids[p.records["thread"]]
        rows = iv[(iv["rank"] == p.rank) & (iv["kind"] == "off")]
        for o in rows:
            assert not ((tid == o["thread"]) & (t >= o["t_begin"]) & (t < o["t_end"])).any()
    rep = r.report()["regions"]
    by = {(x["kind"], x["name"]): x for x in rep["regions"]}
    spinning = by[("region", "spinning")]
    assert spinning["ranks"] == 2 and spinning["count"] == 2
    assert spinning["samples"] > 0 and spinning["compute_samples_pct"] >= 80
    assert by[("region", "halo")]["mpi_calls"] == 4 * steps
    assert rep["unmatched_ends"] == 2 * steps
    assert "Regions and phases" in r.text_report()
    # the intervals as a table of the Python API
    df = exp.table("regions", "intervals")
    assert len(df) == len(iv) and {"rank", "thread", "name", "kind", "depth"} <= set(df.columns)
    # the trace: each region and phase an OTF2-style region of its own in the Chrome export
    out = tmp_path / "trace.json"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "chrome", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    events = json.loads(out.read_text())["traceEvents"]
    for rank in (0, 1):
        names = [e["name"] for e in events if e.get("pid") == rank and e.get("ph") == "X"]
        counts = {n: names.count(n) for n in ("step", "halo", "work", "solve", "worker")}
        assert counts == {"step": steps, "halo": steps, "work": steps, "solve": 1, "worker": 7}
        assert names.count("MPI_Barrier") == 3  # none of the off windows'
        assert names.count("setup") == 1  # begun before MPI_Init: entered at the trace's start
        check_balanced_at_start(r.exp, rank, ["setup"])
    # and in the OTF2 export: one OTF2 region of the user paradigm per name
    import otf2

    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "otf2", "-o", str(tmp_path / "otf2")]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    enters = {}
    with otf2.reader.open(str(tmp_path / "otf2" / "traces.otf2")) as tr:
        for loc, e in tr.events:
            if isinstance(e, otf2.events.Enter) and e.region.paradigm == otf2.Paradigm.USER:
                key = (loc.group.name, e.region.name)
                enters[key] = enters.get(key, 0) + 1
    for rank in (0, 1):
        got = {n: enters.get((f"MPI Rank {rank}", n), 0) for n in ("step", "halo", "worker")}
        assert got == {"step": steps, "halo": steps, "worker": 7}


def check_balanced_at_start(exp, rank, before):
    """Rank's trace (perfweave.open().traces): in each thread each region's ENTERs and
    LEAVEs pair up, a LEAVE never before its ENTER; the regions open when the trace began
    (before, outermost first) are the first marks of their thread, flagged AT_START, at
    or before its first call; no other mark is flagged so."""
    from perfweave.dtypes import EVENT_FLAGS, EVENT_TYPES

    rr = perfweave.open(exp).traces.rank(rank)
    rec, thread = rr.records, rr.thread
    names = [x["name"] for x in rr.meta["regions"]]
    enter, leave, call = (EVENT_TYPES[k] for k in ("ENTER", "LEAVE", "CALL"))
    is_mark = np.isin(rec["type"], [enter, leave])
    at_start = is_mark & ((rec["flags"] & EVENT_FLAGS["AT_START"]) != 0)
    (th,) = set(thread[at_start].tolist())
    mine = rec[is_mark & (thread == th)]
    first = mine[: len(before)]
    assert [names[c] for c in first["comm"].tolist()] == before
    assert (first["type"] == enter).all() and at_start.sum() == len(before)
    calls = rec[(rec["type"] == call) & (thread == th)]
    assert int(first["t0"].max()) <= int(calls["t0"].min())
    for t in set(thread[is_mark].tolist()):
        depth = {}
        for typ, c in zip(*(rec[is_mark & (thread == t)][k].tolist() for k in ("type", "comm"))):
            depth[c] = depth.get(c, 0) + (1 if typ == enter else -1)
            assert depth[c] >= 0, names[c]
        assert not any(depth.values())


def test_regions_fortran(mpi, build, run_pw):
    """`use perfweave` (the module and libperfweave-api.a from pkg-config): regions and a
    phase with their counts, MPI calls inside and times; a name's trailing blanks go."""
    flags = tuple(pkg_config("--cflags")) + tuple(pkg_config("--libs"))
    prog = build(mpi, "regions_fortran.f90", flags)
    r = run_pw(mpi.launch(2) + [prog])
    truth = program_lines(r.proc.stdout)
    iv = perfweave.open(r.exp).regions.intervals
    assert set(iv["name"]) == {"fstep", "fhalo", "fsolve"}
    for (rank, name), t in truth.items():
        mine = iv[(iv["rank"] == rank) & (iv["name"] == name)]
        check_times(mine, t, lambda t: 0.02 * t["outer_ns"] + 20000 * t["count"])
        assert int(mine["mpi_calls"].sum()) == t["mpi_calls"]
        assert set(mine["kind"]) == {"phase" if name == "fsolve" else "region"}


@pytest.mark.parametrize(
    "source,link",
    [
        ("regions_serial.c", ("-pie", "-fPIE", "-pthread")),
        ("regions_serial.c", ("-no-pie", "-Wl,-z,now", "-pthread")),
        ("regions_cxx.cpp", ()),
    ],
)
def test_regions_without_perfweave(build_dir, run_pw, source, link):
    """Built with the header and nothing else: the same output and exit status without
    perfweave (the weak reference stays null) as with it, and under `perfweave run` (no
    MPI) its regions are recorded: the runtime's definition is found by PIE and non-PIE
    executables, bound at once (-z now) or lazily."""
    src = Path(__file__).parent / "programs" / source
    exe = build_dir / f"{src.stem}{''.join(link).replace(',', '_')}"
    cc = "g++" if source.endswith(".cpp") else "gcc"
    subprocess.run(
        [cc, "-O2", "-o", str(exe), str(src), *pkg_config("--cflags"), *link], check=True
    )
    ref = bare([exe])
    r = run_pw([exe], check=False)
    assert (r.proc.stdout, r.proc.returncode) == (ref.stdout, ref.returncode)
    assert ref.returncode == (7 if source.endswith(".c") else 0)
    reg = perfweave.open(r.exp).regions
    iv = reg.intervals
    names = {n: int((iv["name"] == n).sum()) for n in set(iv["name"])}
    if source.endswith(".cpp"):
        assert names == {"cxx-sum": 1}
        return
    assert names == {"outer": 20, "inner": 60, "thread-work": 5, "setup": 1, "solve": 1, "off": 1}
    (p,) = reg.processes
    assert (p.rank, p.unmatched_ends) == (-1, 1)
    assert (
        len(
            set(iv["thread"][iv["name"] == "thread-work"])
            | set(iv["thread"][iv["name"] == "outer"])
        )
        == 2
    )
    # a phase's begin ends the open one: setup ends where solve begins
    (setup,) = iv[iv["name"] == "setup"]
    (solve,) = iv[iv["name"] == "solve"]
    assert setup["t_end"] <= solve["t_begin"]


def test_filter_leaves_calls_and_regions_out_of_the_trace(mpi, build, run_pw, tmp_path):
    """--filter: MPI_Comm_rank excluded (function), the region "work" excluded (region),
    everything inside "halo" excluded (path: its Sendrecv and Allreduce, and itself).
    The trace has exactly the others; the profile still has every call; the trace's
    metadata records the rules."""
    steps = 3
    prog = build(mpi, "regions_mpi.c", tuple(pkg_config("--cflags")) + ("-pthread",))
    rules = "exclude:MPI_Comm_rank;exclude-region:work;exclude-path:halo"
    r = run_pw(mpi.launch(2) + [prog, steps], ["--trace", "--filter", rules])
    out = tmp_path / "trace.json"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "chrome", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    events = json.loads(out.read_text())["traceEvents"]
    names = ("MPI_Comm_rank", "MPI_Comm_size", "MPI_Sendrecv", "MPI_Allreduce", "MPI_Barrier")
    regions = ("step", "halo", "work", "solve")
    for rank in (0, 1):
        mine = [e["name"] for e in events if e.get("pid") == rank and e.get("ph") == "X"]
        got = {n: mine.count(n) for n in names + regions}
        assert got == {
            "MPI_Comm_rank": 0, "MPI_Comm_size": 1, "MPI_Sendrecv": 0, "MPI_Allreduce": 4,
            "MPI_Barrier": 3, "step": steps, "halo": 0, "work": 0, "solve": 1,
        }  # fmt: skip
        meta = json.loads((r.exp / "traces" / f"rank-{rank}.json").read_text())
        assert meta["filter"] == "exclude:MPI_Comm_rank;exclude-region:work;exclude-path:halo"
    prof = perfweave.open(r.exp).profile
    count = {prof.functions[f]: 0 for f in prof.function_ids("mpi")}
    for f, c in zip(prof.sites["fn"].tolist(), prof.sites["count"].tolist()):
        count[prof.functions[f]] += c
    assert (count["MPI_Comm_rank"], count["MPI_Sendrecv"]) == (2, 2 * steps)


def test_filter_errors_are_one_line(tmp_path):
    """A bad rule or Score-P file: one line on stderr, exit status 2, nothing run."""
    bad_file = tmp_path / "bad.filt"
    bad_file.write_text("SCOREP_REGION_NAMES_BEGIN\n  frobnicate\n")
    for rules in ("nonsense", "exclude:", f"@{bad_file}", f"@{tmp_path / 'none.filt'}"):
        cmd = [PERFWEAVE, "run", "-o", str(tmp_path / "x"), "--filter", rules, "--", "true"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and "--filter" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert not (tmp_path / "x").exists()


def trace_calls(exp, rank):
    """{MPI function name: calls} in rank's trace, read through perfweave.open()."""
    from perfweave.dtypes import EVENT_TYPES

    rr = perfweave.open(exp).traces.rank(rank)
    fns = rr.meta["functions"]
    calls = rr.records[rr.records["type"] == EVENT_TYPES["CALL"]]
    names, counts = np.unique(calls["fn"], return_counts=True)
    return {fns[int(f)]: int(c) for f, c in zip(names, counts)}


def test_filter_path_through_ordinary_functions(mpi, build, run_pw, tmp_path):
    """`exclude-path:diagnostics`: the MPI calls and the I/O segments made anywhere below
    the function diagnostics() (directly or through sum_all(), which solver() calls too)
    leave the trace, exactly the program's own counts of them; solver()'s stay; the
    profile keeps every call."""
    from perfweave._format import IO_OPS

    steps = 7
    prog = build(mpi, "filter_paths.c")
    out = tmp_path / "diag"
    r = run_pw(
        mpi.launch(2) + [prog, steps, out],
        ["--trace", "--io", "--filter", "exclude-path:diagnostics"],
    )
    said = rank_counts(r.proc.stdout)
    exp = perfweave.open(r.exp)
    for rank in (0, 1):
        mine = said[rank]
        assert mine["diagnostics_allreduce"] == (steps + 1) // 2 == mine["diagnostics_write"]
        got = trace_calls(r.exp, rank)
        assert got["MPI_Allreduce"] == mine["solver_allreduce"]
        assert got["MPI_Barrier"] == mine["barrier"]
    counts = by_name(exp.mpi_functions())
    assert counts["MPI_Allreduce"]["calls"] == sum(
        said[k]["solver_allreduce"] + said[k]["diagnostics_allreduce"] for k in (0, 1)
    )
    io = exp.io
    for rank in (0, 1):
        f = io.files.index(f"{out}.{rank}")
        seg = io.segments[io.segments["file"] == f]
        ops = [IO_OPS[o] for o in seg["op"].tolist()]
        assert ops.count("write") == 0 and ops.count("open") == 1  # main()'s open stays
    # without the rule the same program traces every call
    r2 = run_pw(mpi.launch(2) + [prog, steps, out], ["--trace", "--filter", "exclude:MPI_Bcast"])
    said = rank_counts(r2.proc.stdout)
    for rank in (0, 1):
        got = trace_calls(r2.exp, rank)
        assert (
            got["MPI_Allreduce"]
            == said[rank]["solver_allreduce"] + said[rank]["diagnostics_allreduce"]
        )


def test_regions_are_nodes_of_the_call_tree(build, run_pw):
    """A sample inside a region is under the node "region NAME" (nested regions nested,
    the phase "phase NAME" above them) at the root of the call tree: each node's share of
    the samples is its region's share of the sampled life by the program's own clock,
    within 3 binomial standard deviations (share_bound)."""
    prog = build(None, "regions_spin.c", tuple(pkg_config("--cflags")))
    r = run_pw(
        [prog, 0.3, 0.1, 0.15], ["--sample", "--sample-interval-ms", "2", "--node-interval", "20"]
    )
    alpha, beta, inner = reported(r.proc, "alpha", "beta", "inner")
    life, samples = sampled_life(r.exp)
    exp = perfweave.open(r.exp)
    tree = tree_nodes(exp)
    ph = "phase compute"
    for path, seconds in (
        ((ph, "region alpha"), alpha),
        ((ph, "region beta"), beta),
        ((ph, "region beta", "region inner"), inner),
    ):
        share = 100 * seconds / life
        got = tree[path]["inclusive_pct"]
        assert abs(got - share) <= share_bound(share, samples), (path, got, share)
    # the program's own functions below each region, rooted as without regions
    assert (ph, "region alpha", "main", "spin") in tree
    assert (ph, "region beta", "region inner", "main", "spin") in tree
    # a region is no function: the functions' tables do not name them
    inc = exp.functions(inclusive=True)
    assert not inc["name"].str.startswith(("region ", "phase ")).any()
    text = r.text_report()
    assert "region alpha" in text
    check_timeline_marks(r, exp, text)


def check_timeline_marks(r, exp, text):
    """The node timeline marks the phases and outermost regions at their intervals' times
    on its clock (s from its first tick), in the report's JSON, the text (a line per
    name with its span) and the HTML's bands."""
    (tl,) = exp.timelines
    iv = exp.regions.intervals
    iv = iv[(iv["kind"] == "phase") | ((iv["kind"] == "region") & (iv["depth"] == 0))]
    (node,) = r.report()["node_timeline"]["nodes"]
    got = {(m["kind"], m["name"]): m for m in node["marks"]}
    assert set(got) == {("phase", "compute"), ("region", "alpha"), ("region", "beta")}
    assert len(node["marks"]) == len(iv)
    for row in iv:
        m = got[(row["kind"], row["name"])]
        assert m["t_begin_s"] * 1e9 + int(tl.t[0]) == pytest.approx(int(row["t_begin"]), abs=2)
        assert m["t_end_s"] * 1e9 + int(tl.t[0]) == pytest.approx(int(row["t_end"]), abs=2)
        span = f"{m['t_begin_s']:.3f}-{m['t_end_s']:.3f} s"
        assert any(row["name"] in x and span in x for x in text.splitlines())
    out = r.exp / "report.html"
    cmd = [PERFWEAVE, "report", "--html", str(out), str(r.exp)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    html = out.read_text()
    for m in node["marks"]:
        assert f'data-t0="{m["t_begin_s"]:.9f}" data-t1="{m["t_end_s"]:.9f}"' in html

"""The heap sites' live timelines (runtime/modules/heap_live.c; docs/heap.md "When a site's
objects were live") against the program's own clock, under each MPI: programs/heap_phases.c
allocates X, sweeps it in sweep_x, frees it; then Y and sweep_y; Z lives throughout; it
prints, per rank, the CLOCK_MONOTONIC times around each malloc and free and each sweep.

A site's timeline marks every bucket during which some of its objects may have been live:
its run of marked buckets must begin within one bucket plus one tick of the coarse clock
before the malloc (never after it returned) and end after the free was called, within a
bucket plus a tick after it returned (`resolution`; one tick more either way where the
VM's kernel missed a tick, which delays the coarse clock: steal time). The samples taken
while a site was live (per site, and per routine through perfweave.open(EXP).heap_live())
then follow: X live during >= 95 % of sweep_x's samples and <= 5 % of sweep_y's, Y the
reverse, Z all of both. Two threads opening and closing one site's intervals at once leave
one run over their span. A process killed by SIGKILL keeps the intervals it closed.
heap_live_fold.c drives the C code's folding of buckets directly."""

import subprocess
from pathlib import Path

import numpy as np

from harness import PROGRAMS, site_lines
from perfweave._format import HEAP_LIVE_BUCKETS
from perfweave.analysis import boundness
from perfweave.analysis.heap import analyze, live_units
from perfweave.readers.heap import read_heap

ROOT = Path(__file__).resolve().parents[2]


def program_times(stdout):
    """{pid: {"X": (alloc_before, alloc_after, free_before, free_after), ...,
    "sweep_x": (begin, end), ...}} (ns) of the program's lines."""
    out = {}
    for line in stdout.splitlines():
        f = line.split()
        if f[:1] == ["site"] and len(f) == 7:
            out.setdefault(int(f[1]), {})[f[2]] = tuple(map(int, f[3:]))
        elif f[:1] == ["routine"] and len(f) == 5:
            out.setdefault(int(f[1]), {})[f[2]] = tuple(map(int, f[3:]))
    return out


def marked_runs(heap, source):
    """{(pid, site name): [(begin ns, end ns), ...]}: each marked site's runs of marked
    buckets in its process, on CLOCK_MONOTONIC's axis; {pid: resolution ns} (a bucket and
    a tick of the coarse clock); {pid: a tick}, which the coarse clock may lag by more
    when the VM misses a tick (steal time on a busy host)."""
    result = analyze(heap)
    lines = site_lines(source)
    row_of = {
        name: int(np.nonzero((result.sites["line"] == line) & mine(result.sites, source))[0][0])
        for name, line in lines.items()
        if ((result.sites["line"] == line) & mine(result.sites, source)).any()
    }
    process, site, bits = live_units(heap, result.row_site)
    p = heap.processes
    runs, res, late = {}, {}, {}
    for k in range(len(p)):
        res[int(p["pid"][k])] = p["live_bucket_ns"][k] + p["live_slack_ns"][k]
        late[int(p["pid"][k])] = p["live_slack_ns"][k]
    for name, row in row_of.items():
        for u in np.nonzero(site == row)[0]:
            k = process[u]
            j = np.nonzero(bits[u])[0]
            groups = np.split(j, np.nonzero(np.diff(j) > 1)[0] + 1) if len(j) else []
            o, w = p["live_origin_ns"][k], p["live_bucket_ns"][k]
            runs[(int(p["pid"][k]), name)] = [(o + g[0] * w, o + (g[-1] + 1) * w) for g in groups]
    return runs, res, late, result


def check_run(got, times, res, late):
    """A site's run of marked buckets against the program's clock around its first malloc
    and its last free: its first bucket holds the malloc's coarse clock reading (the last
    tick before it), its last the free's plus a tick; a late tick errs by one more."""
    a0, a1, f0, f1 = times
    assert a0 - res - late <= got[0] <= a1, (got, times, res)
    assert f0 - late <= got[1] <= f1 + res, (got, times, res)


def mine(sites, source):
    return np.array([str(f).endswith(source) for f in sites["file"]])


def test_live_timelines_and_routines_samples(mpi, build, run_pw):
    prog = build(mpi, "heap_phases.c")
    r = run_pw([*mpi.launch(2), prog], ["--heap", "--sample-interval-ms", "2"])
    truth = program_times(r.proc.stdout)
    assert len(truth) == 2, r.proc.stdout
    exp = r.open()
    heap = exp.heap
    assert (heap.processes["live_bucket_ns"] > 0).all()
    assert (heap.processes["live_unclosed"] == 0).all()
    runs, res, late, result = marked_runs(heap, "heap_phases.c")
    for pid, t in truth.items():
        for name in ("X", "Y", "Z"):
            (got,) = runs[(pid, name)]  # one interval
            check_run(got, t[name], res[pid], late[pid])
        assert res[pid] < 0.05e9  # buckets not widened: a run of about 1.5 s
    # per site: the share of its processes' samples taken while it was live, between the
    # samples inside the program's own interval and those inside it widened by the
    # resolution
    sites = result.sites
    assert result.live["timelines"] and result.live["samples"] > 0
    for name, line in site_lines("heap_phases.c").items():
        if name == "T":
            continue
        (row,) = np.nonzero((sites["line"] == line) & mine(sites, "heap_phases.c"))[0]
        lo = hi = n = 0
        for k, t_ns in heap.sample_t.items():
            pid = int(heap.processes["pid"][k])
            a0, a1, f0, f1 = truth[pid][name]
            lo += ((t_ns >= a1) & (t_ns <= f0 - late[pid])).sum()
            hi += ((t_ns >= a0 - res[pid] - late[pid]) & (t_ns <= f1 + res[pid])).sum()
            n += len(t_ns)
        s = sites[row]
        assert s["live_pct_of"] == "samples" and s["live_samples"] == n
        assert 100 * lo / n - 1e-9 <= s["live_pct"] <= 100 * hi / n + 1e-9, (name, lo, hi, n)
    # per routine, through the API
    live = exp.heap_live()
    lines = site_lines("heap_phases.c")
    where = {name: f"alloc_{name.lower()} (heap_phases.c:{line})" for name, line in lines.items()}

    def pct(routine, name):
        rows = live[(live["routine"] == routine) & (live["where"] == where[name])]
        return float(rows["live_pct"].sum())

    for routine in ("sweep_x", "sweep_y"):
        n = live[live["routine"] == routine]["samples"]
        assert len(n) and n.iloc[0] >= 50, routine  # 0.3 s at 2 ms, two ranks
    assert pct("sweep_x", "X") >= 95 and pct("sweep_y", "X") <= 5
    assert pct("sweep_y", "Y") >= 95 and pct("sweep_x", "Y") <= 5
    assert pct("sweep_x", "Z") == 100 and pct("sweep_y", "Z") == 100
    # what `perfweave boundness --heap` says of a run: the sites live during most of each
    # routine's samples, measured (not the lower bound of records without timelines)
    facts = boundness.run_facts(r.exp)
    for routine, mine_, other in (("sweep_x", "X", "Y"), ("sweep_y", "Y", "X")):
        sites = {s["where"]: s for s in boundness._live_sites(facts, routine, 10.0)}
        assert sites[where[mine_]]["live_during_pct"] >= 95, routine
        assert sites[where["Z"]]["live_during_pct"] == 100, routine
        assert sites.get(where[other], {"live_during_pct": 0})["live_during_pct"] <= 5
        assert all("live_during_pct_min" not in s for s in sites.values())


def test_live_timeline_of_two_threads_at_once(mpi, build, run_pw):
    """Two threads open and close site T's intervals at once (each 200 times: a block
    held 1 ms, then 0.2 ms without): the site is live in every bucket of their span, so
    its timeline is one run over it, whatever order their marks took."""
    prog = build(mpi, "heap_phases.c")
    r = run_pw([*mpi.launch(1), prog, "threads"], ["--heap", "--no-sample"])
    truth = program_times(r.proc.stdout)
    exp = r.open()
    runs, res, late, result = marked_runs(exp.heap, "heap_phases.c")
    ((pid, t),) = truth.items()
    (got,) = runs[(pid, "T")]
    check_run(got, t["T"], res[pid], late[pid])
    assert exp.heap.processes["live_unclosed"][0] == 0
    # no samples: the time's share, labelled so
    where = f"alloc_t (heap_phases.c:{site_lines('heap_phases.c')['T']})"
    (row,) = np.nonzero(result.sites["where"] == where)[0]
    assert result.sites["live_pct_of"][row] == "time"


def fold_reference(marks, base=10):
    """The bitmaps heap_live.c must hold after marks [(site, from, to)] (ticks): the
    narrowest bucket width 2^L >= 2^base holding the last tick marked, each mark's buckets
    from >> L to to >> L."""
    top = max(to for _, _, to in marks)
    level = base
    while top >> level >= HEAP_LIVE_BUCKETS:
        level += 1
    bits = np.zeros((3, HEAP_LIVE_BUCKETS), bool)
    for s, a, b in marks:
        bits[s, a >> level : (b >> level) + 1] = True
    return level, bits


def test_fold_against_its_reference(tmp_path):
    """Marks past the last bucket fold every site's buckets in pairs until they fit; the
    result equals marking at the final width from the start. The lock-free read (the
    site's known run) never says a range is marked that is not."""
    exe = tmp_path / "fold"
    subprocess.run(
        ["cc", "-O2", "-I", ROOT / "include", "-I", ROOT / "runtime/modules", "-o", exe,
         PROGRAMS / "heap_live_fold.c"],
        check=True,
    )  # fmt: skip
    rng = np.random.default_rng(7)
    marks = [(0, 0, 100), (0, 5000, 6000), (2, 1_500_000, 1_500_000)]
    for _ in range(300):  # a growing run, so that it folds several times
        t = int(rng.integers(0, 20_000_000))
        marks.append((int(rng.integers(0, 3)), t, t + int(rng.integers(0, 30_000))))
    marks.append((1, 10, 40_000_000))
    asks = [(int(rng.integers(0, 3)), int(a), int(a) + 2000) for a in rng.integers(0, 4e7, 200)]
    lines = [f"close {s} {a} {b}" for s, a, b in marks] + [f"ask {s} {a} {b}" for s, a, b in asks]
    out = subprocess.run(
        [exe], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    level, want = fold_reference(marks)
    assert out[len(lines)] == f"log2 {level}" and level > 10 + 3  # folded 4 times or more
    for s in range(3):
        words = np.array([int(w, 16) for w in out[len(lines) + 1 + s].split()[2:]], np.uint64)
        got = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
        assert (got == want[s]).all(), s
    for (s, a, b), line in zip(asks, out[len(marks) : len(lines)]):
        if line.endswith(" 1"):
            assert want[s, a >> level : (b >> level) + 1].all(), (s, a, b)


def test_killed_process_keeps_its_closed_intervals(mpi, build, run_pw):
    """A process killed by SIGKILL (programs/heap_sites.c "kill", after freeing its sites'
    objects) leaves the intervals it closed in its mapped record: each site's run as long
    as the program's own clock says its objects were live (first allocation to last
    free), within the resolution at each end."""
    prog = build(mpi, "heap_sites.c")
    r = run_pw([prog, "serial", "kill"], ["--heap"], check=False)
    assert r.proc.returncode != 0
    live = {}
    for line in r.proc.stdout.splitlines():
        f = line.split()
        if len(f) == 5 and f[0] in ("A", "B", "C"):
            live[f[0]] = float(f[4]) * 1e9
    heap = read_heap(r.exp)
    assert heap.processes["state"].tolist() == ["killed"]
    runs, res, late, _ = marked_runs(heap, "heap_sites.c")
    ((pid, r_ns),) = res.items()
    for name, span in live.items():
        (got,) = runs[(pid, name)]
        assert span - late[pid] <= got[1] - got[0] <= span + 2 * r_ns + late[pid], name

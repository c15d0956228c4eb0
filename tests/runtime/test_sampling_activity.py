"""Activities of sampled time against ground truth (analysis/samples/ classify):
programs that spend a known share of their time in write()+fsync(), in malloc/free
(and the mmap/munmap behind them), or blocked on a contended mutex; each activity is
found at its share, and the others near zero. And the advice from samples
(analysis/advice.py) on these programs and on the imbalanced MPI program.

The activities' shares and the functions' are read through the Python API (perfweave.open:
the samples' seconds by activity, functions(inclusive=True)); the advice, and the library
functions that made the app time's samples I/O, allocation or synchronisation
(`activity_functions`, which the advice quotes), are the report's alone: read from
`perfweave report --json`."""

from harness import (
    activity_pct,
    bare,
    inclusive_pct,
    outside_share,
    reported,
    reported_by_rank,
    sampled_life,
    share_bound,
    site_lines,
)

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
OTHERS = ("io", "alloc", "thread_sync", "omp_sync")


def others_near_zero(act, but, outside, samples):
    """The activities a program's phases do not have take at most the time its clock did
    not cover (outside, %: its start-up, the loader, printing its results, its exit)."""
    for a in OTHERS:
        if a != but:
            assert act[a] <= outside + share_bound(outside, samples), (a, act, outside)


def per_thread(proc, word):
    """What each thread of a program measured of itself: its stderr lines `WORD N KEY
    VALUE ...` as dicts of floats (WORD: N among them)."""
    lines = (ln.split() for ln in proc.stderr.splitlines())
    return [dict(zip(w[0::2], map(float, w[1::2]))) for w in lines if w[:1] == [word]]


def near(share, truth, samples, extra=0.0):
    """share (%) within the bound of a program's own measure of it (truth, %), or above
    it by at most extra points (time its clock did not cover that may be of the same
    activity)."""
    bound = share_bound(truth, samples)
    return truth - bound <= share <= truth + extra + bound


def sm_advice(run):
    return run.report()["advice"]


def test_io_write_fsync(build, run_pw, tmp_path):
    prog = build(None, "io_write.c")
    r = run_pw([prog, 2, tmp_path], SAMPLE)
    exp = r.open()
    act = activity_pct(exp)
    n = len(exp.samples())
    # 20 ms of write+fsync, 20 ms of spin, alternately for 2 s: half the time in I/O on an
    # idle machine; here each phase's share of the sampler's life by the program's clock
    # (the write phase's clock reads count as compute: ~100 ns of each write+fsync); the
    # time the clock did not cover is compute, or I/O when printing
    io_s, spin_s = reported(r.proc, "io", "spin")
    life, _ = sampled_life(r.exp)
    outside = outside_share(r.exp, io_s + spin_s)
    assert near(act["io"], 100 * io_s / life, n, outside), (act, io_s, life)
    assert near(act["compute"], 100 * spin_s / life, n, outside), (act, spin_s, life)
    others_near_zero(act, "io", outside, n)
    [adv] = [a for a in sm_advice(r) if a["rule"] == "sampled_io"]
    assert "fsync" in adv["text"] and f"I/O takes {act['io']:.0f} % of the samples" in adv["text"]
    by_activity = r.report()["samples"]["activity_functions"]
    io_fns = {f["name"] for f in by_activity["io"][:2]}
    assert io_fns & {"fsync", "write"}, by_activity
    [header] = [ln for ln in r.text_report().splitlines() if ln.startswith("Where the time")]
    assert f"I/O {act['io']:.1f} %" in header, header


def test_alloc_churn(build, run_pw):
    prog = build(None, "alloc_churn.c")
    r = run_pw([prog, 2], SAMPLE)
    exp = r.open()
    act = activity_pct(exp)
    n = len(exp.samples())
    # 2 s of malloc/free, 1 s of spin: 2/3 in the allocator on an idle machine; here by
    # the program's clock, less the churn loop's own instructions (the same loop run
    # without the allocator: its time, loop_s, is compute), over the sampler's life
    churn_s, spin_s, loop_s = reported(r.proc, "churn", "spin", "loop")
    life, _ = sampled_life(r.exp)
    outside = outside_share(r.exp, churn_s + spin_s + loop_s)
    alloc = 100 * (churn_s - loop_s) / life
    assert near(act["alloc"], alloc, n, 100 * loop_s / life + outside), (act, alloc)
    compute = 100 * (spin_s + loop_s) / life
    assert near(act["compute"], compute, n, 100 * loop_s / life + outside), (act, compute)
    others_near_zero(act, "alloc", outside, n)
    [adv] = [a for a in sm_advice(r) if a["rule"] == "sampled_alloc"]
    assert "munmap" in adv["text"] and "M_MMAP_THRESHOLD" in adv["text"]


def test_mutex_contention(build, run_pw):
    prog = build(None, "mutex_contend.c", ("-pthread",))
    assert bare([prog, 0.2]).returncode == 0
    r = run_pw([prog, 1.5], SAMPLE)
    exp = r.open()
    act = activity_pct(exp)
    n = len(exp.samples())
    # 0.5 s spin alone, then 3 threads x 1.5 s (one holds the lock, two block) while main
    # joins: compute (0.5 + 1.5) / 6.5 = 31 %, thread sync 4.5 / 6.5 = 69 % on an idle
    # machine; here by each thread's clock, of the threads' sampled lives (main's the
    # sampler's, each worker's its own)
    workers = per_thread(r.proc, "worker")
    spin_s, join_s = reported(r.proc, "spin", "join")
    life, _ = sampled_life(r.exp)
    total = life + sum(w["life"] for w in workers)
    # what no clock covered: main's start-up, its creating the threads, printing, exit
    outside = 100 * (life - spin_s - join_s) / total
    sync = 100 * (join_s + sum(w["wait"] for w in workers)) / total
    compute = 100 * (spin_s + sum(w["held"] for w in workers)) / total
    # the rest of a worker's life (its loop, its unlocks: a thread that loses its core
    # there on a busy machine is sampled there when it runs again) may be either
    loops = 100 * sum(w["life"] - w["wait"] - w["held"] for w in workers) / total
    assert near(act["thread_sync"], sync, n, outside + loops), (act, sync, workers)
    assert near(act["compute"], compute, n, outside + loops), (act, compute, workers)
    others_near_zero(act, "thread_sync", outside + loops, n)
    fns = {f["name"] for f in r.report()["samples"]["activity_functions"]["thread_sync"]}
    assert "lll_lock_wait" in fns or "pthread_mutex_lock" in fns, fns
    [adv] = [a for a in sm_advice(r) if a["rule"] == "sampled_thread_sync"]
    assert "pthread_mutex_lock" in adv["text"]


def test_openmp_barrier_wait_is_openmp_sync(build, run_pw):
    prog = build(None, "omp_imbalance.c", ("-fopenmp",))
    r = run_pw([prog, 2], SAMPLE)
    assert r.proc.stdout == "threads 2\n"
    exp = r.open()
    act = activity_pct(exp)
    s = exp.samples()
    # both threads sampled all along; thread 1 waits at the barrier 10 of every 20 ms: a
    # quarter of the samples in the OpenMP runtime, three quarters in task() on an idle
    # machine; here by each thread's clock, of both threads' sampled time. The rest (the
    # start-up, the region's start and end, the worker idle in the runtime after it,
    # printing, the exit) is compute or OpenMP sync
    threads = per_thread(r.proc, "thread")
    assert len(threads) == 2, r.proc.stderr
    task_s, barrier_s = (sum(t[k] for t in threads) for k in ("task", "barrier"))
    total = s["seconds"].sum()
    outside = 100 * max(0.0, total - task_s - barrier_s) / total
    compute, sync = 100 * task_s / total, 100 * barrier_s / total
    assert near(act["compute"], compute, len(s), outside), (act, compute, outside)
    assert near(act["omp_sync"], sync, len(s), outside), (act, sync, outside)
    others_near_zero(act, "omp_sync", outside, len(s))
    inc = inclusive_pct(exp)
    assert near(inc["task"], compute, len(s)), (inc, compute)
    assert any(name.startswith("main._omp_fn") for name in inc), inc


def test_pure_computation_has_no_other_activity(build, run_pw):
    prog = build(None, "burn7030.c")
    r = run_pw([prog, 1], SAMPLE)
    exp = r.open()
    act = activity_pct(exp)
    n = len(exp.samples())
    # computing but for the time its clock did not cover (printing its result is I/O)
    heavy_s, light_s = reported(r.proc, "heavy", "light")
    outside = outside_share(r.exp, heavy_s + light_s)
    assert act["compute"] >= 100 - outside - share_bound(100 - outside, n), (act, outside)
    others_near_zero(act, "compute", outside, n)


def test_imbalance_advice_names_rank_function_and_line(mpi, build, run_pw):
    prog = build(mpi, "imbalance.c")
    r = run_pw(mpi.launch(3) + [prog], SAMPLE)
    advice = [a for a in sm_advice(r) if a["rule"] == "sampled_imbalance"]
    # work(): rank 1 ~80 % of its time, ranks 0 and 2 ~40 % on an idle machine: ~50 %
    # above the mean; here from each rank's own measure of its time in work() over its
    # sampled life, each share anywhere within its bound (3 binomial sd of the rank's
    # samples + 2 points): 100 (3 s1 / (s0 + s1 + s2) - 1) grows with s1, falls with
    # the others
    work_s = reported_by_rank(r.proc, "work")
    box = []
    for k in (0, 1, 2):
        life, taken = sampled_life(r.exp, k)
        share = 100 * work_s[k] / life
        box.append((share - share_bound(share, taken), share + share_bound(share, taken)))
    lo = 100 * (3 * box[1][0] / (box[0][1] + box[1][0] + box[2][1]) - 1)
    hi = 100 * (3 * box[1][1] / (box[0][0] + box[1][1] + box[2][0]) - 1)
    [work] = [a for a in advice if a["evidence"]["function"] == "work"]
    ev = work["evidence"]
    assert ev["rank"] == 1 and ev["line"] == site_lines("imbalance.c")["work"]
    assert lo <= ev["above_mean_pct"] <= hi, (ev, lo, hi)
    assert (
        f"rank 1 computes {ev['above_mean_pct']:.0f} % longer than the mean in work() "
        f"at imbalance.c:{ev['line']}"
    ) in work["text"]

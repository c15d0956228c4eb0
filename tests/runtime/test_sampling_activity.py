"""Activities of sampled time against ground truth (analysis/samples.py classify):
programs that spend a known share of their time in write()+fsync(), in malloc/free
(and the mmap/munmap behind them), or blocked on a contended mutex; each activity is
found at its share, and the others near zero. And the advice from samples
(analysis/advice.py) on these programs and on the imbalanced MPI program.

The activities' shares and the functions' are read through the Python API (perfweave.open:
the samples' seconds by activity, functions(inclusive=True)); the advice, and the library
functions that made the app time's samples I/O, allocation or synchronisation
(`activity_functions`, which the advice quotes), are the report's alone: read from
`perfweave report --json`."""

from harness import activity_pct, bare, inclusive_pct, reported_by_rank, sampled_life, site_lines

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
OTHERS = ("io", "alloc", "thread_sync", "omp_sync")


def others_near_zero(act, but):
    for a in OTHERS:
        if a != but:
            assert act[a] < 2, (a, act)


def sm_advice(run):
    return run.report()["advice"]


def test_io_write_fsync(build, run_pw, tmp_path):
    prog = build(None, "io_write.c")
    r = run_pw([prog, 2, tmp_path], SAMPLE)
    act = activity_pct(r.open())
    # 20 ms of write+fsync, 20 ms of spin, alternately for 2 s: half the time in I/O
    # (~1000 samples: binomial sd 1.6 points; the loops' clock reads count as compute)
    assert 35 < act["io"] < 62 and 38 < act["compute"] < 65, act
    others_near_zero(act, "io")
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
    act = activity_pct(r.open())
    # 2 s of malloc/free (the loop's own xorshift a few % of it), 1 s of spin: 2/3
    assert 50 < act["alloc"] < 72 and 28 < act["compute"] < 48, act
    others_near_zero(act, "alloc")
    [adv] = [a for a in sm_advice(r) if a["rule"] == "sampled_alloc"]
    assert "munmap" in adv["text"] and "M_MMAP_THRESHOLD" in adv["text"]


def test_mutex_contention(build, run_pw):
    prog = build(None, "mutex_contend.c", ("-pthread",))
    assert bare([prog, 0.2]).returncode == 0
    r = run_pw([prog, 1.5], SAMPLE)
    act = activity_pct(r.open())
    # 0.5 s spin alone, then 3 threads x 1.5 s (one holds the lock, two block) while
    # main joins: compute (0.5 + 1.5) / 6.5 = 31 %, thread sync 4.5 / 6.5 = 69 %
    assert 58 < act["thread_sync"] < 78 and 22 < act["compute"] < 42, act
    others_near_zero(act, "thread_sync")
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
    # both threads sampled all along; thread 1 waits at the barrier 10 of every 20 ms:
    # a quarter of the samples are in the OpenMP runtime, three quarters in task()
    assert 15 < act["omp_sync"] < 35 and 65 < act["compute"] < 85, act
    others_near_zero(act, "omp_sync")
    inc = inclusive_pct(exp)
    assert 65 < inc["task"] < 85, inc
    assert any(name.startswith("main._omp_fn") for name in inc), inc


def test_pure_computation_has_no_other_activity(build, run_pw):
    prog = build(None, "burn7030.c")
    act = activity_pct(run_pw([prog, 1], SAMPLE).open())
    assert act["compute"] > 98
    others_near_zero(act, "compute")


def test_imbalance_advice_names_rank_function_and_line(mpi, build, run_pw):
    prog = build(mpi, "imbalance.c")
    r = run_pw(mpi.launch(3) + [prog], SAMPLE)
    advice = [a for a in sm_advice(r) if a["rule"] == "sampled_imbalance"]
    # work(): rank 1 ~80 % of its time, ranks 0 and 2 ~40 % on an idle machine: ~50 %
    # above the mean; here from each rank's own measure of its time in work() over its
    # sampled life. Bound 15 points: each rank's share within ~3 binomial sd (~6 points
    # with ~400 samples a rank), ~10 % of max / mean
    work_s = reported_by_rank(r.proc, "work")
    share = [work_s[k] / sampled_life(r.exp, k)[0] for k in (0, 1, 2)]
    expected = 100 * (share[1] / (sum(share) / 3) - 1)
    [work] = [a for a in advice if a["evidence"]["function"] == "work"]
    ev = work["evidence"]
    assert ev["rank"] == 1 and ev["line"] == site_lines("imbalance.c")["work"]
    assert abs(ev["above_mean_pct"] - expected) < 15, (ev, expected)
    assert (
        f"rank 1 computes {ev['above_mean_pct']:.0f} % longer than the mean in work() "
        f"at imbalance.c:{ev['line']}"
    ) in work["text"]

"""Call-stack sampling (perfweave run --sample) against ground truth: a 70 % / 30 % split
of CPU time between two functions, the imbalanced rank at the right function and line,
bounded memory whatever the run length, and a program's own SIGPROF left alone."""
import json

from harness import bare, site_lines
from perfweave.readers.samples import read_samples

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def by_name(rows):
    return {r["name"]: r for r in rows}


def test_seventy_thirty(build, run_pw):
    prog = build(None, "burn7030.c")
    r = run_pw([prog, 2], SAMPLE)
    sm = r.report()["sampling"]
    assert sm["samples"] >= 600                      # ~1000 at 2 ms (+-50 % jitter)
    inc = by_name(sm["inclusive"])
    # binomial error with >= 600 samples: sd < 1.9 points; bound: 5 points
    assert abs(inc["heavy"]["pct"] - 70) <= 5, inc["heavy"]
    assert abs(inc["light"]["pct"] - 30) <= 5, inc["light"]
    assert inc["main"]["pct"] > 98
    assert by_name(sm["functions"])["spin"]["pct"] > 90          # self time
    assert sm["activity_pct"]["compute"] > 99
    # the call tree: main -> heavy -> spin and main -> light -> spin, time at the leaves
    tree = sm["call_tree"]
    path = {}
    for n in tree:
        path[n["id"]] = (path[n["parent"]] if n["parent"] is not None else ()) + (n["name"],)
    node = {path[n["id"]]: n for n in tree}
    assert node[("main",)]["inclusive_pct"] > 98 and node[("main",)]["exclusive_pct"] < 2
    for fn, share in (("heavy", 70), ("light", 30)):
        assert abs(node[("main", fn)]["inclusive_pct"] - share) <= 5
        assert node[("main", fn, "spin")]["inclusive_pct"] > share - 6  # libunwind: now() too
    assert [n["depth"] for n in tree[:3]] == [0, 1, 2]             # depth first
    text = r.text_report()
    assert "call tree" in text
    assert "Where the time goes" in text and "burn7030.c:" in text


def test_imbalanced_rank_at_the_right_function_and_line(mpi, build, run_pw):
    prog = build(mpi, "imbalance.c")
    r = run_pw(mpi.launch(3) + [prog], SAMPLE)
    sm = r.report()["sampling"]
    assert sm["processes"] == 3 and sorted(sm["ranks"]) == [0, 1, 2]
    work = by_name(sm["functions"])["work"]
    # rank 1 works 1.6 s, ranks 0 and 2 0.8 s, of each process's ~2 s sampled life
    # (MPI start-up included): shares ~80 / 40 / 40 %
    assert work["worst_rank"] == 1
    assert work["per_rank_pct"]["max"] > 65 and work["per_rank_pct"]["min"] < 55
    assert work["per_rank_pct"]["max"] - work["per_rank_pct"]["min"] > 20
    assert 0.15 < work["imbalance"] < 0.5
    line = site_lines("imbalance.c")["work"]
    assert any(f"imbalance.c:{line}" in ln["name"] for ln in sm["lines"][:3])
    [wnode] = [n for n in sm["call_tree"] if n["name"] == "work"]
    assert wnode["worst_rank"] == 1 and wnode["per_rank_pct"]["max"] > 65
    # the others wait in MPI_Barrier (a collective) while rank 1 works: 2 x 0.8 s of
    # ~3 x 1.6 s sampled, a third
    assert 20 < sm["activity_pct"]["mpi_coll"] < 45


def test_memory_is_bounded_whatever_the_run_length(build, run_pw):
    prog = build(None, "burn7030.c")
    opts = ["--sample", "--sample-interval-ms", "1", "--sample-capacity", "200"]
    kept = {}
    for seconds in (0.5, 4):
        r = run_pw([prog, seconds], opts)
        [p] = read_samples(r.exp)
        [t] = p.meta["threads"]
        kept[seconds] = (t["kept"], t["thinned"], t["taken"])
        assert 100 <= t["kept"] <= 200                 # the buffer, never more
        # the kept samples still cover the whole run, evenly
        ts = (p.records["t"] - p.meta["t_start"]) / 1e9
        assert ts.min() < 0.15 * seconds + 0.05 and ts.max() > 0.85 * seconds
    assert kept[4][1] > kept[0.5][1] >= 1               # more thinning for the long run


def test_own_sigprof_handler_keeps_its_signals(build, run_pw):
    prog = build(None, "prof_handler.c")
    ref = bare([prog, 1])
    r = run_pw([prog, 1], SAMPLE)

    def ticks(out):
        return int(out.split()[1])
    # ITIMER_PROF at 1 ms (rounded up to the kernel's tick, 1-10 ms) over ~1 s of CPU:
    # the program gets as many SIGPROF under perfweave as alone
    assert ticks(ref.stdout) >= 80 and ticks(r.proc.stdout) > 0.7 * ticks(ref.stdout)
    meta = json.loads(next((r.exp / "samples").glob("*.json")).read_text())
    assert meta["samples"] > 100


def test_threads_the_program_creates_fork_and_exec(build, run_pw):
    """pthreads are sampled from their start; a forked child and an exec'd program run
    as without perfweave (output, exit code), and the child adds no samples of its own."""
    prog = build(None, "threads_burn.c", ("-pthread",))
    ref = bare([prog, 1, 2])
    r = run_pw([prog, 1, 2], SAMPLE, check=False)
    assert r.proc.returncode == ref.returncode == 3
    assert r.proc.stdout == ref.stdout == "child exit 7, system 0\n"
    [p] = [p for p in read_samples(r.exp) if p.meta["pid"] and len(p.records) > 100]
    threads = p.meta["threads"]
    assert len(threads) == 3 and all(t["kept"] >= 200 for t in threads)   # ~500 each
    sm = r.report()["sampling"]
    inc = by_name(sm["inclusive"])
    # three threads burning 1 s each: the two workers twice main_work's samples (the main
    # thread also waits for the child and /bin/true after it: ~0.2 s more of its own);
    # ~500 samples each, binomial sd of the ratio ~0.1; bounds +-25 %
    ratio = inc["worker_work"]["pct"] / inc["main_work"]["pct"]
    assert 1.5 <= ratio <= 2.5, (inc["worker_work"], inc["main_work"])
    assert inc["worker_work"]["pct"] + inc["main_work"]["pct"] > 75


def test_sleeps_last_their_time_and_are_sampled_as_sleep(build, run_pw):
    prog = build(None, "sleeper.c")
    r = run_pw([prog], SAMPLE)
    a, left, b, c, rc = r.proc.stdout.split()
    # nanosleep is not restarted by SA_RESTART: without the sampler's wrappers these
    # would end at the first sample, 1-3 ms in
    assert 1.0 <= float(a) < 1.15 and left == "0" and rc == "0"
    assert 0.3 <= float(b) < 0.36 and 0.2 <= float(c) < 0.25
    sm = r.report()["sampling"]
    assert sm["activity_pct"]["sleep"] > 95


def test_a_thread_that_blocks_signals(build, run_pw):
    """Its samples stay pending and it is simply not sampled; the program is unchanged."""
    prog = build(None, "blocked_signals.c", ("-pthread",))
    r = run_pw([prog], SAMPLE)
    assert r.proc.returncode == 0 and r.proc.stdout == "done\n"
    inc = by_name(r.report()["sampling"]["inclusive"])
    assert inc["open_work"]["pct"] > 90 and "blocked_work" not in inc


def test_counters_read_at_each_sample_go_to_the_sampled_function(build, run_pw):
    prog = build(None, "touch_pages.c")
    r = run_pw([prog], SAMPLE + ["--counters", "perf::PAGE-FAULTS,perf::TASK-CLOCK"])
    sm = r.report()["sampling"]
    assert sm["counters"] == ["perf::PAGE-FAULTS", "perf::TASK-CLOCK"]
    faults = sm["counters_total"]["perf::PAGE-FAULTS"]
    assert faults > 50000                          # ~100k+ pages touched in 1 s
    inc = by_name(sm["inclusive"])
    # the faults happen in touch_pages; samples landing in libc's mmap/munmap (no frame
    # pointer) lose touch_pages' frame, hence 75 % and not 100 %
    assert inc["touch_pages"]["counters"]["perf::PAGE-FAULTS"] > 0.75 * faults
    assert inc["compute"]["counters"]["perf::PAGE-FAULTS"] < 0.02 * faults
    # CPU time: 1 s each, within 15 points of half
    cpu = sm["counters_total"]["perf::TASK-CLOCK"]
    assert abs(inc["compute"]["counters"]["perf::TASK-CLOCK"] / cpu - 0.5) < 0.15

"""perfweave pop's sampled thread factors on an MPI+OpenMP program whose threads have a
known imbalance (programs/omp_mpi_pop.c): in each step's parallel region thread t spins
(1 + t) units, then the master alone one unit. The program prints each thread's work in
the regions and the master's serial work (its own clock); the samples must find them.

Tolerance, from the sampling: a sample stands for the time since its thread's previous
one, so at each start or end of a thread's work the interval that straddles it goes
wholly to one side: an error within one interval d, of either sign, mean 0 (the
transition falls anywhere in the interval), variance at most d^2 / 3. Over k such
transitions (2 per step) the sum has a standard deviation of at most d sqrt(k / 3);
the thread's time is checked within 4 of them, d the thread's own mean interval (its
time in the region / its samples: longer than the setting when it waited for a core)."""

import json
import re
import subprocess

import numpy as np
import pytest
from harness import PERFWEAVE

STEPS, THREADS, UNIT = 30, 2, 0.008
# one pass of spin()'s loop and its clock reading, far above its microsecond (-O0)
SPIN_PASS = 1e-4
SAMPLE = ["--trace", "--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
LINE = re.compile(
    r"rank (\d+) threads (\d+) serial_s ([\d.]+) work_s ([\d. ]+) "
    r"serial_delay_s (-?[\d.]+) delay_s ([-\d. ]+)"
)


def _run(mpi, build, run_pw, monkeypatch, threads, options=SAMPLE):
    # idle OpenMP threads sleep instead of spinning: 2 ranks' threads share 2 cores
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    prog = build(mpi, "omp_mpi_pop.c", ("-fopenmp",))
    r = run_pw(mpi.launch(2) + [prog, STEPS, threads, UNIT], options=options)
    own, delays = {}, {}
    for m in LINE.finditer(r.proc.stdout):
        own[int(m[1])] = (float(m[3]), np.array(m[4].split(), float))
        delays[int(m[1])] = (float(m[5]), np.array(m[6].split(), float))
    assert sorted(own) == sorted(delays) == [0, 1], r.proc.stdout
    return json.loads(_pop("--json", r.exp)), own, delays


def lb_range(lo, hi):
    """The least and the greatest mean/max of values each within [lo, hi]: the range LB
    can take. Not only at the bounds' corners: where the bounds overlap (wide ones, of
    threads that waited for a core) the values can be as even as LB 1, between them (at
    the corners 0.98 beside two busy loops, the tool's 0.993 in bounds). For a top M,
    the least has one value at M and the others at their lower bounds, the greatest each
    value as near M as its bounds let it; both are monotonic in M between the bounds."""
    least = min(
        (lo.sum() - lo[t] + hi[t]) / (len(lo) * hi[t]) for t in range(len(lo)) if hi[t] >= lo.max()
    )
    tops = [m for m in np.concatenate([lo, hi]) if m >= lo.max() and m > 0]
    most = max(np.minimum(hi, m).mean() / m for m in tops)
    return least, most


def _pop(*args):
    """perfweave pop's standard output."""
    p = subprocess.run(
        [PERFWEAVE, "pop", *map(str, args)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_openmp_load_balance_and_serialisation(mpi, build, run_pw, monkeypatch):
    doc, own, delays = _run(mpi, build, run_pw, monkeypatch, THREADS)
    th = doc["threads"]
    assert th["source"] == "sampled" and th["threads"] == 2 * THREADS
    region = doc["region"]["runtime_s"]
    for r in th["ranks"]:
        serial, work = own[r["rank"]]
        assert len(r["threads"]) == THREADS
        samples = np.array(r["samples"], float)
        d = region / samples  # each thread's mean interval
        tol = 4 * d * np.sqrt(2 * STEPS / 3)
        got = np.array(r["parallel_useful_s"])
        assert np.all(np.abs(got - work) <= tol), (got, work, tol)
        assert abs(r["serial_s"] - serial) <= tol[0], (r["serial_s"], serial, tol[0])
        assert r["unrooted_s"] <= tol[0]  # built -O0: the stacks reach main or the region
        least, most = lb_range(np.maximum(work - tol, 0), work + tol)
        assert least <= r["omp_load_balance"] <= most, (r["omp_load_balance"], least, most)
        # and the program made the imbalance it was meant to: thread t spun (1 + t) units
        # a step (mean/max = 0.75) for wall-clock time, so longer by at most the time it
        # waited for a core (its run delay around its spins: 0.50 s of 0.61 s seen at
        # load 9; mean/max 0.93 at load 11), plus per spin one pass of its loop
        serial_delay, delay = delays[r["rank"]]
        planned = (1 + np.arange(THREADS)) * UNIT * STEPS
        assert np.all(work >= planned - 1e-6), (work, planned)
        assert np.all(work <= planned + np.maximum(delay, 0) + STEPS * SPIN_PASS), (work, delay)
        assert (
            UNIT * STEPS - 1e-6 <= serial <= UNIT * STEPS + max(serial_delay, 0) + STEPS * SPIN_PASS
        )
    assert th["notes"] == []
    mul, add = th["multiplicative"], th["additive"]
    assert mul["parallel_efficiency"] == pytest.approx(
        mul["mpi_parallel_efficiency"] * mul["omp_parallel_efficiency"], rel=1e-9
    )
    assert mul["omp_parallel_efficiency"] == pytest.approx(
        mul["omp_serialisation_efficiency"]
        * mul["omp_load_balance"]
        * mul["omp_region_efficiency"],
        rel=1e-9,
    )
    assert add["parallel_efficiency"] == pytest.approx(
        add["mpi_parallel_efficiency"] + add["omp_parallel_efficiency"] - 1, abs=1e-9
    )
    assert add["omp_parallel_efficiency"] == pytest.approx(
        add["omp_serialisation_efficiency"]
        + add["omp_load_balance"]
        + add["omp_region_efficiency"]
        - 2,
        abs=1e-9,
    )
    # the process level is the trace's: with one thread count, the mean of its useful
    assert mul["mpi_parallel_efficiency"] == pytest.approx(
        doc["multiplicative"]["parallel_efficiency"], rel=1e-9
    )


def test_one_thread_is_not_applicable(mpi, build, run_pw, monkeypatch):
    doc, _, _ = _run(mpi, build, run_pw, monkeypatch, 1)
    assert doc["threads"] == "n/a: one thread"


def test_without_samples_is_not_applicable(mpi, build, run_pw, monkeypatch):
    doc, _, _ = _run(mpi, build, run_pw, monkeypatch, THREADS, ["--trace", "--no-sample"])
    assert doc["threads"] == "n/a: no samples"


def test_unreadable_samples_leave_the_process_level(mpi, build, run_pw, monkeypatch):
    """A corrupt samples description costs the thread factors only (one line saying why)."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    prog = build(mpi, "omp_mpi_pop.c", ("-fopenmp",))
    r = run_pw(mpi.launch(2) + [prog, 5, THREADS, UNIT], options=SAMPLE)
    (r.exp / "samples" / "rank-0.json").write_text("{")
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(r.exp)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["threads"].startswith("n/a: samples unreadable (")
    assert 0 < doc["multiplicative"]["parallel_efficiency"] <= 1


def test_references_have_their_thread_factors(mpi, build, run_pw, monkeypatch):
    """EXP: 2 ranks of 2 threads; REF: 1 rank of 3 threads (weak scaling: each rank does
    the same steps). perfweave pop EXP REF gives each one's thread factors as perfweave
    pop gives them on it alone, and the hybrid scaling from them: the useful time of
    all REF's threads x the threads' ratio (4/3) / EXP's, times EXP's hybrid parallel
    efficiency."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    prog = build(mpi, "omp_mpi_pop.c", ("-fopenmp",))
    exp = run_pw(mpi.launch(2) + [prog, 10, 2, UNIT], options=SAMPLE).exp
    ref = run_pw(mpi.launch(1) + [prog, 10, 3, UNIT], options=SAMPLE).exp
    both = json.loads(_pop("--json", "--weak", exp, ref))
    alone = [json.loads(_pop("--json", e))["threads"] for e in (exp, ref)]
    assert both["threads"] == alone[0] and both["references"][0]["threads"] == alone[1]
    assert alone[0]["threads"] == 4 and alone[1]["threads"] == 3
    hy = both["scaling"]["hybrid"]
    total = [sum(sum(r["useful_s"]) for r in th["ranks"]) for th in alone]
    assert hy["source"] == "sampled" and hy["threads_ratio"] == pytest.approx(4 / 3)
    assert hy["computation_scaling"] == pytest.approx(total[1] * 4 / 3 / total[0], rel=1e-9)
    pe = alone[0]["multiplicative"]["parallel_efficiency"]
    assert hy["global_efficiency"] == pytest.approx(hy["computation_scaling"] * pe, rel=1e-9)
    text = _pop(exp, ref)
    assert f"thread factors of {ref} (sampled, 3 threads):" in text
    assert "MPI+OpenMP (sampled): Computation Scaling" in text

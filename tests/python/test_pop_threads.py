"""analysis/pop_threads.thread_factors on per-rank times given by hand: the losses and
factors of docs/pop.md ("MPI+OpenMP: the sampled thread factors") by arithmetic."""

import pytest

from perfweave.analysis import pop_threads

S = 1_000_000_000  # ns


def rank(par, serial, useful=None):
    return {
        "threads": list(range(len(par))),
        "par": [int(x * S) for x in par],
        "useful": [int(x * S) for x in (useful or [par[0] + serial, *par[1:]])],
        "serial_ns": int(serial * S),
        "samples": [100] * len(par),
    }


def test_one_rank_two_threads():
    # runtime 10 s, process useful 8 s: 2 s serial, the regions 6 s, where thread 0
    # works 3 s and thread 1 6 s
    th = pop_threads.thread_factors({0: rank([3, 6], 2)}, {0: 8 * S}, 10 * S)
    N_T, C, U = 20.0, 16.0, 11.0  # 2 threads x 10 s; 2 x 8 s; 3 + 2 + 6
    L_ser, L_lb = 2.0, 2 * (6 - 4.5)
    rest = C - U - L_ser - L_lb
    mul, add = th["multiplicative"], th["additive"]
    assert th["source"] == "sampled" and th["threads"] == 2
    assert mul["parallel_efficiency"] == pytest.approx(U / N_T)
    assert mul["mpi_parallel_efficiency"] == pytest.approx(C / N_T)
    assert mul["omp_parallel_efficiency"] == pytest.approx(U / C)
    assert mul["omp_serialisation_efficiency"] == pytest.approx((C - L_ser) / C)
    assert mul["omp_load_balance"] == pytest.approx((C - L_ser - L_lb) / (C - L_ser))
    assert mul["omp_region_efficiency"] == pytest.approx(U / (C - L_ser - L_lb))
    assert add["omp_serialisation_efficiency"] == pytest.approx(1 - L_ser / N_T)
    assert add["omp_load_balance"] == pytest.approx(1 - L_lb / N_T)
    assert add["omp_region_efficiency"] == pytest.approx(1 - rest / N_T)
    assert add["omp_parallel_efficiency"] == pytest.approx(1 - (C - U) / N_T)
    assert th["ranks"][0]["omp_load_balance"] == pytest.approx(4.5 / 6)


def test_not_applicable():
    assert pop_threads.thread_factors({}, {0: S}, 2 * S) == pop_threads.NO_SAMPLES
    one = {0: rank([1], 0.5), 1: rank([1], 0.5)}
    assert pop_threads.thread_factors(one, {0: S, 1: S}, 2 * S) == pop_threads.ONE_THREAD


def test_cut_stacks_are_noted():
    """Serial time from samples whose stacks reach neither a region nor main is said to
    be uncertain, above UNROOTED_SHARE of the serial time, not below."""
    few = dict(rank([3, 6], 2), unrooted_ns=int(0.05 * 2 * S) - 1)
    th = pop_threads.thread_factors({0: few}, {0: 8 * S}, 10 * S)
    assert th["notes"] == [] and th["ranks"][0]["unrooted_s"] == pytest.approx(0.1, abs=1e-6)
    many = dict(rank([3, 6], 2), unrooted_ns=int(1.5 * S))
    th = pop_threads.thread_factors({0: many}, {0: 8 * S}, 10 * S)
    assert len(th["notes"]) == 1 and "1.500 s" in th["notes"][0]


def test_hybrid_scaling_against_a_reference():
    """pypop's MPI+OpenMP Computational Scaling: the useful time of all threads of the
    reference / of the experiment (x the threads' ratio for weak scaling); Global
    Efficiency: that x the hybrid Parallel Efficiency."""
    exp = pop_threads.thread_factors({0: rank([3, 6], 2)}, {0: 8 * S}, 10 * S)  # U 11 s
    # 2 ranks of 2 threads: U = (2 + 5 + 6) + (2 + 4 + 5) = 24 s over 4 threads
    ref_ranks = {0: rank([5, 6], 2), 1: rank([4, 5], 2)}
    ref = pop_threads.thread_factors(ref_ranks, {0: 8 * S, 1: 8 * S}, 10 * S)
    strong = pop_threads.hybrid_scaling(exp, {0: 8 * S}, ref, {0: 8 * S, 1: 8 * S})
    assert strong["source"] == "sampled" and strong["threads_ratio"] == pytest.approx(0.5)
    assert strong["computation_scaling"] == pytest.approx(24 / 11)
    pe = exp["multiplicative"]["parallel_efficiency"]
    assert strong["global_efficiency"] == pytest.approx(24 / 11 * pe)
    weak = pop_threads.hybrid_scaling(exp, {0: 8 * S}, ref, {0: 8 * S, 1: 8 * S}, weak=True)
    assert weak["computation_scaling"] == pytest.approx(24 * 0.5 / 11)
    # a reference of one thread per rank: its ranks' useful time from the trace
    one = pop_threads.hybrid_scaling(exp, {0: 8 * S}, pop_threads.ONE_THREAD, {0: 6 * S, 1: 5 * S})
    assert one["computation_scaling"] == pytest.approx(1.0) and one["threads_ratio"] == 1.0
    for th, base in ((pop_threads.ONE_THREAD, ref), (exp, pop_threads.NO_SAMPLES)):
        got = pop_threads.hybrid_scaling(th, {0: 8 * S}, base, {0: 8 * S})
        assert got.startswith("n/a: ")

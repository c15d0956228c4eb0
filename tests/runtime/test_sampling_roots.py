"""One root per program in the call tree of the samples (analysis/samples/rooting.py
rooted_paths): a C++ MPI program whose global object's constructor works before main
has its static initialisation under main's root as "[static initialisation]", not as a
root of its own (g++'s _GLOBAL__sub_I_...), at the share of its time the program
measures. (Fortran's main program and OpenMP workers: test_sampling_fortran.py,
test_sampling_openmp.py.) Read through the Python API (perfweave.open)."""

from harness import inclusive_pct, reported_by_rank, sampled_life, share_bound, tree_nodes

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
SECONDS = 1.5


def test_cxx_static_initialisation_under_the_programs_root(mpi, build, run_pw):
    prog = build(mpi, "cxx_static_init.cpp")
    r = run_pw(mpi.launch(2) + [prog, SECONDS], SAMPLE)
    init_s, main_s = (reported_by_rank(r.proc, x) for x in ("init_s", "main_s"))
    assert sorted(init_s) == sorted(main_s) == [0, 1], r.proc.stderr
    exp = r.open()
    node = tree_nodes(exp)
    assert [p[0] for p in node if len(p) == 1] == ["main"]
    init = node[("main", "[static initialisation]")]
    assert ("main", "[static initialisation]", "_GLOBAL__sub_I_main") in node
    work = node[("main", "spin(double)")]
    # the constructor's and main's busy work (~1:2), each at the share of the ranks'
    # sampled lives that the ranks timed it (3 binomial sd of the samples + 2 points)
    life = sum(sampled_life(r.exp, k)[0] for k in (0, 1))
    n = len(exp.samples())
    for node_, part in ((init, init_s), (work, main_s)):
        truth = 100 * sum(part.values()) / life
        assert abs(node_["inclusive_pct"] - truth) <= share_bound(truth, n), (node_, truth)
    assert "[static initialisation]" not in inclusive_pct(exp)

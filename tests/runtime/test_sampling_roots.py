"""One root per program in the call tree of the samples (analysis/samples.py
rooted_paths): a C++ MPI program whose global object's constructor works before main
has its static initialisation under main's root as "[static initialisation]", not as a
root of its own (g++'s _GLOBAL__sub_I_...), at the share of its time the program
measures. (Fortran's main program and OpenMP workers: test_sampling_fortran.py,
test_sampling_openmp.py.) Read through the Python API (perfweave.open)."""

from harness import inclusive_pct, tree_nodes

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
SECONDS = 1.5


def test_cxx_static_initialisation_under_the_programs_root(mpi, build, run_pw):
    prog = build(mpi, "cxx_static_init.cpp")
    r = run_pw(mpi.launch(2) + [prog, SECONDS], SAMPLE)
    _, init_s, _, main_s = r.proc.stdout.split()
    init_s, main_s = float(init_s), float(main_s)
    exp = r.open()
    node = tree_nodes(exp)
    assert [p[0] for p in node if len(p) == 1] == ["main"]
    init = node[("main", "[static initialisation]")]
    assert ("main", "[static initialisation]", "_GLOBAL__sub_I_main") in node
    work = node[("main", "spin(double)")]
    # the constructor's and main's busy work, in the ratio the program timed them
    # (~1:2; > 150 samples each: bounds +-30 %)
    ratio = init["inclusive_pct"] / work["inclusive_pct"]
    assert abs(ratio / (init_s / main_s) - 1) < 0.3, (ratio, init_s, main_s)
    assert "[static initialisation]" not in inclusive_pct(exp)

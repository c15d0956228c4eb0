"""Inlined functions in the sample call tree: a frame whose code was inlined from other
functions stands for all of them (DWARF inline records, addr2line -i), outermost first.
Read through the Python API (perfweave.open: call_tree(), functions(inclusive=True))."""

from harness import inclusive_pct, outside_share, reported, sampled_life, share_bound, tree_nodes

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def test_inlined_functions_are_nodes_of_the_call_tree(build, run_pw):
    prog = build(None, "inlined.c", ("-O2", "-fno-omit-frame-pointer"))
    r = run_pw([prog, 2], SAMPLE)
    hot_s, cold_s, cpu_s = reported(r.proc, "hot", "cold", "cpu")
    # of the sampler's life (70/30 of the solver's time on an idle core); the rest, its
    # start-up, printing and exit, is outside the solver
    life, _ = sampled_life(r.exp)
    truth = {"hot": 100 * hot_s / life, "cold": 100 * cold_s / life}
    solver = 100 - outside_share(r.exp, hot_s + cold_s)
    exp = r.open()
    # a sample per 2 ms of the program's CPU time at least (test_sampling.py)
    taken = len(exp.samples())
    assert taken >= 0.7 * cpu_s / 0.002, (taken, cpu_s)
    node = tree_nodes(exp)
    # shares of wall time against the program's own measure: 3 binomial sd + 2 points
    # (harness.share_bound)
    within = solver - share_bound(solver, taken)
    assert node[("main", "solver")]["inclusive_pct"] >= within, (node[("main", "solver")], solver)
    for fn, share in truth.items():
        bound = share_bound(share, taken)
        assert abs(node[("main", "solver", fn)]["inclusive_pct"] - share) <= bound, (
            node.keys(),
            truth,
        )
        assert node[("main", "solver", fn, "spin")]["exclusive_pct"] > share - bound - 1
    inc = inclusive_pct(exp)
    assert abs(inc["hot"] - truth["hot"]) <= share_bound(truth["hot"], taken)
    assert abs(inc["cold"] - truth["cold"]) <= share_bound(truth["cold"], taken)
    assert inc["solver"] >= within and inc["main"] >= within, (inc, solver)

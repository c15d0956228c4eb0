"""Inlined functions in the sample call tree: a frame whose code was inlined from other
functions stands for all of them (DWARF inline records, addr2line -i), outermost first."""
SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def test_inlined_functions_are_nodes_of_the_call_tree(build, run_pw):
    prog = build(None, "inlined.c", ("-O2", "-fno-omit-frame-pointer"))
    r = run_pw([prog, 2], SAMPLE)
    sm = r.report()["sampling"]
    assert sm["samples"] >= 600
    path = {}
    for n in sm["call_tree"]:
        path[n["id"]] = (path[n["parent"]] if n["parent"] is not None else ()) + (n["name"],)
    node = {path[n["id"]]: n for n in sm["call_tree"]}
    # binomial error with >= 600 samples: sd < 1.9 points; bound: 5 points
    assert node[("main", "solver")]["inclusive_pct"] > 97
    for fn, share in (("hot", 70), ("cold", 30)):
        assert abs(node[("main", "solver", fn)]["inclusive_pct"] - share) <= 5, node.keys()
        assert node[("main", "solver", fn, "spin")]["exclusive_pct"] > share - 6
    inc = {r["name"]: r["pct"] for r in sm["inclusive"]}
    assert abs(inc["hot"] - 70) <= 5 and abs(inc["cold"] - 30) <= 5
    assert inc["solver"] > 97 and inc["main"] > 97

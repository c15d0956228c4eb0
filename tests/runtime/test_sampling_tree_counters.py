"""--sample --counters: each node of the sampled call tree gets the events counted at
its samples, inclusive and exclusive, against ground truth: the page faults of a
function that touches a known number of fresh pages land on its node of the tree."""

PAGES = 100000
OPTS = [
    "--sample",
    "--sample-interval-ms",
    "2",
    "--sample-capacity",
    "4000",
    "--counters",
    "perf::PAGE-FAULTS,perf::TASK-CLOCK",
]


def tree_paths(tree):
    """{(name, ...) path from the root: node}."""
    path, out = {}, {}
    for n in tree:
        path[n["id"]] = (path[n["parent"]] if n["parent"] is not None else ()) + (n["name"],)
        out[path[n["id"]]] = n
    return out


def test_page_faults_on_the_call_tree_node(build, run_pw):
    prog = build(None, "touch_tree.c")
    r = run_pw([prog, PAGES], OPTS)
    assert r.proc.stdout == f"touched {PAGES} pages\n"
    sm = r.report()["sampling"]
    node = tree_paths(sm["call_tree"])
    pf = "perf::PAGE-FAULTS"
    touch = node[("main", "phase_touch", "toucher")]
    # one fault per page, all between toucher's first and last samples (the program
    # spins before and after, so start-up faults and the last interval's faults do not
    # land elsewhere): within 2 % above the pages touched, never below
    assert PAGES <= touch["counters_inclusive"][pf] <= 1.02 * PAGES, touch
    # the faults happen in toucher's own loop: exclusive too (minus its final spin's now())
    assert touch["counters_exclusive"][pf] >= 0.95 * PAGES, touch
    parent = node[("main", "phase_touch")]
    assert parent["counters_inclusive"][pf] >= touch["counters_inclusive"][pf]
    assert parent["counters_exclusive"][pf] < 0.01 * PAGES
    # the compute phase faults (almost) never; main's total is the whole run's
    comp = node[("main", "phase_compute")]
    assert comp["counters_inclusive"][pf] < 0.01 * PAGES, comp
    # a node's inclusive count holds its children's; main's at most the run's total
    main = node[("main",)]
    assert (
        touch["counters_inclusive"][pf] + comp["counters_inclusive"][pf]
        <= main["counters_inclusive"][pf]
        <= sm["counters_total"][pf]
    )
    # CPU time (TASK-CLOCK, ns) goes with the samples: phase_compute burns 0.3 s of its
    # thread's CPU time (spin_cpu), whatever the load
    cpu = comp["counters_inclusive"]["perf::TASK-CLOCK"] / 1e9
    assert 0.2 < cpu < 0.4, comp
    text = r.text_report()
    assert f"{{{pf}, perf::TASK-CLOCK inclusive}}" in text
    line = next(ln for ln in text.splitlines() if ln.strip().endswith("}") and " toucher {" in ln)
    assert int(line.rsplit("{", 1)[1].split(",")[0]) == touch["counters_inclusive"][pf]

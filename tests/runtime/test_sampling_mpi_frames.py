"""MPI calls in the sample call tree: a sample taken inside an MPI call has the call
(MPI_Barrier, MPI_Init, ...) as its innermost node under the program's frames, with
libunwind and with the frame-pointer walk (which continues from the wrapper's frame
where the MPI library has no frame pointers), and its time matches the MPI profile's.
Read through the Python API (perfweave.open: call_tree(), functions(), lines(), the
samples' seconds per rank and activity, mpi_ranks()); the split of the app time (the
samples between MPI_Init and MPI_Finalize) is the report's alone, read from its JSON."""

import pytest

from harness import activity_per_rank_pct, by_name, sampled_life, site_lines, tree_nodes

SAMPLE = ["--sample-interval-ms", "2", "--sample-capacity", "4000"]


@pytest.mark.parametrize("unwinder", ["libunwind", "frame pointers"])
def test_mpi_calls_are_nodes_with_the_profiles_time(mpi, build, run_pw, unwinder):
    prog = build(mpi, "imbalance.c")
    extra = [] if unwinder == "libunwind" else ["--no-sample-libunwind"]
    r = run_pw(mpi.launch(3) + [prog], SAMPLE + extra)
    exp = r.open()
    node = tree_nodes(exp)
    unrooted = sum(n["inclusive_pct"] for p, n in node.items() if len(p) == 1 and p != ("main",))
    assert unrooted < 3, node.keys()  # before main: loader, constructors
    barrier = node[("main", "MPI_Barrier")]
    assert barrier["exclusive_pct"] == pytest.approx(barrier["inclusive_pct"])
    assert barrier["mpi_coll_pct"] > 0.95 * barrier["inclusive_pct"]
    # rank 1 never waits: its barrier share is the barrier's own latency, 1.3-1.6 % on an
    # idle machine (4 barriers with 3 ranks on 2 cores), 2.4-4.9 % seen at load 11,
    # against ~35-45 % for the others (its value against the MPI profile: below)
    coll = activity_per_rank_pct(exp, "mpi_coll")  # {rank: %}
    assert sorted(coll) == [0, 1, 2], coll
    # (within half a point: a sample taken in a wrapper's first instructions, before it
    # sets the thread's state, is in MPI_Barrier's node but still computation; one such
    # sample of rank 1, 0.07 %, was seen once in ~20 runs)
    assert barrier["worst_rank"] != 1 and barrier["rank_min_pct"] == pytest.approx(
        coll[1], abs=0.5
    ), (coll, barrier)
    assert all(3 * coll[1] < c for rank, c in coll.items() if rank != 1), coll
    # MPI_Init and MPI_Finalize are MPI time (state mpi_other), whatever the library does
    # inside them (sleeps, reads, futex waits)
    init = node[("main", "MPI_Init")]
    assert init["mpi_other_pct"] > 0.9 * init["inclusive_pct"]
    # each rank's share of time in MPI_Barrier vs its barrier time in the MPI profile
    # over its sampled life. Samples are weighted by the time since the previous one: a
    # rank that waits for a core (3 ranks on 2 cores, and a busy machine) is sampled once
    # when it runs again, for the whole wait (counted instead, 17 % against the
    # profile's 30 % was seen at load 10). What remains: the state changes at each
    # barrier's entry and exit, each putting up to one running interval (3 ms at most,
    # 5 with the handler and the signal's delivery) on the wrong side: 8 x 5 ms over
    # the life, plus 1 point (0.2 point seen at load 11)
    ranks = exp.mpi_ranks()
    mpi_s = dict(zip(ranks["rank"].tolist(), ranks["mpi_s"].tolist()))
    for rank, got in coll.items():
        life, _ = sampled_life(r.exp, rank)
        expected = 100 * mpi_s[rank] / life
        assert abs(got - expected) <= 100 * 8 * 0.005 / life + 1, (rank, got, expected)
    # self time: the MPI call; self line: the program's line that calls it
    funcs = by_name(exp.functions())
    # (the function's self time is every node that ends in it: a sample whose walk lost
    # main, rooted at MPI_Barrier itself, is in it and in `unrooted` above: 0.03 point
    # once, frame pointers, a quiet machine)
    anywhere = sum(n["exclusive_pct"] for p, n in node.items() if p[-1] == "MPI_Barrier")
    assert funcs["MPI_Barrier"]["pct"] == pytest.approx(anywhere, abs=0.01)
    assert barrier["inclusive_pct"] - 0.01 <= anywhere <= barrier["inclusive_pct"] + unrooted
    at = f"main (imbalance.c:{site_lines('imbalance.c')['barrier']})"
    line = next(ln for name, ln in by_name(exp.lines()).items() if name.startswith(at))
    assert line["mpi_coll_pct"] == pytest.approx(barrier["inclusive_pct"], abs=0.5)
    # the report's split of the app time (Performance Reports' summary line): of the
    # samples between MPI_Init and MPI_Finalize, so its MPI is the barrier's share of them
    # (MPI_Init and MPI_Finalize, start-up and shutdown, are on the start-up line)
    sm = r.report()["samples"]
    split = sm["time_split"]
    assert split["MPI"] == pytest.approx(
        sum(v for k, v in sm["app_activity_pct"].items() if k.startswith("mpi_"))
    )
    assert split["MPI"] == pytest.approx(
        100 * barrier["inclusive_pct"] / sm["phase_pct"]["app"], abs=2
    )
    assert sm["phase_pct"]["init"] == pytest.approx(init["inclusive_pct"], abs=2)
    assert sum(split.values()) == pytest.approx(100, abs=0.01)
    [line] = [ln for ln in r.text_report().splitlines() if ln.startswith("  time       compute")]
    assert f"compute {split['compute']:.1f} %, MPI {split['MPI']:.1f} %" in line, line

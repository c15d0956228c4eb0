"""Start-up apart from the app time (analysis/phases.py), against the program's own clock:
startup.c sleeps 0.3 s before MPI_Init (its own time: not start-up), computes 0.3 s
between MPI_Init and MPI_Finalize, sleeps 0.2 s after MPI_Finalize (shutdown), and
prints what it measured per rank with CLOCK_MONOTONIC, the clock of the runtime's
timestamps. The start-up line's figures (the report's startup section) and the app time's
split are the report's alone: read from `perfweave report --json`; the samples' activities
through the Python API (perfweave.open)."""

from harness import activity_pct, reported_by_rank

from perfweave.report.summary import duration

BEFORE, WORK, AFTER = 0.3, 0.3, 0.2
SAMPLE = ["--sample-interval-ms", "5"]
# the wrapper's own steps outside the interval it times (entering, and after it stamps
# the end of MPI_Init), plus a descheduling there on a busy machine
EDGE_S = 0.01


def test_start_up_line_matches_the_programs_clock(mpi, build, run_pw):
    prog = build(mpi, "startup.c")
    r = run_pw(mpi.launch(2) + [prog, BEFORE, WORK, AFTER], SAMPLE)
    measured = {k: reported_by_rank(r.proc, k) for k in ("init", "app", "shutdown")}
    assert sorted(measured["init"]) == [0, 1], r.proc.stderr
    data = r.report()
    su = data["startup"]
    assert su["ranks"] == 2 and su["shutdown_ranks"] == 2
    for p in su["per_rank"]:
        rank = p["rank"]
        # MPI_Init as the program timed it around the call: the runtime's interval is
        # inside it. The sleep before it is not start-up but the program's own time
        init = measured["init"][rank]
        assert init - EDGE_S <= p["init_s"] <= init, (p, init)
        assert p["before_init_s"] >= BEFORE, p
        # app time: MPI_Init's return to MPI_Finalize's entry, around the program's
        app = measured["app"][rank]
        assert app <= p["app_s"] <= app + EDGE_S, (p, app)
        # shutdown: MPI_Finalize's entry to the samples' write at exit, after main
        # returned: the program's MPI_Finalize and sleep, then exit handlers (MPI's own
        # and the writing of the samples: 0.25 s allowed on a busy machine)
        down = measured["shutdown"][rank]
        assert down - EDGE_S <= p["shutdown_s"] <= down + 0.25, (p, down)
    # the summary's figures are over the ranks
    assert su["init_s"]["max"] == max(p["init_s"] for p in su["per_rank"])
    # the program's sleeps are before MPI_Init and after MPI_Finalize: in the samples
    # (the call tree's), not in the app time's split, which is the 0.3 s of computing
    # and the barrier
    act = activity_pct(r.open())
    assert act["sleep"] > 10, act
    sm = data["samples"]
    assert "sleep/wait" not in sm["time_split"] and sm["app_activity_pct"]["sleep"] == 0
    assert sm["time_split"]["compute"] > 80, sm["time_split"]
    pct = su["samples_pct"]
    assert abs(sum(pct.values()) - 100) < 1e-6 and pct["before_init"] > 10, pct
    # the text says the same, with what each share is of
    text = " ".join(r.text_report().split())
    init = su["init_s"]
    assert (
        f"start-up MPI_Init {duration(init['max'])} max, {duration(init['mean'])} mean "
        f"per rank ({pct['init']:.1f} % of the samples)" in text
    ), text[:1500]
    assert f"(of the {sm['app_samples']} samples in the app time)" in text

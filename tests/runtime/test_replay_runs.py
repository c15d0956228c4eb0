"""The ideal-network replay (analysis/replay.py) of traced MPI programs under both MPIs:
the ideal runtime is arithmetic from the program's own clocks, and a program whose
sends cross is reported as a deadlock under rendezvous."""

from perfweave.analysis.replay import replay


def measured(stdout):
    """{rank: (ping-pong compute seconds, last compute seconds)} as the program printed."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("compute "):
            _, rank, a, b = line.split()
            out[int(rank)] = (float(a), float(b))
    return out


def test_ideal_runtime_is_the_chain_of_computations(mpi, build, run_pw):
    prog = build(mpi, "replay_cases.c")
    r = run_pw(mpi.launch(2) + [prog, "pingpong"], options=["--trace"])
    m = measured(r.proc.stdout)
    assert sorted(m) == [0, 1], r.proc.stdout
    # the ping-pong is serial (each rank computes while the other waits), then the
    # longer of the two last computations before the barrier
    expect = m[0][0] + m[1][0] + max(m[0][1], m[1][1])
    res = replay(r.exp)
    assert res.deadlock is None
    # the replay adds the time between the program's clock reads and its MPI calls, and
    # from MPI_Init to the first computation: microseconds per call, 13 calls per rank;
    # 2 ms covers a preemption of one of them on a busy machine
    assert abs(res.t_ideal_s - expect) < 2e-3, (res.t_ideal_s, expect)
    assert res.t_ideal_s <= res.t_recorded_s
    cp = res.critical_path()
    # the path goes through both ranks' computations: every message of the ping-pong
    # but the last, after which rank 1's 30 ms lead to the barrier
    assert set(cp["rank"].tolist()) == {0, 1}
    assert cp["via"].count("message") == 9
    # at 1 byte/s each of the 10 messages of 4 bytes takes 4 s: then the last message
    # is on the path too, and rank 0's last 20 ms end it
    slow = replay(r.exp, bandwidth_Bps=1.0)
    expect = 10 * 4.0 + m[0][0] + m[1][0] + m[0][1]
    assert abs(slow.t_ideal_s - expect) < 2e-3, (slow.t_ideal_s, expect)
    assert slow.critical_path()["via"].count("message") == 10


def test_crossing_sends_deadlock_under_rendezvous(mpi, build, run_pw):
    prog = build(mpi, "replay_cases.c")
    r = run_pw(mpi.launch(2) + [prog, "cross"], options=["--trace"])
    eager = replay(r.exp)
    assert eager.deadlock is None and eager.t_ideal_s < eager.t_recorded_s + 1e-9
    res = replay(r.exp, eager_limit=0)
    assert res.t_ideal_s == float("inf")
    assert [(d["rank"], d["function"]) for d in res.deadlock] == [(0, "MPI_Send"), (1, "MPI_Send")]
